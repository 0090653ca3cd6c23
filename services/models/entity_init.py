"""Composed initial embeddings for the zoo's numbered entity tokens (``[models] entity_embeddings``).

With ``entity_max_number`` > 0 every household entity (``" pen 2"``) is one token whose embedding
starts random, so that ``" pen 2"`` is a pen is an association the model must learn token by
token, from the few games where that very token is a target. The household teacher measured it:
it missed 71% of the targets numbered 2 or higher shown to it, against 33% of those numbered 1
(``scripts/sightings.py``). ``composed`` starts each entity row instead as a weighted sum of three
unit directions: the kind's embedding (the mean row of the tokens of ``" pen"``, the word the task
names), the number's (the tokens of ``" 2"``) and its own random row, rescaled to the norm of that
random row. Every pen then starts close to the word pen, and all entities with the same number
share one direction. Only the initial weights change: the checkpoint stays a plain Qwen3 model.
Embeddings are tied, so the composition holds for the output side too. Pure module, apart from
torch for the tensor math.
"""

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from services.errors import InputError

if TYPE_CHECKING:
    import torch

KIND_WEIGHT = 0.8
NUMBER_WEIGHT = 0.45
OWN_WEIGHT = 0.4  # the three squared weights sum to ~1: a composed row is as long as the random one


def entity_parts(entity: str) -> tuple[str, str]:
    """``" pen 2"`` -> (``" pen"``, ``" 2"``): the kind word and the number, each space-led as in text."""
    name, _, number = entity.rpartition(" ")
    if not name.strip() or not number.isdigit():
        raise InputError(f"not a numbered entity token: {entity!r}")
    return name, f" {number}"


def _single_id(entity: str, encode: Callable[[str], list[int]]) -> int:
    ids = encode(entity)
    if len(ids) != 1:
        raise InputError(f"entity {entity!r} is {len(ids)} tokens, not one: build the tokenizer with it")
    return ids[0]


def _unit(rows: "torch.Tensor") -> "torch.Tensor":
    return rows / rows.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def composed_rows(own: "torch.Tensor", kind: "torch.Tensor", number: "torch.Tensor") -> "torch.Tensor":
    """Row-wise ``KIND*kind + NUMBER*number + OWN*own`` over unit directions, at ``own``'s norms."""
    mixed = KIND_WEIGHT * _unit(kind) + NUMBER_WEIGHT * _unit(number) + OWN_WEIGHT * _unit(own)
    return _unit(mixed) * own.norm(dim=-1, keepdim=True)


def compose_entity_embeddings(
    embeddings: "torch.Tensor",
    entities: Sequence[str],
    encode: Callable[[str], list[int]],
) -> int:
    """Overwrite, in place, the rows of ``entities`` in ``embeddings`` (vocab x hidden) with their
    composed rows; returns how many were composed.

    ``encode`` gives the ids of a text as the tokenizer splits it in running text: one id for each
    entity, and those of its kind word and its number.
    """
    import torch

    if not entities:
        return 0
    ids = torch.tensor([_single_id(e, encode) for e in entities])
    parts = [entity_parts(e) for e in entities]
    with torch.no_grad():
        source = embeddings.detach().clone()  # kind and number rows are read before any entity is written

        def mean_row(text: str) -> "torch.Tensor":
            tokens = encode(text)
            if not tokens:
                raise InputError(f"the tokenizer gives no tokens for {text!r}")
            return source[tokens].mean(dim=0)

        kinds = torch.stack([mean_row(name) for name, _ in parts])
        numbers = torch.stack([mean_row(number) for _, number in parts])
        embeddings[ids] = composed_rows(source[ids], kinds, numbers)
    return len(entities)
