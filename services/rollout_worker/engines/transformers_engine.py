"""Generation with a ``transformers`` causal LM (CPU or GPU): one batched decode loop with a KV cache.

Two paths behind one interface, the same sampling and log-probs:

* **KV slots** (Qwen3, fp32, CPU: every zoo and shipped model): each sequence owns a persistent
  slot (``kv_slots.SlotPool``) that a functional forward (``qwen3_decode.Qwen3Decoder``) writes in
  place; a turn prefills only what its slot does not hold yet. Decode at batch 4 is bound by memory
  bandwidth, and this path moves little more than the weights and each row's keys and values: where
  a C compiler is found, a decode step runs on kernels compiled for this CPU
  (``native_kernels.py``), otherwise on torch's ops.
* **Hugging Face forward** (any other model): prompts are left-padded into one batch and prefilled
  in one pass into a ``DynamicCache``; prefixes are reused across calls through ``PrefixKVStore``.

Either way, one token per live request per step; requests that stop are dropped from the batch,
so a long straggler does not drag finished rows along.

Own loop rather than ``model.generate``: it samples from exactly ``softmax(logits / T)`` with a
private ``torch.Generator`` (no global RNG state, no default top-k from a generation config) and
returns that distribution's log-prob of each sampled token directly. ``bench/generation_throughput.py``
measures it against ``model.generate`` on the same prompts.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.cache_dir import resolve_cache_dir
from services.errors import InputError
from services.rollout_worker.engines.base import (
    FinishReason,
    Generation,
    GenerationEngine,
    GenerationParams,
    next_version,
    validate_prompts,
)
from services.rollout_worker.engines.kv_slots import SlotPool
from services.rollout_worker.engines.native_kernels import DecodeKernels, available_kernels
from services.rollout_worker.engines.prefix_cache import (
    CachedPrefix,
    PrefixKVStore,
    layer_states,
    stack_prefixes,
)
from services.rollout_worker.engines.qwen3_decode import Qwen3Decoder, unsupported_reason
from services.rollout_worker.engines.sampler import sample_tokens
from services.rollout_worker.engines.weights_file import check_weights_fit, shapes_of
from services.settings.models import PREFIX_CACHE_MB

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache, PreTrainedModel


def _eos_ids(model: "PreTrainedModel") -> list[int]:
    eos = model.generation_config.eos_token_id if model.generation_config is not None else None
    if eos is None:
        eos = model.config.eos_token_id
    if eos is None:
        return []
    return [int(e) for e in eos] if isinstance(eos, list | tuple) else [int(eos)]


class TransformersEngine(GenerationEngine):
    """A ``GenerationEngine`` over an in-process ``transformers`` model."""

    kind = "transformers"

    def __init__(
        self,
        model: "PreTrainedModel",
        stop_token_ids: Sequence[int],
        pad_token_id: int,
        seed: int = 0,
        prefix_cache_bytes: int = 0,
        kv_slots: bool = True,
        native_kernels: bool = True,
        cache_dir: Path | None = None,
    ) -> None:
        """``prefix_cache_bytes``: memory for states kept across calls (0: none); ``kv_slots=False``
        forces the Hugging Face path on a model the KV-slot path could run (benches compare them);
        ``native_kernels``: the KV-slot path's compiled decode kernels, built under the cache root
        (``cache_dir``, else the default) where a C compiler is found (false: torch's ops)."""
        super().__init__(stop_token_ids)
        self.model = model.eval()
        self._pad = int(pad_token_id)
        self._seed = seed
        self._calls = 0
        self.unsupported = unsupported_reason(self.model) if kv_slots else "kv_slots=False"
        kernels = None
        if self.unsupported is None and native_kernels:
            found = available_kernels(resolve_cache_dir(cache_dir))
            kernels = found if isinstance(found, DecodeKernels) else None
        self.kernels = kernels
        self._decoder = Qwen3Decoder(self.model, kernels) if self.unsupported is None else None
        self._slots = (
            SlotPool(self._decoder.slot_shape, prefix_cache_bytes) if self._decoder is not None else None
        )
        use_store = prefix_cache_bytes > 0 and self._decoder is None
        self._prefix = PrefixKVStore(prefix_cache_bytes) if use_store else None
        self.prefilled_tokens = 0  # prompt tokens run through the model so far (cache hits excluded)

    @classmethod
    def from_pretrained(
        cls,
        reference: str,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        seed: int = 0,
        cache_dir: Path | None = None,
        prefix_cache_mb: int = PREFIX_CACHE_MB,
        kv_slots: bool = True,
        native_kernels: bool = True,
    ) -> "TransformersEngine":
        """Load a zoo model or checkpoint path; stop on ``<|im_end|>`` and the model's eos ids."""
        from services.agent.chat_format import end_of_turn_id
        from services.models.loading import DTypeName, load_causal_lm, load_tokenizer

        dtype_name: DTypeName
        match dtype:
            case "float32" | "bfloat16" | "float16":
                dtype_name = dtype
            case _:
                raise InputError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
        tokenizer = load_tokenizer(reference, cache_dir)
        model = load_causal_lm(reference, device=device, dtype=dtype_name, cache_dir=cache_dir)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end_of_turn_id(tokenizer)
        stop = [end_of_turn_id(tokenizer), *_eos_ids(model)]
        return cls(
            model,
            stop,
            pad_token_id=pad,
            seed=seed,
            prefix_cache_bytes=prefix_cache_mb << 20,
            kv_slots=kv_slots,
            native_kernels=native_kernels,
            cache_dir=cache_dir,
        )

    @property
    def max_positions(self) -> int:
        return int(self.model.config.max_position_embeddings)

    def load_weights(
        self, state_dict: Mapping[str, "torch.Tensor"], version: int, *, rewind: bool = False
    ) -> None:
        """Copy a full state dict into the model (a tied ``lm_head.weight`` may be absent); one that
        does not fit is refused before any weight changes."""
        new_version = next_version(self._version, version, rewind)
        tied = {"lm_head.weight"} if self.model.config.tie_word_embeddings else set()
        check_weights_fit(shapes_of(state_dict), shapes_of(self.model.state_dict()), tied)
        self.model.load_state_dict(dict(state_dict), strict=False)
        self._forget_states()
        self._version = new_version

    @property
    def slots(self) -> SlotPool | None:
        """The KV slots (None on the Hugging Face path)."""
        return self._slots

    def _forget_states(self) -> None:
        """Drop every state computed with the old weights (and re-read the weights on the slot path)."""
        if self._prefix is not None:
            self._prefix.clear()
        if self._decoder is not None and self._slots is not None:
            self._decoder.refresh()
            self._slots.clear()

    def generate(self, prompts: Sequence[Sequence[int]], params: GenerationParams) -> list[Generation]:
        import torch

        validate_prompts(prompts, self.model.config.vocab_size)
        seed = params.seed if params.seed is not None else self._seed + self._calls
        self._calls += 1
        device = self.model.device
        generator = torch.Generator(device=device).manual_seed(seed)
        with torch.inference_mode():
            if self._decoder is None:
                return self._decode(prompts, params, generator, device)
            if self._decoder.stale():  # the module's weights changed in place, not through load_weights
                self._forget_states()
            return self._decode_slots(prompts, params, generator)

    def _decode_slots(
        self, prompts: Sequence[Sequence[int]], params: GenerationParams, generator: "torch.Generator"
    ) -> list[Generation]:
        """The KV-slot path: prefill what each prompt's slot lacks, then decode into the slots."""
        assert self._decoder is not None and self._slots is not None
        claims = self._slots.claim(prompts, params.max_new_tokens)
        logits_B_V = self._decoder.prefill(claims, prompts)
        self.prefilled_tokens += sum(len(p) - c.reused for p, c in zip(prompts, claims, strict=True))
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        finish: list[FinishReason] = ["length"] * len(prompts)
        live = list(range(len(prompts)))  # request index of each row still in the batch
        sample = self.kernels.sample if self.kernels is not None else sample_tokens
        for step in range(params.max_new_tokens):
            ids_B, logp_B = sample(logits_B_V, params.temperature, generator)
            last_step = step == params.max_new_tokens - 1
            keep = []
            for row, (request, token, logp) in enumerate(
                zip(live, ids_B.tolist(), logp_B.tolist(), strict=True)
            ):
                tokens[request].append(token)
                logprobs[request].append(logp)
                if token in self._stop:
                    finish[request] = "stop"
                elif not last_step:
                    keep.append(row)
            if not keep:
                break
            if len(keep) < len(live):
                ids_B, live = ids_B[keep], [live[row] for row in keep]
            positions = [len(prompts[r]) + len(tokens[r]) - 1 for r in live]
            logits_B_V = self._decoder.decode([claims[r].slot for r in live], ids_B, positions)
        for claim, prompt, sampled in zip(claims, prompts, tokens, strict=True):
            claim.slot.tokens[:] = [*prompt, *sampled[:-1]]  # the last sampled token was never fed
        self._slots.settle(claims)
        return [Generation(t, lp, f) for t, lp, f in zip(tokens, logprobs, finish, strict=True)]

    def _decode(
        self,
        prompts: Sequence[Sequence[int]],
        params: GenerationParams,
        generator: "torch.Generator",
        device: "torch.device",
    ) -> list[Generation]:
        import torch

        cache, mask_B_L, out = self._prefill(prompts, device)
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        finish: list[FinishReason] = ["length"] * len(prompts)
        live = list(range(len(prompts)))  # request index of each row still in the batch
        next_pos_B = torch.tensor([len(p) for p in prompts], device=device)
        for step in range(params.max_new_tokens):
            ids_B, logp_B = sample_tokens(out.logits[:, -1, :], params.temperature, generator)
            last_step = step == params.max_new_tokens - 1
            keep = []
            rows_out = zip(live, ids_B.tolist(), logp_B.tolist(), strict=True)
            for row, (request, token, logp) in enumerate(rows_out):
                tokens[request].append(token)
                logprobs[request].append(logp)
                if token in self._stop:
                    finish[request] = "stop"
                elif not last_step:
                    keep.append(row)
                    continue
                self._remember(cache, mask_B_L, row, [*prompts[request], *tokens[request][:-1]])
            if not keep:
                break
            if len(keep) < len(live):
                rows = torch.tensor(keep, device=device)
                cache.batch_select_indices(rows)
                ids_B, mask_B_L, next_pos_B = ids_B[rows], mask_B_L[rows], next_pos_B[rows]
                live = [live[row] for row in keep]
            mask_B_L = torch.cat([mask_B_L, mask_B_L.new_ones((len(live), 1))], dim=1)
            out = self.model(
                input_ids=ids_B[:, None],
                attention_mask=mask_B_L,
                position_ids=next_pos_B[:, None],
                past_key_values=cache,
                use_cache=True,
            )
            next_pos_B = next_pos_B + 1
        return [Generation(t, lp, f) for t, lp, f in zip(tokens, logprobs, finish, strict=True)]

    def _prefill(
        self, prompts: Sequence[Sequence[int]], device: "torch.device"
    ) -> tuple["DynamicCache", "torch.Tensor", Any]:
        """One forward pass over every prompt's uncached suffix; return (cache, mask, model output).

        Row layout (columns = cache positions): ``[pad | cached prefix | pad | new suffix]``; the
        mask hides the pads and position ids continue each row's own sequence.
        """
        import torch
        from transformers import DynamicCache

        hits = [self._prefix.lookup(p) if self._prefix is not None else None for p in prompts]
        cached = [0 if hit is None else len(hit.token_ids) for hit in hits]
        suffixes = [list(p[c:]) for p, c in zip(prompts, cached, strict=True)]
        batch, width_c, width_s = len(prompts), max(cached), max(len(s) for s in suffixes)
        cache = DynamicCache(config=self.model.config)
        mask_B_C = torch.zeros((batch, width_c), dtype=torch.long, device=device)
        if width_c:
            for layer, (keys, values) in enumerate(stack_prefixes(hits, width_c)):
                cache.update(keys, values, layer)
            for i, c in enumerate(cached):
                mask_B_C[i, width_c - c :] = 1
        ids_B_S = torch.full((batch, width_s), self._pad, dtype=torch.long, device=device)
        mask_B_S = torch.zeros((batch, width_s), dtype=torch.long, device=device)
        pos_B_S = torch.zeros((batch, width_s), dtype=torch.long, device=device)
        for i, (suffix, c) in enumerate(zip(suffixes, cached, strict=True)):
            ids_B_S[i, width_s - len(suffix) :] = torch.tensor(suffix, device=device)
            mask_B_S[i, width_s - len(suffix) :] = 1
            pos_B_S[i, width_s - len(suffix) :] = torch.arange(c, c + len(suffix), device=device)
        mask_B_L = torch.cat([mask_B_C, mask_B_S], dim=1)
        out = self.model(
            input_ids=ids_B_S,
            attention_mask=mask_B_L,
            position_ids=pos_B_S,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.prefilled_tokens += sum(len(s) for s in suffixes)
        return cache, mask_B_L, out

    def _remember(self, cache: "DynamicCache", mask_B_L: "torch.Tensor", row: int, fed: list[int]) -> None:
        """Store the keys/values of the tokens ``row`` fed to the model, for the next call."""
        if self._prefix is None:
            return
        columns = mask_B_L[row].nonzero().squeeze(-1)
        if len(columns) != len(fed):
            raise AssertionError(f"cache holds {len(columns)} positions for {len(fed)} fed tokens")
        states = layer_states(cache)
        keys = [k[row].index_select(1, columns) for k, _ in states]
        values = [v[row].index_select(1, columns) for _, v in states]
        self._prefix.add(CachedPrefix(tuple(fed), keys, values))
