"""The webshop expert on the evaluation goals, in-process vs over HTTP through the env gateway.

The same goals (``valid_unseen`` goal ids ``[0, goals)``) are played by the expert twice: on the
backend in this process, then through a real `turnopd serve env-gateway` subprocess
(`LocalGateway`, ``--concurrency`` episodes in flight). Both runs print mean reward, success
(reward 1) and mean turns; the rewards must agree, and the timing ratio shows the HTTP overhead.

    PYTHONPATH=. python bench/webshop_expert.py [--goals 200] [--workers 2] [--concurrency 8]
"""

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from services.contracts.env_gateway import EpisodeCreate
from services.env_gateway.backend_factory import make_backend
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.local_server import LocalGateway
from services.settings import load_settings

Run = tuple[float, int]  # reward, turns


def in_process(config: Path, goals: int) -> list[Run]:
    backend = make_backend("webshop", load_settings(config).env_gateway)
    runs = []
    for seed in range(goals):
        session = backend.open("valid_unseen", backend.choose("valid_unseen", seed, None), expert=True)
        action, turns, reward = session.start().expert_action, 0, 0.0
        while action is not None and turns < 30:
            outcome = session.step(action)
            turns, reward, action = turns + 1, outcome.reward, outcome.expert_action
        runs.append((reward, turns))
    return runs


async def over_http(url: str, goals: int, concurrency: int) -> list[Run]:
    limit = asyncio.Semaphore(concurrency)

    async def one(client: EnvGatewayClient, seed: int) -> Run:
        async with limit:
            request = EpisodeCreate(env="webshop", split="valid_unseen", seed=seed, expert=True)
            start = await client.create_episode(request)
            action, turns, reward = start.expert_action, 0, 0.0
            while action is not None and turns < 30:
                result = await client.step(start.episode_id, action)
                turns, reward, action = result.turn, result.reward, result.expert_action
            await client.delete_episode(start.episode_id)
            return reward, turns

    async with EnvGatewayClient(url) as client:
        return await asyncio.gather(*(one(client, s) for s in range(goals)))


def summary(name: str, runs: list[Run], seconds: float) -> str:
    rewards = [r for r, _ in runs]
    return (
        f"{name:<12} goals {len(runs)}  mean reward {sum(rewards) / len(runs):.4f}  "
        f"success {sum(r >= 1.0 for r in rewards) / len(runs):.4f}  "
        f"mean turns {sum(t for _, t in runs) / len(runs):.2f}  {1000 * seconds / len(runs):.1f} ms/episode"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--config", type=Path, default=None, help="TOML config ([env_gateway] cache_dir, ...)"
    )
    args = parser.parse_args()
    config = args.config or Path(tempfile.mkdtemp()) / "empty.toml"
    config.touch()

    started = time.perf_counter()
    local = in_process(config, args.goals)
    local_s = time.perf_counter() - started
    print(summary("in-process", local, local_s))
    with LocalGateway(config, workers=args.workers) as gateway:
        started = time.perf_counter()
        remote = asyncio.run(over_http(gateway.url, args.goals, args.concurrency))
        http_s = time.perf_counter() - started
    print(summary("over HTTP", remote, http_s))
    print(f"same rewards both ways: {local == remote}; HTTP / in-process time: {http_s / local_s:.1f}x")


if __name__ == "__main__":
    main()
