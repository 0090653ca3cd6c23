"""A pool of env worker processes, each reached over its own pipe.

Calls to one worker are serialised by a one-thread executor (blocking pipe I/O stays off the
event loop); calls to different workers run in parallel. A worker that dies, or that does not
answer within ``call_timeout_s`` (it is then killed), is replaced by a fresh process in the same
slot with a new generation number: episodes opened on the old generation are lost, the others
never notice. A monitor task also replaces workers that die while idle.
"""

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from services.contracts.env_worker import REPLY_ADAPTER, Ping, Pong, WorkerError
from services.env_gateway.episode_errors import EpisodeLostError, GatewayBusyError
from services.env_gateway.worker_process import Reply, Request, WorkerStart
from services.settings.env_gateway import EnvGatewaySettings

log = logging.getLogger(__name__)
_MONITOR_INTERVAL_S = 0.5
_START_TIMEOUT_S = 120.0


class WorkerDied(RuntimeError):
    """The worker's pipe broke or it missed its deadline (then it was killed)."""


@dataclass
class _Worker:
    slot: int
    generation: int
    process: subprocess.Popen[bytes]
    conn: Connection
    executor: ThreadPoolExecutor
    episodes: set[str] = field(default_factory=set)

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_alive(self) -> bool:
        return self.process.poll() is None


class WorkerPool:
    """``size`` worker processes; episodes are placed on the least-loaded one. ``service_token``:
    the gateway's, handed to every worker at its start (on stdin, never in argv)."""

    def __init__(
        self,
        settings: EnvGatewaySettings,
        service_token: str | None,
        on_restart: Callable[[], None] = lambda: None,
    ) -> None:
        self._settings = settings
        self._start_json = WorkerStart(settings=settings, service_token=service_token).model_dump_json()
        self._workers: list[_Worker] = []
        self._locks: list[asyncio.Lock] = []
        self._on_restart = on_restart
        self._monitor: asyncio.Task[None] | None = None
        self.restarts = 0

    # lifecycle

    async def start(self) -> None:
        size = self._settings.workers
        self._locks = [asyncio.Lock() for _ in range(size)]
        self._workers = [self._spawn(slot, 0) for slot in range(size)]
        await asyncio.gather(*(self._await_ready(w) for w in self._workers))
        self._monitor = asyncio.create_task(self._watch(), name="env-worker-monitor")

    async def close(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        for worker in self._workers:
            self._stop(worker, graceful=True)

    # placement and calls

    def reserve(self, episode_id: str) -> tuple[int, int]:
        """Place an episode on the least-loaded worker: its (slot, generation); busy when all are full."""
        worker = min(self._workers, key=lambda w: (len(w.episodes), w.slot))
        limit = self._settings.max_episodes_per_worker
        if len(worker.episodes) >= limit:
            raise GatewayBusyError(
                f"all {len(self._workers)} env workers host {limit} episodes; "
                "delete finished episodes or add workers/replicas"
            )
        worker.episodes.add(episode_id)
        return worker.slot, worker.generation

    def is_current(self, slot: int, generation: int) -> bool:
        return self._workers[slot].generation == generation

    def release(self, slot: int, generation: int, episode_id: str) -> None:
        if self.is_current(slot, generation):
            self._workers[slot].episodes.discard(episode_id)

    async def call(self, slot: int, generation: int, request: Request) -> Reply:
        """Send one request to the worker of (slot, generation) and return its reply."""
        worker = self._workers[slot]
        if worker.generation != generation:
            raise EpisodeLostError(self._lost_message(slot))
        payload = request.model_dump_json().encode()
        loop = asyncio.get_running_loop()
        try:
            raw = await loop.run_in_executor(worker.executor, self._roundtrip, worker, payload)
        except WorkerDied as exc:
            await self.replace(slot, generation, reason=str(exc))
            raise EpisodeLostError(self._lost_message(slot, str(exc))) from None
        return REPLY_ADAPTER.validate_json(raw)

    def _roundtrip(self, worker: _Worker, payload: bytes) -> bytes:
        timeout = self._settings.call_timeout_s
        try:
            worker.conn.send_bytes(payload)
            if not worker.conn.poll(timeout):
                self._kill(worker)
                raise WorkerDied(
                    f"env worker pid {worker.pid} did not answer within {timeout:g}s and was killed"
                )
            return worker.conn.recv_bytes()
        except (EOFError, OSError) as exc:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=1.0)  # reap it, to say how it died
            raise WorkerDied(f"env worker pid {worker.pid} died ({self._exit_description(worker)})") from exc

    # health and replacement

    def alive(self) -> int:
        return sum(1 for w in self._workers if w.is_alive())

    def size(self) -> int:
        return len(self._workers)

    def pids(self) -> list[int]:
        return [w.pid for w in self._workers]

    async def replace(self, slot: int, generation: int, reason: str) -> None:
        """Replace the worker of ``slot`` if it is still ``generation`` (the first caller wins)."""
        async with self._locks[slot]:
            old = self._workers[slot]
            if old.generation != generation:
                return
            log.warning("replacing env worker slot %d (pid %d): %s", slot, old.pid, reason)
            self._stop(old, graceful=False)
            new = self._spawn(slot, generation + 1)
            self._workers[slot] = new
            self.restarts += 1
            self._on_restart()
            await self._await_ready(new)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(_MONITOR_INTERVAL_S)
            for worker in list(self._workers):
                if worker.is_alive():
                    continue
                try:
                    await self.replace(worker.slot, worker.generation, self._exit_description(worker))
                except Exception:
                    # The monitor must outlive a failed restart; /healthz reports the slot as down.
                    log.exception("could not replace env worker slot %d; retrying", worker.slot)

    # process handling

    def _spawn(self, slot: int, generation: int) -> _Worker:
        # A fresh interpreter (not multiprocessing): it never re-imports the caller's __main__, which
        # may be uvicorn, a Ray Serve replica or pytest.
        parent, child = socket.socketpair()
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        command = [sys.executable, "-m", "services.env_gateway.worker_process", str(child.fileno())]
        process = subprocess.Popen(command, pass_fds=(child.fileno(),), env=env, stdin=subprocess.PIPE)
        assert process.stdin is not None
        process.stdin.write(self._start_json.encode())
        process.stdin.close()
        child.close()
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"env-worker-{slot}")
        return _Worker(slot, generation, process, Connection(parent.detach()), executor)

    async def _await_ready(self, worker: _Worker) -> None:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + _START_TIMEOUT_S
        reply = await loop.run_in_executor(worker.executor, self._ping_until, worker, deadline)
        if not isinstance(reply, Pong):
            raise RuntimeError(f"env worker slot {worker.slot} answered {reply!r} to ping")

    def _ping_until(self, worker: _Worker, deadline: float) -> Pong | WorkerError:
        worker.conn.send_bytes(Ping().model_dump_json().encode())
        if not worker.conn.poll(max(0.0, deadline - time.monotonic())):
            raise RuntimeError(f"env worker slot {worker.slot} did not start within {_START_TIMEOUT_S:g}s")
        reply = REPLY_ADAPTER.validate_json(worker.conn.recv_bytes())
        assert isinstance(reply, Pong | WorkerError)
        return reply

    def _kill(self, worker: _Worker) -> None:
        if worker.is_alive():
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()

    def _stop(self, worker: _Worker, graceful: bool) -> None:
        if graceful:
            # A closed pipe makes the worker leave its loop and close its games.
            with contextlib.suppress(OSError):
                worker.conn.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=5.0)
        self._kill(worker)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=5.0)
        # Closed by its own executor thread, after the calls queued there (they fail on the dead
        # process and report their episodes lost): closed from here, while one of them is writing, its
        # fd number could go to the replacement's pipe, which would get that call's request and hand
        # its reply to the wrong caller.
        worker.executor.submit(self._close_pipe, worker.conn)
        worker.executor.shutdown(wait=False)

    @staticmethod
    def _close_pipe(conn: Connection) -> None:
        with contextlib.suppress(OSError):
            conn.close()

    def _exit_description(self, worker: _Worker) -> str:
        code = worker.process.poll()
        if code is None:
            return "pipe closed"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def _lost_message(self, slot: int, why: str = "") -> str:
        reason = f" ({why})" if why else ""
        return (
            f"the env worker process hosting this episode died{reason} and was replaced; "
            "the episode's game state is gone, start a new episode"
        )
