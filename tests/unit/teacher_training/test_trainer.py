"""The SFT trainer on the tiny zoo student: the loss is HF's masked cross-entropy, it falls, it is
seeded, and the checkpoint it saves loads back through the shared loader."""

import copy
import json
from pathlib import Path

import pytest
import torch
from expert_episodes import scripted_episode

from services.agent.chat_format import ChatFormat
from services.errors import ConflictError, InputError
from services.models.build import MANIFEST
from services.models.loading import load_causal_lm, load_tokenizer
from services.models.saved_checkpoint import checkpoint_target, save_checkpoint
from services.settings.sft import SFTSettings
from services.teacher_training.rendering import RenderedEpisode, render_episode
from services.teacher_training.resume import TrainState
from services.teacher_training.trainer import StepReport, episode_tensors, response_loss, train_sft


@pytest.fixture(scope="module")
def rendered(chat: ChatFormat) -> list[RenderedEpisode]:
    """Bare tool calls (no thoughts): short responses, so a few steps show the loss fall."""
    return [
        render_episode(chat, scripted_episode(seed=0), think=False),
        render_episode(chat, scripted_episode(turns=3), think=False),
    ]


def tiny_run(zoo_cache: Path, episodes: list[RenderedEpisode], **overrides: object) -> list[float]:
    model = load_causal_lm("student", cache_dir=zoo_cache)
    settings = SFTSettings.model_validate(
        {"epochs": 2, "batch_episodes": 1, "lr": 3e-3, "warmup_frac": 0.0, **overrides}
    )
    return train_sft(model, episodes, settings).losses


def test_response_loss_is_the_masked_next_token_cross_entropy(zoo_cache: Path, rendered):
    model = load_causal_lm("student", cache_dir=zoo_cache)
    episode = rendered[0]
    ids = torch.tensor([episode.token_ids])
    labels = torch.where(torch.tensor([episode.loss_mask()]), ids, torch.full_like(ids, -100))
    with torch.no_grad():
        reference = model(input_ids=ids, labels=labels).loss.item() * episode.num_response_tokens
        loss_sum, _, correct = response_loss(model, episode_tensors(episode))
    assert loss_sum.item() == pytest.approx(reference, rel=1e-5)
    assert 0 <= correct <= episode.num_response_tokens
    assert episode_tensors(episode).targets_N.tolist() == [
        t for t, on in zip(episode.token_ids, episode.loss_mask(), strict=True) if on
    ]


def test_context_targets_leave_out_the_inserted_mistakes_unless_asked(chat: ChatFormat):
    noisy = render_episode(chat, scripted_episode(seed=0), think=True, reject_rate=0.99, seed=3)
    mistakes = {t for a, b in noisy.mistake_spans for t in range(a, b)}
    responses = {t for a, b in noisy.response_spans for t in range(a, b)}
    assert mistakes and not mistakes & responses
    masked = episode_tensors(noisy)
    kept = set((masked.context_at_M + 1).tolist())
    assert kept == set(range(1, len(noisy.token_ids))) - responses - mistakes
    assert masked.context_targets_M.tolist() == [noisy.token_ids[t] for t in sorted(kept)]
    everything = episode_tensors(noisy, context_on_mistakes=True)
    assert set((everything.context_at_M + 1).tolist()) == kept | mistakes
    assert torch.equal(everything.targets_N, masked.targets_N)


def test_loss_falls_and_reports_every_step(zoo_cache: Path, rendered):
    model = load_causal_lm("student", cache_dir=zoo_cache)
    reports: list[StepReport] = []
    settings = SFTSettings(epochs=8, batch_episodes=2, lr=1e-2, warmup_frac=0.0)
    summary = train_sft(model, rendered, settings, on_step=reports.append)
    assert summary.steps == 8 and [r.step for r in reports] == list(range(8))
    assert summary.losses == [r.loss for r in reports]
    assert summary.losses[-1] < 0.5 * summary.losses[0]
    assert reports[-1].token_accuracy > reports[0].token_accuracy
    assert summary.tokens_seen == 8 * sum(len(e.token_ids) - 1 for e in rendered)
    assert not model.training


def test_same_seed_same_loss_curve(zoo_cache: Path, rendered):
    first = tiny_run(zoo_cache, rendered, seed=1)
    assert first == tiny_run(zoo_cache, rendered, seed=1)
    assert first != tiny_run(zoo_cache, rendered, seed=4)  # another episode order (seeds 1-3 share one)


def test_a_resumed_run_ends_where_the_uninterrupted_one_does(zoo_cache: Path, rendered):
    settings = SFTSettings(epochs=3, batch_episodes=1, lr=3e-3, warmup_frac=0.0, checkpoint_every=2)
    straight = load_causal_lm("student", cache_dir=zoo_cache)
    saved: list[TrainState] = []
    whole = train_sft(straight, rendered, settings, on_checkpoint=lambda s: saved.append(copy.deepcopy(s)))
    assert [s.next_step for s in saved] == [2, 4]  # every 2 steps, not after the last (6)
    assert saved[0].losses == whole.losses[:2] and saved[0].total_steps == 6
    resumed = load_causal_lm("student", cache_dir=zoo_cache)
    reports: list[StepReport] = []
    rest = train_sft(resumed, rendered, settings, on_step=reports.append, start=saved[0])
    assert [r.step for r in reports] == [2, 3, 4, 5]
    assert rest.losses == whole.losses and rest.tokens_seen == whole.tokens_seen
    for name, weight in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], weight), name
    with pytest.raises(InputError, match="step 2 of 6, but this run has 4 steps"):
        train_sft(resumed, rendered, settings.model_copy(update={"epochs": 2}), start=saved[0])


def test_checkpoint_loads_back_with_the_shared_loader(zoo_cache: Path, rendered, tmp_path: Path):
    model = load_causal_lm("student", cache_dir=zoo_cache)
    train_sft(model, rendered[:1], SFTSettings(epochs=2, batch_episodes=1, lr=1e-3))
    target = checkpoint_target("student-sft", tmp_path)
    assert target == tmp_path / "models" / "student-sft"
    save_checkpoint(model, load_tokenizer("student", zoo_cache), target, {"stage": "sft"})
    loaded = load_causal_lm("student-sft", cache_dir=tmp_path)
    ids = torch.tensor([rendered[0].token_ids[:64]])
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    assert json.loads((target / MANIFEST).read_text()) == {"stage": "sft"}
    assert (
        load_tokenizer("student-sft", tmp_path).get_vocab()
        == load_tokenizer("student", zoo_cache).get_vocab()
    )
    with pytest.raises(ConflictError, match="zoo model"):
        checkpoint_target("teacher", tmp_path)


def test_novel_tokens_weigh_novel_weight_in_the_response_loss(zoo_cache: Path, chat: ChatFormat):
    marked = render_episode(chat, scripted_episode(seed=0), novel=True)
    novel = {t for a, b in marked.novel_spans for t in range(a, b)}
    plain, weighted = episode_tensors(marked), episode_tensors(marked, novel_weight=4.0)
    targets = [t for a, b in marked.response_spans for t in range(a, b)]
    assert weighted.weights_N.tolist() == [4.0 if t in novel else 1.0 for t in targets]
    assert plain.weight == len(targets) and weighted.weight == len(targets) + 3.0 * len(novel)
    model = load_causal_lm("student", cache_dir=zoo_cache)
    with torch.no_grad():
        plain_sum, _, plain_right = response_loss(model, plain)
        weighted_sum, _, weighted_right = response_loss(model, weighted)
        logits = model(input_ids=torch.tensor([marked.token_ids])).logits[0]
    per_token = torch.nn.functional.cross_entropy(
        logits[[t - 1 for t in targets]],
        torch.tensor([marked.token_ids[t] for t in targets]),
        reduction="none",
    )
    assert plain_sum.item() == pytest.approx(per_token.sum().item(), rel=1e-4)
    assert weighted_sum.item() == pytest.approx((per_token * weighted.weights_N).sum().item(), rel=1e-4)
    assert weighted_sum.item() > plain_sum.item() and plain_right == weighted_right
