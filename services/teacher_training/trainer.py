"""Supervised fine-tuning on rendered expert episodes: plain torch, one process, CPU or one GPU.

Loss: token cross-entropy on response tokens only (the ``response_spans``), summed over the
episodes of an optimizer step and divided by their response-token count, so every expert token
weighs the same whatever its episode's length::

    loss = - sum_{i in batch} sum_{t in spans_i} w_t log p(x_t | x_<t) / sum_i sum_{t in spans_i} w_t

``w_t`` is 1, or ``[sft] novel_token_weight`` on the tokens that are new against the response
before (``RenderedEpisode.novel_spans``): a thought is mostly the last one copied, and the few new
tokens carry its decisions.

Each episode is one forward pass with no padding (the same computation as at generation), and
its gradient is accumulated. Logits are materialised only at the positions that predict a
response token. AdamW, linear warm-up then cosine/linear decay, global grad-norm clipping; the
episode order is a seeded shuffle, so the same data and seed give the same loss curve.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.errors import InputError
from services.settings.sft import SFTSettings
from services.teacher_training.precision import uses_bfloat16
from services.teacher_training.rendering import RenderedEpisode
from services.teacher_training.resume import TrainState
from services.teacher_training.schedule import learning_rate, step_batches

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class StepReport:
    """One optimizer step: mean response-token loss and accuracy of its batch, and how it ran."""

    step: int
    total_steps: int
    loss: float
    token_accuracy: float
    lr: float
    grad_norm: float
    tokens: int
    seconds: float


@dataclass(frozen=True)
class TrainSummary:
    steps: int
    episodes: int
    losses: list[float]
    tokens_seen: int
    seconds: float


@dataclass(frozen=True)
class EpisodeTensors:
    """One episode ready for a forward pass: inputs, where the predictions are read, their targets."""

    input_ids_1_T: "torch.Tensor"
    predict_at_N: "torch.Tensor"
    targets_N: "torch.Tensor"
    context_at_M: "torch.Tensor"
    context_targets_M: "torch.Tensor"
    weights_N: "torch.Tensor"
    weight: float  # the sum of weights_N (the response-token count when all weigh 1)


def episode_tensors(
    episode: RenderedEpisode,
    length_bucket: int = 1,
    context_on_mistakes: bool = False,
    novel_weight: float = 1.0,
) -> EpisodeTensors:
    """Inputs are the ids without the last one; position t-1 predicts token t (responses, then the rest).

    The context targets are every other token after the first, less the inserted mistakes'
    responses (``episode.mistake_spans``) unless ``context_on_mistakes``. Inputs are right-padded to
    a multiple of ``length_bucket``: under causal attention the padding changes no real position,
    and fewer distinct shapes let CPU kernels be reused. Response targets inside
    ``episode.novel_spans`` weigh ``novel_weight``, the others 1.
    """
    import torch

    ids = episode.token_ids
    inputs = ids[:-1]
    inputs = inputs + [0] * (-len(inputs) % length_bucket)
    targets = [t for start, end in episode.response_spans for t in range(start, end)]
    if not targets or targets[0] < 1:
        raise InputError("an episode needs response tokens after its first token")
    excluded = set(targets)
    if not context_on_mistakes:
        excluded.update(t for start, end in episode.mistake_spans for t in range(start, end))
    context = [t for t in range(1, len(ids)) if t not in excluded]
    novel = {t for start, end in episode.novel_spans for t in range(start, end)}
    weights = [novel_weight if t in novel else 1.0 for t in targets]
    return EpisodeTensors(
        input_ids_1_T=torch.tensor([inputs], dtype=torch.long),
        predict_at_N=torch.tensor([t - 1 for t in targets], dtype=torch.long),
        targets_N=torch.tensor([ids[t] for t in targets], dtype=torch.long),
        context_at_M=torch.tensor([t - 1 for t in context], dtype=torch.long),
        context_targets_M=torch.tensor([ids[t] for t in context], dtype=torch.long),
        weights_N=torch.tensor(weights, dtype=torch.float32),
        weight=sum(weights),
    )


def response_loss(
    model: "PreTrainedModel", batch: EpisodeTensors, context_weight: float = 0.0, bf16: bool = False
) -> tuple["torch.Tensor", "torch.Tensor", int]:
    """Weighted sum of the cross-entropy over one episode's response tokens (``weights_N``), the plain
    sum over its other tokens (zero unless ``context_weight`` > 0), and how many response predictions
    were right.

    ``bf16`` runs the decoder under bfloat16 autocast (weights and the lm head stay float32).
    """
    import torch

    device = model.device
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        hidden_1_T_H = model.base_model(input_ids=batch.input_ids_1_T.to(device)).last_hidden_state
    hidden_1_T_H = hidden_1_T_H.float()
    head = model.get_output_embeddings()
    if head is None:
        raise InputError("the model has no output embeddings (lm head)")
    logits_N_V = head(hidden_1_T_H[0, batch.predict_at_N.to(device)]).float()
    targets_N = batch.targets_N.to(device)
    per_token_N = torch.nn.functional.cross_entropy(logits_N_V, targets_N, reduction="none")
    loss = (per_token_N * batch.weights_N.to(device)).sum()
    correct = int((logits_N_V.argmax(dim=-1) == targets_N).sum().item())
    context_loss = torch.zeros((), device=device)
    if context_weight > 0.0:
        logits_M_V = head(hidden_1_T_H[0, batch.context_at_M.to(device)]).float()
        context_targets_M = batch.context_targets_M.to(device)
        context_loss = torch.nn.functional.cross_entropy(logits_M_V, context_targets_M, reduction="sum")
    return loss, context_loss, correct


def make_optimizer(model: "PreTrainedModel", settings: SFTSettings) -> "torch.optim.AdamW":
    """AdamW; no weight decay on norms and biases (1-d parameters)."""
    import torch

    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": settings.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=settings.lr, betas=settings.betas)


def train_sft(
    model: "PreTrainedModel",
    episodes: Sequence[RenderedEpisode],
    settings: SFTSettings,
    on_step: Callable[[StepReport], None] | None = None,
    start: TrainState | None = None,
    on_checkpoint: Callable[[TrainState], None] | None = None,
) -> TrainSummary:
    """Train ``model`` in place on ``episodes``; ``on_step`` gets every step's report.

    ``start`` continues a run from its saved state (weights, optimizer, progress) at the step it
    had reached; ``on_checkpoint`` gets the state every ``settings.checkpoint_every`` steps (not
    after the last one: the caller saves the finished model).
    """
    import torch

    if settings.threads:
        torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    tensors = [
        episode_tensors(
            e, settings.length_bucket, settings.context_loss_on_mistakes, settings.novel_token_weight
        )
        for e in episodes
    ]
    plan = step_batches(len(tensors), settings.epochs, settings.batch_episodes, settings.seed)
    warmup = round(settings.warmup_frac * len(plan))
    optimizer = make_optimizer(model, settings)
    bf16 = uses_bfloat16(settings.autocast, model.device)
    losses: list[float] = []
    seen, first, before = 0, 0, 0.0
    if start is not None:
        if start.total_steps != len(plan) or not 0 < start.next_step < len(plan):
            raise InputError(
                f"the saved state is at step {start.next_step} of {start.total_steps}, "
                f"but this run has {len(plan)} steps"
            )
        model.load_state_dict(start.model_state)
        optimizer.load_state_dict(start.optimizer_state)
        losses, seen, first, before = list(start.losses), start.tokens_seen, start.next_step, start.seconds
    model.train()
    started = time.perf_counter()
    for step in range(first, len(plan)):
        batch = plan[step]
        step_started = time.perf_counter()
        lr = learning_rate(step, len(plan), settings.lr, warmup, settings.schedule, settings.min_lr_ratio)
        for group in optimizer.param_groups:
            group["lr"] = lr
        denominator = sum(tensors[i].weight for i in batch)
        count = sum(len(tensors[i].targets_N) for i in batch)
        total_loss, correct, tokens = 0.0, 0, 0
        for i in batch:
            loss_sum, context_sum, right = response_loss(
                model, tensors[i], settings.context_loss_weight, bf16=bf16
            )
            ((loss_sum + settings.context_loss_weight * context_sum) / denominator).backward()
            total_loss += float(loss_sum.item())
            correct += right
            tokens += len(tensors[i].targets_N) + len(tensors[i].context_targets_M)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip).item())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total_loss / denominator)
        seen += tokens
        if on_step is not None:
            on_step(
                StepReport(
                    step=step,
                    total_steps=len(plan),
                    loss=losses[-1],
                    token_accuracy=correct / count,
                    lr=lr,
                    grad_norm=grad_norm,
                    tokens=tokens,
                    seconds=time.perf_counter() - step_started,
                )
            )
        every = settings.checkpoint_every
        if on_checkpoint is not None and every and (step + 1) % every == 0 and step + 1 < len(plan):
            on_checkpoint(
                TrainState(
                    next_step=step + 1,
                    total_steps=len(plan),
                    losses=list(losses),
                    tokens_seen=seen,
                    seconds=before + time.perf_counter() - started,
                    model_state=model.state_dict(),
                    optimizer_state=optimizer.state_dict(),
                )
            )
    model.eval()
    return TrainSummary(len(plan), len(tensors), losses, seen, before + time.perf_counter() - started)
