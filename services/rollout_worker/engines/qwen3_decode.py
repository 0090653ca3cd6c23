"""A functional forward of a Hugging Face ``Qwen3ForCausalLM`` over persistent KV slots (fp32, CPU).

The same math as ``transformers``' Qwen3 (RMSNorm on the hidden state and, per head, on queries and
keys; rotary embeddings from the model's own ``rotary_emb``; grouped-query attention scaled by
``head_dim ** -0.5``; SiLU-gated MLP), read from the module's weights, with what a decode step at
batch 4 needs to stay near the bytes it must move:

* tokens of all rows run flat (``[N, hidden]``) through the projections: no padding, no masks;
* queries, keys and values come out of one fused matmul, gate and up out of another (4 matmuls per
  layer instead of 7; at batch 4, 39 against 49 us for QKV and 114 against 122 us for gate/up on
  this CPU; ``refresh`` rebuilds them after new weights are loaded);
* each row's keys and values are written in place into its slot, and its queries attend over the
  slot's valid prefix (a view, never a copy); a decode query needs no mask at all, and a prefill
  builds one causal mask per row and call, shared by every layer;
* rotary cos/sin come from one table indexed by position;
* given ``native_kernels.DecodeKernels``, a decode step runs as this machine's compiled loops: five
  calls a layer (few-row matmuls with the norms, SiLU gate and residual adds fused in; one
  attention call that norms and rotates q and k, writes each row's key and value into its slot and
  attends over it), which stream the weights and the slots at about twice the speed of MKL's small
  GEMMs and PyTorch's CPU attention; a short prefill uses the few-row matmul; otherwise torch's ops.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.rollout_worker.engines.kv_slots import Claim, KVSlot, SlotShape
from services.rollout_worker.engines.native_kernels import DecodeKernels, Rope, slot_batch

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


def unsupported_reason(model: "PreTrainedModel") -> str | None:
    """Why ``Qwen3Decoder`` cannot run ``model`` (None: it can)."""
    import torch

    config = model.config
    rope = getattr(config, "rope_parameters", None) or {}
    checks = [
        (config.model_type == "qwen3", f"architecture {config.model_type!r} (only qwen3)"),
        (next(model.parameters()).dtype == torch.float32, "dtype is not float32"),
        (model.device.type == "cpu", f"device {model.device.type!r} (only cpu)"),
        (not getattr(config, "attention_bias", False), "attention biases"),
        (rope.get("rope_type", "default") == "default", f"rope type {rope.get('rope_type')!r}"),
        (
            all(t == "full_attention" for t in getattr(config, "layer_types", None) or ["full_attention"]),
            "sliding-window layers",
        ),
        (config.hidden_act == "silu", f"activation {config.hidden_act!r}"),
    ]
    return next((why for ok, why in checks if not ok), None)


@dataclass(frozen=True)
class _Layer:
    in_norm: "torch.Tensor"
    qkv: "torch.Tensor"  # [(heads + 2 kv_heads) * head_dim, hidden]
    qk_norm: "torch.Tensor"  # [heads + kv_heads, head_dim]: q_norm's weight per query head, then k_norm's
    o: "torch.Tensor"
    post_norm: "torch.Tensor"
    gate_up: "torch.Tensor"  # [2 * intermediate, hidden]
    down: "torch.Tensor"


@dataclass(frozen=True)
class _Span:
    """One row's new tokens: flat rows ``[first, first + count)`` at positions ``[start, start + count)``."""

    slot: KVSlot
    start: int
    first: int
    count: int


class Qwen3Decoder:
    """Prefill and decode steps of one Qwen3 model, writing keys and values into ``KVSlot``s."""

    def __init__(self, model: "PreTrainedModel", kernels: DecodeKernels | None = None) -> None:
        reason = unsupported_reason(model)
        if reason is not None:
            raise ValueError(f"Qwen3Decoder cannot run this model: {reason}")
        config = model.config
        self.model = model
        self.kernels = kernels
        self.heads = int(config.num_attention_heads)
        self.kv_heads = int(config.num_key_value_heads)
        self.head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // self.heads)
        self.eps = float(config.rms_norm_eps)
        self._cos_P_d: torch.Tensor | None = None
        self._sin_P_d: torch.Tensor | None = None
        self._read: tuple[tuple[int, int], ...] = ()
        self.refresh()

    @property
    def slot_shape(self) -> SlotShape:
        return SlotShape(
            len(self._layers), self.kv_heads, self.head_dim, self._embed.dtype, self._embed.device
        )

    def refresh(self) -> None:
        """Re-read the module's weights (the fused matrices are copies: call after every weight load)."""
        import torch

        inner = self.model.model
        layers = []
        for block in inner.layers:
            attn, mlp = block.self_attn, block.mlp
            layers.append(
                _Layer(
                    in_norm=block.input_layernorm.weight.detach(),
                    qkv=torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach(),
                    qk_norm=torch.cat(
                        [
                            attn.q_norm.weight.expand(self.heads, -1),
                            attn.k_norm.weight.expand(self.kv_heads, -1),
                        ]
                    ).detach(),
                    o=attn.o_proj.weight.detach(),
                    post_norm=block.post_attention_layernorm.weight.detach(),
                    gate_up=torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach(),
                    down=mlp.down_proj.weight.detach(),
                )
            )
        self._layers = layers
        self._embed = inner.embed_tokens.weight.detach()
        self._norm = inner.norm.weight.detach()
        self._lm_head = self.model.get_output_embeddings().weight.detach()
        self._read = self._weights_signature()

    def stale(self) -> bool:
        """Whether the module's weights changed (in place or replaced) since ``refresh`` read them."""
        return self._weights_signature() != self._read

    def _weights_signature(self) -> tuple[tuple[int, int], ...]:
        return tuple((p._version, p.data_ptr()) for p in self.model.parameters())

    def prefill(self, claims: Sequence[Claim], prompts: Sequence[Sequence[int]]) -> "torch.Tensor":
        """Run every prompt's unclaimed suffix into its slot; the logits after each prompt (``[B, V]``)."""
        import torch

        spans: list[_Span] = []
        ids: list[int] = []
        positions: list[int] = []
        first = 0
        for claim, prompt in zip(claims, prompts, strict=True):
            new = prompt[claim.reused :]
            spans.append(_Span(claim.slot, claim.reused, first, len(new)))
            ids.extend(new)
            positions.extend(range(claim.reused, len(prompt)))
            first += len(new)
        x_N_D = self._forward(torch.tensor(ids), torch.tensor(positions), spans)
        return self._logits(x_N_D[[s.first + s.count - 1 for s in spans]])

    def decode(
        self, slots: Sequence[KVSlot], ids_B: "torch.Tensor", positions: Sequence[int]
    ) -> "torch.Tensor":
        """Feed one token per row (``ids_B`` at ``positions``); the next logits (``[B, V]``)."""
        import torch

        if self.kernels is not None:
            return self._decode_native(self.kernels, slots, ids_B, list(positions))
        spans = [
            _Span(slot, pos, row, 1) for row, (slot, pos) in enumerate(zip(slots, positions, strict=True))
        ]
        return self._logits(self._forward(ids_B, torch.tensor(positions), spans))

    def _decode_native(
        self, kernels: DecodeKernels, slots: Sequence[KVSlot], ids_B: "torch.Tensor", positions: list[int]
    ) -> "torch.Tensor":
        """``decode`` on the compiled kernels: five calls a layer (the norms, rotary, SiLU gate and
        residual adds inside them), one for the head."""
        import torch.nn.functional as F

        heads, kv_heads, dim, eps = self.heads, self.kv_heads, self.head_dim, self.eps
        cos_P_d, sin_P_d = self._rope_tables(max(positions) + 1)
        batch = slot_batch([s.kv for s in slots], positions, heads // kv_heads)
        x_B_D = F.embedding(ids_B, self._embed)
        for index, layer in enumerate(self._layers):
            qkv_B_F = kernels.matmul(x_B_D, layer.qkv, norm=layer.in_norm, eps=eps)
            rope = Rope(layer.qk_norm, cos_P_d, sin_P_d, eps)
            attn_B_HD = kernels.decode_attention(qkv_B_F, batch, index, heads, kv_heads, dim, rope)
            kernels.matmul(attn_B_HD, layer.o, into=x_B_D)
            gate_up_B_F = kernels.matmul(x_B_D, layer.gate_up, norm=layer.post_norm, eps=eps)
            kernels.matmul(gate_up_B_F, layer.down, glu=True, into=x_B_D)
        return kernels.matmul(x_B_D, self._lm_head, norm=self._norm, eps=eps)

    def _logits(self, x_B_D: "torch.Tensor") -> "torch.Tensor":
        import torch.nn.functional as F

        return self._project(F.rms_norm(x_B_D, x_B_D.shape[-1:], self._norm, self.eps), self._lm_head)

    def _project(self, x_N_I: "torch.Tensor", weight_O_I: "torch.Tensor") -> "torch.Tensor":
        """``x @ weight.T``: the compiled kernel for a few rows (a short prefill) where there is one."""
        if self.kernels is not None and x_N_I.shape[0] <= _FEW_ROWS:
            return self.kernels.matmul(x_N_I, weight_O_I)
        return _project(x_N_I, weight_O_I)

    def _rope_tables(self, length: int) -> tuple["torch.Tensor", "torch.Tensor"]:
        """Per position, rotary cos and sign-folded sin (``x * cos + roll(x, d/2) * sin`` rotates ``x``),
        for positions ``[0, length)`` at least, from the model's own rotary module."""
        import torch

        if self._cos_P_d is None or self._sin_P_d is None or self._cos_P_d.shape[0] < length:
            size = max(length, int(self.model.config.max_position_embeddings))
            positions = torch.arange(size, device=self._embed.device)[None]
            cos, sin = self.model.model.rotary_emb(self._embed[:1], positions)
            half = self.head_dim // 2
            self._cos_P_d = cos[0].contiguous()
            self._sin_P_d = torch.cat([-sin[0, :, :half], sin[0, :, half:]], dim=-1)
        return self._cos_P_d, self._sin_P_d

    def _forward(
        self, ids_N: "torch.Tensor", pos_N: "torch.Tensor", spans: Sequence[_Span]
    ) -> "torch.Tensor":
        """The last hidden state of every new token, with torch's ops (and the few-row matmul kernel)."""
        import torch
        import torch.nn.functional as F

        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        cos_P_d, sin_P_d = self._rope_tables(int(pos_N.max()) + 1)
        cos_N_1_d, sin_N_1_d = cos_P_d[pos_N][:, None], sin_P_d[pos_N][:, None]
        masks = [self._causal_mask(s) for s in spans]
        x_N_D = F.embedding(ids_N, self._embed)
        n, width = x_N_D.shape
        for index, layer in enumerate(self._layers):
            qkv_N_F = self._project(F.rms_norm(x_N_D, (width,), layer.in_norm, self.eps), layer.qkv)
            # Queries and keys: per-head RMSNorm and rotary embedding in one pass, written back in place,
            # so that each row's new key and value sit side by side for one copy into its slot.
            qk_N_J_d = qkv_N_F[:, : (heads + kv_heads) * dim].view(n, heads + kv_heads, dim)
            normed = F.rms_norm(qk_N_J_d, (dim,), eps=self.eps) * layer.qk_norm
            torch.add(normed * cos_N_1_d, normed.roll(dim // 2, dims=-1) * sin_N_1_d, out=qk_N_J_d)
            attn_N_HD = self._attend_spans(qkv_N_F, spans, masks, index)
            x_N_D = x_N_D + self._project(attn_N_HD, layer.o)
            gate_up = self._project(F.rms_norm(x_N_D, (width,), layer.post_norm, self.eps), layer.gate_up)
            half = gate_up.shape[1] // 2
            x_N_D = x_N_D + self._project(F.silu(gate_up[:, :half]) * gate_up[:, half:], layer.down)
        return x_N_D

    def _attend_spans(
        self, qkv_N_F: "torch.Tensor", spans: Sequence[_Span], masks: "list[torch.Tensor | None]", index: int
    ) -> "torch.Tensor":
        """Layer ``index``'s attention with torch's ops: each span's keys and values into its slot, then
        its queries over the slot's valid prefix."""
        import torch

        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        n = qkv_N_F.shape[0]
        kv_N_2_K_d = qkv_N_F[:, heads * dim :].view(n, 2, kv_heads, dim)
        outputs = []
        for span, mask in zip(spans, masks, strict=True):
            rows, end = slice(span.first, span.first + span.count), span.start + span.count
            span.slot.kv[index, :, :, span.start : end].copy_(kv_N_2_K_d[rows].permute(1, 2, 0, 3))
            keys, values = span.slot.kv[index, 0, None, :, :end], span.slot.kv[index, 1, None, :, :end]
            outputs.append(
                self._attend(qkv_N_F[rows, : heads * dim].view(-1, heads, dim), keys, values, mask)
            )
        return outputs[0] if len(outputs) == 1 else torch.cat(outputs)

    def _attend(
        self, q_T_H_d: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", mask: "torch.Tensor | None"
    ) -> "torch.Tensor":
        """One row's attention output ``[T, heads * dim]`` over its slot's keys/values ``[1, kv_heads, L, dim]``."""
        import torch.nn.functional as F

        count = q_T_H_d.shape[0]
        if count == 1:
            # One query: fold each kv head's group of query heads into the query axis; nothing to mask.
            q = q_T_H_d.view(1, self.kv_heads, self.heads // self.kv_heads, self.head_dim)
            return F.scaled_dot_product_attention(q, k, v).reshape(1, -1)
        q = q_T_H_d.transpose(0, 1)[None]  # [1, heads, T, dim]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=True)
        return out[0].transpose(0, 1).reshape(count, -1)

    def _causal_mask(self, span: _Span) -> "torch.Tensor | None":
        """Query t (at position start + t) sees positions ``<= start + t``: an additive mask (0 or -inf),
        built once per call and shared by every layer (SDPA converts a boolean one on every call: 1 of
        the 5 ms an 84-token prefill over 3k positions took). None where SDPA's own causal mask (no
        prefix) or no mask (one query) says the same."""
        import torch

        if span.count == 1 or span.start == 0:
            return None
        query_P = torch.arange(span.start, span.start + span.count)[:, None]
        hidden = torch.arange(span.start + span.count)[None] > query_P
        return torch.zeros(hidden.shape, dtype=self._embed.dtype).masked_fill_(hidden, float("-inf"))


_FEW_ROWS = 16


def _project(x_N_I: "torch.Tensor", weight_O_I: "torch.Tensor") -> "torch.Tensor":
    """``x @ weight.T``. For a few rows (decode), as ``(weight @ x.T).T``: MKL's GEMM with the weight as
    the tall left operand streams it once, while ``F.linear`` at M = 4 runs at about half the bandwidth
    (measured in a whole decode step: 3.6 against 6.2 ms at L = 256, the 8 MB LM head most of it)."""
    import torch
    import torch.nn.functional as F

    if x_N_I.shape[0] > _FEW_ROWS:
        return F.linear(x_N_I, weight_O_I)
    return torch.mm(weight_O_I, x_N_I.t()).t().contiguous()
