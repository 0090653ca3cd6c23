"""Hypothesis strategies of ``/v1/completions`` answers, valid and broken, and the check that the
codec's compiled reader reads them as the Python reader does: the property tests
(tests/unit/teacher_scorer/test_codec_properties.py) and the long sanitizer run (bench/codec_fuzz.py)
share them.

An answer is written here as text, not through ``json.dumps``, so that it can hold what a hostile
or odd server sends: duplicate keys, number forms Python and C could read apart (``-0``, ``1e999999``,
integers past 2^53 or past a float), escapes, deep nesting, any key order and whitespace.
"""

import functools
import json
import random
import re
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from services.teacher_scorer.completions_codec import EndpointAnswerError, python_scores_from_completion
from services.teacher_scorer.completions_native import CodecKernels
from services.teacher_scorer.engine import RowScores, ScoreRow

FIELDS = ("top_ids_P_K", "top_logprobs_P_K", "token_logprob_P", "entropy_P")


@dataclass(frozen=True)
class Answer:
    """An answer's text, the rows it is read for and their top-K."""

    body: bytes
    rows: list[ScoreRow]
    top_k: int


class Raw(str):
    """JSON text written as it is (a number in any form, a literal)."""


# A value: Raw, str, a list of values, or an object as (key, value) pairs (duplicates allowed).
Value = object


def dump(value: Value, ws: str = "", ascii_only: bool = False) -> str:
    """``value`` as JSON text, ``ws`` after every separator."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=ascii_only)
    if isinstance(value, list):
        return "[" + f",{ws}".join(dump(v, ws, ascii_only) for v in value) + "]"
    if isinstance(value, tuple):
        pairs = (f"{json.dumps(k, ensure_ascii=ascii_only)}:{ws}{dump(v, ws, ascii_only)}" for k, v in value)
        return "{" + f",{ws}".join(pairs) + "}"
    raise TypeError(f"not a value: {value!r}")


ODD_LOG_PROBS = ["0", "-0", "-0.0", "0e5", "-1", "-16777217", "-9007199254740992", "-9007199254740993", "5"]
ODD_LOG_PROBS += ["-1e999999", "-1e39", "-3.4028235e38", "-3.4028236e38", "-1" + "0" * 25, "-1" + "0" * 400]
ODD_LOG_PROBS += [
    "1e-400",
    "-2.5e-320",
    "-1.00000000000000000000001",
    "-0.1e1",
    "-1E+2",
    "-123456789012345678",
]
ODD_TEXTS = ['"', "\\", "é", "日本", "\n", "\u2028", "\U0001f600", "\x00", "</s>", ""]
ODD_VALUES = [
    "null",
    "true",
    "1.0",
    "-0",
    "1e2",
    "99999999999999999999",
    '"7"',
    "[]",
    "{}",
    "[[[[1]]]]",
    '{"a":[1]}',
]
ODD_KEYS = ["0{}", " {}", "+{}", "{}_0", "", "-1", "{}.0", "{}a"]


def _log_prob(rng: random.Random, odd: float) -> str:
    """A log-prob as a server could write it: mostly ordinary, with share ``odd`` in a form the
    readers must take alike (zeros, integers, overflow to infinity, more digits than a double)."""
    if rng.random() >= odd:
        value = -rng.expovariate(0.5)
        return f"{value:.9g}" if rng.random() < 0.5 else repr(value)
    match rng.randrange(4):
        case 0:
            return rng.choice(ODD_LOG_PROBS)
        case 1:
            return str(-rng.randrange(10 ** rng.randrange(1, 20)))
        case 2:
            return (
                f"-{rng.randrange(10**12)}.{rng.randrange(10**9)}{rng.choice('eE')}{rng.randrange(-330, 330)}"
            )
        case _:
            return repr(-abs(rng.uniform(-1, 1)) * 10.0 ** rng.randrange(-320, 308))


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(ODD_TEXTS) for _ in range(rng.randrange(3)))


def _position(rng: random.Random, token: int, top_k: int, odd: float) -> Value:
    """One position's entries for the token there: usually the top ``top_k`` ranked and the token,
    with share ``odd`` of oddities (more or fewer entries, duplicates, odd keys, ranks or values)."""
    if rng.random() < odd / 4:
        return Raw(rng.choice(["null", "{}", "[]", "-1", '"x"']))
    count = max(1, top_k + (rng.randrange(-1, 4) if rng.random() < odd else rng.randrange(2)))
    ids = rng.sample(range(41), count)
    if token not in ids and rng.random() < 0.5:
        ids[rng.randrange(count)] = token
    entries: list[tuple[str, Value]] = []
    for rank, token_id in enumerate(ids, 1):
        fields: list[tuple[str, Value]] = [("logprob", Raw(_log_prob(rng, odd)))]
        if rng.random() < 0.9:
            fields.append(("rank", Raw(rng.choice(ODD_VALUES) if rng.random() < odd else str(rank))))
        if rng.random() < 0.5:
            fields.append(("decoded_token", _text(rng)))
        if rng.random() < odd:
            fields.append((_text(rng), Raw(rng.choice(ODD_VALUES))))
        if rng.random() < 0.2:
            rng.shuffle(fields)
        key = rng.choice(ODD_KEYS).format(token_id) if rng.random() < odd / 2 else str(token_id)
        entries.append((key, tuple(fields)))
    if token not in ids and rng.random() < 0.9:
        written = "null" if rng.random() < 0.5 else str(top_k + rng.randrange(1, 6))
        entries.append((str(token), (("logprob", Raw(_log_prob(rng, odd))), ("rank", Raw(written)))))
    if rng.random() < odd / 2:  # a duplicate id (Python keeps the last)
        entries.append(rng.choice(entries))
    if rng.random() < 0.25:
        rng.shuffle(entries)
    return tuple(entries)


def _prompt_token_ids(rng: random.Random, prompt: list[int], odd: float) -> Value | None:
    if rng.random() >= odd:
        return None if rng.random() < 0.1 else [Raw(str(t)) for t in prompt]
    return rng.choice(
        [
            Raw("null"),
            [Raw(f"{t}.0") for t in prompt],
            [Raw(str(t)) for t in reversed(prompt)],
            [Raw(str(t)) for t in prompt[:-1]],
            [Raw("true") if t == 1 else Raw(str(t)) for t in prompt],
            "text",
        ]
    )


def build_answer(rng: random.Random, odd: float) -> Answer:
    """An answer to a request of one to three prompts, with share ``odd`` of oddities at each place
    one can be."""
    top_k = rng.randrange(1, 5)
    prompts = [[rng.randrange(41) for _ in range(rng.randrange(2, 8))] for _ in range(rng.randrange(1, 4))]
    rows = []
    for prompt in prompts:
        scored = sorted(rng.sample(range(1, len(prompt)), rng.randrange(len(prompt))))
        rows.append(ScoreRow(np.array(prompt, dtype=np.int64), np.array(scored, dtype=np.int64)))
    choices = []
    for index, prompt in enumerate(prompts):
        listed: list[Value] = [Raw("null")] + [_position(rng, token, top_k, odd) for token in prompt[1:]]
        fields: list[tuple[str, Value]] = [("index", Raw(str(index))), ("prompt_logprobs", listed)]
        ids = _prompt_token_ids(rng, prompt, odd)
        if ids is not None:
            fields.append(("prompt_token_ids", ids))
        fields += [("text", ""), ("finish_reason", "length")]
        if rng.random() < odd:
            fields.append((rng.choice(["index", "prompt_logprobs", "x"]), Raw(rng.choice(ODD_VALUES))))
        rng.shuffle(fields)
        choices.append(tuple(fields))
    if rng.random() < 0.2:
        rng.shuffle(choices)
    envelope: list[tuple[str, Value]] = [
        ("id", "cmpl-1"),
        ("object", "text_completion"),
        ("choices", choices),
    ]
    envelope.append(("usage", (("prompt_tokens", Raw("3")), ("completion_tokens", Raw("0")))))
    if rng.random() < odd:
        envelope.append((rng.choice(["choices", "x"]), Raw(rng.choice(ODD_VALUES))))
    ws = rng.choice(["", "", " ", "\n  ", "\t"])
    return Answer(dump(tuple(envelope), ws, rng.random() < 0.5).encode(), rows, top_k)


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    """``build_answer`` of a drawn seed and share of oddities (the bulk is drawn from the seed: a
    hypothesis draw per value cost ~100 ms an answer)."""
    odd = draw(st.sampled_from([0.0, 0.01, 0.05, 0.2, 0.5]))
    return build_answer(random.Random(draw(st.integers(0, 2**64 - 1))), odd)


FRAGMENTS = [b"{", b"}", b"[", b"]", b",", b":", b'"', b"null", b"-0", b"1e999999", b"\\u0000", b"\xff"]
FRAGMENTS += [b"\xc3", b" ", b'"7":{"logprob":-1}', b'"index":0', b'"rank":1', b"-1.5", b"[" * 70]


LOG_PROB = re.compile(rb'"logprob":\s*(-?\d+(\.\d+)?([eE][-+]?\d+)?)')


@st.composite
def mutated(draw: st.DrawFn, answer: Answer) -> Answer:
    """``answer`` with one to three edits: a cut, an inserted fragment, a changed byte, a copied
    slice, or a log-prob swapped for one in a form the readers must take alike."""
    body = bytearray(answer.body)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(body)))
        match draw(st.integers(0, 4)):
            case 0:
                del body[at : at + draw(st.integers(1, 12))]
            case 1:
                body[at:at] = draw(st.sampled_from(FRAGMENTS))
            case 2:
                body[at : at + 1] = bytes([draw(st.integers(0, 255))])
            case 3:
                start = draw(st.integers(0, len(body)))
                body[at:at] = body[start : start + draw(st.integers(1, 40))]
            case _:
                numbers = list(LOG_PROB.finditer(body))
                if numbers:
                    number = numbers[draw(st.integers(0, len(numbers) - 1))]
                    body[number.start(1) : number.end(1)] = draw(st.sampled_from(ODD_LOG_PROBS)).encode()
    return Answer(bytes(body), answer.rows, answer.top_k)


# What a run of one fragment after an answer's start can fill (positions, entries, tokens, depth).
RUNS = [b"{},", b"null,", b"0,", b'"1":{"logprob":0},', b"[", b"{", b'"', b"\\"]


@st.composite
def arbitrary_bodies(draw: st.DrawFn) -> tuple[list[bytes], Answer]:
    """Bytes alone; the start of a well-formed answer followed by bytes; and its start up to one of
    its brackets followed by a run of one fragment, what fills the reader's buffers fastest (empty
    positions, minimal entries or tokens) or nests deepest; with the answer they are read for."""
    answer, noise = draw(answers()), draw(st.binary(max_size=200))
    cut, run, repeats = (
        draw(st.integers(0, 10**6)),
        draw(st.sampled_from(RUNS)),
        draw(st.sampled_from([1, 10, 1000, 20_000])),
    )
    brackets = [i + 1 for i, byte in enumerate(answer.body) if byte == ord("[")]
    bodies = [
        noise,
        answer.body[: cut % (len(answer.body) + 1)] + noise,
        answer.body[: brackets[cut % len(brackets)]] + run * repeats,
    ]
    return bodies, answer


def assert_same_rows(ours: list[RowScores], theirs: list[RowScores]) -> None:
    """Equal rows, bit for bit (a -0.0 against 0.0 counts)."""
    assert len(ours) == len(theirs)
    for mine, other in zip(ours, theirs, strict=True):
        for field in FIELDS:
            a, b = getattr(mine, field), getattr(other, field)
            assert a.dtype == b.dtype and a.shape == b.shape, field
            assert a.tobytes() == b.tobytes(), (field, a, b)


def assert_readers_agree(kernels: CodecKernels, answer: Answer) -> bool:
    """The compiled reader reads ``answer`` as the Python reader does, or leaves it to Python (which
    then gives its rows or its EndpointAnswerError); True where the compiled reader read it."""
    try:
        expected, error = python_scores_from_completion(answer.body, answer.rows, answer.top_k), None
    except EndpointAnswerError as exc:
        expected, error = None, exc
    compiled = kernels.read(answer.body, answer.rows, answer.top_k)
    if compiled is None:
        return False
    assert error is None, f"the compiled reader read an answer the Python reader refuses: {error}"
    assert expected is not None
    assert_same_rows(compiled, expected)
    return True


def _choice(positions_json: str, extra: str = "") -> bytes:
    return f'{{"id":"cmpl-1","choices":[{{"index":0,{extra}"prompt_logprobs":[null,{positions_json}]}}]}}'.encode()


def colliding_ids(count: int) -> np.ndarray:
    """``count`` token ids (< 10^18, as the C reads them) that the C's duplicate check hashes to one
    slot (select_top_k's multiplicative hash of a table for ``count`` ids), so it must fall back
    from the table to sorting."""
    bits = max(4, int(np.ceil(np.log2(2 * count))))
    inverse = pow(0x9E3779B97F4A7C15, -1, 2**64)  # id * multiplier = t: the top bits of t are 0
    t = np.arange(1, 40 * count, dtype=np.uint64) << np.uint64(2)
    with np.errstate(over="ignore"):
        ids = t * np.uint64(inverse)
    ids = ids[ids < np.uint64(10**18)][:count]
    assert len(ids) == count and (ids.astype(object) * 0x9E3779B97F4A7C15 % 2**64 >> (64 - bits) == 0).all()
    return ids.astype(np.int64)


@functools.cache
def hostile_answers() -> dict[str, Answer]:
    """What a hostile or broken endpoint answers (issue 61's list), for one request: each must be an
    EndpointAnswerError (or, where it is an answer after all, rows) in linear time, the compiled
    and the Python reader alike."""
    two = [ScoreRow(np.array([5, 7]), np.array([1]))]
    valid = _choice('{"7":{"logprob":-0.25,"rank":1}}', '"prompt_token_ids":[5,7],')
    wide_ids = colliding_ids(100_000)
    wide = '"7":{"logprob":-200},' + ",".join(
        f'"{i}":{{"logprob":{-(len(wide_ids) - j) / 1000}}}' for j, i in enumerate(wide_ids.tolist())
    )
    return {
        "truncated JSON": Answer(valid[: len(valid) // 2], two, 1),
        "10,000 empty positions": Answer(
            _choice(",".join(["{}"] * 10_000)), [ScoreRow(np.arange(10_001) % 50, np.array([1, 5000]))], 1
        ),
        "duplicate keys": Answer(valid.replace(b'"index":0,', b'"index":0,"index":1,'), two, 1),
        "nesting past 64": Answer(_choice("[" * 100 + "]" * 100), two, 1),
        "nesting 100,000 deep": Answer(
            valid.replace(b'"choices"', b'"x":' + b"[" * 100_000 + b"]" * 100_000 + b',"choices"'), two, 1
        ),
        "1e999999": Answer(_choice('{"7":{"logprob":-1e999999,"rank":1}}'), two, 1),
        # the ids a request carries are < 2^31: the token there is 7, the other ids collide
        "100k-entry position": Answer(_choice("{" + wide + "}"), two, 20),
    }
