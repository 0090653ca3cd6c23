"""Settings of the teacher scorer: which checkpoint, which engine, how the Serve deployment batches and scales."""

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from services.settings_section import Section

TeacherEngineKind = Literal["transformers", "vllm"]
TeacherDType = Literal["float32", "bfloat16", "float16"]
# The endpoint keys, in [teacher] and in each [[sources]] entry
ENDPOINT_KEYS = ("endpoint_url", "endpoint_model", "endpoint_api_key_env")
EndpointModel = Annotated[
    str,
    Field(description="The endpoint's served model name (vLLM: --served-model-name); empty: its only model."),
]
ApiKeyEnv = Annotated[
    str,
    Field(
        pattern=r"^([A-Za-z_][A-Za-z0-9_]*)?$",
        description="NAME of the environment variable holding the endpoint's API key (never the key "
        "itself), sent as a bearer token; empty: no key.",
    ),
]


def endpoint_keys_problem(url: str, model: str, api_key_env: str) -> str | None:
    """What is wrong with a set of endpoint keys (None: nothing)."""
    if not url and (model or api_key_env):
        return "endpoint_model and endpoint_api_key_env need endpoint_url (the server to score on)"
    return None


class TeacherSettings(Section):
    # Where the teacher scores (its app, or a server) is fixed for the run: a restart with a new
    # config redeploys the app, it does not move the teacher to a server or back.
    RUN_DEFINING = frozenset(ENDPOINT_KEYS)

    model: str = Field("", description="Teacher checkpoint: a local directory readable by from_pretrained.")
    engine: TeacherEngineKind = Field("transformers", description="Scoring engine behind the deployment.")
    device: str = Field(
        "cpu", min_length=1, description="Torch device of the transformers engine ('auto': GPU if any)."
    )
    dtype: TeacherDType = Field(
        "float32", description="Weight dtype; log-softmax is always computed in fp32."
    )
    max_context: int | None = Field(
        None,
        ge=2,
        description="Longest accepted sequence (unset: the model's max_position_embeddings). The vLLM engine "
        "accepts at most max_position_embeddings - 1: it needs room for the one token it generates.",
    )
    # Batching: items of a Serve batch are single sequences, gathered across concurrent requests.
    max_batch_tokens: int = Field(
        65536, ge=2, description="Raw tokens gathered from concurrent requests into one Serve batch."
    )
    batch_wait_timeout_s: float = Field(
        0.01, ge=0.0, le=10.0, description="Longest wait for more sequences before a Serve batch runs."
    )
    token_budget: int = Field(
        16384,
        ge=2,
        description="Padded tokens (rows x longest row) of one forward pass; also the longest sequence.",
    )
    max_batch_size: int = Field(64, ge=1, description="Rows (sequences) of one forward pass.")
    pass_overhead_tokens: int = Field(
        256,
        ge=0,
        description="Fixed cost of a forward pass in tokens; packing trades padding against passes.",
    )
    logits_chunk: int = Field(
        2048, ge=1, description="Scored positions whose full-vocabulary logits are materialised at once."
    )
    # Scaling and placement.
    replicas: int = Field(1, ge=1, description="Replicas when autoscaling is off.")
    autoscaling: bool = Field(False, description="Let Serve scale replicas between min and max replicas.")
    min_replicas: int = Field(1, ge=0, description="Autoscaling lower bound.")
    max_replicas: int = Field(4, ge=1, description="Autoscaling upper bound.")
    target_ongoing_requests: float = Field(
        16.0, gt=0.0, description="Autoscaling target of in-flight requests per replica."
    )
    max_ongoing_requests: int = Field(
        128, ge=1, description="In-flight requests one replica accepts (>= clients, or batching starves)."
    )
    num_cpus: float = Field(1.0, ge=0.0, description="CPUs each replica reserves.")
    threads: int | None = Field(
        None,
        ge=1,
        description="torch CPU threads of a replica's passes (the transformers engine). Unset: Ray's "
        "count, the reserved CPUs or 1 for a share under one CPU. A synchronous step on a small machine "
        "can give the teacher every core, since its passes run while the rollouts and the learner wait.",
    )
    num_gpus: float = Field(0.0, ge=0.0, description="GPUs each replica reserves (1 on a GPU pool).")
    resources: dict[str, float] = Field(
        default_factory=dict, description="Custom Ray resources per replica, e.g. {teacher_pool = 1}."
    )
    restart_surge_percent: int = Field(
        100,
        ge=0,
        le=100,
        description="Extra replicas (percent of the target) Serve may start while the app is redeployed "
        "(`turnopd restart teacher`): >0 keeps old replicas serving until new ones are ready (needs room "
        "for them), 0 stops old replicas first.",
    )
    health_check_period_s: float = Field(10.0, gt=0.0, description="Seconds between replica health checks.")
    health_check_timeout_s: float = Field(30.0, gt=0.0, description="A health check slower than this fails.")
    # HTTP (standalone `turnopd serve teacher`; the cluster's Serve config sets its own).
    host: str = Field("127.0.0.1", min_length=1, description="HTTP bind address of the Serve proxy.")
    port: int = Field(8000, ge=1, le=65535, description="HTTP port of the Serve proxy.")
    route_prefix: str = Field(
        "/", pattern=r"^/", description="Route prefix of the app: POST {prefix}/v1/score."
    )
    # What one HTTP request may ask (the Serve handle path is in-cluster and not capped).
    http_max_body_bytes: int = Field(
        33_554_432,
        ge=1024,
        le=1 << 31,
        description="Largest HTTP request body in bytes, refused unread (413).",
    )
    http_max_sequences: int = Field(
        4096, ge=1, le=1_000_000, description="Sequences (or prompts) in one HTTP request (413 beyond)."
    )
    http_max_entries: int = Field(
        16_777_216,
        ge=1,
        le=1 << 34,
        description="Scored positions x top_k of one HTTP request, the size of its answer (413 beyond).",
    )
    http_max_top_k: int = Field(
        512,
        ge=1,
        le=1_000_000,
        description="Largest top_k (prompt_logprobs) of one HTTP request (422 beyond); the engine may cap "
        "it lower (its vocabulary, vllm_max_logprobs).",
    )
    # vLLM engine only.
    vllm_gpu_memory_utilization: float = Field(
        0.85, gt=0.0, le=1.0, description="Share of GPU memory the vLLM engine may take."
    )
    vllm_enable_prefix_caching: bool = Field(
        False,
        description="vLLM's enable_prefix_caching. No speed-up for scoring: vLLM skips reading the prefix "
        "cache for requests that ask for prompt log-probs, so it only costs KV blocks.",
    )
    vllm_max_logprobs: int = Field(
        128,
        ge=1,
        description="vLLM's max_logprobs: the largest top_k the vLLM engine serves (distill.distill_topk "
        "must not exceed it).",
    )
    # An OpenAI-compatible teacher server (vLLM, SGLang, `turnopd serve teacher`) instead of our app.
    endpoint_url: str = Field(
        "",
        description="Base URL of an OpenAI-compatible server that returns prompt log-probs, e.g. "
        "http://host:8000 (it answers POST {url}/v1/completions); the run then deploys no teacher app "
        "and scores there. Empty: the run's own teacher Serve app.",
    )
    endpoint_model: EndpointModel = ""
    endpoint_api_key_env: ApiKeyEnv = ""
    endpoint_timeout_s: float = Field(
        300.0,
        gt=0.0,
        description="Deadline of one endpoint request, from the connect to the answer's last byte (not per "
        "read: a server that drips its answer cannot hold the run); past it the run stops, to be resumed.",
    )
    endpoint_max_answer_mb: int = Field(
        1024,
        ge=1,
        description="Cap on one endpoint answer (MiB), counted as it streams in; past it the run stops, to be "
        "resumed. An answer is ~2.4 KB per position at K = 50 (it answers every position of every row sent).",
    )
    native_codec: bool = Field(
        True,
        description="Write and read /v1/completions answers (our app's, and an endpoint's in the run) with "
        "the codec's C reader and writer, built with the C compiler ($CC or cc) into <cache root>/kernels "
        "on first use; without a compiler, or false: Python's (the same answers, ~8x slower per scored "
        "token; bench/teacher_throughput.py).",
    )
    # Clients.
    client_max_attempts: int = Field(6, ge=1, description="Attempts of a client call before it gives up.")
    client_backoff_s: float = Field(0.5, gt=0.0, description="First retry delay; doubles per attempt.")
    client_max_backoff_s: float = Field(8.0, gt=0.0, description="Cap on one retry delay.")
    REMOVED: ClassVar[dict[str, str]] = {
        "client_timeout_s": "the run calls the teacher through its Serve handle, which has no such timeout; "
        "an HTTP client (TeacherHttpClient) takes its own timeout_s",
    }

    @model_validator(mode="after")
    def _consistent(self) -> "TeacherSettings":
        if self.max_batch_tokens < self.token_budget:
            raise ValueError(
                f"max_batch_tokens ({self.max_batch_tokens}) must be >= token_budget ({self.token_budget}), "
                "or a sequence of token_budget tokens could never enter a batch"
            )
        problem = endpoint_keys_problem(self.endpoint_url, self.endpoint_model, self.endpoint_api_key_env)
        if problem is not None:
            raise ValueError(problem)
        if self.autoscaling and self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) must be <= max_replicas ({self.max_replicas})"
            )
        return self
