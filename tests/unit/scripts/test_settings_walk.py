"""scripts/settings_walk.py follows the whole tree through a package: parameters, aliases, objects
that hold it (and their methods, overrides included), carriers handed on, what reads which section."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("settings_walk", REPO / "scripts" / "settings_walk.py")
assert _spec is not None and _spec.loader is not None
settings_walk = importlib.util.module_from_spec(_spec)
sys.modules["settings_walk"] = settings_walk  # dataclasses look their module up
_spec.loader.exec_module(settings_walk)

DRIVER = """
from pkg.parts import Holder, Box, piece_only, reads_optim, make_box

def train(settings):
    s = settings
    reads_optim(s)
    piece_only(settings.rollout)
    holder = Holder(settings)
    holder.use()
    box = make_box(settings)
    consume(box)
    return None

def consume(box):
    return box.settings.eval

def never_called(settings):
    return settings.run
"""
PARTS = """
from dataclasses import dataclass

def reads_optim(tree):
    return tree.optim.lr

def piece_only(rollout):
    return rollout.max_turns

class Base:
    def __init__(self, tree):
        self.tree = tree

    def use(self):
        return self.hook()

    def hook(self):
        return None

class Holder(Base):
    def hook(self):
        return self.tree.blend

    def unrelated(self):
        return 1

@dataclass
class Box:
    settings: object

def make_box(tree) -> Box:
    return Box(settings=tree)
"""


def walk_of(tmp_path: Path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "driver.py").write_text(DRIVER)
    (pkg / "parts.py").write_text(PARTS)
    return settings_walk.walk(tmp_path, "pkg.driver:train:settings")


def test_the_tree_is_followed_through_aliases_holders_overrides_and_carriers(tmp_path):
    w = walk_of(tmp_path)
    assert w.rooms == {
        "pkg.driver:train": {"rollout"},
        "pkg.parts:reads_optim": {"optim"},
        "pkg.parts:Base.__init__": set(),
        "pkg.parts:Base.use": set(),  # a method run on a carrier (holder.use())
        "pkg.parts:Holder.hook": {"blend"},  # reads self.tree, which its base class holds
        "pkg.parts:make_box": set(),
        "pkg.driver:consume": {"eval"},  # a Box holds the tree: box.settings is it
    }
    assert set(w.returns) == {"pkg.parts:make_box"}  # hands a carrier back up
    assert ("pkg.parts:Box", "settings") in w.holders and ("pkg.parts:Base", "tree") in w.holders


def test_a_piece_of_the_tree_is_not_followed_and_nothing_else_is_entered(tmp_path):
    w = walk_of(tmp_path)
    assert "pkg.parts:piece_only" not in w.rooms
    assert "pkg.parts:Holder.unrelated" not in w.rooms
    assert "pkg.parts:Base.hook" not in w.rooms  # holds nothing it reads
    assert "pkg.driver:never_called" not in w.rooms
    assert w.unresolved == set()


def test_the_driver_hands_the_whole_tree_only_to_its_resolvers_and_the_stack_start():
    """Issue 62: each part and service is handed its own piece; the tree stops at these."""
    w = settings_walk.walk(REPO, "services.orchestrator.pipeline:train:settings")
    assert set(w.rooms) <= {
        "services.orchestrator.pipeline:train",
        "services.operations.run_pieces:RunPieces.of",
        "services.orchestrator.run_plan:LoopSettings.of",
        "services.orchestrator.evaluation:EvalPlan.of",
        "services.orchestrator.source_mix:StepSources.of",
        "services.operations.stack:start_stack",
        "services.operations.stack:connect_ray",
        "services.operations.stack:logical_cpus_needed",
        "services.operations.stack:teacher_clients",
    }
    assert w.returns == {} and w.unresolved == set()
