"""The controller's probe statistics from a probe step's batch (pure).

K_t is the token-pooled mean KL at turn t over the trajectories reaching it (turns without tokens
count as 0), n_t the survivors, and the success turns the final-turn indices of the successful
trajectories. A probe batch rolls out to H_max, so it is uncensored below that cap.
"""

from services.contracts.controller import ProbeStats
from services.contracts.records import TurnStatsRecord
from services.controller.turn_weights import survivors
from services.diagnostics.step_stats import pooled_kl


def probe_stats(record: TurnStatsRecord) -> ProbeStats:
    """ProbeStats of one step's turn statistics."""
    trajectories = record.trajectories
    counts = survivors([t.turn_tokens for t in trajectories])
    kl = [k if k is not None else 0.0 for k in pooled_kl(list(trajectories), len(counts))]
    success_turns = [len(t.turn_tokens) - 1 for t in trajectories if t.success]
    return ProbeStats(step=record.step, kl_per_turn=kl, survivors=counts, success_turns=success_turns)
