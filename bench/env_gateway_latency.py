"""Per-step latency of the env gateway over HTTP vs calling TextWorld in-process, side by side.

The same games are played with the same actions both ways: first in this process (TextWorld's
engine directly, timing only `step`), then through a real `turnopd serve env-gateway` subprocess
on loopback (timing `EnvGatewayClient.step`: validation, HTTP, JSON, the worker pipe, the engine).
A last run plays many episodes at once to show throughput under concurrency.

    PYTHONPATH=. python bench/env_gateway_latency.py [--games 12] [--workers 2] [--concurrency 32]
"""

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from services.contracts.env_gateway import EnvName, EpisodeCreate
from services.env_gateway.backend_factory import make_backend
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.local_server import LocalGateway
from services.settings.env_gateway import EnvGatewaySettings

Script = tuple[EnvName, int, list[str]]  # env, seed, the expert's actions


def record_scripts(settings: EnvGatewaySettings, env: EnvName, seeds: range) -> list[Script]:
    """The expert's action sequence of each game (played in-process, untimed)."""
    backend = make_backend(env, settings)
    scripts = []
    for seed in seeds:
        session = backend.open("valid_unseen", backend.choose("valid_unseen", seed, None), expert=True)
        action, actions = session.start().expert_action, []
        while action is not None and len(actions) < 100:
            actions.append(action)
            outcome = session.step(action)
            action = None if outcome.done else outcome.expert_action
        session.close()
        scripts.append((env, seed, actions))
    return scripts


class InProcess:
    """TextWorld's engines called directly, one backend per env (engines are reused)."""

    def __init__(self, settings: EnvGatewaySettings) -> None:
        self._backends = {env: make_backend(env, settings) for env in ("alfworld", "textworld")}

    def play(self, script: Script) -> list[float]:
        """Seconds per `step` of the engine itself."""
        env, seed, actions = script
        backend = self._backends[env]
        session = backend.open("valid_unseen", backend.choose("valid_unseen", seed, None), expert=False)
        session.start()
        latencies = []
        for action in actions:
            started = time.perf_counter()
            session.step(action)
            latencies.append(time.perf_counter() - started)
        session.close()
        return latencies


async def play_over_http(client: EnvGatewayClient, script: Script) -> list[float]:
    """Seconds per `EnvGatewayClient.step` (validation, HTTP, JSON, worker pipe, engine)."""
    env, seed, actions = script
    start = await client.create_episode(EpisodeCreate(env=env, split="valid_unseen", seed=seed))
    latencies = []
    for action in actions:
        started = time.perf_counter()
        await client.step(start.episode_id, action)
        latencies.append(time.perf_counter() - started)
    await client.delete_episode(start.episode_id)
    return latencies


async def side_by_side(
    url: str, local: InProcess, scripts: list[Script], rounds: int
) -> tuple[list[float], list[float]]:
    """Both ways, game by game, alternating, so a busy machine slows both alike."""
    in_process: list[float] = []
    over_http: list[float] = []
    async with EnvGatewayClient(url) as client:
        for script in scripts:  # warm-up: engines, game files
            local.play(script)
            await play_over_http(client, script)
        for _ in range(rounds):
            for script in scripts:
                in_process += local.play(script)
                over_http += await play_over_http(client, script)
    return in_process, over_http


async def concurrent_throughput(
    url: str, scripts: list[Script], concurrency: int
) -> tuple[float, float, int]:
    """(episodes opened per second, steps per second, steps) with ``concurrency`` episodes at once."""
    chosen = [scripts[i % len(scripts)] for i in range(concurrency)]
    async with EnvGatewayClient(url) as client:
        started = time.perf_counter()
        starts = await asyncio.gather(
            *(
                client.create_episode(EpisodeCreate(env=env, split="valid_unseen", seed=seed))
                for env, seed, _ in chosen
            )
        )
        opened = time.perf_counter()

        async def play(episode_id: str, actions: list[str]) -> int:
            for action in actions:
                await client.step(episode_id, action)
            return len(actions)

        steps = sum(
            await asyncio.gather(*(play(st.episode_id, sc[2]) for st, sc in zip(starts, chosen, strict=True)))
        )
        stepped = time.perf_counter()
        await asyncio.gather(*(client.delete_episode(st.episode_id) for st in starts))
    return concurrency / (opened - started), steps / (stepped - opened), steps


def summary(latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    return f"mean {statistics.fmean(ms):7.2f} ms  p50 {statistics.median(ms):7.2f} ms  p95 {p95:7.2f} ms"


def report(url: str, local: InProcess, scripts: dict[str, list[Script]], args: argparse.Namespace) -> None:
    """Print the side-by-side latencies and the concurrent throughput."""
    print(f"env gateway latency, {os.cpu_count()} cores, {args.workers} env workers, loopback HTTP")
    for env, env_scripts in scripts.items():
        in_process, over_http = asyncio.run(side_by_side(url, local, env_scripts, args.rounds))
        mean_ratio = statistics.fmean(over_http) / statistics.fmean(in_process)
        median_ratio = statistics.median(over_http) / statistics.median(in_process)
        overhead = (statistics.median(over_http) - statistics.median(in_process)) * 1000
        print(f"{env:9s} in-process  {summary(in_process)}  ({len(in_process)} steps)")
        print(f"{env:9s} over HTTP   {summary(over_http)}")
        print(
            f"{env:9s} ratio HTTP/in-process: {median_ratio:4.2f}x median, {mean_ratio:4.2f}x mean; "
            f"overhead {overhead:+.2f} ms/step (median)"
        )
    opens, rate, steps = asyncio.run(concurrent_throughput(url, scripts["alfworld"], args.concurrency))
    local_rate = 1.0 / statistics.fmean([x for s in scripts["alfworld"] for x in local.play(s)])
    print(
        f"alfworld  {args.concurrency} concurrent episodes over HTTP: opened {opens:5.1f} episodes/s, "
        f"then {rate:6.1f} steps/s ({steps} steps) vs {local_rate:6.1f} steps/s for one in-process loop"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=12, help="household games (textworld: a quarter)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="repetitions of the side-by-side run")
    args = parser.parse_args()
    settings = EnvGatewaySettings(workers=args.workers)
    cache_dir = settings.resolved_cache_dir()
    scripts = {
        "alfworld": record_scripts(settings, "alfworld", range(args.games)),
        "textworld": record_scripts(settings, "textworld", range(max(3, args.games // 4))),
    }
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "bench.toml"
        config.write_text(f'[env_gateway]\ncache_dir = "{cache_dir}"\nworkers = {args.workers}\n')
        with LocalGateway(config, workers=args.workers) as gateway:
            report(gateway.url, InProcess(settings), scripts, args)


if __name__ == "__main__":
    main()
