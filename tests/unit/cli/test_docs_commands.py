"""Every `turnopd ...` command shown in README.md and docs/ is one the CLI has.

Each line of a fenced shell block (```bash, ```sh, ```shell, ```console or a bare ```) that runs
`turnopd` (after any `VAR=value` prefixes; continuation lines joined) is checked against the CLI's
own metadata (typer's click command tree): the command path exists and every `--option` it uses belongs to that command.
Usage synopses count too (`[--steps K]`, `--env a|b`): an option shown there must exist. Paths of the
repository's configs a document names must exist (configs moved in issue 24). No Ray, no servers.
"""

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from services.cli.main import build_app

REPO = Path(__file__).resolve().parents[3]
SHELL_FENCES = {"", "bash", "sh", "shell", "console"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
CONTROL = {"&&", "||", ";", ">", ">>", "2>", "&", "2>&1"}
CONFIG_PATH = re.compile(r"(?<![\w/.~-])(?:configs|docs/results)/[\w./-]+\.toml")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class DocCommand:
    where: str  # "README.md:42"
    text: str  # the command as written (continuations joined)
    words: tuple[str, ...]  # shell words from `turnopd` on


def _shell_lines(text: str) -> list[tuple[int, str]]:
    """(line number, logical line) of every fenced shell block, continuation lines joined."""
    lines, fence, pending, start = [], None, "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            fence = stripped[3:].strip().lower() if fence is None else None
            pending = ""
            continue
        if fence is None or fence not in SHELL_FENCES:
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append((start, pending + stripped))
        pending = ""
    return lines


def _turnopd_words(line: str) -> tuple[str, ...] | None:
    """The words of a `turnopd` invocation on this line (from `turnopd` to the end of that command)."""
    line = line.removeprefix("$ ")
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words or words[0] != "turnopd":
        return None
    command, depth = [], 0
    for word in words:
        if depth == 0 and (word in CONTROL or word == "|"):
            break
        depth += word.count("[") - word.count("]")
        command.append(word)
    return tuple(command)


def doc_commands(path: Path) -> list[DocCommand]:
    name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
    found = []
    for number, line in _shell_lines(path.read_text()):
        words = _turnopd_words(line)
        if words is not None:
            found.append(DocCommand(f"{name}:{number}", line, words))
    return found


def _is_option(word: str) -> bool:
    if not word.startswith("-") or word == "-":
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False  # a negative number is a value


def problems_of(command: DocCommand, root: Any) -> list[str]:
    """What is wrong with one documented command, each naming the file, line and command."""
    current, path = root, ["turnopd"]
    words = [w.strip("[]") for w in command.words[1:]]
    words = [w for w in words if w]
    while hasattr(current, "commands"):  # a group (typer vendors its own click)
        if not words or words[0].startswith("-"):
            return [f"{command.where}: `{command.text}`: `{' '.join(path)}` needs a subcommand"]
        sub = current.commands.get(words[0])
        if sub is None:
            known = ", ".join(sorted(current.commands))
            return [
                f"{command.where}: `{command.text}`: no command `{' '.join(path)} {words[0]}` "
                f"(known: {known})"
            ]
        current, path, words = sub, [*path, words[0]], words[1:]
    options = {"--help"} | {o for p in current.params for o in (*p.opts, *p.secondary_opts)}
    bad = []
    for word in words:
        for part in word.split("|"):
            name = part.split("=", 1)[0]
            if _is_option(name) and name not in options:
                bad.append(
                    f"{command.where}: `{command.text}`: `{name}` is not an option of "
                    f"`{' '.join(path)}` (its options: {', '.join(sorted(options))})"
                )
    return bad


@pytest.fixture(scope="module")
def root() -> Any:
    return typer.main.get_command(build_app())


def test_every_documented_turnopd_command_exists(root: Any) -> None:
    commands = [c for doc in documents() for c in doc_commands(doc)]
    assert len(commands) > 40, "the extraction found too few commands: is the parsing broken?"
    assert any(c.where.startswith("README.md") for c in commands)
    problems = [p for c in commands for p in problems_of(c, root)]
    assert problems == [], "stale commands in the docs:\n" + "\n".join(problems)


def test_every_documented_config_path_exists() -> None:
    missing = []
    for doc in documents():
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for match in CONFIG_PATH.finditer(line):
                if not (REPO / match.group(0)).is_file():
                    missing.append(f"{doc.relative_to(REPO)}:{number}: {match.group(0)} does not exist")
    assert missing == [], "missing configs named in the docs:\n" + "\n".join(missing)


def _anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    headings = [line.lstrip("#").strip() for line in doc.read_text().splitlines() if line.startswith("#")]
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_resolves() -> None:
    """Links between README.md and docs/ point at files that exist, and at headings they have."""
    broken = []
    for doc in documents():
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                path, _, anchor = target.partition("#")
                file = (doc.parent / path).resolve() if path else doc
                where = f"{doc.relative_to(REPO)}:{number}: ({target})"
                if not file.exists():
                    broken.append(f"{where}: no file {path}")
                elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
                    broken.append(f"{where}: no heading #{anchor} in {path or doc.name}")
    assert broken == [], "broken links in the docs:\n" + "\n".join(broken)


def test_the_layout_lists_every_package() -> None:
    """docs/architecture.md's layout (the README links it) names every package of services/."""
    text = (REPO / "docs" / "architecture.md").read_text()
    layout = text[text.index("## Layout of the repository") :]
    listed = set(re.findall(r"^  (\w+)/", layout, flags=re.MULTILINE))
    packages = {p.parent.name for p in (REPO / "services").glob("*/__init__.py")}
    assert packages - listed == set(), "packages missing from docs/architecture.md's layout"
    assert listed - packages == set(), "docs/architecture.md's layout lists packages that are gone"


def test_the_check_names_the_file_line_and_the_bad_part(tmp_path: Path, root: Any) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(
        "text\n"
        "```bash\n"
        "turnopd eval --model teacher --episodez 3   # typo\n"
        "TURNOPD_OPTIM__LR=1e-4 turnopd controller replayy probes.jsonl\n"
        "turnopd train --config configs/demo.toml \\\n"
        "    --steps 2 | tee log\n"
        "turnopd controller replay P [--steps K] [--use-success | --all-trajectories] --h-min -1\n"
        "ls runs  # turnopd not here\n"
        "```\n"
        "```python\n"
        "turnopd --bogus\n"
        "```\n"
    )
    commands = doc_commands(doc)
    assert [c.where.rsplit(":", 1)[1] for c in commands] == ["3", "4", "5", "7"]
    problems = [p for c in commands for p in problems_of(c, root)]
    assert len(problems) == 2
    assert problems[0].startswith(f"{doc}:3: `turnopd eval --model teacher --episodez 3")
    assert "`--episodez` is not an option of `turnopd eval`" in problems[0]
    assert problems[1].startswith(f"{doc}:4: ")
    assert "no command `turnopd controller replayy`" in problems[1]
