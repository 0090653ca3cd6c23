import torch

from services.rollout_worker.engines.kv_slots import SlotPool, SlotShape

SHAPE = SlotShape(layers=2, kv_heads=1, head_dim=2, dtype=torch.float32, device=torch.device("cpu"))


def test_a_prompt_continues_the_slot_whose_whole_sequence_begins_it():
    pool = SlotPool(SHAPE, max_bytes=1 << 20)
    first = pool.claim([[1, 2, 3], [1, 2, 9, 9, 9], [4, 4]], max_new_tokens=4)
    first[0].slot.tokens[:] = [1, 2, 3]
    first[1].slot.tokens[:] = [1, 2, 9, 9]
    first[2].slot.tokens[:] = [4, 4, 5]
    pool.settle(first)
    again = pool.claim([[1, 2, 9, 9, 9, 5], [1, 2, 3, 7], [4, 4, 5]], max_new_tokens=4)
    assert again[0].slot is first[1].slot and again[0].reused == 4
    assert again[1].slot is first[0].slot and again[1].reused == 3
    # A prompt the slot holds in full keeps nothing (a token must be prefilled): it takes a spare slot.
    assert again[2].reused == 0 and again[2].slot.tokens == []


def test_a_prefix_shared_with_another_episode_is_not_reused():
    pool = SlotPool(SHAPE, max_bytes=1 << 20)
    [claim] = pool.claim([[1, 2, 3, 4]], max_new_tokens=2)
    claim.slot.tokens[:] = [1, 2, 3, 4, 5]  # an episode that opened with the same instructions
    pool.settle([claim])
    [other] = pool.claim([[1, 2, 3, 4, 8, 8]], max_new_tokens=2)
    assert other.reused == 0  # its states would depend on what the worker played before


def test_each_prompt_gets_its_own_slot_even_when_two_share_a_prefix():
    pool = SlotPool(SHAPE, max_bytes=1 << 20)
    [claim] = pool.claim([[4, 5, 6]], max_new_tokens=2)
    claim.slot.tokens[:] = [4, 5, 6]
    pool.settle([claim])
    claims = pool.claim([[4, 5, 6, 7], [4, 5, 6, 8]], max_new_tokens=2)
    assert claims[0].slot is not claims[1].slot
    assert [c.reused for c in claims] == [3, 0]
    assert len(pool) == 2


def test_slots_grow_in_place_keeping_the_reused_prefix():
    pool = SlotPool(SHAPE, max_bytes=1 << 30)
    [claim] = pool.claim([list(range(1, 11))], max_new_tokens=5)
    claim.slot.kv[:, :, :, :10] = torch.arange(10, dtype=torch.float32)[None, None, None, :, None]
    claim.slot.tokens[:] = list(range(1, 11))
    pool.settle([claim])
    capacity = claim.slot.capacity
    longer = list(range(1, 11)) + [0] * capacity
    [grown] = pool.claim([longer], max_new_tokens=5)
    assert grown.slot is claim.slot and grown.reused == 10 and grown.slot.capacity >= len(longer) + 5
    assert grown.slot.kv[1, 1, 0, :10, 0].tolist() == list(range(10))


def test_a_call_frees_the_slots_it_did_not_continue_and_the_budget_bounds_empty_buffers():
    pool = SlotPool(SHAPE, max_bytes=0)
    claims = pool.claim([[1, 2], [3, 4]], max_new_tokens=2)
    for claim in claims:
        claim.slot.tokens[:] = [7, 7]
    pool.settle(claims)
    assert len(pool) == 0  # no budget: nothing is kept across calls
    one_slot = SHAPE.nbytes(256)
    pool = SlotPool(SHAPE, max_bytes=2 * one_slot)
    claims = pool.claim([[1, 2], [3, 4], [5, 6]], max_new_tokens=2)
    for claim in claims:
        claim.slot.tokens[:] = [7, 9]
    pool.settle(claims[:1])  # episodes 2 and 3 ended
    assert pool.held_tokens == 2 and len(pool) == 2 and pool.nbytes == 2 * one_slot
    pool.clear()
    assert pool.held_tokens == 0 and len(pool) == 2  # buffers kept for reuse within the budget
