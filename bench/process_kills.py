"""Processes SIGKILLed from outside at seeded random moments inside a step, N trials per kind: how
many runs complete, and the steps and episodes they lose or repeat (issue 60).

Each trial trains ``configs/smoke.toml`` (4 steps of 4 episodes, a checkpoint every 2 steps,
``[pipeline] max_staleness`` as given) with `turnopd train` in a process of its own, waits for
step 1's line, then SIGKILLs the process of its kind a random part of a step later (seeded by
``--seed``, the kind and the trial: printed, and replayed by the same arguments):

- ``learner``: the learner's actor process (the run restarts it from its checkpoint);
- ``redis-server``, ``env-gateway``: the embedded store, the gateway process (the watchdog
  restarts them); ``env-worker``: one env worker process of the gateway (the gateway replaces it,
  the pool plays the chunk again);
- ``teacher-replica``: the teacher's Serve replica (Serve starts another; its calls are sent again);
- ``run-control``: the status actor (Ray restarts it);
- ``driver``: `turnopd train` itself, then `turnopd train --resume`.

A run completes when it exits 0 with steps 1..4 each logged once. ``repeated``: steps logged twice
(0 is the target); ``failed``: episodes counted failed (each with its reason: none is ever
dropped silently); ``redone``: steps trained again after a checkpoint (the learner and the driver:
at most ``checkpoint_every - 1`` is the target).

Trials are appended to ``--out`` (a JSONL) as they finish, each naming the commit it ran (``+``: with
changes under ``services/`` not committed; the trials run the work tree, so leave it alone meanwhile);
a second call skips those done, so the 20 trials a kind takes can be spread over sittings:

    PYTHONPATH=$PWD python bench/process_kills.py --trials 20 [--kinds learner driver] [--staleness 0]
"""

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from services.cache_dir import resolve_cache_dir
from services.operations.process_table import run_process

REPO = Path(__file__).resolve().parents[1]
STEPS, EVERY = 4, 2
KINDS = ("learner", "redis-server", "env-gateway", "env-worker", "teacher-replica", "run-control", "driver")


def config_text(staleness: int) -> str:
    text = (REPO / "configs" / "smoke.toml").read_text()
    text = text.replace("steps = 3", f"steps = {STEPS}").replace(
        "checkpoint_every = 2", f"checkpoint_every = {EVERY}"
    )
    return text + f"\n[pipeline]\nmax_staleness = {staleness}\n"


def victim(kind: str, run: Path, driver: int) -> int:
    """The pid to SIGKILL for ``kind`` in the run at ``run`` (driver: `turnopd train`'s pid), among
    that run's own processes (those below its driver)."""
    return driver if kind == "driver" else run_process(kind, run, driver)


def metrics(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


STARTED: list[subprocess.Popen[bytes]] = []  # this trial's `turnopd train` processes


def train(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with log.open("ab") as sink:
        STARTED.append(
            subprocess.Popen(
                [sys.executable, "-m", "services.cli", "train", *args],
                stdout=sink,
                stderr=sink,
                env=env,
                cwd=REPO,
                start_new_session=True,  # a trial that goes wrong is stopped whole (stop_trial)
            )
        )
        return STARTED[-1]


def stop_trial(proc: subprocess.Popen[bytes]) -> None:
    """Stop a trial that went wrong, its Ray cluster and services with it (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def commit() -> str:
    """The commit the trials measure (with ``+`` when the work tree differs from it)."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "services"], cwd=REPO).returncode
    return head.stdout.strip() + ("+" if dirty else "")


def final_state(run: Path) -> tuple[dict, list[dict]]:
    """The run's last checkpoint's weights and its controller's log (what an exact resume repeats)."""
    from safetensors.torch import load_file

    weights = load_file(str(run / "checkpoints" / f"step_{STEPS:06d}" / "model.safetensors"))
    lines = (run / "controller.jsonl").read_text().splitlines()
    return weights, [json.loads(line) for line in lines if line.strip()]


def reference(staleness: int, head: str) -> tuple[dict, list[dict]]:
    """An uninterrupted run of the trials' config, run once per commit and staleness (cached)."""
    run = resolve_cache_dir() / "bench" / "process-kills" / f"reference-{head}-s{staleness}" / "run"
    if not (run / "checkpoints" / f"step_{STEPS:06d}").exists():
        if run.parent.exists():
            shutil.rmtree(run.parent)
        run.parent.mkdir(parents=True)
        config = run.parent / "config.toml"
        config.write_text(config_text(staleness))
        print(f"an uninterrupted run for reference: {run}", flush=True)
        proc = train(["--config", str(config), "--run-dir", str(run)], run.parent / "train.log")
        rc = proc.wait(timeout=1800)
        stop_trial(STARTED.pop())  # what it may have left behind
        if rc != 0:
            raise RuntimeError(f"the uninterrupted reference run exited {rc}: {run.parent / 'train.log'}")
    return final_state(run)


def against(run: Path, ref: tuple[dict, list[dict]]) -> dict:
    """How the trial's final weights and controller log compare with the uninterrupted run's."""
    weights, decisions = final_state(run)
    diff = max(float((weights[name].float() - ref[0][name].float()).abs().max()) for name in ref[0])
    return {"weights_max_abs_diff": diff, "controller_equal": decisions == ref[1]}


def trial(
    kind: str, index: int, seed: int, staleness: int, root: Path, ref: tuple[dict, list[dict]] | None
) -> dict:
    rng = random.Random(f"{seed}:{kind}:{index}:{staleness}")
    run = root / f"{kind}-{index}" / "run"
    run.parent.mkdir(parents=True)
    config = run.parent / "config.toml"
    config.write_text(config_text(staleness))
    log = run.parent / "train.log"
    started = time.monotonic()
    proc = train(["--config", str(config), "--run-dir", str(run)], log)
    while not metrics(run):
        if proc.poll() is not None:
            raise RuntimeError(
                f"{kind} trial {index}: training exited {proc.returncode} before step 1; {log}"
            )
        time.sleep(0.2)
    step_s = float(metrics(run)[0]["times"]["total_s"])
    delay = rng.uniform(0.0, step_s)
    time.sleep(delay)
    pid = victim(kind, run, proc.pid)
    logged_at_kill = [int(m["step"]) for m in metrics(run)]
    saved = [p.name.removeprefix("step_") for p in (run / "checkpoints").glob("step_*")]
    checkpoints = sorted(int(n) for n in saved if n.isdigit())  # not one being written (step_N.tmp)
    os.kill(pid, signal.SIGKILL)
    print(f"seed {seed}: {kind} trial {index}: SIGKILL pid {pid} at step 1 + {delay:.2f} s", flush=True)
    rc = proc.wait(timeout=1800)
    redone = 0
    if kind == "driver":
        last = max(logged_at_kill, default=0)
        resumed_from = max((c for c in checkpoints if c <= last), default=0)
        redone = last - resumed_from
        rc = train(["--resume", str(run)], log).wait(timeout=1800)
    steps = [int(m["step"]) for m in metrics(run)]
    restarts_path = run / "restarts.jsonl"
    restarts = (
        [json.loads(line) for line in restarts_path.read_text().splitlines()]
        if restarts_path.exists()
        else []
    )
    for r in restarts:
        if r["request_id"].startswith("learner-lost"):
            redone += max(0, max(logged_at_kill, default=0) - int(r["step"]))
    if kind == "env-worker":  # the gateway saw it die and replaced it (its log says so)
        logs = "".join(p.read_text(errors="replace") for p in run.glob("env_gateway*.log"))
        if "replacing env worker slot" not in logs:
            raise RuntimeError(f"env-worker trial {index}: the gateway never replaced a worker ({run})")
    reasons: dict[str, int] = {}
    for m in metrics(run):
        for why, n in (m.get("failure_reasons") or {}).items():
            reasons[why] = reasons.get(why, 0) + n
    completed = rc == 0 and sorted(set(steps)) == list(range(1, STEPS + 1))
    return {
        "kind": kind,
        "trial": index,
        "seed": seed,
        "staleness": staleness,
        "delay_s": round(delay, 3),
        "rc": rc,
        "completed": completed,
        "repeated": len(steps) - len(set(steps)),
        "failed": sum(int(m["failed_episodes"]) for m in metrics(run)),
        "failure_reasons": reasons,
        "redone": redone,
        "recoveries": [r["request_id"] for r in restarts],
        "wall_s": round(time.monotonic() - started, 1),
        **(against(run, ref) if completed and ref is not None else {}),
    }


def table(rows: list[dict]) -> str:
    head = f"{'kind':16} {'trials':>6} {'completed':>9} {'repeated':>8} {'failed':>6} {'redone max':>10}"
    out = [head + f" {'exact end':>9} {'max |dw|':>9}"]
    for kind in KINDS:
        mine = [r for r in rows if r["kind"] == kind]
        if mine:
            done = sum(r["completed"] for r in mine)
            checked = [r for r in mine if "controller_equal" in r]
            exact = sum(r["controller_equal"] and r["weights_max_abs_diff"] == 0.0 for r in checked)
            worst = max((r["weights_max_abs_diff"] for r in checked), default=float("nan"))
            out.append(
                f"{kind:16} {len(mine):>6} {done:>6}/{len(mine):<2} {sum(r['repeated'] for r in mine):>8} "
                f"{sum(r['failed'] for r in mine):>6} {max(r['redone'] for r in mine):>10} "
                f"{exact:>6}/{len(checked):<2} {worst:>9.2g}"
            )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--seed", type=int, default=60)
    parser.add_argument("--staleness", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "docs/results/records/process-kills/trials.jsonl")
    parser.add_argument(
        "--table", action="store_true", help="print the table of the trials in --out, run none"
    )
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in args.out.read_text().splitlines()] if args.out.exists() else []
    done = {(r["kind"], r["trial"], r["seed"], r["staleness"]) for r in rows}
    if args.table:
        print(table([r for r in rows if r["seed"] == args.seed and r["staleness"] == args.staleness]))
        return
    head = commit()
    # at staleness 0 a run's end is exact whatever died: compared with an uninterrupted one
    ref = reference(args.staleness, head) if args.staleness == 0 else None
    with tempfile.TemporaryDirectory(prefix="process-kills-") as tmp:
        for index in range(args.trials):
            for kind in args.kinds:
                if (kind, index, args.seed, args.staleness) in done:
                    continue
                try:
                    row = trial(kind, index, args.seed, args.staleness, Path(tmp), ref)
                except Exception as exc:  # a trial that went wrong is a row too, never a stop
                    row = {"kind": kind, "trial": index, "seed": args.seed, "staleness": args.staleness}
                    row |= {"completed": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
                    row |= {"repeated": 0, "failed": 0, "redone": 0}
                finally:
                    for proc in STARTED:  # what a killed driver left behind among them
                        stop_trial(proc)
                    STARTED.clear()
                row["commit"] = commit()  # the code this trial ran: the work tree's, as it is now
                print(json.dumps(row), flush=True)
                rows.append(row)
                with args.out.open("a") as out:
                    out.write(json.dumps(row) + "\n")
    print(table([r for r in rows if r["seed"] == args.seed and r["staleness"] == args.staleness]))


if __name__ == "__main__":
    main()
