"""The multi-hop search env: a generated encyclopedia and its questions, BM25 (or a remote
Search-R1 retriever, `remote.py`/`contract.py`), the expert, the agent-side protocol, the backend."""
