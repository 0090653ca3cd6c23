"""The generated WebShop: catalogue, goals, BM25 search, pages, scoring and expert (pure logic).

`backend.py` serves it to the env gateway (`remote.py` plays a real AgentGym server instead);
`server.py` serves it over AgentGym's `agentenv_webshop` protocol (`contract.py`)."""
