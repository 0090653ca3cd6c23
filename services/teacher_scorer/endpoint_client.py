"""A teacher reached as an OpenAI-compatible server (vLLM, SGLang, or our own app) that returns prompt
log-probs: ``POST {base_url}/v1/completions`` with the rows' token ids and ``prompt_logprobs = K``.

It offers the orchestrator what the Serve handle client does (``score_rows``), so the step does not
know which kind of teacher it talks to. Every call opens its own connection pool: an
``httpx.AsyncClient`` must not outlive the loop it was used in, and a client is used from more
than one (the driver's step loop; the start-up checks' ``asyncio.run``, ``preflight``).

A down, overloaded or rate-limited server (connection refused or dropped, 5xx, 429) is retried with
bounded back-off, a 429's ``Retry-After`` honoured; scoring is a pure function of its input, so a
resend is safe. When the attempts are spent the run stops with an error saying how to resume it.

The server is not trusted: each request has a deadline for the whole exchange (connect to the
answer's last byte, ``[teacher] endpoint_timeout_s``) and a cap on the answer's bytes
(``endpoint_max_answer_mb``), both ``bounded_answer``'s; either stops the run with the resume hint
(a resend would wait as long, or read as much, again). An answer that is not what was asked for
(not JSON, positions missing, a log-prob that is not finite) is an ``EndpointAnswerError`` saying
what is wrong, with the same hint; its readers, compiled or Python, take linear time in its bytes
(the compiled one O(e log e) for a position of e entries).
"""

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence

import httpx
import numpy as np
import pydantic
import pydantic_core

from services.contracts.completions import CompletionRequest, CompletionResponse
from services.contracts.teacher import TeacherContext
from services.errors import ConfigError, InputError
from services.http_client import tls_context
from services.service_auth import auth_headers
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.bounded_answer import BoundedAnswer, bounded_request
from services.teacher_scorer.completions_codec import (
    EndpointAnswerError,
    completion_request,
    scores_from_completion,
)
from services.teacher_scorer.completions_native import CodecKernels, codec_kernels
from services.teacher_scorer.engine import RowScores, ScoreRow
from services.teacher_scorer.http_client import RETRYABLE_ERRORS, TeacherHttpError, error_detail
from services.teacher_scorer.retry import RetryPolicy
from services.teacher_scorer.token_probe import StudentTokens, tokenizer_mismatch

log = logging.getLogger(__name__)

# The longest Retry-After honoured: a server asking for more is asked again sooner.
MAX_RETRY_AFTER_S = 60.0
# [teacher] endpoint_max_answer_mb's default: at K = 50 an answer is ~2.4 KB per position.
DEFAULT_MAX_ANSWER_BYTES = 1024 * 2**20
RESUME_HINT = (
    "the run stops here: once the endpoint answers again, continue it with `turnopd train --resume <run_dir>`"
)
# How servers name their cap on K: vLLM ("... greater than max allowed: 20") and our app
# ("top_k must be in [1, 512]").
_CAP_PATTERNS = (
    re.compile(r"greater than max allowed:?\s*(\d+)"),
    re.compile(r"top_k must be in \[1, (\d+)\]"),
)


class TopKAboveCapError(ConfigError):
    """The endpoint returns fewer log-probs per position than the run's top-K."""


class TokenizerMismatchError(ConfigError):
    """The endpoint does not tokenise as the student does."""


class EndpointTeacherClient:
    """Scores rows through an OpenAI-compatible ``/v1/completions`` (``model``: its served model name;
    ``api_key``: sent as a bearer token; ``timeout_s``: the deadline of one request, connect to the
    answer's last byte; ``max_answer_bytes``: the cap on one answer; ``codec``: the compiled reader of
    its answers, None: Python's)."""

    def __init__(
        self,
        base_url: str,
        model: str | None,
        *,
        api_key: str | None = None,
        default_top_k: int = 50,
        policy: RetryPolicy | None = None,
        timeout_s: float = 300.0,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
        max_context: int | None = None,
        codec: CodecKernels | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/v1/completions"
        self.model = model
        self._headers = {"content-type": "application/json"} | auth_headers(api_key)
        self.sleep = asyncio.sleep  # the back-off's wait (a test records it instead)
        self._default_top_k = default_top_k
        self._policy = policy or RetryPolicy()
        self._timeout_s = timeout_s
        self._max_answer_bytes = max_answer_bytes
        self._transport = transport
        self.retries = 0  # attempts that failed and were sent again, over this client's life
        self._max_context = max_context  # None: asked of the server's /v1/models once
        self._codec = codec  # the answers' compiled reader (None: Python's)

    async def limits(self) -> TeacherContext:
        """The longest sequence the endpoint scores: ``max_context`` if given, else its model's
        ``max_model_len`` (from ``GET /v1/models``, vLLM) less the one token it generates."""
        if self._max_context is None:
            self._max_context = await self._served_context()
        return TeacherContext(max_context=self._max_context, token_budget=self._max_context)

    async def score_rows(self, rows: Sequence[ScoreRow], top_k: int | None = None) -> list[RowScores]:
        """Score numpy rows at ``top_k`` (None: the run's distill_topk); every row in one request."""
        k = top_k or self._default_top_k
        body = completion_request(rows, k, self.model).model_dump_json(exclude_none=True)
        answer = await self._post(body)
        try:
            return scores_from_completion(answer, rows, k, self._codec)
        except EndpointAnswerError as exc:
            raise EndpointAnswerError(
                f"the teacher endpoint {self.url} gave an answer the run cannot use: {exc}; {RESUME_HINT}"
            ) from None

    async def preflight(self, top_k: int, student: StudentTokens) -> TeacherContext:
        """The start-up checks in one call, each failing now rather than mid-run: K within the server's
        cap (``check_top_k``), the student's token ids (``check_tokenizer``), a context it tells
        (``limits``: a wrong model name has none)."""
        await self.check_top_k(top_k)
        await self.check_tokenizer(student)
        return await self.limits()

    async def check_top_k(self, top_k: int) -> None:
        """Start-up probe: TopKAboveCapError naming both numbers when the endpoint caps K below ``top_k``."""
        probe = ScoreRow(np.array([0, 1], dtype=np.int64), np.array([1], dtype=np.int64))
        try:
            await self.score_rows([probe], top_k)
        except InputError as exc:
            cap = _cap_in(str(exc))
            if cap is None or cap >= top_k:
                raise
            raise TopKAboveCapError(
                f"distill.distill_topk = {top_k} but the teacher endpoint {self.url} returns at most {cap} "
                f"log-probs per position; start vLLM with --max-logprobs {top_k} (or more), or lower "
                f"distill_topk to {cap}"
            ) from exc

    async def check_tokenizer(self, student: StudentTokens) -> None:
        """Start-up probe: TokenizerMismatchError naming both tokenizers when the endpoint tokenises the
        probe text otherwise than the student, or returns ids beyond the student's vocabulary."""
        request = CompletionRequest(
            model=self.model,
            prompt=student.text,
            prompt_logprobs=self._default_top_k,
            max_tokens=1,
            return_token_ids=True,
        )
        answer = await self._post(request.model_dump_json(exclude_none=True))
        try:
            choices = CompletionResponse.model_validate_json(answer).choices
        except pydantic.ValidationError as exc:
            raise EndpointAnswerError(
                f"the teacher endpoint {self.url} answered the tokenizer probe with what is not a completion "
                f"({exc.error_count()} errors, first: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']})"
            ) from None
        if len(choices) != 1:
            raise EndpointAnswerError(
                f"the teacher endpoint {self.url} answered the tokenizer probe (1 prompt) with {len(choices)} choices"
            )
        choice = choices[0]
        endpoint = f"the endpoint's (model {self.model or '(its only one)'} at {self.base_url})"
        if choice.prompt_token_ids is None:
            # Without the ids only the vocabulary can be compared; servers that take
            # return_token_ids (vLLM) always send them.
            log.warning(
                "%s did not return prompt_token_ids for the tokenizer probe: only its vocabulary size is "
                "checked against the student's tokenizer %s",
                endpoint,
                student.tokenizer,
            )
        top_ids = [token for position in choice.prompt_logprobs or [] if position for token in position]
        problem = tokenizer_mismatch(
            student,
            endpoint,
            student.token_ids if choice.prompt_token_ids is None else choice.prompt_token_ids,
            top_ids,
        )
        if problem is not None:
            raise TokenizerMismatchError(problem)

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self._timeout_s, transport=self._transport, verify=tls_context())

    async def _request(
        self, http: httpx.AsyncClient, method: str, url: str, body: str | None
    ) -> BoundedAnswer:
        """One exchange within the deadline and the cap; past either the run stops (with the hint)."""
        try:
            return await bounded_request(
                http,
                method,
                url,
                deadline_s=self._timeout_s,
                max_bytes=self._max_answer_bytes,
                content=body,
                headers=self._headers,
            )
        except (TimeoutError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
            raise TeacherHttpError(
                f"the teacher endpoint {url} did not answer in full within {self._timeout_s:g} s (connect to "
                f"the answer's last byte: [teacher] endpoint_timeout_s); {RESUME_HINT}"
            ) from None
        except EndpointAnswerError as exc:  # over the cap
            raise type(exc)(
                f"the teacher endpoint {url}: {exc} ([teacher] endpoint_max_answer_mb); {RESUME_HINT}"
            ) from None

    async def _served_context(self) -> int:
        response = await self._answer("GET", f"{self.base_url}/v1/models", None)
        try:
            listed = pydantic_core.from_json(response.content) if response.status_code == 200 else {}
        except ValueError:  # a 200 that is not JSON: no models told
            listed = {}
        cards = [c for c in listed.get("data", []) if isinstance(c, dict)] if isinstance(listed, dict) else []
        lengths = [c.get("max_model_len") for c in cards if self.model in (None, c.get("id"))]
        if len(lengths) != 1 or not isinstance(lengths[0], int):
            served = [c.get("id") for c in cards]
            raise ConfigError(
                f"the teacher endpoint {self.base_url} does not tell its context (GET /v1/models: "
                f"{response.status_code}, {len(lengths)} matching models with max_model_len; it serves "
                f"{served}, the run asks for {self.model or 'its only one'!r}); set endpoint_model to one "
                "of them, or [teacher] max_context to the longest sequence it scores"
            )
        return lengths[0] - 1

    async def _post(self, body: str) -> bytes:
        """The body of the endpoint's answer to ``body`` at ``/v1/completions``; InputError for a 4xx."""
        response = await self._answer("POST", self.url, body)
        if response.status_code >= 400:
            raise InputError(f"the teacher endpoint {self.url} refused the request ({_reason(response)})")
        return response.content

    async def _answer(self, method: str, url: str, body: str | None) -> BoundedAnswer:
        """The endpoint's answer other than a 5xx or 429, those and dropped connections retried as
        the module says."""
        async with self._http() as http:
            for attempt in range(1, self._policy.max_attempts + 1):
                last = attempt == self._policy.max_attempts
                delay = self._policy.delay(attempt)
                try:
                    response = await self._request(http, method, url, body)
                except RETRYABLE_ERRORS as exc:
                    reason = f"{type(exc).__name__}: {exc}"
                else:
                    if response.status_code < 500 and response.status_code != 429:
                        return response
                    reason = _reason(response)
                    if response.status_code == 429:
                        delay = _retry_after(response) or delay
                if last:
                    raise TeacherHttpError(
                        f"the teacher endpoint {url} failed {attempt} times, last with {reason}; {RESUME_HINT}"
                    )
                self.retries += 1
                log.warning("teacher endpoint call failed (%s), retry %d in %.1fs", reason, attempt, delay)
                await self.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")


def endpoint_client(
    teacher: TeacherSettings, top_k: int, environ: Mapping[str, str], section: str = "teacher"
) -> EndpointTeacherClient:
    """The client of ``[teacher] endpoint_url`` (or a source's: ``section`` names where the keys were
    set, for errors); its API key from the variable the settings name."""
    api_key = None
    if teacher.endpoint_api_key_env:
        api_key = environ.get(teacher.endpoint_api_key_env)
        if not api_key:
            raise ConfigError(
                f"{section}.endpoint_api_key_env names {teacher.endpoint_api_key_env!r}, which is not set "
                "in the environment (export the endpoint's API key under that name)"
            )
    return EndpointTeacherClient(
        teacher.endpoint_url,
        teacher.endpoint_model or None,
        api_key=api_key,
        default_top_k=top_k,
        policy=RetryPolicy.from_settings(teacher),
        timeout_s=teacher.endpoint_timeout_s,
        max_answer_bytes=teacher.endpoint_max_answer_mb * 2**20,
        max_context=teacher.max_context,
        codec=codec_kernels(teacher.native_codec),
    )


def _reason(response: BoundedAnswer) -> str:
    """A failed answer's status and error message."""
    return f"{response.status_code}: {error_detail(httpx.Response(response.status_code, content=response.content))}"


def _retry_after(response: BoundedAnswer) -> float | None:
    """Seconds a 429's Retry-After asks for (None when absent or an HTTP date), capped."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _cap_in(message: str) -> int | None:
    for pattern in _CAP_PATTERNS:
        if match := pattern.search(message):
            return int(match.group(1))
    return None
