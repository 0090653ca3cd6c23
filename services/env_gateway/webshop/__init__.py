"""The generated WebShop (pure logic): catalogue, goals, BM25 search, pages, scoring and expert.

`backends/webshop.py` serves it to the env gateway; `webshop_server.py` serves it over AgentGym's
`agentenv_webshop` protocol."""
