"""The chat format and an engine together: several episodes, turn by turn, without an environment."""

from pathlib import Path

from services.agent.chat_format import ChatFormat, task_message
from services.agent.tool_calls import (
    ParsedAction,
    inadmissible_action_feedback,
    parse_response,
)
from services.contracts.action_templates import match_admissible
from services.models.loading import load_tokenizer
from services.rollout_worker.engines import GenerationParams, make_engine

ADMISSIBLE = ["go to countertop 1", "go to cabinet 1", "look", "inventory"]


def test_batched_turns_keep_spans_logprobs_and_prefixes_aligned(zoo_cache: Path):
    engine = make_engine("transformers", "student", cache_dir=zoo_cache, seed=0)
    chat = ChatFormat(load_tokenizer("student", zoo_cache))
    episodes = [
        chat.start(task_message(f"Your task is to: put a mug {i} in cabinet.", "You see a cabinet 1."))
        for i in range(3)
    ]
    logprobs: list[list[float]] = [[] for _ in episodes]
    for turn in range(3):
        prefixes = [e.token_ids for e in episodes]
        gens = engine.generate(prefixes, GenerationParams(max_new_tokens=20, temperature=1.0, seed=turn))
        for episode, gen, lps in zip(episodes, gens, logprobs, strict=True):
            start, end = episode.add_response_ids(gen.token_ids)
            assert episode.token_ids[start:end] == gen.token_ids
            lps.extend(gen.logprobs)
            parsed = parse_response(episode.response_text(gen.token_ids))
            if isinstance(parsed, ParsedAction):
                command = match_admissible(parsed.action, ADMISSIBLE)
                feedback = (
                    "You arrive." if command else inadmissible_action_feedback(parsed.action, ADMISSIBLE)
                )
            else:
                feedback = parsed.feedback  # an untrained model: rejected client-side, still a turn
            episode.add_observation(feedback)
    for episode, prefix, lps in zip(episodes, prefixes, logprobs, strict=True):
        assert episode.num_turns == 3
        assert episode.token_ids[: len(prefix)] == prefix
        assert sum(end - start for start, end in episode.response_spans) == len(lps)
        assert episode.token_ids[-3:] == chat.tokenizer.encode(
            "<|im_start|>assistant\n", add_special_tokens=False
        )
