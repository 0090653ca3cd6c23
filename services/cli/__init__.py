"""The `turnopd` command line (typer + rich)."""
