"""Every model shipped in artifacts/models/ matches its manifest: the files a clone gets are the ones measured."""

import shlex

import pytest

from services.models.shipped import SHIPPED_ROOT, require_shipped, shipped_names

SHIPPED = shipped_names()


@pytest.mark.skipif(not SHIPPED, reason=f"no model is shipped under {SHIPPED_ROOT}")
@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_model_verifies_and_names_its_recipe(name: str):
    shipped = require_shipped(name)
    manifest = shipped.manifest
    assert manifest["name"] == name
    assert manifest["recipe"] and all(command.startswith("turnopd ") for command in manifest["recipe"])
    assert {"config.json", "model.safetensors", "tokenizer.json", "turnopd_build.json"} <= set(
        manifest["files"]
    )
    for command in manifest["recipe"]:  # the recipe's configs are in the repository
        words = shlex.split(command)
        configs = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "--config"]
        assert all((SHIPPED_ROOT.parents[1] / config).is_file() for config in configs), command
    measured = shipped.measured
    if measured is not None:  # measured on the shipped weights, with the command that reproduces it
        assert measured["command"].startswith("turnopd eval ") and 0.0 <= measured["success_rate"] <= 1.0
