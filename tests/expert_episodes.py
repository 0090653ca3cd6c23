"""A scripted household expert episode in the env gateway's own messages, for teacher-training tests."""

from services.contracts.env_gateway import EpisodeStart, StepResult
from services.contracts.expert_data import ExpertEpisode, ExpertTurn

INTRO = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, "
    "you see a countertop 1, a drawer 1, and a sinkbasin 1.\n\nYour task is to: put a apple in drawer."
)
# (expert action, observation, admissible actions after it)
SCRIPT = [
    (
        "go to countertop 1",
        "You arrive at countertop 1. On the countertop 1, you see a apple 1.",
        ["examine countertop 1", "go to drawer 1", "go to sinkbasin 1", "take apple 1 from countertop 1"],
    ),
    (
        "take apple 1 from countertop 1",
        "You pick up the apple 1 from the countertop 1.",
        ["go to drawer 1", "go to sinkbasin 1", "put apple 1 in/on countertop 1"],
    ),
    (
        "go to drawer 1",
        "You arrive at drawer 1. The drawer 1 is closed.",
        ["go to sinkbasin 1", "open drawer 1"],
    ),
    (
        "open drawer 1",
        "You open the drawer 1. The drawer 1 is open. In it, you see nothing.",
        ["close drawer 1", "put apple 1 in/on drawer 1"],
    ),
    ("put apple 1 in/on drawer 1", "You put the apple 1 in/on the drawer 1.", ["take apple 1 from drawer 1"]),
]


def scripted_episode(seed: int = 0, turns: int = len(SCRIPT), won: bool = True) -> ExpertEpisode:
    """A small household episode in the gateway's own messages (expert actions included)."""
    start = EpisodeStart(
        episode_id=f"ep{seed}",
        observation=INTRO,
        objective="put a apple in drawer.",
        admissible_actions=["go to countertop 1", "go to drawer 1", "go to sinkbasin 1", "inventory", "look"],
        task_type="pick_and_place",
        game_id=f"train/pick_and_place/{seed:05d}",
        seed=seed,
        expert_action=SCRIPT[0][0],
    )
    steps = []
    for i, (action, observation, admissible) in enumerate(SCRIPT[:turns]):
        last = i == len(SCRIPT) - 1
        result = StepResult(
            observation=observation,
            reward=1.0 if last and won else 0.0,
            done=last,
            won=last and won,
            admissible_actions=admissible,
            turn=i + 1,
            expert_action=None if last else SCRIPT[i + 1][0],
        )
        steps.append(ExpertTurn(action=action, result=result))
    return ExpertEpisode(start=start, turns=steps)


def scripted_search_episode(seed: int = 0) -> ExpertEpisode:
    """A small multi-hop search episode (a search, then the answer), in the gateway's messages."""
    question = "In which country was the founder of Brightwater Press born?"
    start = EpisodeStart(
        episode_id=f"search{seed}",
        observation=f"Question: {question}",
        objective=question,
        admissible_actions=[],
        task_type="two_hop",
        game_id=f"train/two_hop/{seed:05d}",
        seed=seed,
        expert_action="search[Brightwater Press founder]",
    )
    passages = "<information>Brightwater Press was founded by Ada Lorne, born in Veloria.</information>"
    turns = [
        ExpertTurn(
            action="search[Brightwater Press founder]",
            result=StepResult(
                observation=passages,
                reward=0.0,
                done=False,
                won=False,
                admissible_actions=[],
                turn=1,
                expert_action="answer[Veloria]",
            ),
        ),
        ExpertTurn(
            action="answer[Veloria]",
            result=StepResult(
                observation="Your answer is correct.",
                reward=1.0,
                done=True,
                won=True,
                admissible_actions=[],
                turn=2,
            ),
        ),
    ]
    return ExpertEpisode(start=start, turns=turns)
