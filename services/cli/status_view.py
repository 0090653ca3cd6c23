"""How `turnopd status` shows a ``RunStatus``: a run summary, a service table, the recent restarts."""

import time

from rich.console import Group
from rich.table import Table
from rich.text import Text

from services.contracts.operations import RunStatus
from services.contracts.orchestrator import EvalRecord

HEALTH_STYLE = {"ok": "green", "busy": "cyan", "restarting": "yellow", "down": "bold red", "unknown": "dim"}


def _num(value: float | int | None, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def summary_lines(status: RunStatus, now: float | None = None) -> list[str]:
    """The run's headline facts, one per line."""
    age = (now if now is not None else time.time()) - status.updated_at
    lines = [
        f"run {status.run_id} ({status.method}) in {status.run_dir}",
        f"{status.phase}: step {status.step}/{status.total_steps}, weights version {status.weights_version}, "
        f"last step {_num(status.last_step_s, '{:.1f}')} s, updated {age:.0f} s ago",
        f"H_hat {_num(status.h_hat)}, H_bar {_num(status.h_bar, '{:.2f}')}, alpha {_num(status.alpha, '{:.3f}')}"
        if not status.sources
        else f"{len(status.sources)} task sources, each with its own controller (below)",
    ]
    load = status.pool_load
    lines.append(
        "pools busy in the last step: not recorded yet"
        if load is None
        else "pools busy in the last step: "
        + ", ".join(f"{pool} {100 * share:.0f}%" for pool, share in load.busy.items())
        + f"; two or more at once {100 * load.overlap:.0f}%; weights lag {_num(status.weights_lag)}"
    )
    ev = status.last_eval
    lines.append("last eval: none yet" if ev is None else f"last eval {_eval_text(ev)}")
    evals = {e.env: e for e in status.source_evals}
    for source in status.sources or []:
        last = evals.get(source.env)
        lines.append(
            f"  {source.env}: H_hat {source.h_hat}, H_bar {source.h_bar:.2f}, alpha {source.alpha:.3f}, "
            f"success {source.success_rate:.2f} on {source.trajectories} trajectories; "
            + ("no eval yet" if last is None else f"eval {_eval_text(last)}")
        )
    return lines


def _eval_text(ev: EvalRecord) -> str:
    return f"after step {ev.step}: Avg@{ev.n} {ev.avg_at_n:.3f}, success {ev.success_rate:.3f} on {ev.split}"


def status_renderable(status: RunStatus, now: float | None = None, recent: int = 5) -> Group:
    """Summary, the service table, and the last ``recent`` restarts."""
    services = Table(title="services", title_justify="left")
    services.add_column("service", no_wrap=True)
    services.add_column("health", no_wrap=True)
    services.add_column("restarts", justify="right")
    services.add_column("version")
    services.add_column("detail")
    for s in status.services:
        detail = f"{s.address} {s.detail}" if s.address else s.detail
        services.add_row(
            s.name, Text(s.health, style=HEALTH_STYLE[s.health]), str(s.restarts), s.version, detail
        )
    parts: list[Text | Table] = [Text(line) for line in summary_lines(status, now)]
    parts.append(services)
    if status.restarts:
        restarts = Table(title="recent restarts", title_justify="left")
        for column in ("service", "ok", "after step", "seconds", "message"):
            restarts.add_column(column)
        for r in status.restarts[-recent:]:
            restarts.add_row(
                r.service, Text("yes" if r.ok else "no", style="green" if r.ok else "red"),
                str(r.step), f"{r.seconds:.1f}", r.message,
            )  # fmt: skip
        parts.append(restarts)
    return Group(*parts)
