"""The command line shared by the trajectory scripts (``scripts/goal_drift.py``, ``sightings.py``,
``first_mistake.py``): a ``turnopd eval --trajectories`` file and the model that played it."""

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def games_and_decoder(
    description: str, argv: list[str] | None = None
) -> tuple[Iterator[dict[str, Any]], Callable[[list[int]], str]]:
    """The games of the trajectory file named on the command line (one JSON object per line) and
    a decoder of token ids with the tokenizer of the ``--model`` that played them."""
    from services.models.loading import load_tokenizer

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("trajectories", type=Path)
    parser.add_argument("--model", required=True, help="the model that played (for its tokenizer)")
    args = parser.parse_args(argv)
    tokenizer = load_tokenizer(args.model)
    lines = args.trajectories.read_text().splitlines()
    return (json.loads(line) for line in lines if line.strip()), lambda ids: str(tokenizer.decode(ids))
