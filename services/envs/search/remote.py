"""The remote retriever: a client of a Search-R1-compatible retrieval server (`POST {url}/retrieve`).

With the run's service token every request carries ``Authorization: Bearer <token>``. Every
failure is a RetrievalError that says what happened: the server unreachable, slower than the
timeout, the token refused or missing (401), an HTTP error status (with the start of its body), or
an answer that is not Search-R1 output (not JSON, wrong shape, not one result list per query).
Nothing is retried and nothing is replaced by an empty result.
"""

from collections.abc import Sequence

import httpx
from pydantic import ValidationError

from services.envs.search.contract import RetrieveRequest, RetrieveResponse
from services.envs.search.retrieval import (
    RetrievalError,
    RetrievedPassage,
    Retriever,
    split_contents,
)
from services.service_auth import auth_headers, token_refusal

_BODY_CHARS = 300


class RemoteRetriever(Retriever):
    def __init__(
        self,
        base_url: str,
        timeout_s: float,
        service_token: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``service_token``: the bearer the server demands (None: send none)."""
        self.url = base_url.rstrip("/") + "/retrieve"
        self._timeout = timeout_s
        self._sends_token = bool(service_token)
        headers = auth_headers(service_token)
        self._http = httpx.Client(timeout=timeout_s, transport=transport, headers=headers)

    def retrieve(self, queries: Sequence[str], topk: int) -> list[list[RetrievedPassage]]:
        if not queries:
            return []
        body = RetrieveRequest(queries=list(queries), topk=topk, return_scores=True).model_dump(mode="json")
        try:
            response = self._http.post(self.url, json=body)
        except httpx.TimeoutException:
            raise RetrievalError(
                f"retrieval server {self.url} did not answer within {self._timeout:g}s"
            ) from None
        except httpx.TransportError as exc:
            raise RetrievalError(f"cannot reach retrieval server {self.url}: {exc}") from None
        if response.status_code == 401:
            raise RetrievalError(token_refusal("retrieval server", self.url, self._sends_token))
        if not response.is_success:
            raise RetrievalError(
                f"retrieval server {self.url} answered HTTP {response.status_code}: "
                f"{response.text[:_BODY_CHARS]}"
            )
        try:
            parsed = RetrieveResponse.model_validate_json(response.content)
        except ValidationError as exc:
            raise RetrievalError(
                f"retrieval server {self.url} sent an answer that is not Search-R1 /retrieve output: "
                f"{exc.errors()[0]['msg']} (body starts {response.text[:_BODY_CHARS]!r})"
            ) from None
        if len(parsed.result) != len(queries):
            raise RetrievalError(
                f"retrieval server {self.url} answered {len(parsed.result)} result lists "
                f"for {len(queries)} queries"
            )
        return [
            [
                RetrievedPassage(d.document.id or "", *split_contents(d.document.contents), score=d.score)
                for d in docs[:topk]
            ]
            for docs in parsed.result
        ]

    def close(self) -> None:
        self._http.close()
