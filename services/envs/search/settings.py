"""Settings of the `search` env (section ``[env_gateway.search]``): the generated encyclopedia,
its question set, and where retrieval runs (the embedded BM25 index or a Search-R1 server)."""

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from services.settings_section import Section

RetrieverKind = Literal["bm25", "remote"]


class SearchEnvSettings(Section):
    seed: int = Field(0, ge=0, description="Seed of the generated encyclopedia and its questions.")
    countries: int = Field(10, ge=2, le=1000, description="Countries in the encyclopedia.")
    cities: int = Field(50, ge=2, le=10_000, description="Cities (each lies in one country).")
    people: int = Field(250, ge=4, le=100_000, description="People (each born in one city).")
    organisations: int = Field(60, ge=3, le=10_000, description="Publishers, studios and labels.")
    works: int = Field(250, ge=3, le=100_000, description="Novels, films and albums.")
    test_fraction: float = Field(
        0.2, gt=0.0, lt=1.0, description="Share of question subjects held out for valid_unseen."
    )
    corpus_file: Path | None = Field(
        None, description="Search-R1 corpus JSONL for the BM25 index (unset: the generated encyclopedia)."
    )
    questions_file: Path | None = Field(
        None,
        description="Question JSONL (question, golden_answers, data_source, split) instead of the "
        "generated questions; such questions have no expert.",
    )
    retriever: RetrieverKind = Field(
        "bm25", description="'bm25': local index over the encyclopedia; 'remote': a Search-R1 server."
    )
    retrieval_url: str | None = Field(
        None, description="Search-R1 retrieval server (POST {url}/retrieve) when retriever = 'remote'."
    )
    retrieval_timeout_s: float = Field(
        10.0, gt=0.0, le=600.0, description="A retrieval call slower than this fails the episode."
    )
    topk: int = Field(3, ge=1, le=50, description="Passages returned per search (Search-R1's default: 3).")
    max_turns: int = Field(
        50, ge=1, le=1000, description="Steps before the env ends an unanswered episode (reward 0)."
    )

    @model_validator(mode="after")
    def _remote_needs_url(self) -> "SearchEnvSettings":
        if self.retriever == "remote" and not self.retrieval_url:
            raise ValueError("retriever = 'remote' needs retrieval_url (the Search-R1 server's base URL)")
        if self.countries > self.cities:
            raise ValueError(f"every country needs a capital: countries ({self.countries}) > cities")
        return self

    def corpus_key(self) -> str:
        """What fixes the generated encyclopedia and its questions (its cache directory name)."""
        sizes = f"c{self.countries}-ci{self.cities}-p{self.people}-o{self.organisations}-w{self.works}"
        return f"s{self.seed}-{sizes}-t{self.test_fraction:g}"
