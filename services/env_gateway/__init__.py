"""Environment gateway: FastAPI service with a pool of env worker processes."""
