"""Generation throughput of the rollout pool vs bare ``model.generate`` on the same prompts, one run.

The pool plays ``--episodes`` household episodes (``--turns`` turns each, ``--new`` tokens per
response) on ``--workers`` Ray actors (one CPU each) against a local env gateway; its rate is
response tokens / wall time of ``pool.play`` (generation, parsing, env steps, Ray overhead).
The bare side replays the pool's own prompts through ``model.generate`` in this process
(all CPU threads), with the same sampling (temperature 1, no top-k/top-p) and token limit:

* ``generate x1``: one call on the episodes' first-turn prompts (a single batched call);
* ``generate per turn``: one call per turn on that turn's prompts of the episodes still running,
  i.e. exactly the pool's generation work, without env, parsing, Ray or the prefix cache.

    PYTHONPATH=$PWD python bench/rollout_throughput.py [--model teacher] [--episodes 16] [--turns 4]
"""

import argparse
import os
import statistics
import time

import ray
import torch

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.contracts.rollout import EpisodeTask, RolloutResult
from services.env_gateway.local_server import LocalGateway
from services.models.loading import load_tokenizer
from services.rollout_worker.engines.transformers_engine import TransformersEngine
from services.rollout_worker.pool import RolloutPool
from services.settings import load_settings


def _generate(engine: TransformersEngine, prompts: list[list[int]], new: int, pad: int) -> tuple[int, float]:
    """(generated tokens up to and including a stop, seconds) of one bare ``model.generate`` call."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    torch.manual_seed(1)
    start = time.perf_counter()
    with torch.inference_mode():
        out = engine.model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=new,
            eos_token_id=list(engine.stop_token_ids),
            pad_token_id=pad,
        )
    seconds = time.perf_counter() - start
    stop = set(engine.stop_token_ids)
    tokens = 0
    for row in out[:, width:].tolist():
        tokens += next((i + 1 for i, t in enumerate(row) if t in stop), len(row))
    return tokens, seconds


def _turn_prompts(result: RolloutResult) -> list[list[list[int]]]:
    """Per turn, the prompts the pool generated from (episodes still running at that turn)."""
    turns = max(len(t.turns) for t in result.trajectories)
    return [
        [t.token_ids[: t.turns[k].response_start] for t in result.trajectories if len(t.turns) > k]
        for k in range(turns)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="teacher")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    settings = load_settings(
        None,
        {
            "cluster": {"rollout_workers": args.workers},
            "models": {"max_new_tokens": args.new},
            "rollout_worker": {"num_cpus": 1.0},
        },
    )
    tasks = [
        EpisodeTask(env="alfworld", split="valid_unseen", seed=i // 6, task_type=HOUSEHOLD_TASK_TYPES[i % 6])
        for i in range(args.episodes)
    ]
    engine = TransformersEngine.from_pretrained(args.model)
    tokenizer = load_tokenizer(args.model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else engine.stop_token_ids[0]
    threads = torch.get_num_threads()
    pool_rates, first_rates, turn_rates = [], [], []
    with LocalGateway(workers=1) as gateway:
        ray.init(namespace="turnopd", include_dashboard=False, log_to_driver=False, num_cpus=os.cpu_count())
        pool = RolloutPool(
            settings.for_rollout_worker(), settings.cluster.rollout_workers, gateway.url, args.model
        )
        try:
            pool.play(tasks[:2], 1, 1.0, 0)  # warm-up: first calls, gateway game loading
            for _ in range(args.repeats):
                result = pool.play(tasks, args.turns, 1.0, 0)
                pool_rates.append(result.generated_tokens / result.wall_s)
                prompts = _turn_prompts(result)
                tokens, seconds = _generate(engine, prompts[0], args.new, pad)
                first_rates.append(tokens / seconds)
                per_turn = [_generate(engine, p, args.new, pad) for p in prompts]
                turn_rates.append(sum(t for t, _ in per_turn) / sum(s for _, s in per_turn))
        finally:
            pool.close()
            ray.shutdown()
    pool_rate, first_rate, turn_rate = (statistics.median(r) for r in (pool_rates, first_rates, turn_rates))
    print(
        f"model {args.model}, {args.episodes} episodes x {args.turns} turns, {args.new} new tokens/response"
    )
    print(f"pool ({args.workers} workers x 1 thread, env + parsing + Ray): {pool_rate:8.0f} tokens/s")
    print(f"model.generate x1, first-turn prompts ({threads} threads):   {first_rate:8.0f} tokens/s")
    print(f"model.generate per turn, same prompts ({threads} threads):   {turn_rate:8.0f} tokens/s")
    print(f"ratio pool / generate x1:       {pool_rate / first_rate:.2f}")
    print(f"ratio pool / generate per turn: {pool_rate / turn_rate:.2f}")


if __name__ == "__main__":
    main()
