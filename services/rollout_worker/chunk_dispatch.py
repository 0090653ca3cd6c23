"""One play's chunks handed to the pool's idle workers, and what comes back (owner only).

A worker that dies mid-chunk (``RayActorError``) is left to Ray to restart (``WorkerStarts.recover``:
the others keep playing) and its chunk is played again, on whichever worker is idle first. A chunk
whose result lost episodes to the env gateway (``EpisodeFailure.reason`` ``env_lost``: the gateway's
env worker process died under them and was replaced) is played again whole, with the same seeds, so
the step gets the trajectories an undisturbed play gives; after ``max_attempts`` plays its tasks are
failures with that reason. One that could not reach the gateway at all (``env_unreachable``: its
process died) is played again once a new gateway is switched in: no chunk goes out until then
(``GATEWAY_BACK_S`` at most, once for all the chunks that found that gateway silent). A failure of
the environment itself (a game that raises on an action) is no loss: it stays in the result as the
failure it is.
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import ray
from ray.exceptions import RayActorError

from services.contracts.rollout import EpisodeFailure, FailureReason, RolloutResult
from services.ray_names import ROLLOUT_POOL as POOL_NAME
from services.rollout_worker.actor import worker_name
from services.rollout_worker.chunk_ledger import ChunkLedger, InFlight
from services.rollout_worker.pool_members import Gateway, Roster
from services.rollout_worker.pool_stats import PoolStats
from services.rollout_worker.task_chunks import lost_episodes
from services.rollout_worker.weights_version import StaleWeightsError
from services.rollout_worker.worker_starts import WorkerStarts

log = logging.getLogger(__name__)

# how long a chunk that could not reach the env gateway waits for a new one before its next play
GATEWAY_BACK_S = 60.0


class ChunkDispatch:
    """Hands chunks to the idle members of ``roster`` and takes their answers; ``gateway`` reads the
    pool's current env gateway."""

    def __init__(
        self, roster: Roster, starts: WorkerStarts, stats: PoolStats, gateway: Callable[[], Gateway]
    ) -> None:
        self._roster = roster
        self._starts = starts
        self._stats = stats
        self._gateway = gateway

    def hand_out(self, ledger: ChunkLedger) -> None:
        """Give each idle worker the next chunk (none while the env gateway is known silent)."""
        if ledger.gateway_wait is not None:
            return
        gateway = self._gateway()
        for index, member in enumerate(self._roster):
            if not ledger.pending:
                break
            if member.state != "idle":
                continue
            chunk = ledger.next_chunk()
            request = ledger.requests[chunk].model_copy(update={"env_gateway_url": gateway.url})
            ref = member.handle.play.remote(request)
            ledger.sent(ref, InFlight(index, chunk, gateway.generation, member.handle))
            self._roster.set(index, replace(member, state="playing"))
        if (
            ledger.pending
            and not ledger.inflight
            and not any(m.state in ("idle", "starting") for m in self._roster)
        ):
            ledger.fail_pending(POOL_NAME, "no rollout worker is left")

    def back(self, ledger: ChunkLedger, ref: Any, on_result: Callable[[RolloutResult], None] | None) -> None:
        flight = ledger.back(ref)
        index, chunk = flight.worker, flight.chunk
        member = self._roster[index] if index < len(self._roster) else None
        # else an operator replaced it, a shrink took it, or the pool closed: no crash
        mine = member is not None and member.handle is flight.handle and member.state == "playing"
        try:
            result: RolloutResult = ray.get(ref)
        except (RayActorError, StaleWeightsError) as exc:
            if mine and member is not None and not member.leaving:
                # a stale worker is one Ray restarted while it was idle (it came back at version 0)
                self._stats.crashes_by_worker[index] += 1
                if isinstance(exc, RayActorError):
                    self._stats.worker_deaths += 1
                    log.warning("%s died playing chunk %d: %s", worker_name(index), chunk, exc)
                self._starts.recover(index)
            elif mine:
                self._starts.retire(index)
            self._again(ledger, flight, f"{exc}", "worker_lost")
            return
        except BaseException:
            if mine:
                self.done_with(index)
            raise
        if mine:
            self.done_with(index)
        switched = flight.generation != self._gateway().generation
        lost = lost_episodes(result, gateway_switched=switched)
        if lost:
            self._count_lost(chunk, lost, switched)
            unreachable = any(f.reason == "env_unreachable" for f in lost)
            if unreachable and ledger.attempts[chunk] < ledger.max_attempts:
                if switched:
                    log.info("the env gateway is back at %s: playing the chunk again", self._gateway().url)
                else:
                    ledger.wait_for_gateway(flight.generation, GATEWAY_BACK_S)
            self._again(ledger, flight, lost[0].error, "env_unreachable" if unreachable else "env_lost")
            return
        ledger.results[chunk] = result
        if on_result is not None:
            on_result(result)

    def on_time(self, ledger: ChunkLedger, now: float) -> None:
        """Kill the workers of overdue chunks, and end a wait for the env gateway that is over.

        An overdue worker is alive but hung (an env call or the engine that never returns): killed,
        Ray restarts it and the chunk comes back as a ``RayActorError``, played again like a death."""
        for flight in ledger.overdue(now):
            self._stats.overdue_kills += 1
            log.warning(
                "%s played chunk %d for more than %.0fs (rollout_worker.chunk_timeout_s): killed, "
                "so Ray restarts it; the chunk is played again",
                worker_name(flight.worker),
                flight.chunk,
                ledger.timeout_s,
            )
            ray.kill(flight.handle, no_restart=False)
        if ledger.gateway_wait is not None:
            generation, until = ledger.gateway_wait
            if generation != self._gateway().generation:
                log.info("the env gateway is back at %s: playing the chunk again", self._gateway().url)
                ledger.gateway_wait = None
            elif now >= until:
                log.warning(
                    "no new env gateway in %.0f s: playing against %s again",
                    GATEWAY_BACK_S,
                    self._gateway().url,
                )
                ledger.gateway_wait = None

    def _count_lost(self, chunk: int, lost: Sequence[EpisodeFailure], gateway_switched: bool) -> None:
        if gateway_switched:
            self._stats.env_replays += 1
            log.warning("chunk %d lost episodes to an env gateway switch; playing it again", chunk)
        else:
            self._stats.env_lost_replays += 1
            log.warning(
                "chunk %d lost %d episode(s) to the env gateway (%s); playing it again",
                chunk,
                len(lost),
                lost[0].error,
            )

    def _again(self, ledger: ChunkLedger, flight: InFlight, error: str, reason: FailureReason) -> None:
        if ledger.again(flight.chunk, worker_name(flight.worker), error, reason):
            self._stats.replays += 1
        else:
            self._stats.failed_chunks += 1

    def done_with(self, index: int) -> None:
        """Worker ``index``'s chunk is over: it takes the next, or leaves if a shrink is taking it."""
        member = self._roster[index]
        if member.leaving:
            self._starts.retire(index)
        else:
            self._roster.set(index, replace(member, state="idle"))

    def abandon(self, ledger: ChunkLedger) -> None:
        """A play that stops early (an error) leaves its workers free for the next (their chunks run out)."""
        for flight in ledger.inflight.values():
            member = self._roster[flight.worker] if flight.worker < len(self._roster) else None
            if member is not None and member.handle is flight.handle and member.state == "playing":
                self.done_with(flight.worker)
