import shlex
import tomllib
from pathlib import Path

import pytest

from services.cli.result_view import eval_description
from services.errors import ConfigError
from services.models.shipped import measured_success, require_shipped, shipped_names
from services.models.zoo import ZOO
from services.orchestrator.run_result import comparable_measurement
from services.settings import TurnOPDSettings, load_settings
from services.settings.loader import load_recipe

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


def test_defaults_are_the_paper_table():
    s = TurnOPDSettings()
    assert s.distill.distill_topk == 50
    assert (s.depth.coverage_quantile, s.depth.use_success, s.depth.min_cov_traj) == (0.8, True, 8)
    assert (s.depth.min, s.depth.max, s.depth.ema_alpha) == (2, 50, 0.3)
    assert (s.depth.probe_interval, s.depth.warmup_steps) == (8, 3)
    assert (s.blend.start, s.blend.end, s.blend.min_floor, s.blend.min_frac) == (0.0, 1.0, 8, 0.15)
    assert s.blend.turn_norm_blend is True
    assert s.distill.clip_ratio == (0.9, 9.0)
    assert (s.optim.lr, s.optim.batch, s.optim.steps) == (1e-6, 64, 100)
    assert s.rollout.max_turns == 80 and s.rollout.temperature == 1.0
    assert (s.eval.val_n, s.eval.val_temperature) == (4, 0.85)


def test_validation_may_decode_greedily(tmp_path):
    assert load_settings(write(tmp_path, "[eval]\nval_temperature = 0\n")).eval.val_temperature == 0.0


def test_priority_overrides_then_env_then_file(tmp_path, monkeypatch):
    path = write(tmp_path, "[depth]\nema_alpha = 0.5\nprobe_interval = 4\n[optim]\nsteps = 9\n")
    assert load_settings(path).depth.ema_alpha == 0.5
    monkeypatch.setenv("TURNOPD_DEPTH__EMA_ALPHA", "0.7")
    s = load_settings(path)
    assert (s.depth.ema_alpha, s.depth.probe_interval, s.optim.steps) == (0.7, 4, 9)
    s = load_settings(path, {"depth": {"ema_alpha": 0.9}})
    assert (s.depth.ema_alpha, s.depth.probe_interval) == (0.9, 4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[depth]\nema_alpha = 1.5\n", "depth.ema_alpha: Input should be less than or equal to 1"),
        ("[depth]\nmin = 10\nmax = 5\n", "depth: min (10) must be <= max (5)"),
        ("[blend]\nstart = 0.6\nend = 0.2\n", "blend: end (0.2) must be greater than start (0.6)"),
        ("[depth]\nbogus = 1\n", "depth.bogus: unknown key"),
        ("[nonsense]\nx = 1\n", "nonsense: unknown key"),
        ("[distill]\nclip_ratio = [1.5, 2.0]\n", "clip_ratio must be"),
        ("[optim]\nsteps = 'many'\n", "optim.steps: Input should be a valid integer"),
        ("[optim]\nbatch = 4\nmini_batches = 5\n", "mini_batches (5) cannot exceed batch (4)"),
        (
            "[eval]\nval_temperature = -0.1\n",
            "eval.val_temperature: Input should be greater than or equal to 0",
        ),
        ("[depth\n", "is not valid TOML"),
    ],
)
def test_invalid_values_name_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=r"invalid settings|not valid TOML") as info:
        load_settings(write(tmp_path, text))
    assert message in str(info.value)


def test_invalid_env_value_names_the_key(monkeypatch):
    monkeypatch.setenv("TURNOPD_BLEND__MIN_FRAC", "2")
    with pytest.raises(ConfigError, match=r"blend\.min_frac"):
        load_settings()


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.toml")


def test_paper_defaults_file_matches_built_in_defaults():
    assert load_settings(REPO / "configs" / "paper_defaults.toml") == TurnOPDSettings()


# Run configs sit in configs/; the SFT recipes that make the models they name in configs/teachers/;
# recipes of experiments that were not kept sit beside the results page whose numbers they reproduce.
RUN_CONFIGS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "configs").glob("*.toml"))
RECIPES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "configs" / "teachers").rglob("*.toml"))
RESULT_RECIPES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs" / "results").rglob("*.toml"))


def _recipe_outputs(paths: list[str]) -> dict[str, str]:
    """The model name each recipe's `turnopd teacher train --config` saves (`[sft] out`) -> recipe."""
    return {load_recipe(REPO / path).sft.out: path for path in paths}


def _perturbed_outputs() -> dict[str, str]:
    """out -> base of each `turnopd models perturb BASE --out OUT` in a shipped model's recipe."""
    outputs = {}
    for name in shipped_names():
        for command in require_shipped(name).manifest["recipe"]:
            words = shlex.split(command)
            if words[:3] == ["turnopd", "models", "perturb"]:
                outputs[words[words.index("--out") + 1]] = words[3]
    return outputs


def _made_by_a_recipe(name: str, outputs: dict[str, str]) -> bool:
    if name in ZOO or Path(name).is_absolute() or name in outputs:
        return True
    base = _perturbed_outputs().get(name)  # a model perturbed from one a recipe makes
    return base is not None and base != name and _made_by_a_recipe(base, outputs)


def test_configs_are_sorted_into_runs_and_recipes():
    assert {"demo.toml", "smoke.toml", "paper_defaults.toml"} <= {Path(p).name for p in RUN_CONFIGS}
    assert "configs/teachers/teacher_alfworld_novel.toml" in RECIPES  # the competent household teacher
    every = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "configs").rglob("*.toml"))
    assert every == sorted(RUN_CONFIGS + RECIPES), "a config outside configs/ and configs/teachers/"


@pytest.mark.parametrize("path", RUN_CONFIGS)
def test_every_run_config_loads(path: str):
    """What `turnopd train --config` loads; the models it names are zoo models, mounted paths or the
    output of a kept recipe (configs/, configs/teachers/), so a user can make every one of them."""
    settings = load_settings(REPO / path)
    outputs = _recipe_outputs(RECIPES)
    for role, name in (("student", settings.models.student), ("teacher", settings.models.teacher)):
        assert _made_by_a_recipe(name, outputs), (
            f"{path}: [models] {role} = {name!r} has no recipe in configs/"
        )
    if path == "configs/demo.toml":  # the README's main run: evaluated after the last step, and the
        # student before training and the teacher measured on the same games in their shipped manifests
        assert settings.optim.steps % settings.eval.interval == 0
        wanted = eval_description(settings)
        for name in (settings.models.student, settings.models.teacher):
            measured = measured_success(REPO / "artifacts" / "models" / name)
            assert measured is not None and comparable_measurement(measured, wanted)[0], (name, measured)


@pytest.mark.parametrize("path", RECIPES + RESULT_RECIPES)
def test_every_sft_recipe_loads(path: str):
    """What `turnopd teacher train --config` loads (a teacher recipe, apart from a run config): each
    recipe names its output, and its base is a zoo model or another recipe's output; a kept recipe
    (configs/teachers/) starts from a kept one."""
    raw = tomllib.loads((REPO / path).read_text())
    assert "out" in raw.get("sft", {}), f"{path}: a recipe names the model it saves ([sft] out)"
    settings = load_recipe(REPO / path)
    kept = _recipe_outputs(RECIPES)
    outputs = kept if path in RECIPES else {**kept, **_recipe_outputs(RESULT_RECIPES)}
    assert _made_by_a_recipe(settings.sft.base, outputs), (
        f"{path}: [sft] base = {settings.sft.base!r} is made by no recipe it may use"
    )


def test_recipe_outputs_are_unique():
    names = [load_recipe(REPO / path).sft.out for path in RECIPES + RESULT_RECIPES]
    assert len(names) == len(set(names))


def test_a_run_config_and_a_recipe_do_not_mix(tmp_path: Path):
    """[sft] is a recipe's; a run's sections that a recipe never reads are not accepted in one."""
    with pytest.raises(ConfigError, match=r"\[sft\] belongs to a teacher-training recipe"):
        load_settings(write(tmp_path, '[sft]\nout = "x"\n'))
    with pytest.raises(ConfigError, match=r"depth: unknown key"):
        load_recipe(write(tmp_path, '[sft]\nout = "x"\n[depth]\nmax = 30\n'))
    recipe = load_recipe(write(tmp_path, '[sft]\nout = "x"\n[rollout]\ntask_reminder = true\n'))
    assert recipe.sft.out == "x" and recipe.rollout.task_reminder is True


def test_the_gateway_reads_its_own_sections_of_either_kind_of_file(tmp_path: Path):
    recipe = write(tmp_path, '[sft]\nout = "x"\n[env_gateway]\nworkers = 3\n')
    assert load_settings(recipe, sections=("env_gateway", "security")).env_gateway.workers == 3
