"""A run's task sources (``[[sources]]``): which environments a step plays, each with its share of
the batch, its own teacher, and its own depth controller and blend schedule.

A run config without ``[[sources]]`` has one source: ``[rollout] env`` on the ``train`` split,
evaluated on ``[eval] split``, the whole batch, ``[models] teacher``, the run's ``[depth]``,
``[blend]`` and ``[rollout] max_turns`` (``TurnOPDSettings.task_sources``).
"""

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from services.contracts.env_gateway import EnvName, Split
from services.settings.algorithm import BlendSettings, DepthSettings
from services.settings.teacher import ApiKeyEnv, EndpointModel, endpoint_keys_problem
from services.settings_section import Section

SHARE_TOLERANCE = 1e-6


class TaskSourceSettings(Section):
    """One ``[[sources]]`` entry as written in a config."""

    env: EnvName = Field(description="The environment this source plays.")
    share: float = Field(gt=0.0, le=1.0, description="Its share of each batch (the shares sum to 1).")
    teacher: str = Field(min_length=1, description="Its teacher: a zoo name or a checkpoint path.")
    split: Split = Field("train", description="Game pool of its training rollouts.")
    eval_split: Split = Field("valid_unseen", description="Game pool it is evaluated on.")
    task_types: list[str] = Field(
        default_factory=list, description="Task types to sample round-robin (empty: any task type)."
    )
    max_turns: int | None = Field(
        None, ge=1, description="Its rollout turn cap (unset: [rollout] max_turns)."
    )
    task_reminder: bool | None = Field(
        None,
        description="Restate the task in its observations, the format its teacher was trained in "
        "(unset: [rollout] task_reminder).",
    )
    depth: dict[str, Any] = Field(
        default_factory=dict, description="Keys of [depth] this source sets otherwise (its own controller)."
    )
    blend: dict[str, Any] = Field(
        default_factory=dict, description="Keys of [blend] this source sets otherwise."
    )
    endpoint_url: str = Field(
        "",
        description="Base URL of an OpenAI-compatible server (vLLM, SGLang) that scores this source's "
        "trajectories instead of a teacher app the run deploys; [teacher]'s client keys apply. Empty: "
        "the app of `teacher`.",
    )
    endpoint_model: EndpointModel = ""
    endpoint_api_key_env: ApiKeyEnv = ""

    @model_validator(mode="after")
    def _endpoint_named(self) -> "TaskSourceSettings":
        problem = endpoint_keys_problem(self.endpoint_url, self.endpoint_model, self.endpoint_api_key_env)
        if problem is not None:
            raise ValueError(problem)
        return self


class TaskSource(BaseModel):
    """A source with every override applied: what its controller, rollouts, teacher and loss use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: str
    share: float
    teacher: str
    split: str
    eval_split: str
    task_types: tuple[str, ...]
    max_turns: int
    task_reminder: bool
    depth: DepthSettings
    blend: BlendSettings
    endpoint_url: str = ""
    endpoint_model: str = ""
    endpoint_api_key_env: str = ""


def _override(section: BaseModel, changes: dict[str, Any], where: str) -> Any:
    """``section`` with ``changes`` applied and validated; errors name ``where`` and the key."""
    unknown = sorted(set(changes) - set(type(section).model_fields))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: not a key of [{where.rsplit('.', 1)[1]}]")
    try:
        return type(section).model_validate({**section.model_dump(), **changes})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            problems.append(
                f"{where}{'.' + key if key else ''}: {str(err['msg']).removeprefix('Value error, ')}"
            )
        raise ValueError("; ".join(problems)) from None


def resolve_sources(
    sources: list[TaskSourceSettings],
    depth: DepthSettings,
    blend: BlendSettings,
    max_turns: int,
    task_reminder: bool,
) -> list[TaskSource]:
    """Every source with the run's sections overridden by its own keys; ValueError naming the key
    when the shares do not sum to 1, an env appears twice, or an override is invalid."""
    total = math.fsum(s.share for s in sources)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        shares = " + ".join(f"{s.share:g}" for s in sources)
        raise ValueError(f"sources: the shares must sum to 1, not {shares} = {total:g}")
    resolved = []
    seen: set[str] = set()
    for i, source in enumerate(sources):
        if source.env in seen:
            raise ValueError(f"sources[{i}].env: {source.env!r} is already a source; one source per env")
        seen.add(source.env)
        resolved.append(
            TaskSource(
                env=source.env,
                share=source.share,
                teacher=source.teacher,
                split=source.split,
                eval_split=source.eval_split,
                task_types=tuple(source.task_types),
                max_turns=source.max_turns or max_turns,
                task_reminder=task_reminder if source.task_reminder is None else source.task_reminder,
                depth=_override(depth, source.depth, f"sources[{i}].depth"),
                blend=_override(blend, source.blend, f"sources[{i}].blend"),
                endpoint_url=source.endpoint_url,
                endpoint_model=source.endpoint_model,
                endpoint_api_key_env=source.endpoint_api_key_env,
            )
        )
    return resolved
