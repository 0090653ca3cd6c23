"""One HTTP request to a server we do not control, its whole answer bounded: it must arrive within
a deadline counted from the connect to the last byte (not per read, so a server that drips a byte
at a time cannot hold the caller), and hold at most a number of bytes (counted as they stream in,
so a server that sends gigabytes is cut off at the cap, not read into memory first)."""

import asyncio
from dataclasses import dataclass

import httpx

from services.teacher_scorer.completions_codec import EndpointAnswerError


class AnswerTooLargeError(EndpointAnswerError):
    """The answer holds more bytes than the cap."""


@dataclass(frozen=True)
class BoundedAnswer:
    """A whole answer: its status, headers and body (decoded as its Content-Encoding says)."""

    status_code: int
    headers: httpx.Headers
    content: bytes


async def bounded_request(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    deadline_s: float,
    max_bytes: int,
    content: str | None = None,
    headers: dict[str, str] | None = None,
) -> BoundedAnswer:
    """``method url`` and its whole answer within ``deadline_s`` (else ``TimeoutError``) and
    ``max_bytes`` (else ``AnswerTooLargeError``, before reading more); transport errors as httpx
    raises them."""
    # identity: a compressed answer could expand past the cap within one read
    headers = {"accept-encoding": "identity"} | (headers or {})
    async with asyncio.timeout(deadline_s):
        async with http.stream(method, url, content=content, headers=headers) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and (len(declared) > 18 or int(declared) > max_bytes):
                raise AnswerTooLargeError(
                    f"it announced an answer of {declared} bytes, over the cap of {max_bytes}"
                )
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise AnswerTooLargeError(f"its answer went past the cap of {max_bytes} bytes")
                chunks.append(chunk)
    return BoundedAnswer(response.status_code, response.headers, b"".join(chunks))
