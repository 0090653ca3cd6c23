"""The `webshop` backend: WebShop episodes (search -> results -> product -> options -> Buy Now).

By default it plays the generated local shop (`services.envs.webshop`: a seeded catalogue
cached on disk, BM25 search, goals made from the catalogue, task types = product categories);
with ``env_gateway.webshop.remote_url`` it plays an AgentGym `agentenv_webshop` server
(`webshop_remote`). Either way a game is a goal id: evaluation (`valid_unseen`) takes ids
``[0, N_eval)`` and training ``[N_eval, N_eval + N_train)``, and the last observation carries the
``[WEBSHOP_FINAL_SCORE=...]`` marker. The expert reads only the pages it is shown.
"""

from abc import abstractmethod
from functools import cached_property
from pathlib import Path

from services.contracts.env_gateway import EnvInfo, Split
from services.envs.backend import EnvBackend, GameChoice, GameSession, Opening, Outcome
from services.envs.game_cache import atomic_write_text, ensure_file
from services.envs.webshop.catalogue import CATALOGUE_FORMAT, Catalogue, generate_catalogue
from services.envs.webshop.expert import ShopExpert
from services.envs.webshop.goals import GoalBook, GoalSplits
from services.envs.webshop.pages import final_observation
from services.envs.webshop.settings import WebShopSettings
from services.envs.webshop.shop import Shop, ShopSession
from services.envs.webshop.vocabulary import CATEGORIES
from services.errors import InputError

SPLITS: tuple[Split, ...] = ("train", "valid_unseen")
# A remote server's goals have no known category: they form one task type.
REMOTE_TASK_TYPE = "goal"


def catalogue_path(settings: WebShopSettings, cache_dir: Path) -> Path:
    name = f"catalogue-v{CATALOGUE_FORMAT}-seed{settings.catalogue_seed}-n{settings.products}.json"
    return cache_dir / "webshop" / name


def load_shop(settings: WebShopSettings, cache_dir: Path) -> Shop:
    """The local shop of these settings; its catalogue is generated into the cache on first use."""

    def build(target: Path) -> None:
        atomic_write_text(target, generate_catalogue(settings.catalogue_seed, settings.products).to_json())

    path, _ = ensure_file(catalogue_path(settings, cache_dir), build)
    catalogue = Catalogue.from_json(path.read_text())
    goals = GoalBook(catalogue, GoalSplits(settings.goals_eval, settings.goals_train))
    return Shop(catalogue, goals, settings.results_per_page, settings.max_results)


def game_id(split: str, goal_id: int) -> str:
    return f"{split}/goal_{goal_id:05d}"


class WebShopBackend(EnvBackend):
    name = "webshop"

    def __init__(self, settings: WebShopSettings, cache_dir: Path, service_token: str | None = None) -> None:
        """``service_token``: the bearer sent to a remote webshop server (None: none is sent)."""
        self._settings = settings
        self._cache_dir = cache_dir
        self._service_token = service_token
        self._splits = GoalSplits(self._settings.goals_eval, self._settings.goals_train)

    @property
    def remote(self) -> bool:
        return self._settings.remote_url is not None

    @cached_property
    def shop(self) -> Shop:
        return load_shop(self._settings, self._cache_dir)

    def task_types(self) -> list[str]:
        return [REMOTE_TASK_TYPE] if self.remote else list(CATEGORIES)

    def pool_size(self, split: Split, task_type: str) -> int:
        if self.remote:
            return len(self._splits.ids(split))
        return len(self.shop.goals.category_ids(split, task_type))

    def info(self) -> EnvInfo:
        ws = self._settings
        source = (
            f"AgentGym agentenv_webshop server at {ws.remote_url}"
            if ws.remote_url is not None
            else f"generated offline ({ws.products} products, catalogue seed {ws.catalogue_seed})"
        )
        return EnvInfo(
            name="webshop",
            splits=list(SPLITS),
            task_types=self.task_types(),
            source=source,
            games_per_split={s: len(self._splits.ids(s)) for s in SPLITS},
        )

    def choose(self, split: Split, seed: int, task_type: str | None) -> GameChoice:
        """Without a task type the seed picks a goal id of the split directly (the paper's goal ids)."""
        if task_type is not None:
            if task_type in self.task_types() and self.pool_size(split, task_type) == 0:
                raise InputError(f"no webshop goals of category {task_type!r} in split {split!r}")
            return super().choose(split, seed, task_type)
        goal = self._splits.goal_id(split, seed)
        if self.remote:
            return GameChoice(REMOTE_TASK_TYPE, goal - self._splits.ids(split).start)
        category = self.shop.goals.goal(goal).category
        return GameChoice(category, self.shop.goals.category_ids(split, category).index(goal))

    def goal_id(self, split: Split, choice: GameChoice) -> int:
        if self.remote:
            return self._splits.goal_id(split, choice.index)
        ids = self.shop.goals.category_ids(split, choice.task_type)
        if not ids:
            raise InputError(f"no webshop goals of category {choice.task_type!r} in split {split!r}")
        return ids[choice.index % len(ids)]

    def game_path(self, split: Split, choice: GameChoice) -> Path:
        """Every goal is played on the one catalogue file (generated on first use)."""
        if self.remote:
            raise InputError("a remote webshop server has no local game files")
        self.goal_id(split, choice)
        return catalogue_path(self._settings, self._cache_dir)

    def open(self, split: Split, choice: GameChoice, expert: bool) -> GameSession:
        goal = self.goal_id(split, choice)
        ws = self._settings
        if ws.remote_url is None:
            return LocalShopSession(self.shop.session(goal), game_id(split, goal), expert)
        from services.envs.webshop.remote import RemoteShopSession, remote_client

        client = remote_client(ws.remote_url, ws.remote_timeout_s, self._service_token)
        return RemoteShopSession(client, goal, game_id(split, goal), expert)


class ShopGameSession(GameSession):
    """One shopping episode as the gateway sees it; subclasses say how pages are fetched."""

    def __init__(self, task_type: str, gid: str, expert: bool) -> None:
        self._task_type = task_type
        self._game_id = gid
        self._expert: ShopExpert | None = None
        self._with_expert = expert

    @abstractmethod
    def _begin(self) -> tuple[str, str]:
        """Load the goal; (first page, instruction)."""

    @abstractmethod
    def _act(self, action: str) -> tuple[str, float, bool]:
        """Play an action; (new page, reward, done)."""

    @abstractmethod
    def _actions(self) -> list[str]:
        """The current page's admissible actions."""

    def start(self) -> Opening:
        page, instruction = self._begin()
        admissible = self._actions()
        self._expert = ShopExpert(instruction) if self._with_expert else None
        expert_action = self._expert.next_action(page, admissible) if self._expert is not None else None
        return Opening(page, instruction, admissible, self._task_type, self._game_id, expert_action)

    def step(self, action: str) -> Outcome:
        page, reward, done = self._act(action)
        if self._expert is not None:
            self._expert.record(action)
        if done:
            return Outcome(final_observation(page, reward), reward, True, reward >= 1.0, [], None)
        admissible = self._actions()
        expert_action = self._expert.next_action(page, admissible) if self._expert is not None else None
        return Outcome(page, reward, False, False, admissible, expert_action)


class LocalShopSession(ShopGameSession):
    def __init__(self, session: ShopSession, gid: str, expert: bool) -> None:
        super().__init__(session.goal.category, gid, expert)
        self._session = session

    def _begin(self) -> tuple[str, str]:
        return self._session.observation(), self._session.instruction

    def _act(self, action: str) -> tuple[str, float, bool]:
        result = self._session.step(action)
        if not result.valid:
            raise InputError(f"{action!r} is not possible on this page")
        return self._session.observation(), result.reward, result.done

    def _actions(self) -> list[str]:
        return self._session.admissible_actions()

    def close(self) -> None:
        """Nothing to release: the shop is shared and the session is plain data."""
