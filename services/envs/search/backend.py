"""The `search` backend (Search-R1 style multi-hop QA): the agent searches and then answers.

A game is one question of the generated encyclopedia (``services.envs.search``); its task
type is the question's data source (``single_hop``, ``two_hop``, ``three_hop``). The actions are
``search[<query>]`` (the observation is the top-k passages in ``<information>``) and
``answer[<answer>]`` (ends the episode; reward 1 on an exact match after normalisation). An episode
not answered after ``max_turns`` steps ends with reward 0. Retrieval runs on the embedded BM25
index, or on a Search-R1 retrieval server (``retriever = "remote"``).
"""

from functools import cached_property
from pathlib import Path

from services.contracts.env_gateway import EnvInfo, Split
from services.envs.backend import EnvBackend, GameChoice, GameSession, Opening, Outcome
from services.envs.search.actions import ADMISSIBLE, parse_action
from services.envs.search.answers import exact_match
from services.envs.search.bm25_index import Bm25Retriever
from services.envs.search.dataset import (
    QuestionPools,
    corpus_path,
    questions_path,
    read_corpus,
    read_questions,
)
from services.envs.search.expert import SearchExpert
from services.envs.search.questions import DATA_SOURCES, SPLITS, Question
from services.envs.search.remote import RemoteRetriever
from services.envs.search.retrieval import Retriever, information_block
from services.envs.search.settings import SearchEnvSettings
from services.errors import InputError

INSTRUCTIONS = (
    "Answer the given question. Reason inside <think> and </think> every time you get new "
    "information. If you lack knowledge, call the search engine with the search tool or with "
    "<search> query </search>; it returns the top passages between <information> and "
    "</information>. You can search as many times as you want. When you know the answer, give it "
    "inside <answer> and </answer> without explanation, for example <answer> Kessrow </answer>."
)


def opening_text(question: Question) -> str:
    """The first user message of an episode (Search-R1's prompt)."""
    return f"{INSTRUCTIONS}\nQuestion: {question.question}"


class SearchBackend(EnvBackend):
    name = "search"

    def __init__(
        self, settings: SearchEnvSettings, cache_dir: Path, service_token: str | None = None
    ) -> None:
        """``service_token``: the bearer sent to a remote retrieval server (None: none is sent)."""
        self._settings = settings
        self._cache_dir = cache_dir
        self._service_token = service_token

    @cached_property
    def _questions(self) -> QuestionPools:
        return read_questions(questions_path(self._settings, self._cache_dir))

    @cached_property
    def _retriever(self) -> Retriever:
        settings = self._settings
        match settings.retriever:
            case "bm25":
                return Bm25Retriever(read_corpus(corpus_path(self._settings, self._cache_dir)))
            case "remote":
                assert settings.retrieval_url is not None  # checked by the settings
                return RemoteRetriever(
                    settings.retrieval_url, settings.retrieval_timeout_s, service_token=self._service_token
                )
            case _:
                raise ValueError(f"unknown retriever {settings.retriever!r}")

    def task_types(self) -> list[str]:
        """The data sources: single/two/three-hop, or those of the question file (sorted)."""
        if self._settings.questions_file is None:
            return list(DATA_SOURCES)
        return sorted({source for _, source in self._questions})

    def pool_size(self, split: Split, task_type: str) -> int:
        size = len(self._questions.get((split, task_type), []))
        if size == 0:
            raise InputError(f"no {task_type!r} questions in split {split!r}")
        return size

    def info(self) -> EnvInfo:
        counts = {s: sum(len(q) for (split, _), q in self._questions.items() if split == s) for s in SPLITS}
        s = self._settings
        questions = s.questions_file or f"generated encyclopedia (seed {s.seed})"
        retrieval = f"Search-R1 server {s.retrieval_url}" if s.retriever == "remote" else "BM25 (bm25s)"
        source = f"questions: {questions}; retrieval: {retrieval}, top {s.topk}"
        return EnvInfo(
            name="search",
            splits=list(SPLITS),
            task_types=self.task_types(),
            source=source,
            games_per_split=counts,
        )

    def game_path(self, split: Split, choice: GameChoice) -> Path:
        return questions_path(self._settings, self._cache_dir)

    def question(self, split: Split, choice: GameChoice) -> Question:
        return self._questions[(split, choice.task_type)][choice.index]

    def open(self, split: Split, choice: GameChoice, expert: bool) -> GameSession:
        question = self.question(split, choice)
        return SearchSession(question, self._retriever, self._settings.topk, self._settings.max_turns, expert)


class SearchSession(GameSession):
    def __init__(
        self, question: Question, retriever: Retriever, topk: int, max_turns: int, expert: bool
    ) -> None:
        self._question = question
        self._retriever = retriever
        self._topk = topk
        self._max_turns = max_turns
        self._expert = SearchExpert(question) if expert and question.chain else None
        self._steps = 0

    def start(self) -> Opening:
        q = self._question
        return Opening(
            opening_text(q), q.question, list(ADMISSIBLE), q.data_source, q.id, self._expert_action()
        )

    def step(self, action: str) -> Outcome:
        kind, argument = parse_action(action)
        self._steps += 1
        if kind == "answer":
            won = exact_match(argument, self._question.golden_answers)
            verdict = "correct" if won else "not correct"
            return Outcome(f"Your answer {argument!r} is {verdict}.", float(won), True, won, [], None)
        passages = self._retriever.retrieve([argument], self._topk)[0]
        if self._expert is not None:
            self._expert.observe(p.title for p in passages)
        observation = information_block(passages)
        if self._steps >= self._max_turns:
            observation += f"\nThe turn limit ({self._max_turns}) is reached without an answer."
            return Outcome(observation, 0.0, True, False, [], None)
        return Outcome(observation, 0.0, False, False, list(ADMISSIBLE), self._expert_action())

    def _expert_action(self) -> str | None:
        return self._expert.next_action() if self._expert is not None else None

    def close(self) -> None:
        """Nothing to release: the retriever belongs to the backend."""
