"""The environments, one folder each: the game and its backend, the expert, the agent-side
protocol, its settings, and (where it has one) its remote adapter and contract.

`alfworld/` (the household tasks), `textworld/`, `search/` and `webshop/`. Around them:
`backend.py` is the interface the env gateway serves every env through, `game_cache.py` the
generated-games cache they share, and `protocols.py` picks an env's agent-side protocol by name.
Nothing here imports the gateway, the rollout workers or Ray.
"""
