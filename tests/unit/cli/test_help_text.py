"""Every option's help survives Rich's rendering: `--help` shows it word for word.

Rich markup reads ``[name]`` as a style tag and drops it, so a help string that named its config
key as ``[rollout.env]`` printed as "Env backend ." This walks the whole command tree.
"""

import typer
from rich.text import Text

from services.cli.main import build_app


def _commands(command, path: str = "turnopd"):  # type: ignore[no-untyped-def]
    """(path, command) for the command and every subcommand (groups have ``commands``)."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, f"{path} {name}")


def test_every_help_text_renders_unchanged_under_rich_markup():
    root = typer.main.get_command(build_app())
    checked, mangled = 0, []
    for path, command in _commands(root):
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        for text in texts:
            checked += 1
            if Text.from_markup(text).plain != text:
                mangled.append(f"{path}: {text!r}")
    assert checked > 100
    assert mangled == []


def test_eval_help_names_the_config_keys(cli):  # type: ignore[no-untyped-def]
    result = cli("eval", "--help")
    assert result.code == 0
    flat = " ".join(result.out.replace("│", " ").split())
    assert "Env backend (config: rollout.env)." in flat
    assert "Turn cap (config: rollout.max_turns)." in flat
