"""Every contract survives a JSON round trip and rejects unknown fields and broken shapes."""

import pytest
from pydantic import ValidationError

from services.contracts.controller import DepthState, ProbeStats, StepDecision, StepPlan
from services.contracts.diagnosis import DiagnosisReport, PhaseStats, TurnSummary
from services.contracts.experiments import (
    ComparisonSummary,
    MethodSummary,
    RunScore,
    TaskTypeScore,
    TaskTypeSummary,
    TimeSplit,
    WindowScore,
)
from services.contracts.learner import LearnerStepResult
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.contracts.teacher import ScoreRequest, ScoreResponse, ScoreSequence, SequenceScores
from services.contracts.trajectory import Trajectory, TurnRecord

TURN_STATS = TurnStatsRecord(
    step=3,
    probe=False,
    alpha=0.25,
    h_roll=7,
    trajectories=[
        TrajectoryTurnStats(turn_tokens=[3, 2], turn_kl_sum=[0.5, 0.1], success=True, truncated=False),
        TrajectoryTurnStats(
            turn_tokens=[4], turn_kl_sum=[0.2], success=False, truncated=True, turn_entropy_sum=[1.5]
        ),
    ],
)
WINDOW = WindowScore(mean=0.625, std=0.125, steps=[3, 4, 5, 6])
RUN_SCORE = RunScore(
    seed=0,
    run_dir="cmp/turnopd/seed0",
    wall_time_s=30.0,
    time_split=TimeSplit(rollout_s=18.0, teacher_s=3.0, learner_s=6.0, other_s=3.0),
    mean_h_roll=4.5,
    least_time_cutoff_s=30.0,
    speedup_vs_vanilla=2.0,
    same_step=WINDOW,
    least_time=WindowScore(mean=None, std=None, steps=[]),
    per_task_type={"pick_and_place": TaskTypeScore(same_step=WINDOW, least_time=WINDOW)},
)
METHOD_SUMMARY = MethodSummary(
    method="turnopd",
    seeds=[0],
    same_step_acc=0.625,
    same_step_std=0.125,
    same_step_seed_std=None,
    least_time_acc=None,
    least_time_std=None,
    least_time_seed_std=None,
    wall_time_s=30.0,
    wall_time_seed_std=None,
    speedup_vs_vanilla=2.0,
    per_task_type={
        "pick_and_place": TaskTypeSummary(
            same_step_acc=0.5, same_step_std=0.0, least_time_acc=0.5, least_time_std=0.0
        )
    },
    runs=[RUN_SCORE],
)
PHASE = PhaseStats(
    name="early",
    n_steps=2,
    first_step=1,
    last_step=2,
    alpha_mean=0.1,
    deep_shallow_kl_ratio=0.4,
    deep_support=0.2,
    deep_loss_budget=0.05,
    deep_loss_budget_actual=0.07,
    gap_per_turn=[0.1, None],
)
EXAMPLES = [
    TurnRecord(
        index=0, response_start=4, response_end=7, action="look", accepted=True, observation="You see"
    ),
    Trajectory(
        episode_id="ep-1",
        env="alfworld",
        split="train",
        task_type="pick_and_place",
        token_ids=[1, 2, 3, 4, 5, 6, 7, 8, 9],
        turns=[
            TurnRecord(
                index=0, response_start=2, response_end=4, action="look", accepted=True, observation="o"
            ),
            TurnRecord(
                index=1, response_start=6, response_end=9, action=None, accepted=False, observation="bad"
            ),
        ],
        sampler_logprobs=[-0.1, -0.2, -0.3, -0.4, -0.5],
        reward=1.0,
        success=True,
        truncated=False,
        weights_version=4,
    ),
    ScoreRequest(sequences=[ScoreSequence(token_ids=[1, 2, 3], positions=[1, 2])], top_k=2),
    ScoreResponse(
        results=[
            SequenceScores(
                positions=[1],
                top_ids=[[5, 6]],
                top_logprobs=[[-0.1, -2.5]],
                token_logprob=[-0.1],
                entropy=[0.4],
            )
        ]
    ),
    ProbeStats(step=2, kl_per_turn=[0.4, 0.2], survivors=[8, 5], success_turns=[1, 1]),
    DepthState(step=2, h_bar=12.5, h_cov=3, h_eff=2, h_ctrl=3),
    StepDecision(step=2, probe=True, h_roll=50, h_hat=14, h_bar=12.5, h_eff=2, h_cov=3, h_ctrl=3),
    StepPlan(step=4, probe=False, h_roll=14, h_hat=14, alpha=0.04, weights_version=3),
    TURN_STATS,
    LearnerStepResult(
        step=3,
        loss=0.3,
        mean_kl=0.5,
        tokens=5,
        grad_norm=1.2,
        weights_version=3,
        turn_stats=TURN_STATS,
        forward_backward_s=0.5,
        optimizer_s=0.1,
    ),
    PHASE,
    TurnSummary(
        turn=0,
        reliable=True,
        support_frac=1.0,
        mean_survivors=8.0,
        mean_kl=0.3,
        gap=None,
        loss_share=0.4,
        loss_share_traj=0.5,
    ),
    DiagnosisReport(
        steps=2,
        first_step=1,
        last_step=2,
        reliable_prefix=1,
        shallow_turns=[0],
        deep_turns=[0],
        min_survivors=8,
        min_survivor_frac=0.1,
        min_step_frac=0.6,
        deep_shallow_kl_ratio=1.0,
        deep_support=1.0,
        deep_loss_budget=0.5,
        deep_loss_budget_actual=0.5,
        phases={"early": PHASE},
        per_turn=[],
    ),
    WINDOW,
    RUN_SCORE,
    METHOD_SUMMARY,
    ComparisonSummary(
        steps=6,
        window=4,
        baseline="vanilla",
        seeds=[0],
        least_time_cutoff_s={"0": 30.0},
        config="configs/smoke.toml",
        methods={"turnopd": METHOD_SUMMARY},
    ),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_json_round_trip(message):
    again = type(message).model_validate_json(message.model_dump_json())
    assert again == message


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_unknown_fields_rejected_and_frozen(message):
    data = message.model_dump()
    data["surprise"] = 1
    with pytest.raises(ValidationError, match="surprise"):
        type(message).model_validate(data)
    field = next(iter(type(message).model_fields))
    with pytest.raises(ValidationError):
        setattr(message, field, getattr(message, field))


def test_probe_stats_shape_errors():
    with pytest.raises(ValidationError, match="survivors has 1"):
        ProbeStats(step=1, kl_per_turn=[0.1, 0.2], survivors=[3])
    with pytest.raises(ValidationError, match="empty"):
        ProbeStats(step=1, kl_per_turn=[0.1], survivors=[0])
    with pytest.raises(ValidationError, match="finite"):
        ProbeStats(step=1, kl_per_turn=[float("nan")], survivors=[1])
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        ProbeStats(step=1, kl_per_turn=[0.1, 0.1], survivors=[2, -1])


def test_trajectory_span_errors():
    good = EXAMPLES[1]
    data = good.model_dump()
    data["sampler_logprobs"] = [-0.1]
    with pytest.raises(ValidationError, match="sampler_logprobs has 1 entries for 5 tokens"):
        Trajectory.model_validate(data)
    data = good.model_dump()
    data["turns"][1]["response_start"] = 3
    with pytest.raises(ValidationError, match="out of order"):
        Trajectory.model_validate(data)
    assert good.turn_tokens == [2, 3]


def test_score_sequence_positions_must_have_a_prefix():
    with pytest.raises(ValidationError, match=r"positions \[0, 3\] outside \[1, 3\)"):
        ScoreSequence(token_ids=[1, 2, 3], positions=[0, 1, 3])
