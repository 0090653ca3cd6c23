"""`turnopd teacher train` end to end on a cached expert dataset (no gateway) and the tiny zoo student."""

import io
import json
from pathlib import Path

import pytest
from expert_episodes import scripted_episode, scripted_search_episode
from rich.console import Console
from rich.progress import Progress

from services.agent.chat_format import ChatFormat
from services.cli.teacher_cmd import _CollectBar
from services.envs.protocols import HOUSEHOLD_PROTOCOL, SEARCH_PROTOCOL
from services.errors import ConflictError
from services.models.build import MANIFEST
from services.models.loading import load_causal_lm, load_tokenizer
from services.models.trained_format import check_task_reminder
from services.settings.loader import load_recipe
from services.teacher_training.dataset import dataset_dir, save_dataset
from services.teacher_training.pipeline import expert_datasets, train_teacher, wanted_dataset
from services.teacher_training.rendering import render_episodes
from services.teacher_training.trainer import StepReport


@pytest.fixture
def config(tmp_path: Path, zoo_cache: Path) -> Path:
    """Settings whose expert dataset is already in the cache: three scripted episodes."""
    path = tmp_path / "turnopd.toml"
    path.write_text(
        f'[models]\ncache_dir = "{tmp_path}"\n'
        f'[sft]\nbase = "{zoo_cache / "models" / "student"}"\nout = "student-sft"\n'
        "episodes = 3\nepochs = 2\nbatch_episodes = 2\nlr = 0.003\n"
    )
    info = wanted_dataset(load_recipe(path))
    episodes = [scripted_episode(seed) for seed in info.seeds]
    save_dataset(dataset_dir(info, tmp_path), info.model_copy(update={"episodes": 3}), episodes)
    return path


def test_train_reuses_the_cached_dataset_and_saves_a_loadable_checkpoint(cli, config: Path, tmp_path: Path):
    result = cli("teacher", "train", "--config", config, "--seed", "0")
    assert result.code == 0, result.err
    target = tmp_path / "models" / "student-sft"
    assert result.out.strip() == str(target)
    assert "expert data  alfworld cached: 3 episodes (0 dropped)" in result.err
    assert "training     3 steps" in result.err
    # not a terminal: a plain line per step (per 5% of the steps) instead of a live bar
    assert [line.split("  ")[0] for line in result.err.splitlines() if line.startswith("training step")] == [
        "training step 1/3",
        "training step 2/3",
        "training step 3/3",
    ]
    manifest = json.loads((target / MANIFEST).read_text())
    assert (manifest["stage"], manifest["name"], manifest["episodes"], manifest["steps"]) == (
        "sft",
        "student-sft",
        3,
        3,
    )
    assert manifest["base_manifest"]["name"] == "student"
    assert load_causal_lm("student-sft", cache_dir=tmp_path).num_parameters() > 0


def test_zoo_names_and_missing_bases_fail_in_one_line_before_any_work(cli, config: Path):
    refused = cli("teacher", "train", "--config", config, "--out", "teacher")
    assert refused.code == 2 and "is a zoo model" in refused.err
    missing = cli("teacher", "train", "--config", config, "--base", "no-such-model")
    assert missing.code == 2 and "no model checkpoint" in missing.err


def interrupted_run(config: Path, tmp_path: Path) -> Path:
    """Train from ``config`` until step 1 ends (a state saved after every step); where it is kept."""
    settings = load_recipe(config, {"sft": {"seed": 0, "checkpoint_every": 1}})

    def interrupt(report: StepReport) -> None:
        if report.step == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_teacher(settings, expert_datasets(settings), on_step=interrupt)
    return tmp_path / "models" / ".student-sft.resume"


def test_an_interrupted_run_continues_from_its_saved_state(cli, config: Path, tmp_path: Path):
    partial = interrupted_run(config, tmp_path)
    assert sorted(p.name for p in partial.iterdir()) == ["run.json", "state.pt"]
    assert not (tmp_path / "models" / "student-sft").exists()

    other = cli("teacher", "train", "--config", config, "--seed", "0", "--lr", "0.001")
    assert other.code == 2 and "(lr differ)" in other.err and "--fresh" in other.err
    assert partial.is_dir()
    result = cli("teacher", "train", "--config", config, "--seed", "0")
    assert result.code == 0, result.err
    assert "training     3 steps (resumed at step 1)" in result.err
    steps = [line.split("  ")[0] for line in result.err.splitlines() if line.startswith("training step")]
    assert steps == ["training step 2/3", "training step 3/3"]
    manifest = json.loads((tmp_path / "models" / "student-sft" / MANIFEST).read_text())
    assert (manifest["steps"], manifest["resumed_at_step"]) == (3, 1)
    assert not partial.exists()


def test_fresh_discards_a_partial_run(cli, config: Path, tmp_path: Path):
    partial = interrupted_run(config, tmp_path)
    result = cli("teacher", "train", "--config", config, "--seed", "0", "--lr", "0.001", "--fresh")
    assert result.code == 0, result.err
    assert "training     3 steps, " in result.err and "resumed" not in result.err
    assert not partial.exists()


def test_a_joint_recipe_trains_on_each_env_in_its_own_format_and_records_them(
    cli, tmp_path: Path, zoo_cache: Path
):
    path = tmp_path / "joint.toml"
    path.write_text(
        f'[models]\ncache_dir = "{tmp_path}"\n'
        f'[sft]\nbase = "{zoo_cache / "models" / "student"}"\nout = "student-joint"\n'
        "epochs = 1\nbatch_episodes = 2\nlr = 0.003\n"
        '[[sft.mix]]\nenv = "alfworld"\nepisodes = 3\ntask_reminder = true\n'
        '[[sft.mix]]\nenv = "search"\nepisodes = 2\nmax_expert_turns = 10\n'
    )
    settings = load_recipe(path)
    household, search = (wanted_dataset(settings, part) for part in settings.parts())
    assert (household.env, search.env, search.max_expert_turns) == ("alfworld", "search", 10)
    for info, episodes in (
        (household, [scripted_episode(seed) for seed in household.seeds]),
        (search, [scripted_search_episode(seed) for seed in search.seeds]),
    ):
        save_dataset(
            dataset_dir(info, tmp_path), info.model_copy(update={"episodes": len(episodes)}), episodes
        )

    trained = train_teacher(settings, expert_datasets(settings))
    assert trained.summary.steps == 3  # 5 episodes, 2 a step, one pass
    manifest = json.loads((trained.path / MANIFEST).read_text())
    assert manifest["task_reminder"] == {"alfworld": True, "search": False}
    assert manifest["episodes"] == 5 and len(manifest["dataset"]) == 2
    # each env's episodes rendered in its own chat and format: the tokens trained on add up to that
    chat = ChatFormat(load_tokenizer("student-joint", tmp_path))
    rendered = [
        r
        for protocol, episodes, remind in (
            (HOUSEHOLD_PROTOCOL, [scripted_episode(s) for s in household.seeds], True),
            (SEARCH_PROTOCOL, [scripted_search_episode(s) for s in search.seeds], False),
        )
        for r in render_episodes(protocol.chat(chat), episodes, protocol=protocol, remind_task=remind)
    ]
    assert trained.sequence_tokens == sum(len(r.token_ids) for r in rendered)
    reminded = render_episodes(
        SEARCH_PROTOCOL.chat(chat), [scripted_search_episode(0)], protocol=SEARCH_PROTOCOL, remind_task=True
    )
    assert len(reminded[0].token_ids) > len(rendered[3].token_ids)  # the format shows in the count
    result = cli("teacher", "train", "--config", path, "--out", "student-joint-2")
    assert result.code == 0, result.err
    assert "expert data  alfworld cached: 3 episodes (0 dropped)" in result.err
    assert "expert data  search cached: 2 episodes (0 dropped)" in result.err
    # a run plays each env in the format it learned there
    check_task_reminder("student-joint", tmp_path, True, "alfworld")
    with pytest.raises(ConflictError, match="task_reminder = false on search"):
        check_task_reminder("student-joint", tmp_path, True, "search")
    # the mix owns env, episodes and turn limits: a flag for the whole recipe is refused
    refused = cli("teacher", "train", "--config", path, "--episodes", "4")
    assert refused.code == 2 and "set episodes in each part, not in [sft]" in refused.err


def test_collection_progress_counts_each_env_of_a_joint_recipe_on_its_own():
    """In a log (no live bar) each env's collection prints its own count against its own total."""
    console = Console(file=io.StringIO(), force_terminal=False, width=120)
    with Progress(console=console) as progress:
        bar = _CollectBar(progress, console)
        for env, total, lost in (("alfworld", 10, {3}), ("search", 20, set())):
            bar.start(total, env)
            for i in range(total):
                bar.episode(won=i not in lost)
    lines = [line for line in console.file.getvalue().splitlines() if line.startswith("expert episodes")]
    assert lines[0] == "expert episodes alfworld 1/10 (0 dropped)"
    assert lines[9] == "expert episodes alfworld 10/10 (1 dropped)"
    assert (
        lines[10] == "expert episodes search 2/20 (0 dropped)"
        and lines[-1] == "expert episodes search 20/20 (0 dropped)"
    )
