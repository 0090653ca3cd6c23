"""The endpoint client against a hostile teacher endpoint: a real HTTP server on a loopback port
that answers broken JSON, answers built to crash or stall a reader, a gigabyte body, a slow drip
or a dropped connection. Each call ends, in bounded time and memory, in an EndpointAnswerError
naming what is wrong (or the retry path's TeacherHttpError), with the resume hint; the compiled and
the Python reader say the same."""

import asyncio
import contextlib
import re
import socket
import socketserver
import threading
import tracemalloc
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import numpy as np
import pytest
from codec_answers import assert_same_rows, colliding_ids, hostile_answers

from services.settings.teacher import TeacherSettings
from services.teacher_scorer.completions_codec import EndpointAnswerError, python_scores_from_completion
from services.teacher_scorer.endpoint_client import EndpointTeacherClient, endpoint_client
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.http_client import TeacherHttpError
from services.teacher_scorer.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=3, backoff_s=0.001, max_backoff_s=0.001)
GUARD_S = 20.0  # a call still running after this fails the test (rather than hang it)
GIGABYTE = 10**9
RESUME = "continue it with `turnopd train --resume <run_dir>`"
T = TypeVar("T")


class HostileServer(socketserver.ThreadingTCPServer):
    """Answers ``/<case>/...`` as ``cases[case]`` says, counting the requests and bytes it sent."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.cases: dict[str, Callable[[socket.socket], None]] = {}
        self.requests: dict[str, int] = {}
        self.sent: dict[str, int] = {}
        self.stop = threading.Event()

    def url(self, case: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{case}"


class _Handler(socketserver.BaseRequestHandler):
    server: HostileServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(GUARD_S)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(65536)
            if not chunk:
                return
            head += chunk
        request_line, _, rest = head.partition(b"\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in rest.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        body = head.split(b"\r\n\r\n", 1)[1]
        while len(body) < length:
            body += sock.recv(65536)
        case = request_line.split(b" ")[1].decode().split("/")[1]
        self.server.requests[case] = self.server.requests.get(case, 0) + 1
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, TimeoutError):
            self.server.cases[case](sock)  # (the client hanging up is what a bounded client does)


def _send(server: HostileServer, case: str, sock: socket.socket, data: bytes) -> None:
    # counted first: the client may be done (and the test read the count) before sendall returns
    server.sent[case] = server.sent.get(case, 0) + len(data)
    sock.sendall(data)


def _answer(body: bytes) -> Callable[[socket.socket], None]:
    head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    return lambda sock: sock.sendall(head.encode() + body)


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    server = HostileServer()
    for name, answer in hostile_answers().items():
        server.cases[name.replace(" ", "-")] = _answer(answer.body)

    def endless(case: str, declared: bool) -> Callable[[socket.socket], None]:
        framing = f"content-length: {GIGABYTE}" if declared else "transfer-encoding: chunked"

        def send(sock: socket.socket) -> None:
            _send(server, case, sock, f"HTTP/1.1 200 OK\r\n{framing}\r\n\r\n".encode())
            chunk = b" " * 65536
            frame = chunk if declared else f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
            for _ in range(GIGABYTE // len(chunk)):  # streamed: a gigabyte is never held
                if server.stop.is_set():
                    return
                _send(server, case, sock, frame)

        return send

    def drip(sock: socket.socket) -> None:
        _send(server, "drip", sock, b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n{")
        while not server.stop.wait(0.02):
            _send(server, "drip", sock, b" ")

    def drop_before_answering(sock: socket.socket) -> None:
        sock.close()

    def drop_mid_answer(sock: socket.socket) -> None:
        sock.sendall(b'HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n{"choices":[')
        sock.close()

    server.cases |= {
        "declared-gigabyte": endless("declared-gigabyte", declared=True),
        "chunked-gigabyte": endless("chunked-gigabyte", declared=False),
        "drip": drip,
        "drop-before-answering": drop_before_answering,
        "drop-mid-answer": drop_mid_answer,
    }
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.stop.set()
    server.shutdown()
    server.server_close()


def _guarded(call: Coroutine[Any, Any, T]) -> T:
    """``call`` run to its end, or TimeoutError after GUARD_S."""

    async def guarded() -> T:
        return await asyncio.wait_for(call, GUARD_S)

    return asyncio.run(guarded())


BROKEN = {
    "truncated-JSON": r"the endpoint's answer is not JSON \(EOF while parsing",
    "10,000-empty-positions": r"prompt 0, position 1: 0 log-probs, fewer than top_k = 1",
    "duplicate-keys": r"the endpoint answered choices \[1\] for 1 prompts",
    "nesting-past-64": r"prompt 0, position 1: not a map of token ids to \{'logprob': ...\}",
    "nesting-100,000-deep": r"the endpoint's answer is not JSON \(recursion limit exceeded",
    "1e999999": r"prompt 0: a log-prob that is not finite",
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_answer_is_an_endpoint_answer_error_alike_from_both_readers(
    hostile, codec_kernels_built, case
):
    answer = hostile_answers()[case.replace("-", " ")]
    messages = []
    for codec in (None, codec_kernels_built):
        client = EndpointTeacherClient(hostile.url(case), None, policy=FAST, timeout_s=10.0, codec=codec)
        with pytest.raises(EndpointAnswerError) as caught:  # within GUARD_S, else a TimeoutError
            _guarded(client.score_rows(answer.rows, answer.top_k))
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith(
        f"the teacher endpoint {hostile.url(case)}/v1/completions gave an answer the run"
    )
    assert re.search(BROKEN[case], messages[0]) and messages[0].endswith(RESUME)
    assert hostile.requests[case] == 2  # one each: an answer is not sent again


def test_a_100k_entry_position_is_read_in_n_log_n_alike(hostile, codec_kernels_built):
    """One position of 100,000 entries, the worst order for the old insertion sort and ids that
    all hash to one slot of the duplicate check: the C reads it (today's quadratic check and sort
    took seconds; its time is bench/codec_fuzz.py's) into the Python reader's rows."""
    answer = hostile_answers()["100k-entry position"]
    compiled = codec_kernels_built.read(answer.body, answer.rows, answer.top_k)
    assert compiled is not None
    expected = python_scores_from_completion(answer.body, answer.rows, answer.top_k)
    assert_same_rows(compiled, expected)
    ids = colliding_ids(100_000)  # log-probs -100 (the first) up to -0.001 (the last), after 7's
    assert compiled[0].top_ids_P_K[0].tolist() == ids[::-1][:20].tolist()
    assert (
        compiled[0].top_logprobs_P_K[0].tolist()
        == np.array([-k / 1000 for k in range(1, 21)], np.float32).tolist()
    )
    client = EndpointTeacherClient(
        hostile.url("100k-entry-position"), None, policy=FAST, codec=codec_kernels_built
    )
    assert_same_rows(_guarded(client.score_rows(answer.rows, answer.top_k)), expected)


@pytest.mark.parametrize("case", ["declared-gigabyte", "chunked-gigabyte"])
def test_a_gigabyte_answer_is_cut_at_the_cap_without_holding_it(hostile, case):
    """The server streams a gigabyte (announced, or chunked without a length); the client stops at
    its cap: the error names the cap and its setting, little was sent, less was held."""
    row = [ScoreRow(np.array([5, 7]), np.array([1]))]
    client = EndpointTeacherClient(hostile.url(case), None, policy=FAST, max_answer_bytes=4 * 2**20)
    tracemalloc.start()
    try:
        with pytest.raises(EndpointAnswerError) as caught:
            _guarded(client.score_rows(row, 1))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    hostile.stop.set()
    message = str(caught.value)
    if case == "declared-gigabyte":
        assert f"it announced an answer of {GIGABYTE} bytes, over the cap of {4 * 2**20}" in message
    else:
        assert f"its answer went past the cap of {4 * 2**20} bytes" in message
    assert "[teacher] endpoint_max_answer_mb" in message and RESUME in message
    assert peak < 32 * 2**20, peak
    assert hostile.sent[case] < 64 * 2**20, hostile.sent[case]
    assert hostile.requests[case] == 1


def test_the_cap_is_the_settings(hostile):
    teacher = TeacherSettings(endpoint_url=hostile.url("chunked-gigabyte"), endpoint_max_answer_mb=1)
    client = endpoint_client(teacher, 1, {})
    with pytest.raises(EndpointAnswerError, match=f"its answer went past the cap of {2**20} bytes"):
        _guarded(client.score_rows([ScoreRow(np.array([5, 7]), np.array([1]))], 1))


def test_a_slow_drip_is_stopped_by_the_deadline_of_the_whole_answer(hostile):
    """A byte every 20 ms never trips a per-read timeout; the deadline counts the whole answer."""
    client = EndpointTeacherClient(hostile.url("drip"), None, policy=FAST, timeout_s=1.0)
    with pytest.raises(TeacherHttpError) as caught:  # a per-read timeout never trips: GUARD_S would
        _guarded(client.score_rows([ScoreRow(np.array([5, 7]), np.array([1]))], 1))
    assert str(caught.value) == (
        f"the teacher endpoint {hostile.url('drip')}/v1/completions did not answer in full within 1 s (connect "
        "to the answer's last byte: [teacher] endpoint_timeout_s); the run stops here: once the endpoint "
        "answers again, continue it with `turnopd train --resume <run_dir>`"
    )
    assert hostile.requests["drip"] == 1  # a resend would wait as long again
    assert hostile.sent["drip"] > 45 + 10  # after its 45 bytes of head it dripped all along (~50 a second)
    assert hostile.sent["drip"] < 45 + 100_000 // 10  # and was cut off long before its announced length


@pytest.mark.parametrize("case", ["drop-before-answering", "drop-mid-answer"])
@pytest.mark.parametrize("call", ["score_rows", "limits"])
def test_a_dropped_connection_is_retried_then_stops_with_the_resume_hint(hostile, case, call):
    """Retried as a restarting server is, then the run stops saying how to resume, for the scoring
    call and for the start-up question of the endpoint's context alike."""
    client = EndpointTeacherClient(hostile.url(case), None, policy=FAST)
    request = (
        client.score_rows([ScoreRow(np.array([5, 7]), np.array([1]))], 1)
        if call == "score_rows"
        else client.limits()
    )
    with pytest.raises(
        TeacherHttpError, match=r"failed 3 times, last with RemoteProtocolError: .*" + re.escape(RESUME)
    ):
        _guarded(request)
    assert hostile.requests[case] == 3 and client.retries == 2
