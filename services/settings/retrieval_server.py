"""Settings of the project's Search-R1-compatible retrieval server (section ``[retrieval_server]``).

It serves the `search` env's generated encyclopedia (``[env_gateway.search]`` fixes which).
"""

from pathlib import Path

from pydantic import Field

from services.settings_section import Section


class RetrievalServerSettings(Section):
    host: str = Field("127.0.0.1", min_length=1, description="Bind address.")
    port: int = Field(8200, ge=1, le=65535, description="Port.")
    corpus: Path | None = Field(
        None,
        description="A Search-R1 corpus JSONL to serve (unset: the search env's generated encyclopedia).",
    )
    default_topk: int = Field(3, ge=1, le=100, description="Passages per query when a request has no topk.")
    max_queries: int = Field(
        512, ge=1, le=100_000, description="Queries accepted in one request (413 beyond)."
    )
    max_topk: int = Field(
        100,
        ge=1,
        le=10_000,
        description="Largest topk (passages per query) one request may ask (413 beyond).",
    )
    max_body_bytes: int = Field(
        1_048_576,
        ge=1024,
        le=1 << 31,
        description="Largest request body in bytes, refused unread beyond (413).",
    )
    delay_s: float = Field(
        0.0, ge=0.0, le=3600.0, description="Latency added to every /retrieve (failure drills; 0: none)."
    )
    fail_every: int = Field(
        0, ge=0, description="Answer every N-th /retrieve with HTTP 503 (failure drills; 0: never)."
    )
