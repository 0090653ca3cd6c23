"""The README is the front door: it stays within its line budget, and every page it links exists."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUDGET = 250


def test_the_readme_stays_within_its_line_budget():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= BUDGET, f"README.md has {len(lines)} lines, over its {BUDGET}: move detail to docs/"


def test_every_local_page_the_readme_links_exists():
    text = (REPO / "README.md").read_text()
    targets = {m.split("#", 1)[0] for m in re.findall(r"\]\(([^)]+)\)", text) if not m.startswith("http")}
    missing = sorted(t for t in targets if t and not (REPO / t).exists())
    assert targets and missing == [], f"README.md links pages that do not exist: {missing}"
