"""Teacher scorer throughput: 16 concurrent clients against the Serve app vs one bare batched forward.

Both sides score the same sequences with the same random-weight Qwen3 checkpoint on the same
machine, one after the other. The bare side is the engine called in-process on all sequences at
once (length-sorted passes under the same token budget; no Serve, no serialisation, no queue). The
service side runs `turnopd`'s `teacher` app on a local Ray with one replica, and N clients that
each send their requests one after another, through the deployment handle (packed buffers) and
then over HTTP (JSON), then as an OpenAI-compatible endpoint (``/v1/completions`` through the
run's ``EndpointTeacherClient``, which answers every position). Prints scored positions per
second of each, the ratios service / bare and to the handle path, and the bytes per scored token
of the endpoint's JSON answer against the packed handle format.

    PYTHONPATH=$PWD python bench/teacher_throughput.py [--clients 16] [--replica-cpus 2] ...
"""

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import numpy as np
import ray
import torch
from ray import serve

from services.orchestrator.teacher_scores import TeacherClient
from services.ray_names import TEACHER_APP as APP_NAME
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.codec import pack_scores
from services.teacher_scorer.completions_codec import (
    completion_json,
    completion_request,
    rows_from_prompts,
    scores_from_completion,
)
from services.teacher_scorer.completions_native import codec_kernels
from services.teacher_scorer.endpoint_client import EndpointTeacherClient
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.handle_client import TeacherHandleClient
from services.teacher_scorer.http_client import TeacherHttpClient
from services.teacher_scorer.random_checkpoint import RandomQwen3Spec, cached_random_qwen3
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.serve_app import teacher_application
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model


@dataclass(frozen=True)
class Workload:
    requests: list[list[list[ScoreRow]]]  # [client][request] -> rows

    @property
    def rows(self) -> list[ScoreRow]:
        return [row for client in self.requests for request in client for row in request]

    @property
    def scored(self) -> int:
        return sum(len(r.positions_P) for r in self.rows)

    @property
    def tokens(self) -> int:
        return sum(r.length for r in self.rows)


def make_workload(args: argparse.Namespace) -> Workload:
    """Agent-like rows: a prompt, then a response whose tokens (the second half) are scored."""
    rng = np.random.default_rng(args.seed)
    requests = []
    for _ in range(args.clients):
        client = []
        for _ in range(args.requests_per_client):
            rows = []
            for _ in range(args.seqs_per_request):
                n = int(rng.integers(args.min_len, args.max_len + 1))
                ids = rng.integers(0, args.vocab, size=n).astype(np.int64)
                rows.append(ScoreRow(ids, np.arange(n // 2, n, dtype=np.int64)))
            client.append(rows)
        requests.append(client)
    return Workload(requests)


def each_request(work: Workload, rows_of: Callable[[list[ScoreRow]], list[ScoreRow]]) -> Workload:
    """The same clients and requests, each request's rows replaced by ``rows_of(rows)``."""
    return Workload([[rows_of(rows) for rows in client] for client in work.requests])


def every_position(rows: list[ScoreRow]) -> list[ScoreRow]:
    """The same rows scored at every position: what an endpoint answers (prompt_logprobs has no
    positions field), so the handle path on these isolates the transport from the extra positions."""
    return [ScoreRow(r.token_ids_T, np.arange(1, r.length, dtype=np.int64)) for r in rows]


def as_endpoint_rows(rows: list[ScoreRow]) -> list[ScoreRow]:
    """The rows our app's ``/v1/completions`` scores for these prompts (every position, no entropy)."""
    return rows_from_prompts([r.token_ids_T.tolist() for r in rows])


def bare_forward(scorer: TeacherScorer, work: Workload, top_k: int) -> float:
    """Seconds for one batched scoring of every row, in-process."""
    rows = work.rows
    start = time.perf_counter()
    scorer.score(rows, [top_k] * len(rows))
    return time.perf_counter() - start


async def through_client(client: TeacherClient, work: Workload, top_k: int) -> float:
    """Seconds for every client's requests, one after another per client, the clients concurrent:
    through the Serve handle (packed) or an ``EndpointTeacherClient`` (/v1/completions)."""

    async def one_client(requests: list[list[ScoreRow]]) -> None:
        for rows in requests:
            await client.score_rows(rows, top_k)

    start = time.perf_counter()
    await asyncio.gather(*(one_client(c) for c in work.requests))
    return time.perf_counter() - start


async def through_http(url: str, work: Workload, top_k: int) -> float:
    from services.contracts.teacher import ScoreRequest, ScoreSequence

    bodies = [
        [
            ScoreRequest(
                sequences=[
                    ScoreSequence(token_ids=r.token_ids_T.tolist(), positions=r.positions_P.tolist())
                    for r in rows
                ],
                top_k=top_k,
            )
            for rows in client
        ]
        for client in work.requests
    ]
    async with TeacherHttpClient(url) as http:

        async def one_client(requests: list[ScoreRequest]) -> None:
            for request in requests:
                await http.score(request)

        start = time.perf_counter()
        await asyncio.gather(*(one_client(c) for c in bodies))
        return time.perf_counter() - start


def completion_answer(url: str, rows: list[ScoreRow], top_k: int) -> bytes:
    """The app's ``/v1/completions`` answer for one request's rows."""
    body = completion_request(rows, top_k, "teacher").model_dump_json(exclude_none=True)
    answer = httpx.post(f"{url}/v1/completions", content=body, headers={"content-type": "application/json"})
    answer.raise_for_status()
    return answer.content


def bytes_per_scored_token(answer: bytes, rows: list[ScoreRow], top_k: int) -> tuple[float, float, float]:
    """One request's answer: JSON bytes per scored token, JSON bytes per answered position (the
    endpoint answers every position), and our packed format's bytes per scored token."""
    scored = sum(len(r.positions_P) for r in rows)
    answered = sum(r.length - 1 for r in rows)
    packed = pack_scores(scores_from_completion(answer, rows, top_k), top_k)
    packed_bytes = (
        len(packed.top_ids) + len(packed.top_logprobs) + len(packed.token_logprob) + len(packed.entropy)
    )
    return len(answer) / scored, len(answer) / answered, packed_bytes / scored


def codec_costs(
    answer: bytes, rows: list[ScoreRow], top_k: int, repeats: int = 5
) -> tuple[tuple[float, float], tuple[float | None, float | None]]:
    """µs per scored token to write and to read one request's answer, in Python and with the
    compiled codec (None where it cannot be built), best of ``repeats``, side by side."""
    prompts = [r.token_ids_T.tolist() for r in rows]
    served = rows_from_prompts(prompts)
    scores = scores_from_completion(answer, served, top_k)
    scored = sum(len(r.positions_P) for r in rows)

    def best(call: Callable[[], object]) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return min(times) / scored * 1e6

    python = (
        best(lambda: completion_json(prompts, scores, "teacher")),
        best(lambda: scores_from_completion(answer, rows, top_k)),
    )
    kernels = codec_kernels(True)
    if kernels is None:
        return python, (None, None)
    native = (
        best(lambda: completion_json(prompts, scores, "teacher", kernels)),
        best(lambda: scores_from_completion(answer, rows, top_k, kernels)),
    )
    return python, native


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests-per-client", type=int, default=2)
    parser.add_argument("--seqs-per-request", type=int, default=8)
    parser.add_argument("--min-len", type=int, default=32)
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--token-budget", type=int, default=8192)
    parser.add_argument("--max-batch-tokens", type=int, default=32768)
    parser.add_argument("--batch-wait", type=float, default=0.02)
    parser.add_argument("--replica-cpus", type=float, default=float(os.cpu_count() or 1))
    parser.add_argument(
        "--native-codec",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="[teacher] native_codec: /v1/completions answers written (app) and read (client) in C",
    )
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--skip-endpoint", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds of quiet before each service arm")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    spec = RandomQwen3Spec(
        vocab_size=args.vocab, hidden_size=args.hidden, num_layers=args.layers, num_heads=4, max_context=1024
    )
    path = cached_random_qwen3(spec)
    work = make_workload(args)
    print(
        f"workload: {args.clients} clients x {args.requests_per_client} requests x {args.seqs_per_request} sequences, "
        f"{work.tokens} tokens, {work.scored} scored positions, top_k={args.top_k}; model {spec.name}; "
        f"{os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )

    engine = TransformersEngine(load_teacher_model(path, "cpu", "float32"))
    scorer = TeacherScorer(engine, token_budget=args.token_budget, max_batch_size=64)
    bare_forward(scorer, Workload([[work.requests[0][0]]]), args.top_k)  # warm-up

    ray.init(
        num_cpus=max(2, int(args.replica_cpus)),
        include_dashboard=False,
        namespace="turnopd",
        log_to_driver=False,
    )
    port = 8000 + os.getpid() % 1000
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    settings = TeacherSettings(
        model=str(path),
        num_cpus=args.replica_cpus,
        token_budget=args.token_budget,
        max_batch_tokens=args.max_batch_tokens,
        batch_wait_timeout_s=args.batch_wait,
        native_codec=args.native_codec,
    )
    handle = serve.run(teacher_application(settings, args.top_k), name=APP_NAME, route_prefix="/teacher")
    client = TeacherHandleClient(handle)
    url = f"http://127.0.0.1:{port}/teacher"
    asyncio.run(through_client(client, Workload([[work.requests[0][0]]]), args.top_k))  # warm-up
    before = handle.stats.remote().result()
    codec = codec_kernels(args.native_codec)
    endpoint = EndpointTeacherClient(url, "teacher", default_top_k=args.top_k, codec=codec)
    times: dict[str, list[float]] = {
        "bare": [],
        "bare_all": [],
        "handle": [],
        "http": [],
        "endpoint": [],
        "handle_all": [],
    }
    work_all = each_request(work, every_position)
    work_endpoint = each_request(work, as_endpoint_rows)
    service: dict[str, Callable[[], float]] = {
        "handle": lambda: asyncio.run(through_client(client, work, args.top_k)),
    }
    if not args.skip_http:
        service["http"] = lambda: asyncio.run(through_http(url, work, args.top_k))
    if not args.skip_endpoint:
        service["endpoint"] = lambda: asyncio.run(through_client(endpoint, work, args.top_k))
        service["handle_all"] = lambda: asyncio.run(through_client(client, work_all, args.top_k))
    for round_ in range(args.rounds):
        times["bare"].append(bare_forward(scorer, work, args.top_k))
        if not args.skip_endpoint:
            times["bare_all"].append(bare_forward(scorer, work_endpoint, args.top_k))
        # The service arms in turn, every other round backwards, each after a pause: the bare
        # forwards' threads spin on after them, and whichever arm came next would pay for it.
        for side in list(service)[:: 1 if round_ % 2 == 0 else -1]:
            time.sleep(args.pause)
            times[side].append(service[side]())
    after = handle.stats.remote().result()
    wire = codec_times = None
    if not args.skip_endpoint:
        answer = completion_answer(url, work.requests[0][0], args.top_k)
        wire = bytes_per_scored_token(answer, work.requests[0][0], args.top_k)
        codec_times = codec_costs(answer, work.requests[0][0], args.top_k)
    serve.shutdown()
    ray.shutdown()

    batches = after.batches - before.batches
    requests = after.requests - before.requests
    padding = (after.padded_tokens - before.padded_tokens) / max(
        1, after.input_tokens - before.input_tokens
    ) - 1
    print(
        f"service: {requests} requests in {batches} batches (up to {after.max_batch_requests} requests "
        f"from different clients in one), padding {padding:.1%}; median of {args.rounds} rounds:"
    )
    bare_tps = work.scored / statistics.median(times["bare"])
    print(f"bare batched forward   : {bare_tps:8.0f} scored tokens/s")
    handle_tps = work.scored / statistics.median(times["handle"])
    for side, label in (
        ("handle", "handle (packed)"),
        ("http", "HTTP (JSON)    "),
        ("endpoint", "/v1/completions"),
    ):
        if times[side]:
            tps = work.scored / statistics.median(times[side])
            paired = statistics.median(h / t for h, t in zip(times["handle"], times[side], strict=True))
            print(
                f"service, {label}: {tps:8.0f} scored tokens/s   ratio service/bare {tps / bare_tps:.2f}"
                f"   ratio to handle {tps / handle_tps:.2f} (median of the rounds' own ratios {paired:.2f}: "
                + " ".join(f"{h / t:.2f}" for h, t in zip(times["handle"], times[side], strict=True))
                + ")"
            )
    if times["endpoint"]:
        # the endpoint's rows scored at every position through the handle: what the transport costs
        all_tps = work.scored / statistics.median(times["handle_all"])
        endpoint_tps = work.scored / statistics.median(times["endpoint"])
        print(
            f"service, handle scoring every position (with the entropy): {all_tps:8.0f} scored tokens/s   "
            f"ratio to handle {all_tps / handle_tps:.2f}; endpoint / this {endpoint_tps / all_tps:.2f}"
        )
        # what the protocol's extra positions cost the compute alone: the ratio's bound with free JSON
        bare_all_tps = work.scored / statistics.median(times["bare_all"])
        print(
            f"bare, every position without the entropy (what /v1/completions computes): {bare_all_tps:8.0f} "
            f"scored tokens/s   bare ratio {bare_all_tps / bare_tps:.2f} (the endpoint's bound with free JSON)"
        )
    if wire is not None:
        json_scored, json_answered, packed = wire
        print(
            f"bytes per scored token at K={args.top_k}: /v1/completions JSON {json_scored:.0f} "
            f"({json_answered:.0f} per answered position: it answers every one), packed handle format "
            f"{packed:.0f}; JSON / packed {json_scored / packed:.1f}"
        )
    if codec_times is not None:
        python_us, native_us = codec_times
        for side, (python, native) in (
            ("write", (python_us[0], native_us[0])),
            ("read", (python_us[1], native_us[1])),
        ):
            print(
                f"codec {side} of that answer, µs per scored token: Python {python:6.1f}, C "
                + ("unavailable" if native is None else f"{native:6.1f}   Python / C {python / native:.1f}")
            )


if __name__ == "__main__":
    main()
