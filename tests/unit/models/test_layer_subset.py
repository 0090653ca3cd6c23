from pathlib import Path

import pytest
import torch

from services.errors import ConfigError
from services.models.layer_subset import check_layer_choice, keep_layers
from services.models.loading import load_causal_lm


@pytest.mark.parametrize(
    ("layers", "problem"),
    [
        ([], "at least one"),
        ([0, 4], "has 4 layers"),
        ([-1, 2], "out of range"),
    ],
)
def test_bad_layer_choices_are_named(layers: list[int], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        check_layer_choice(layers, 4)


def test_cut_model_computes_what_the_full_model_does_with_the_dropped_layers_skipped(zoo_cache: Path) -> None:
    full = load_causal_lm("teacher", cache_dir=zoo_cache)
    cut = keep_layers(load_causal_lm("teacher", cache_dir=zoo_cache), [0, 3])
    assert cut.config.num_hidden_layers == 2 and len(cut.model.layers) == 2
    assert [layer.self_attn.layer_idx for layer in cut.model.layers] == [0, 1]

    def skip(module: torch.nn.Module, args: tuple, kwargs: dict, output: object) -> object:
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    hooks = [full.model.layers[i].register_forward_hook(skip, with_kwargs=True) for i in (1, 2)]
    ids = torch.tensor([[5, 17, 99, 3, 250, 41, 7]])
    with torch.no_grad():
        expected, got = full(ids).logits, cut(ids).logits
    for hook in hooks:
        hook.remove()
    with torch.no_grad():
        unchanged = full(ids).logits
    torch.testing.assert_close(got, expected)
    assert not torch.allclose(got, unchanged, atol=1e-3)


def test_cut_model_generates_with_its_kv_cache_and_round_trips(zoo_cache: Path, tmp_path: Path) -> None:
    cut = keep_layers(load_causal_lm("teacher", cache_dir=zoo_cache), [1, 2])
    ids = torch.tensor([[5, 17, 99, 3]])
    with torch.no_grad():
        cached = cut.generate(ids, max_new_tokens=6, do_sample=False, use_cache=True)
        uncached = cut.generate(ids, max_new_tokens=6, do_sample=False, use_cache=False)
    assert cached.tolist() == uncached.tolist()
    cut.save_pretrained(tmp_path / "cut")
    reloaded = load_causal_lm(str(tmp_path / "cut"))
    assert reloaded.config.num_hidden_layers == 2
    with torch.no_grad():
        torch.testing.assert_close(reloaded(ids).logits, cut(ids).logits)


def _hidden(output: object) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output  # type: ignore[index,return-value]


def test_grown_model_runs_the_repeated_layers_twice_as_independent_copies(
    zoo_cache: Path, tmp_path: Path
) -> None:
    full = load_causal_lm("teacher", cache_dir=zoo_cache)
    grown = keep_layers(load_causal_lm("teacher", cache_dir=zoo_cache), [0, 1, 2, 1, 2, 3])
    assert grown.config.num_hidden_layers == 6 and len(grown.model.layers) == 6
    assert [layer.self_attn.layer_idx for layer in grown.model.layers] == [0, 1, 2, 3, 4, 5]
    first, second = grown.model.layers[1], grown.model.layers[3]
    assert first is not second
    pairs = zip(first.parameters(), second.parameters(), strict=True)
    assert all(a.data_ptr() != b.data_ptr() and torch.equal(a, b) for a, b in pairs)

    # The full model with layers 1 and 2 run again after layer 2 computes what the grown one does.
    again = {"busy": False}

    def repeat(module: torch.nn.Module, args: tuple, kwargs: dict, output: object) -> object:
        if again["busy"]:
            return output
        again["busy"] = True
        hidden = _hidden(output)
        rest = {k: v for k, v in kwargs.items() if k != "hidden_states"}
        for layer in (full.model.layers[1], full.model.layers[2]):
            hidden = _hidden(layer(hidden, **rest))
        again["busy"] = False
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    hook = full.model.layers[2].register_forward_hook(repeat, with_kwargs=True)
    ids = torch.tensor([[5, 17, 99, 3, 250, 41, 7]])
    with torch.no_grad():
        expected, got = full(ids, use_cache=False).logits, grown(ids, use_cache=False).logits
    hook.remove()
    torch.testing.assert_close(got, expected)

    with torch.no_grad():
        cached = grown.generate(ids[:, :4], max_new_tokens=6, do_sample=False, use_cache=True)
        uncached = grown.generate(ids[:, :4], max_new_tokens=6, do_sample=False, use_cache=False)
        next(second.parameters()).add_(1.0)
    assert cached.tolist() == uncached.tolist()
    assert not torch.equal(next(first.parameters()), next(second.parameters()))
    grown.save_pretrained(tmp_path / "grown")
    reloaded = load_causal_lm(str(tmp_path / "grown"))
    assert reloaded.config.num_hidden_layers == 6
    with torch.no_grad():
        torch.testing.assert_close(reloaded(ids).logits, grown(ids).logits)
