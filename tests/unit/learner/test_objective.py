"""The OPD objective on a real tiny Qwen3: equals an independent per-sample computation; one step helps."""

import pytest
import torch
from learner_batches import make_batch
from transformers import AutoModelForCausalLM

from services.learner.objective import (
    collate,
    final_hidden_states,
    micro_batch_loss,
    mini_batch_members,
    plan_micro_batches,
    turn_stats,
)


def independent_loss(model, batch, clip_ratio=(0.9, 9.0)):
    """Per sample, no padding: sum_i w_i * clip(r_i) * KL_tail(student || teacher top-K)."""
    low, high = clip_ratio
    total = torch.zeros(())
    for s in batch.samples:
        logits = model(input_ids=torch.tensor([s.token_ids])).logits[0]
        lp = torch.log_softmax(logits.float(), -1)
        ids = torch.from_numpy(s.teacher_top_ids.unpack().copy())
        lt = torch.from_numpy(s.teacher_top_logprobs.unpack().copy())
        for j, p in enumerate(s.positions):
            ls = lp[p - 1, ids[j]]
            ps_tail = 1 - ls.exp().sum()
            pt_tail = 1 - lt[j].exp().sum()
            kl = (ls.exp() * (ls - lt[j])).sum() + ps_tail * (ps_tail.log() - pt_tail.log())
            ratio = torch.exp(lp[p - 1, s.token_ids[p]].detach() - s.sampler_logprobs[j]).clamp(
                1 - low, 1 + high
            )
            total = total + s.token_weights[j] * ratio * kl
    return total


def test_padded_micro_batch_equals_independent_loss(tiny_student, tiny_teacher):
    model = AutoModelForCausalLM.from_pretrained(tiny_student)
    batch = make_batch(tiny_teacher, step=1)
    mb = collate(batch.samples, pad_id=0, device=torch.device("cpu"))
    loss, kl = micro_batch_loss(model, mb, "tail", (0.9, 9.0))
    assert loss.item() == pytest.approx(independent_loss(model, batch).item(), rel=1e-4)
    assert kl.shape[0] == sum(len(s.positions) for s in batch.samples) and (kl >= 0).all()
    assert sum(sum(s.token_weights) for s in batch.samples) == pytest.approx(1.0)


def test_micro_batching_does_not_change_the_loss(tiny_student, tiny_teacher):
    model = AutoModelForCausalLM.from_pretrained(tiny_student)
    batch = make_batch(tiny_teacher, step=2)
    whole, _ = micro_batch_loss(model, collate(batch.samples, 0, torch.device("cpu")), "tail", (0.9, 9.0))
    groups = plan_micro_batches([len(s.token_ids) for s in batch.samples], token_budget=40)
    assert len(groups) > 1
    parts = sum(
        micro_batch_loss(
            model, collate([batch.samples[i] for i in g], 0, torch.device("cpu")), "tail", (0.9, 9.0)
        )[0]
        for g in groups
    )
    assert parts.item() == pytest.approx(whole.item(), rel=1e-5)


def test_mini_batches_follow_the_global_trajectory_index_on_any_rank():
    assert mini_batch_members([0, 1, 2, 3, 4], 1) == [[0, 1, 2, 3, 4]]
    assert mini_batch_members([0, 1, 2, 3, 4], 2) == [[0, 2, 4], [1, 3]]
    # one rank holding trajectories 0-5, or two holding 1, 2, 4 and 0, 3, 5: the same three mini-batches
    assert mini_batch_members([0, 1, 2, 3, 4, 5], 3) == [[0, 3], [1, 4], [2, 5]]
    assert mini_batch_members([1, 2, 4], 3) == [[], [0, 2], [1]]  # trajectories -, 1 and 4, 2
    assert mini_batch_members([0, 3, 5], 3) == [[0, 1], [], [2]]  # trajectories 0 and 3, -, 5
    with pytest.raises(ValueError, match="mini_batches must be >= 1"):
        mini_batch_members([0], 0)


def test_optimizer_steps_reduce_the_loss(tiny_student, tiny_teacher):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_student)
    batch = make_batch(tiny_teacher, step=3)
    mb = collate(batch.samples, 0, torch.device("cpu"))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = None
    for _ in range(5):
        loss, _ = micro_batch_loss(model, mb, "tail", (0.9, 9.0))
        first = loss.item() if first is None else first
        loss.backward()
        optim.step()
        optim.zero_grad()
    assert micro_batch_loss(model, mb, "tail", (0.9, 9.0))[0].item() < 0.8 * first


def test_plan_micro_batches_respects_budget():
    groups = plan_micro_batches([10, 3, 7, 7, 2], token_budget=14)
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4]
    lengths = [10, 3, 7, 7, 2]
    assert all(len(g) * max(lengths[i] for i in g) <= 14 or len(g) == 1 for g in groups)


def test_plan_pads_rows_only_where_the_pass_overhead_pays_for_it():
    lengths = [10, 3, 7, 7, 2]
    # no overhead: no padding at all (equal lengths may share, at no cost)
    groups = plan_micro_batches(lengths, token_budget=100)
    assert all(len({lengths[i] for i in g}) == 1 for g in groups)
    assert sum(len(g) * max(lengths[i] for i in g) for g in groups) == sum(lengths)
    # an overhead of 5 tokens a pass: 3 and 2 share a pass (1 token of padding saves 5)
    assert plan_micro_batches(lengths, token_budget=100, pass_overhead=5) == [[0], [2, 3], [1, 4]]


def test_right_padded_rows_need_no_padding_mask(tiny_student):
    """The unmasked pass over right-padded rows gives the masked pass's hidden states bit for bit at
    every real position (causal attention: a real token never sees the padding after it)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_student).eval()
    gen = torch.Generator().manual_seed(0)
    lengths = [37, 64, 5, 50]
    ids = torch.randint(3, model.config.vocab_size, (len(lengths), max(lengths)), generator=gen)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        ids[b, n:] = 0
    with torch.no_grad():
        masked = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        unmasked = final_hidden_states(model, ids)
    real = mask.bool()
    assert torch.equal(unmasked[real], masked[real])
    assert not torch.equal(unmasked[~real], masked[~real])  # only the never-read padding differs


def test_turn_stats_sum_per_turn(tiny_teacher):
    sample = make_batch(tiny_teacher, step=4).samples[0]
    kl = torch.arange(len(sample.positions), dtype=torch.float32)
    stats = turn_stats(sample, kl)
    assert sum(stats.turn_tokens) == len(sample.positions)
    assert sum(stats.turn_kl_sum) == pytest.approx(float(kl.sum()))
    assert len(stats.turn_tokens) == sample.num_turns


def test_shard_by_tokens_balances_load():
    from services.learner.service import shard_by_tokens

    lengths = [10, 9, 2, 2, 1]
    shards = shard_by_tokens(lengths, 2)
    assert sorted(i for s in shards for i in s) == [0, 1, 2, 3, 4]
    assert [sum(lengths[i] for i in s) for s in shards] == [12, 12]
    assert shard_by_tokens([5], 2) == [[0], []]


def test_turn_stats_carry_the_samples_teacher_entropy(tiny_teacher):
    sample = make_batch(tiny_teacher, step=4).samples[0]
    entropy = [0.5 * (t + 1) for t in range(sample.num_turns)]
    stats = turn_stats(
        sample.model_copy(update={"turn_entropy_sum": entropy}), torch.zeros(len(sample.positions))
    )
    assert stats.turn_entropy_sum == entropy
    assert turn_stats(sample, torch.zeros(len(sample.positions))).turn_entropy_sum is None


def recorded_logprobs(model, sample):
    """What a sampler playing with ``model`` records: the log-prob of each response token it drew."""
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([sample.token_ids])).logits[0].float(), -1)
    return [lp[p - 1, sample.token_ids[p]].item() for p in sample.positions]


def test_importance_ratio_corrects_a_sampler_one_version_behind(tiny_student, tiny_teacher):
    """Staleness: the rollouts were played with weights v-1, the learner holds v; the ratio
    pi_v(y) / pi_{v-1}(y) comes from the log-probs the sampler recorded, clipped to [1 - low, 1 + high]."""
    batch = make_batch(tiny_teacher, step=5)
    sampler = AutoModelForCausalLM.from_pretrained(tiny_student)  # version v-1
    learner = AutoModelForCausalLM.from_pretrained(tiny_student)
    optim = torch.optim.AdamW(learner.parameters(), lr=5e-2)
    for _ in range(3):  # version v: three updates later
        micro_batch_loss(learner, collate(batch.samples, 0, torch.device("cpu")), "tail", (0.9, 9.0))[
            0
        ].backward()
        optim.step()
        optim.zero_grad()
    stale = batch.model_copy(
        update={
            "samples": [
                s.model_copy(update={"sampler_logprobs": recorded_logprobs(sampler, s)})
                for s in batch.samples
            ]
        }
    )
    fresh = batch.model_copy(
        update={
            "samples": [
                s.model_copy(update={"sampler_logprobs": recorded_logprobs(learner, s)})
                for s in batch.samples
            ]
        }
    )
    clip = (0.2, 0.2)
    loss, kl = micro_batch_loss(learner, collate(stale.samples, 0, torch.device("cpu")), "tail", clip)
    assert loss.item() == pytest.approx(independent_loss(learner, stale, clip).item(), rel=1e-4)
    # the lag matters: the versions disagree, and some ratios reach the clip
    ratios = torch.exp(
        torch.tensor([x for s in fresh.samples for x in s.sampler_logprobs])
        - torch.tensor([x for s in stale.samples for x in s.sampler_logprobs])
    )
    assert (ratios > 1.2).any() and (ratios < 0.8).any()
    weights = torch.tensor([w for s in stale.samples for w in s.token_weights])
    unweighted_by_ratio = (weights * kl).sum().item()
    assert loss.item() != pytest.approx(unweighted_by_ratio, rel=1e-3)
    # without a lag (the learner's own log-probs recorded) every ratio is 1: the plain weighted KL
    same, kl_same = micro_batch_loss(learner, collate(fresh.samples, 0, torch.device("cpu")), "tail", clip)
    assert same.item() == pytest.approx((weights * kl_same).sum().item(), rel=1e-5)
