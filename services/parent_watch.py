"""A child server that stops when the process that started it is gone.

`turnopd train` starts its env gateway (and `turnopd eval` its own) as a child process and stops it
on the way out. A SIGTERM to the run (a Kubernetes or systemd stop, `kill`) ends the run's process
without that: Ray's handler exits before the run's exit stack unwinds, and the gateway would stay
up, re-parented to init, holding the run's port. So the parent passes its pid in
``TURNOPD_PARENT_PID``, and the child interrupts itself (SIGINT, the same clean stop the parent
sends) once its parent pid is no longer that one.
"""

import os
import signal
import threading
import time

PARENT_ENV = "TURNOPD_PARENT_PID"
POLL_S = 1.0


def watch_parent(poll_s: float = POLL_S) -> threading.Thread | None:
    """Start the watch if ``TURNOPD_PARENT_PID`` is set (None: not a child of a turnopd process)."""
    raw = os.environ.get(PARENT_ENV)
    if not raw:
        return None
    try:
        parent = int(raw)
    except ValueError:
        raise ValueError(f"{PARENT_ENV} must be a process id, got {raw!r}") from None
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        # A run started in the background (`nohup`, `&`, CI) hands its children SIGINT ignored: the
        # interrupt this watch and the parent's stop send would do nothing.
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
