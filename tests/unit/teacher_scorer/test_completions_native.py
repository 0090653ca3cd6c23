"""The codec's compiled writer and reader (completions_kernels.c) against the Python codec: the same
text out, the same rows in, and every answer the C reader does not take read in Python instead."""

import dataclasses
import json
import logging
import re
from pathlib import Path

import numpy as np
import pydantic_core
import pytest

from services.native_build import NativeBuildError
from services.teacher_scorer import completions_native
from services.teacher_scorer.completions_codec import (
    EndpointAnswerError,
    completion_json,
    python_scores_from_completion,
    scores_from_completion,
)
from services.teacher_scorer.completions_native import (
    CODEC_SOURCE,
    available_codec_kernels,
    codec_kernels,
    disagreements,
    load_codec_kernels,
)
from services.teacher_scorer.engine import RowScores, ScoreRow

FIELDS = ("top_ids_P_K", "top_logprobs_P_K", "token_logprob_P", "entropy_P")


def _same_rows(ours, theirs):
    assert len(ours) == len(theirs)
    for mine, other in zip(ours, theirs, strict=True):
        for field in FIELDS:
            np.testing.assert_array_equal(getattr(mine, field), getattr(other, field), err_msg=field)


def _random_scores(rng, prompts, k, logprobs):
    """Scores of every position of each prompt, log-probs drawn by ``logprobs(shape)``."""
    scores = []
    for prompt in prompts:
        n = len(prompt) - 1
        top_ids = rng.integers(0, 2**40, size=(n, k))
        token_lp = logprobs((n,)).astype(np.float32)
        scores.append(RowScores(top_ids, logprobs((n, k)).astype(np.float32), token_lp, token_lp))
    return scores


def _envelope_free(body: bytes) -> bytes:
    return body[body.index(b'"choices"') :]  # the id and the time differ between two answers


def test_the_writer_writes_the_python_writers_text_for_every_float32(codec_kernels_built):
    """Random bit patterns (every magnitude down to subnormals, both zeros) and log-prob-like values:
    byte for byte the text ``%.9g`` writes, so every float32 comes back exactly."""
    rng = np.random.default_rng(3)

    def bit_patterns(shape):
        bits = rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)
        values = bits.view(np.float32).copy()
        values[~np.isfinite(values)] = -0.0
        return values

    for draw in (bit_patterns, lambda shape: -(10.0 ** rng.uniform(-12, 6, size=shape))):
        prompts = [rng.integers(0, 2**40, size=n).tolist() for n in (1500, 2, 900)]
        scores = _random_scores(rng, prompts, 20, draw)
        scores[0].top_ids_P_K[5, 3] = prompts[0][6]  # the token there inside the top-K
        python = completion_json(prompts, scores, "m")
        compiled = completion_json(prompts, scores, "m", codec_kernels_built)
        assert _envelope_free(compiled) == _envelope_free(python)
        answer = json.loads(compiled)
        written = [float(e["logprob"]) for e in answer["choices"][0]["prompt_logprobs"][1].values()]
        assert np.array_equal(np.float32(written[:20]), scores[0].top_logprobs_P_K[0])


def test_a_log_prob_that_is_not_finite_is_written_as_the_python_writer_writes_it(codec_kernels_built):
    prompts = [[1, 2, 3]]
    lps = np.array([[-0.5, np.nan], [-1.0, -2.0]], dtype=np.float32)
    scores = [RowScores(np.array([[2, 4], [3, 5]]), lps, np.array([-0.5, -1.0], np.float32), lps[:, 0])]
    assert codec_kernels_built.positions_json(np.array(prompts[0]), scores[0]) is None
    assert _envelope_free(completion_json(prompts, scores, "m", codec_kernels_built)) == _envelope_free(
        completion_json(prompts, scores, "m")
    )


def _vllm_answer(rng, prompts, k, indent=None, extra=True):
    """What vLLM writes: every position's top-K with ranks and decoded text (with quotes, backslashes,
    non-ASCII), the token there with its true rank, 17-digit log-probs; keys in its order."""
    texts = ['"', "\\", "é", "日本", "\n", "\u2028", "a b", "\U0001f600", "</s>"]
    choices = []
    for index, prompt in enumerate(prompts):
        positions = [None]
        for token in prompt[1:]:
            ids = rng.choice(200, size=k, replace=False).tolist()
            lps = np.sort(-rng.exponential(3.0, size=k))[::-1].tolist()
            entries = {
                str(t): {"logprob": lp, "rank": r + 1, "decoded_token": texts[(t + r) % len(texts)]}
                for r, (t, lp) in enumerate(zip(ids, lps, strict=True))
            }
            if str(token) not in entries:
                entries[str(token)] = {"logprob": lps[-1] - 1.5, "rank": int(rng.integers(k + 1, 900))}
            positions.append(entries)
        choice = {"index": index, "text": "", "logprobs": None, "finish_reason": "length"}
        choice |= {"prompt_logprobs": positions, "prompt_token_ids": prompt}
        if extra:
            choice["stop_reason"] = None
        choices.append(choice)
    answer = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": choices}
    answer["usage"] = {
        "prompt_tokens": 3,
        "total_tokens": 3,
        "completion_tokens": 0,
        "prompt_tokens_details": None,
    }
    return json.dumps(answer, indent=indent, ensure_ascii=False).encode()


@pytest.mark.parametrize("indent", [None, 2])
def test_the_reader_reads_vllm_shaped_answers_as_python_does(codec_kernels_built, indent):
    rng = np.random.default_rng(5)
    prompts = [rng.integers(0, 200, size=n).tolist() for n in (40, 3, 25)]
    body = _vllm_answer(rng, prompts, 6, indent=indent)
    rows = [ScoreRow(np.array(p), np.arange(len(p) // 3, len(p))) for p in prompts]
    rows[1] = ScoreRow(rows[1].token_ids_T, np.arange(0))  # a row that scores nothing
    assert codec_kernels_built.parse(body) is not None
    compiled = codec_kernels_built.read(body, rows, 5)
    assert compiled is not None
    _same_rows(compiled, python_scores_from_completion(body, rows, 5))


def test_the_reader_reads_numbers_correctly_rounded(codec_kernels_built):
    """Every JSON number form, read as the Python reader reads it then makes it a float (bit for
    bit, in double)."""
    rng = np.random.default_rng(9)
    texts = ["-0", "-0.0", "0", "-1", "-1e2", "-1E-2", "-0.000001", "-1.5e+3", "-12345678901234567.0"]
    texts += ["-9007199254740992", "-0.10000000000000001", "-9007199254740993.0", "-1.7976931348623157e308"]
    texts += ["-5e-324", "-2.5e-320"]
    texts += [repr(-float(x)) for x in 10.0 ** rng.uniform(-30, 30, size=300)]
    texts += [
        f"-{rng.integers(1, 10**9)}.{rng.integers(0, 10**9):09d}e{rng.integers(-40, 40)}" for _ in range(300)
    ]
    texts += [f"{-float(np.float32(x))!r}" for x in rng.exponential(5.0, size=300)]
    positions = ",".join(f'{{"{i}":{{"logprob":{t}}}}}' for i, t in enumerate(texts))
    body = f'{{"choices":[{{"index":0,"prompt_logprobs":[null,{positions}]}}]}}'.encode()
    parsed = codec_kernels_built.parse(body)
    assert parsed is not None
    want = np.array([float(pydantic_core.from_json(t)) for t in texts])  # "-0": the int 0, so 0.0
    assert parsed.entry_lp_E.view(np.int64).tolist() == want.view(np.int64).tolist()
    assert parsed.entry_id_E.tolist() == list(range(len(texts)))


REFUSED = {
    "truncated": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-0.5}}]}',
    "trailing text": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-0.5}}]}]} x',
    "NaN": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":NaN}}]}]}',
    "a plus sign": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":+0.5}}]}]}',
    "a leading zero": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-01}}]}]}',
    "no digit after the point": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1.}}]}]}',
    "a raw control character": b'{"choices":[{"index":0,"x":"a\x01","prompt_logprobs":[null,{"7":{"logprob":-1}}]}]}',
    "invalid UTF-8": b'{"choices":[{"index":0,"x":"\xc3\x28","prompt_logprobs":[null,{"7":{"logprob":-1}}]}]}',
    "a lone surrogate": b'{"choices":[{"index":0,"x":"\\ud800","prompt_logprobs":[null,{"7":{"logprob":-1}}]}]}',
    "an escaped key it reads": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1,"r\\u0061nk":9}}]}]}',
    "a duplicate log-prob": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1,"logprob":-2}}]}]}',
    "a token id with a sign": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"+7":{"logprob":-1}}]}]}',
    "a 19-digit index": b'{"choices":[{"index":1000000000000000000,"prompt_logprobs":[null]}]}',
    # Python keeps it exact, where a double rounds it (and ties it with its neighbours)
    "an integer log-prob past 2^53": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-9007199254740993}}]}]}',
    "an entry that is not an object": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":-1}]}]}',
    "no index": b'{"choices":[{"prompt_logprobs":[null,{"7":{"logprob":-1}}]}]}',
    "a lone low surrogate": b'{"choices":[{"index":0,"x":"\\udc00","prompt_logprobs":[null,{"7":{"logprob":-1}}]}]}',
    "a high surrogate without its low half": b'{"choices":[{"index":0,"x":"\\ud83d\\u0041","prompt_logprobs":[null]}]}',
    # Python refuses it where it is read (it overflows a float), with an EndpointAnswerError
    "an integer log-prob past a float's range": b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1'
    + b"0" * 400
    + b"}}]}]}",
    "deep nesting": b'{"choices":[{"index":0,"x":'
    + b"[" * 100
    + b"]" * 100
    + b',"prompt_logprobs":[null]}]}',
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_reader_refuses_is_read_in_python(codec_kernels_built, case):
    """The C reader refuses what it cannot read exactly as Python would; the codec then gives the
    Python reader's rows or its error."""
    body = REFUSED[case]
    assert codec_kernels_built.parse(body) is None
    row = [ScoreRow(np.array([5, 7]), np.array([1]))]
    try:
        expected = python_scores_from_completion(body, row, 1)
    except EndpointAnswerError as exc:
        with pytest.raises(EndpointAnswerError, match=re.escape(str(exc))):
            scores_from_completion(body, row, 1, codec_kernels_built)
    else:
        _same_rows(scores_from_completion(body, row, 1, codec_kernels_built), expected)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_log_prob_past_float32s_range_is_refused_as_python_refuses_it(codec_kernels_built):
    """-1e300 is a finite double but no finite float32: Python's reader refuses it where it is
    read, so the C must not return its -inf."""
    body = b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1e300},"8":{"logprob":-1}}]}]}'
    row = [ScoreRow(np.array([5, 7]), np.array([1]))]
    assert codec_kernels_built.read(body, row, 1) is None  # the token's log-prob
    assert codec_kernels_built.read(body, row, 2) is None  # and a top-K one
    with pytest.raises(EndpointAnswerError, match="prompt 0: a log-prob that is not finite"):
        scores_from_completion(body, row, 2, codec_kernels_built)
    unread = b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1},"8":{"logprob":-1e300}}]}]}'
    (scores,) = codec_kernels_built.read(unread, row, 1)  # an entry no row reads is no matter
    assert scores.top_ids_P_K.tolist() == [[7]]


def test_an_integer_log_prob_reads_as_the_python_readers_float(codec_kernels_built):
    """``-0`` is the integer 0 to Python (so 0.0, not -0.0); integers up to 2^53 are read exactly."""
    body = b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-0},"8":{"logprob":-9007199254740992}}]}]}'
    row = [ScoreRow(np.array([5, 7]), np.array([1]))]
    (compiled,) = codec_kernels_built.read(body, row, 2)
    (python,) = python_scores_from_completion(body, row, 2)
    assert compiled.top_logprobs_P_K.tobytes() == python.top_logprobs_P_K.tobytes()
    assert compiled.token_logprob_P.tobytes() == np.float32([0.0]).tobytes()


def test_surrogate_pairs_are_read_by_the_c(codec_kernels_built):
    """``json.dumps`` writes a character past U+FFFF as an escaped pair: the C reads it, not Python."""
    text = json.dumps({"decoded_token": "\U0001f600 😀"})[1:-1]
    body = f'{{"choices":[{{"index":0,"prompt_logprobs":[null,{{"7":{{"logprob":-1,{text}}}}}]}}]}}'.encode()
    assert b"\\ud83d\\ude00" in body
    row = [ScoreRow(np.array([5, 7]), np.array([1]))]
    compiled = codec_kernels_built.read(body, row, 1)
    assert compiled is not None
    _same_rows(compiled, python_scores_from_completion(body, row, 1))


def _filled(kind: str, n: int) -> tuple[bytes, tuple[int, int, int, int]]:
    """The densest answer of ``n`` items of one kind, and the counts parse_answer must give."""
    match kind:
        case "empty positions":
            return b'{"choices":[{"index":0,"prompt_logprobs":[' + b",".join([b"{}"] * n) + b"]}]}", (
                1,
                n,
                0,
                0,
            )
        case "entries":
            entries = b",".join(b'"%d":{"logprob":0}' % (i % 10) for i in range(n))
            return b'{"choices":[{"index":0,"prompt_logprobs":[{' + entries + b"}]}]}", (1, 1, n, 0)
        case "tokens":
            tokens = b",".join([b"0"] * n)
            return b'{"choices":[{"index":0,"prompt_logprobs":[],"prompt_token_ids":[' + tokens + b"]}]}", (
                1,
                0,
                0,
                n,
            )
        case "choices":
            return b'{"choices":[' + b",".join([b'{"index":0,"prompt_logprobs":[]}'] * n) + b"]}", (
                n,
                0,
                0,
                0,
            )
        case _:
            raise ValueError(kind)


@pytest.mark.parametrize("kind", ["empty positions", "entries", "tokens", "choices"])
@pytest.mark.parametrize("n", [1, 2, 10_000])
def test_the_densest_answer_of_each_kind_fits_the_buffers(codec_kernels_built, kind, n):
    """Buffers sized from the answer's bytes hold the most items any answer that long can have: an
    answer of 10,000 empty positions (30 KB) once filled them (an AssertionError, no resume hint)."""
    body, counts = _filled(kind, n)
    parsed = codec_kernels_built.parse(body)
    assert parsed is not None
    got = (len(parsed.choice_C_5), len(parsed.position_Q_2), len(parsed.entry_id_E), len(parsed.token_T))
    assert got == counts


def test_an_answer_of_empty_positions_is_an_endpoint_answer_error(codec_kernels_built):
    body, _ = _filled("empty positions", 10_000)  # no prompt_token_ids
    row = [ScoreRow(np.arange(10_000) % 7, np.array([1]))]
    with pytest.raises(EndpointAnswerError, match="prompt 0, position 1: 0 log-probs, fewer than top_k = 1"):
        scores_from_completion(body, row, 1, codec_kernels_built)


def _row_scores(n: int = 3, k: int = 2) -> RowScores:
    lps = -np.arange(1, n * k + 1, dtype=np.float32).reshape(n, k)
    return RowScores(np.arange(n * k).reshape(n, k), lps, lps[:, -1] - 1, lps[:, 0])


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        (
            "top_logprobs_P_K",
            np.zeros((3, 1), np.float32),
            ValueError,
            r"scores.top_logprobs_P_K has shape \(3, 1\)",
        ),
        (
            "top_logprobs_P_K",
            np.zeros((3, 2)),
            TypeError,
            "scores.top_logprobs_P_K has dtype float64, the codec's C reads float32",
        ),
        ("token_logprob_P", np.zeros(2, np.float32), ValueError, r"scores.token_logprob_P has shape \(2,\)"),
        ("token_logprob_P", np.zeros(3, np.float16), TypeError, "scores.token_logprob_P has dtype float16"),
        (
            "top_ids_P_K",
            np.zeros((3, 2)),
            TypeError,
            "scores.top_ids_P_K has dtype float64, the codec's C reads integers",
        ),
        ("top_ids_P_K", np.zeros(6, np.int64), ValueError, r"scores.top_ids_P_K has 1 dimension\(s\)"),
        (
            "top_ids_P_K",
            np.zeros((2, 2), np.int64),
            ValueError,
            "scores.top_ids_P_K has 2 positions, prompt_T 4 tokens",
        ),
    ],
)
def test_the_writers_arguments_are_checked_naming_the_argument(
    codec_kernels_built, field, value, error, message
):
    """Each size and type the C relies on: a top-K of log-probs narrower than the ids' would be read
    past its end, a float64 one written otherwise than the Python writer writes it."""
    scores = dataclasses.replace(_row_scores(), **{field: value})
    with pytest.raises(error, match=message):
        codec_kernels_built.positions_json(np.array([1, 2, 3, 4]), scores)
    with pytest.raises(TypeError, match="prompt_T has dtype float64, the codec's C reads integers"):
        codec_kernels_built.positions_json(np.array([1.0, 2.0, 3.0, 4.0]), _row_scores())


def _parsed(kernels):
    body = b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1},"8":{"logprob":-2}}]}]}'
    return kernels.parse(body)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"at_P": np.array([2])}, ValueError, r"at_P holds positions in \[2, 2\], parsed.position_Q_2 2"),
        ({"at_P": np.array([-1])}, ValueError, r"at_P holds positions in \[-1, -1\]"),
        ({"at_P": np.array([1.0])}, TypeError, "at_P has dtype float64"),
        ({"token_P": np.array([7, 7])}, ValueError, r"token_P has shape \(2,\), at_P \(1,\)"),
        ({"top_k": -1}, ValueError, "top_k = -1, not >= 0"),
        (
            {"entry_lp_E": np.zeros(2, np.float32)},
            TypeError,
            "parsed.entry_lp_E has dtype float32, the codec's C reads float64",
        ),
        ({"entry_rank_E": np.zeros(1, np.int64)}, ValueError, r"entry_rank_E \(1,\) \(want one length\)"),
        ({"position_Q_2": np.array([[0, -1], [1, 2]])}, ValueError, "names entries outside the 2 parsed"),
        (
            {"position_Q_2": np.zeros((2, 2))},
            TypeError,
            "parsed.position_Q_2 has dtype float64, the codec's C reads int64",
        ),
    ],
)
def test_the_selections_arguments_are_checked_naming_the_argument(
    codec_kernels_built, change, error, message
):
    """Each size the C relies on, before it reads: a position past the parsed ones, entries past the
    parsed entries, a token per position, the arrays' types."""
    parsed = _parsed(codec_kernels_built)
    call = {"at_P": np.array([1]), "token_P": np.array([7]), "top_k": 1}
    fields = {k: v for k, v in change.items() if k not in call}
    call |= {k: v for k, v in change.items() if k in call}
    with pytest.raises(error, match=message):
        codec_kernels_built.select_top_k(dataclasses.replace(parsed, **fields), **call)
    top_ids, top_lps, token_lp = codec_kernels_built.select_top_k(parsed, np.array([1]), np.array([7]), 1)
    assert (top_ids.tolist(), top_lps.tolist(), token_lp.tolist()) == ([[7]], [[-1.0]], [-1.0])


def test_the_reader_takes_bytes_or_text_only(codec_kernels_built):
    with pytest.raises(TypeError, match="parse: body is bytearray, not bytes or str"):
        codec_kernels_built.parse(bytearray(b'{"choices":[]}'))


def test_answers_it_parses_but_python_reads_otherwise_fall_back(codec_kernels_built):
    """A duplicate token id (Python keeps the last), a float rank (ignored), tokens sent back as
    floats: the rows come from the Python reader."""
    duplicate = b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1},"7":{"logprob":-2}}]}]}'
    row = [ScoreRow(np.array([5, 7]), np.array([1]))]
    assert codec_kernels_built.parse(duplicate) is not None
    assert codec_kernels_built.read(duplicate, row, 1) is None
    (scores,) = scores_from_completion(duplicate, row, 1, codec_kernels_built)
    assert scores.token_logprob_P.tolist() == [-2.0]
    float_rank = b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1,"rank":9.0}}]}]}'
    (scores,) = scores_from_completion(float_rank, row, 1, codec_kernels_built)
    assert scores.top_ids_P_K.tolist() == [[7]]
    as_floats = (
        b'{"choices":[{"index":0,"prompt_logprobs":[null,{"7":{"logprob":-1}}],"prompt_token_ids":[5.0,7]}]}'
    )
    assert codec_kernels_built.parse(as_floats) is None
    (scores,) = scores_from_completion(as_floats, row, 1, codec_kernels_built)
    assert scores.top_ids_P_K.tolist() == [[7]]


def test_a_library_that_writes_or_reads_otherwise_fails_its_check(codec_kernels_built, monkeypatch):
    assert disagreements(codec_kernels_built) == []
    monkeypatch.setattr(type(codec_kernels_built), "positions_json", lambda self, prompt, scores: b"[null]")
    monkeypatch.setattr(type(codec_kernels_built), "read", lambda self, body, rows, k: None)
    failures = disagreements(codec_kernels_built)
    assert failures == [
        "positions_json writes other text than the Python writer",
        "read refused an answer the Python reader takes",
    ]


def test_the_library_is_cached_per_source_flags_and_cpu(tmp_path: Path):
    built = load_codec_kernels(tmp_path)
    assert built.path == CODEC_SOURCE.library_path(tmp_path) and built.path.parent == tmp_path / "kernels"
    assert built.path.name.startswith("completions-") and built.path.exists()
    assert load_codec_kernels(tmp_path).path == built.path  # found, not built again
    assert sorted(p.name for p in (tmp_path / "kernels").iterdir()) == [
        built.path.name,
        built.path.name + ".sha256",
    ]


def test_without_a_compiler_the_codec_stays_in_python_and_says_why_once(tmp_path: Path, monkeypatch, caplog):
    monkeypatch.setenv("CC", "no-such-compiler-here")
    monkeypatch.setenv("TURNOPD_CACHE_DIR", str(tmp_path))
    available_codec_kernels.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=completions_native.__name__):
            assert codec_kernels(True) is None
            assert codec_kernels(True) is None
        warnings = [r.getMessage() for r in caplog.records]
        assert (
            len(warnings) == 1 and "no C compiler (no-such-compiler-here is not on the PATH)" in warnings[0]
        )
        assert codec_kernels(False) is None
    finally:
        available_codec_kernels.cache_clear()


def test_a_failing_build_says_so_and_leaves_no_library(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CC", "false")  # exits 1 without output
    with pytest.raises(NativeBuildError, match=r"could not build completions_kernels.c \(exit 1\)"):
        load_codec_kernels(tmp_path)
    assert list((tmp_path / "kernels").iterdir()) == []
