"""Starting or continuing one planned run directory, for every command that trains a planned run
(`turnopd compare`, `bench/frontier.py`, `bench/multi_env.py`, `bench/reproduce_records.py`).

A run directory is reused only with the settings it was started with: its saved config.json is
compared with the planned settings key by key (keys the saved file predates read as their
defaults; ``run.run_dir`` is not compared), and any difference is a ConflictError naming the keys.
"""

from services.errors import ConflictError
from services.experiments.compare_dir import RunState, config_differences, run_state, settings_json
from services.run_dir import CONFIG_FILE, SECRET_FIELDS, RunDir
from services.settings import TurnOPDSettings
from services.settings.diff import with_defaults
from services.settings.tree import saved_settings_dict


def differences_from_plan(saved_config: str, settings: TurnOPDSettings) -> list[str]:
    """Dotted keys where a saved config.json differs from the settings a run is planned with."""
    defaults = settings_json(TurnOPDSettings.model_construct(), SECRET_FIELDS)  # no env vars
    saved = saved_settings_dict(saved_config)
    return config_differences(with_defaults(saved, defaults), settings_json(settings, SECRET_FIELDS))


def checked_state(settings: TurnOPDSettings, remedy: str) -> RunState:
    """The planned run's state (new; complete: steps 1..K logged and evaluated after K; else
    partial); a directory started with other settings is a ConflictError ending in ``remedy``."""
    path = settings.run.run_dir
    state = run_state(path, settings.optim.steps)
    if state != "new":
        differ = differences_from_plan((path / CONFIG_FILE).read_text(), settings)
        if differ:
            raise ConflictError(
                f"{path} was started with other settings ({', '.join(differ[:8])} differ); {remedy}"
            )
    return state


def opened(settings: TurnOPDSettings, state: RunState) -> RunDir:
    """The run's directory, created (config.json written) when the run is new."""
    run = RunDir(settings.run.run_dir)
    if state == "new":
        run.create(settings)
    return run
