import math

import torch

from services.rollout_worker.engines.sampler import sample_tokens


def test_inverse_cdf_draws_from_softmax_and_never_a_zero_probability_token():
    probs_V = torch.tensor([0.5, 0.0, 0.2, 0.3, 0.0])
    logits_B_V = probs_V.log().expand(50_000, -1)  # -inf logits: probability exactly zero
    generator = torch.Generator().manual_seed(0)
    ids_B, logp_B = sample_tokens(logits_B_V, 1.0, generator)
    counts = torch.bincount(ids_B, minlength=5).float() / len(ids_B)
    assert counts[1] == 0 and counts[4] == 0
    torch.testing.assert_close(counts, probs_V, atol=0.01, rtol=0)  # 4+ standard errors at n = 50k
    torch.testing.assert_close(logp_B, probs_V.log()[ids_B])


def test_temperature_scales_the_distribution_and_its_logprobs():
    logits_B_V = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).expand(40_000, -1)
    ids_B, logp_B = sample_tokens(logits_B_V, 0.5, torch.Generator().manual_seed(1))
    expected_V = torch.softmax(logits_B_V[0] / 0.5, dim=-1)
    counts = torch.bincount(ids_B, minlength=4).float() / len(ids_B)
    torch.testing.assert_close(counts, expected_V, atol=0.01, rtol=0)
    torch.testing.assert_close(logp_B, expected_V.log()[ids_B])


def test_greedy_takes_the_argmax_with_the_unscaled_logprob():
    logits_B_V = torch.tensor([[0.0, 3.0, 1.0], [5.0, -1.0, 4.9]])
    ids_B, logp_B = sample_tokens(logits_B_V, 0.0, torch.Generator())
    assert ids_B.tolist() == [1, 0]
    expected = torch.log_softmax(logits_B_V, dim=-1)[[0, 1], [1, 0]]
    torch.testing.assert_close(logp_B, expected)


def test_a_seed_fixes_the_samples():
    logits_B_V = torch.randn(8, 300, generator=torch.Generator().manual_seed(2))
    draws = [sample_tokens(logits_B_V, 1.0, torch.Generator().manual_seed(s))[0].tolist() for s in (7, 7, 8)]
    assert draws[0] == draws[1] != draws[2]
    assert all(not math.isinf(lp) for lp in sample_tokens(logits_B_V, 1.0, torch.Generator())[1].tolist())
