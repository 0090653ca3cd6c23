"""The agent loop on the search env: the chat shows the search tool and Search-R1's prompt, parsed
searches and answers reach the env, malformed responses get feedback.

The env is the real search backend behind a small in-process stand-in for the gateway client (only
glue; tests/integration/test_search_env.py plays the real gateway over HTTP).
"""

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from scripted_engines import ScriptedEngine

from services.agent.chat_format import ChatFormat
from services.contracts.env_gateway import EpisodeCreate, EpisodeStart, StepResult
from services.contracts.rollout import EpisodeTask
from services.env_gateway.action_validation import check_action
from services.envs.backend import GameSession
from services.envs.search.backend import SearchBackend
from services.envs.search.protocol import format_search_response
from services.envs.search.settings import SearchEnvSettings
from services.models.loading import load_tokenizer
from services.rollout_worker.agent_loop import play_episodes
from services.rollout_worker.engines import Generation, GenerationParams


class InProcessSearchGateway:
    def __init__(self, backend: SearchBackend) -> None:
        self.backend = backend
        self.sessions: dict[str, tuple[GameSession, list[str]]] = {}
        self.questions: dict[str, str] = {}
        self.expert: dict[str, str | None] = {}  # question text -> the expert's next action
        self.steps: list[str] = []

    async def create_episode(self, request: EpisodeCreate) -> EpisodeStart:
        assert request.seed is not None
        choice = self.backend.choose(request.split, request.seed, request.task_type)
        session = self.backend.open(request.split, choice, expert=True)
        opening = session.start()
        episode_id = f"ep-{len(self.sessions)}"
        self.sessions[episode_id] = (session, opening.admissible_actions)
        self.questions[episode_id] = opening.objective
        self.expert[opening.objective] = opening.expert_action
        return EpisodeStart(
            episode_id=episode_id,
            observation=opening.observation,
            objective=opening.objective,
            admissible_actions=opening.admissible_actions,
            task_type=opening.task_type,
            game_id=opening.game_id,
            seed=request.seed,
        )

    async def step(self, episode_id: str, action: str) -> StepResult:
        session, admissible = self.sessions[episode_id]
        outcome = session.step(check_action(action, admissible))
        self.steps.append(action)
        self.sessions[episode_id] = (session, outcome.admissible_actions)
        self.expert[self.questions[episode_id]] = outcome.expert_action
        return StepResult(
            observation=outcome.observation,
            reward=outcome.reward,
            done=outcome.done,
            won=outcome.won,
            admissible_actions=outcome.admissible_actions,
            turn=len(self.steps),
        )

    async def delete_episode(self, episode_id: str) -> None:
        self.sessions.pop(episode_id)


class ExpertEngine(ScriptedEngine):
    """Answers each prompt with the expert's next action (first turn of every game: a malformed reply)."""

    def __init__(self, chat: ChatFormat, gateway: InProcessSearchGateway, stumble: bool) -> None:
        super().__init__(chat.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        self.chat, self.gateway, self.stumble = chat, gateway, stumble
        self.prompts: list[str] = []

    def generate(self, prompts: Sequence[Sequence[int]], params: GenerationParams) -> list[Generation]:
        out = []
        for prompt in prompts:
            text = self.chat.tokenizer.decode(list(prompt))
            self.prompts.append(text)
            match = re.search(r"Question: (.*?)<\|im_end\|>", text)
            assert match is not None
            first_turn = text.count("<|im_start|>assistant") == 1
            action = self.gateway.expert[match.group(1)]
            assert action is not None
            response = (
                "I will just say it."
                if self.stumble and first_turn
                else format_search_response(action, "Next.")
            )
            ids = [*self.chat.tokenizer.encode(response, add_special_tokens=False), self._end]
            out.append(Generation(ids, [-1.0] * len(ids), "stop"))
        return out


@pytest.fixture(scope="module")
def chat(zoo_cache: Path) -> ChatFormat:
    return ChatFormat(load_tokenizer("student", zoo_cache))


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> SearchBackend:
    return SearchBackend(SearchEnvSettings(), tmp_path_factory.mktemp("search"))


def _tasks() -> list[EpisodeTask]:
    return [EpisodeTask(env="search", split="valid_unseen", seed=s) for s in range(6)]


def test_expert_replies_win_every_episode_with_the_search_chat(chat: ChatFormat, backend: SearchBackend):
    gateway = InProcessSearchGateway(backend)
    engine = ExpertEngine(chat, gateway, stumble=False)
    played, failed = asyncio.run(play_episodes(engine, chat, gateway, _tasks(), 10, 1.0, 64, 0))
    assert failed == [] and len(played) == 6
    assert all(t.success and t.reward == 1.0 and not t.truncated for t in played)
    assert sorted({t.task_type for t in played}) == ["single_hop", "three_hop", "two_hop"]
    assert all((t.turns[-1].action or "").startswith("answer[") for t in played)
    first = engine.prompts[0]
    assert '"name": "search"' in first and "answering questions with a search engine" in first
    assert "Admissible actions" not in "".join(engine.prompts)
    searches = [turn for t in played for turn in t.turns if turn.action.startswith("search[")]
    assert searches and all(turn.observation.startswith("<information>Doc 1(Title: ") for turn in searches)


def test_malformed_replies_cost_a_turn_and_get_feedback(chat: ChatFormat, backend: SearchBackend):
    gateway = InProcessSearchGateway(backend)
    engine = ExpertEngine(chat, gateway, stumble=True)
    played, _ = asyncio.run(play_episodes(engine, chat, gateway, _tasks()[:2], 10, 1.0, 64, 0))
    for trajectory in played:
        first = trajectory.turns[0]
        assert first.action is None and not first.accepted
        assert first.observation.startswith(
            "Invalid response: no search tool call, <search> or <answer> found"
        )
        assert trajectory.success
