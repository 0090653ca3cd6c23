"""`python -m services.cli ...` is the same as `turnopd ...`."""

from services.cli.main import run

run()
