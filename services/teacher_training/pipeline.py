"""`turnopd teacher train` end to end: the expert dataset of each env (cached, or collected through a
gateway), rendering, training, and the saved checkpoint. The CLI only adds progress bars and printing.

A joint recipe (``[[sft.mix]]``) has one dataset per env, each rendered in its env's chat and
observation format (``task_reminder``); the model trains on all of them as one shuffled stream, and
its manifest records the format per env.
"""

import asyncio
import json
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from services.agent.chat_format import ChatFormat
from services.contracts.env_gateway import EnvName
from services.contracts.expert_data import ExpertDatasetInfo, ExpertEpisode
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.local_server import LocalGateway
from services.envs.alfworld.generator import GenerationParams
from services.envs.protocols import env_protocol
from services.errors import InputError
from services.models.build import read_manifest
from services.models.layer_subset import check_layer_choice, keep_layers
from services.models.registry import resolve_model_dir
from services.models.saved_checkpoint import checkpoint_target, save_checkpoint
from services.models.trained_format import check_task_reminder, learned_per_env
from services.settings.recipe import TeacherRecipeSettings
from services.settings.sft import SFTPart
from services.teacher_training.collection import collect_expert_episodes, episode_seeds
from services.teacher_training.dataset import DATASET_FORMAT, dataset_dir, load_dataset, save_dataset
from services.teacher_training.rendering import render_episodes
from services.teacher_training.resume import ResumeStore, resume_dir, run_key
from services.teacher_training.trainer import StepReport, TrainSummary, train_sft

SFT_FORMAT = 1


@dataclass(frozen=True)
class ExpertDataset:
    info: ExpertDatasetInfo
    episodes: list[ExpertEpisode]
    path: Path
    cached: bool


@dataclass(frozen=True)
class TrainedCheckpoint:
    path: Path
    summary: TrainSummary
    response_tokens: int
    sequence_tokens: int
    resumed_at_step: int | None = None


class CollectProgress:
    """Callbacks while the dataset is gathered (the CLI's progress bar); the defaults do nothing."""

    def stage(self, description: str) -> None:
        """A setup stage begins (e.g. starting the env gateway)."""

    def start(self, total_episodes: int, env: str = "") -> None:
        """The collection of one env's episodes begins (a joint recipe collects several, one after
        another)."""

    def episode(self, won: bool) -> None:
        """One expert episode finished."""


async def _catalog_entry(url: str, env: str, token: str | None) -> dict[str, Any]:
    async with EnvGatewayClient(url, timeout_s=60.0, token=token) as client:
        catalog = await client.envs()
    info = next((e for e in catalog.envs if e.name == env), None)
    if info is None:
        raise InputError(f"the env gateway at {url} serves no env {env!r}")
    return info.model_dump(mode="json")


def _gateway_env(name: str) -> EnvName:
    """An env name as the gateway's contracts type it."""
    for env in get_args(EnvName):
        if env == name:
            return env
    raise InputError(f"unknown env {name!r}; known: {list(get_args(EnvName))}")


def _games_description(settings: TeacherRecipeSettings, env: str) -> str:
    """What fixes the games of ``env`` a gateway started from these settings serves (part of the dataset key)."""
    gateway = settings.env_gateway
    if env == "search":
        return json.dumps({"search": gateway.search.model_dump(mode="json")}, sort_keys=True)
    if env == "webshop":
        shop = gateway.webshop.model_dump(include={"catalogue_seed", "products", "goals_eval", "goals_train"})
        return json.dumps({"webshop": shop, "remote_url": gateway.webshop.remote_url}, sort_keys=True)
    data = gateway.resolved_alfworld_data()
    if data is not None:
        return json.dumps({"alfworld_data": str(data)})
    household = gateway.household
    params = GenerationParams(household.max_receptacles, household.max_distractors, household.max_targets)
    pools = {
        "train": household.games_per_task_type_train,
        "valid_unseen": household.games_per_task_type_valid,
    }
    return json.dumps({"generated": params.cache_key(), "games_per_task_type": pools}, sort_keys=True)


def wanted_dataset(settings: TeacherRecipeSettings, part: SFTPart | None = None) -> ExpertDatasetInfo:
    """The dataset the recipe asks for, of ``part`` (default: its only env), its counts still zero:
    what keys the cache."""
    sft = settings.sft
    part = part or _only_part(settings)
    url = sft.gateway_url
    games = (
        _games_description(settings, part.env)
        if url is None
        else json.dumps(
            {
                "gateway": asyncio.run(
                    _catalog_entry(url, part.env, settings.security.resolved_service_token())
                )
            },
            sort_keys=True,
        )
    )
    return ExpertDatasetInfo(
        format=DATASET_FORMAT,
        env=part.env,
        split=sft.split,
        seeds=episode_seeds(sft.seed, part.episodes),
        games=games,
        max_expert_turns=part.max_expert_turns,
        detour_rate=sft.detour_rate if part.env == "alfworld" else 0.0,  # household games only
        episodes=0,
        dropped=0,
    )


def _only_part(settings: TeacherRecipeSettings) -> SFTPart:
    parts = settings.parts()
    if len(parts) != 1:
        raise InputError(f"this recipe trains on {len(parts)} envs: name the part")
    return parts[0]


def expert_datasets(
    settings: TeacherRecipeSettings, config: Path | None = None, progress: CollectProgress | None = None
) -> list[ExpertDataset]:
    """The expert episodes of each env the recipe trains on, in its order: from the cache, else
    collected (and cached). Without ``sft.gateway_url`` one local gateway is started from the same
    config for the collections."""
    progress = progress or CollectProgress()
    sft, cache_dir = settings.sft, settings.models.cache_dir
    token = settings.security.resolved_service_token()
    wanted = [wanted_dataset(settings, part) for part in settings.parts()]
    datasets: dict[int, ExpertDataset] = {}
    for index, info in enumerate(wanted):
        directory = dataset_dir(info, cache_dir)
        cached = load_dataset(directory)
        if cached is not None:
            datasets[index] = ExpertDataset(cached[0], cached[1], directory, cached=True)
    missing = [index for index in range(len(wanted)) if index not in datasets]
    if missing:
        with ExitStack() as stack:
            url = sft.gateway_url
            if url is None:
                progress.stage("starting the env gateway")
                url = stack.enter_context(LocalGateway(config, workers=settings.env_gateway.workers)).url
            for index in missing:
                info, episodes = _collect(url, wanted[index], sft.collect_concurrency, progress, token)
                directory = dataset_dir(wanted[index], cache_dir)
                save_dataset(directory, info, episodes)
                datasets[index] = ExpertDataset(info, episodes, directory, cached=False)
    return [datasets[index] for index in range(len(wanted))]


def _collect(
    url: str, wanted: ExpertDatasetInfo, concurrency: int, progress: CollectProgress, token: str | None
) -> tuple[ExpertDatasetInfo, list[ExpertEpisode]]:
    async def run() -> tuple[ExpertDatasetInfo, list[ExpertEpisode]]:
        async with EnvGatewayClient(url, token=token) as client:
            progress.start(len(wanted.seeds), wanted.env)
            collected = await collect_expert_episodes(
                client,
                _gateway_env(wanted.env),
                "train",
                wanted.seeds,
                wanted.max_expert_turns,
                concurrency,
                on_episode=progress.episode,
                detour_rate=wanted.detour_rate,
            )
        info = wanted.model_copy(
            update={"episodes": len(collected.episodes), "dropped": len(collected.dropped_seeds)}
        )
        return info, collected.episodes

    return asyncio.run(run())


def check_request(settings: TeacherRecipeSettings) -> Path:
    """Fail before any work when the base model is missing, was trained in another observation
    format (``[rollout] task_reminder``; a joint base, each part's env in its part's), ``base_layers``
    do not fit it, or the output name is a zoo model's. A joint recipe from a base of one env (one
    format recorded, not which env) is not checked: its parts set each env's format afresh."""
    sft, cache_dir = settings.sft, settings.models.cache_dir
    if not sft.mix:
        base_dir = check_task_reminder(sft.base, cache_dir, settings.rollout.task_reminder, sft.env)
    else:
        base_dir = resolve_model_dir(sft.base, cache_dir)
        if learned_per_env(sft.base, cache_dir):
            for part in sft.mix:
                check_task_reminder(sft.base, cache_dir, part.task_reminder, part.env)
    if sft.base_layers is not None:
        config = json.loads((base_dir / "config.json").read_text())
        check_layer_choice(sft.base_layers, int(config["num_hidden_layers"]))
    return checkpoint_target(sft.out, cache_dir)


def train_teacher(
    settings: TeacherRecipeSettings,
    datasets: Sequence[ExpertDataset],
    on_step: Callable[[StepReport], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    fresh: bool = False,
) -> TrainedCheckpoint:
    """Fine-tune ``sft.base`` on the datasets (``expert_datasets``: one per env, in the recipe's
    order) and save it as ``sft.out``; returns where and how it went.

    A partial run of the same settings saved beside ``sft.out`` (``[sft] checkpoint_every``) is
    continued, unless ``fresh`` discards it.
    """
    from services.models.loading import load_causal_lm, load_tokenizer

    stage = on_stage or (lambda _: None)
    sft, cache_dir = settings.sft, settings.models.cache_dir
    parts = settings.parts()
    if len(datasets) != len(parts) or any(d.info.env != p.env for d, p in zip(datasets, parts, strict=False)):
        raise InputError(
            f"the recipe trains on {[p.env for p in parts]}, got datasets of {[d.info.env for d in datasets]}"
        )
    for dataset in datasets:
        if not dataset.episodes:
            raise InputError(f"the expert dataset {dataset.path} holds no won episodes")
    target = check_request(settings)
    stage(f"loading {sft.base}")
    base_dir = resolve_model_dir(sft.base, cache_dir)
    tokenizer = load_tokenizer(sft.base, cache_dir)
    model = load_causal_lm(sft.base, device=settings.models.device, cache_dir=cache_dir)
    if sft.base_layers is not None:
        stage(f"keeping layers {sft.base_layers} of {sft.base}")
        model = keep_layers(model, sft.base_layers)
    stage("rendering episodes")
    rendered = []
    for part, dataset in zip(parts, datasets, strict=True):
        protocol = env_protocol(part.env)
        rendered += render_episodes(
            protocol.chat(ChatFormat(tokenizer)),
            dataset.episodes,
            sft.max_sequence_tokens,
            sft.think,
            sft.reject_rate,
            sft.seed,
            protocol=protocol,
            false_belief_rate=sft.false_belief_rate,
            goal_drift_rate=sft.goal_drift_rate,
            remind_task=part.task_reminder,
            novel=sft.novel_token_weight != 1.0,
        )
    names = [dataset.path.name for dataset in datasets]
    # a joint recipe's formats are in its [sft] settings, which the key holds
    reminder = False if sft.mix else settings.rollout.task_reminder
    store = ResumeStore(resume_dir(target), run_key(sft, "+".join(names), reminder))
    if fresh:
        store.clear()
    start = store.load()
    stage("training" if start is None else f"resuming at step {start.next_step}")
    summary = train_sft(model, rendered, sft, on_step, start=start, on_checkpoint=store.save)
    stage(f"saving {sft.out}")
    manifest = {
        "format": SFT_FORMAT,
        "kind": "model",
        "stage": "sft",
        "name": sft.out,
        "base": sft.base,
        "base_manifest": read_manifest(base_dir),
        "dataset": names if sft.mix else names[0],
        "episodes": len(rendered),
        "sft": sft.model_dump(mode="json"),
        # a joint model's format per env (trained_format.py reads either)
        "task_reminder": {p.env: p.task_reminder for p in parts}
        if sft.mix
        else settings.rollout.task_reminder,
        "steps": summary.steps,
        "final_loss": summary.losses[-1],
    }
    if start is not None:
        manifest["resumed_at_step"] = start.next_step
    path = save_checkpoint(model, tokenizer, target, manifest)
    store.clear()
    return TrainedCheckpoint(
        path=path,
        summary=summary,
        response_tokens=sum(r.num_response_tokens for r in rendered),
        sequence_tokens=sum(len(r.token_ids) for r in rendered),
        resumed_at_step=None if start is None else start.next_step,
    )
