"""Game-shaped multi-turn episodes played through any ``GenerationEngine``, and a fresh forward to check
what an engine recorded.

Shapes follow the demo's household episodes (FACTS: a first prompt of ~310 tokens, observations of ~83,
responses up to ~65 a turn), shortened so that the tier stays quick. Token ids are seeded draws from
the vocabulary, so no tokenizer is involved and every engine sees the same prompts.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from services.rollout_worker.engines.base import GenerationEngine, GenerationParams

SHIPPED = Path(__file__).resolve().parents[1] / "artifacts" / "models"  # the models the repository ships


@dataclass(frozen=True)
class Played:
    """Each episode's final context, and per turn each episode's generated ids and log-probs."""

    contexts: list[list[int]]
    tokens: list[list[list[int]]]  # [turn][episode] -> ids
    logprobs: list[list[list[float]]]
    spans: list[list[tuple[int, int]]]  # [episode] -> (start, end) of each response in its context


def observations(seed: int, episodes: int, turns: int, vocab: int, first: int = 310, obs: int = 83):
    """Seeded first prompts and per-turn observations (ids in [16, vocab): clear of control tokens)."""
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(16, vocab, first).tolist() for _ in range(episodes)]
    later = [[rng.integers(16, vocab, obs).tolist() for _ in range(episodes)] for _ in range(turns)]
    return prompts, later


def play(
    engine: GenerationEngine,
    prompts: Sequence[Sequence[int]],
    later: Sequence[Sequence[Sequence[int]]],
    max_new_tokens: int,
    temperature: float = 0.0,
) -> Played:
    """Play ``len(later)`` turns: each turn appends the response, then the next observation."""
    contexts = [list(p) for p in prompts]
    tokens, logprobs = [], []
    spans: list[list[tuple[int, int]]] = [[] for _ in prompts]
    for turn, observed in enumerate(later):
        gens = engine.generate(contexts, GenerationParams(max_new_tokens, temperature, seed=100 + turn))
        tokens.append([g.token_ids for g in gens])
        logprobs.append([g.logprobs for g in gens])
        for i, (context, gen, obs) in enumerate(zip(contexts, gens, observed, strict=True)):
            spans[i].append((len(context), len(context) + len(gen.token_ids)))
            context.extend(gen.token_ids)
            context.extend(obs)
    return Played(contexts, tokens, logprobs, spans)


def fresh_logprobs(model: torch.nn.Module, played: Played, temperature: float) -> list[float]:
    """The log-probs a fresh full forward gives every generated token, in ``played``'s order
    (turn-major), under the engines' convention: ``log_softmax(logits / T)``, unscaled at T = 0."""
    scale = temperature if temperature > 0 else 1.0
    by_episode = []
    with torch.inference_mode():
        for context, spans in zip(played.contexts, played.spans, strict=True):
            ids = torch.tensor([context])
            logp = torch.log_softmax(model(input_ids=ids).logits[0].double() / scale, dim=-1)
            by_episode.append([[float(logp[t - 1, context[t]]) for t in range(a, b)] for a, b in spans])
    turns = len(played.tokens)
    return [lp for turn in range(turns) for episode in by_episode for lp in episode[turn]]
