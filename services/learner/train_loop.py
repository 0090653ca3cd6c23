"""The Ray Train worker loop: FSDP2 student, AdamW, ``[optim] mini_batches`` updates per step.

Each rank reads its shard of step k from its own inbox and, for each of the step's mini-batches
(trajectory i in mini-batch i mod ``[optim] mini_batches``, on whichever rank), runs its
micro-batches (loss scaled by the world size and the mini-batch count: FSDP averages gradients
across ranks while the objective is a sum over the global batch), clips and steps; then it
publishes the full weights (rank 0: ``ray.put``). It checkpoints every ``checkpoint_every`` steps,
and when the orchestrator asks (``LearnerCheckpointRequest``, before it replaces the learner). Its
inbox carries typed messages (``LearnerInboxMessage``: a ``LearnerShard``, a checkpoint request or
``LearnerStop``), and so does the shared outbox (``LearnerOutboxMessage``). On start it resumes
from the run directory's newest checkpoint that loads (one that does not is skipped, the reason
logged) and announces the step it resumed at, so the orchestrator sends nothing twice. It never
prunes checkpoints: the orchestrator does, once it has logged the step of a newer one.
"""

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from services.contracts.learner import (
    LearnerCheckpointed,
    LearnerCheckpointRequest,
    LearnerRankResult,
    LearnerReady,
    LearnerShard,
    LearnerStepped,
    LearnerStop,
)
from services.errors import ConflictError, InputError
from services.learner.checkpoint import newest_loadable, read_state, read_training_state, save_checkpoint
from services.learner.fsdp import apply_fsdp, master_dtype
from services.learner.mailbox_client import RankInbox, SharedOutbox
from services.learner.objective import (
    collate,
    micro_batch_loss,
    mini_batch_members,
    plan_micro_batches,
    turn_stats,
)
from services.models.loading import DTypeName, load_causal_lm
from services.settings.per_service import LearnerServiceSettings
from services.torch_threads import effective_threads, use_threads

if TYPE_CHECKING:
    from transformers import PreTrainedModel

FULL_CPU = StateDictOptions(full_state_dict=True, cpu_offload=True)


def _device(use_gpu: bool) -> torch.device:
    if use_gpu:
        import ray.train.torch

        return ray.train.torch.get_device()
    return torch.device("cpu")


@dataclass(frozen=True)
class LoopArgs:
    """What every rank's loop is given: the learner's settings, absolute paths (Ray Train's workers run
    in their own cwd) and the mailbox's boxes (an inbox per rank, the shared outbox)."""

    settings: LearnerServiceSettings
    run_dir: str
    model_dir: str
    inboxes: list[RankInbox]
    outbox: SharedOutbox


def train_loop(config: dict[str, Any]) -> None:
    """Entry point of each Ray Train worker: Ray Train hands its config over as a dict, whose
    ``"args"`` is the ``LoopArgs``."""
    run_train_loop(config["args"])


def run_train_loop(args: LoopArgs) -> None:
    """One rank's loop, in an initialised process group (Ray Train's, or ``solo_worker``'s)."""
    settings = args.settings
    run_dir = Path(args.run_dir)
    base_model = Path(args.model_dir)
    inbox = args.inboxes[dist.get_rank()]
    outbox = args.outbox
    rank, world = dist.get_rank(), dist.get_world_size()
    device = _device(settings.on_gpu)
    use_threads(settings.learner.threads_per_worker)  # here: Ray Train runs this loop in a thread of its own
    torch.manual_seed(settings.seed)

    # float32 master weights whatever the compute dtype; bfloat16 compute is FSDP2's mixed precision
    dtype = master_dtype(settings.learner.dtype)
    found = newest_loadable(run_dir, partial(_restored, device=str(device), dtype=dtype))
    restored = found[1] if found is not None else None
    model = (
        restored.model
        if restored is not None
        else load_causal_lm(str(base_model), device=str(device), dtype=dtype)
    )
    apply_fsdp(model, settings.learner.dtype)
    model.train()
    optim = torch.optim.AdamW(
        model.parameters(), lr=settings.optim.lr, weight_decay=settings.optim.weight_decay
    )
    resumed_step = 0
    if restored is not None:
        set_optimizer_state_dict(model, optim, restored.optimizer_state, options=FULL_CPU)
        torch.set_rng_state(restored.rng_state)
        resumed_step = restored.step
    del found, restored  # a copy of the optimizer state, as large as the optimizer's own
    outbox.put(
        LearnerReady(rank=rank, world_size=world, resumed_step=resumed_step, threads=effective_threads())
    )
    checkpointed = resumed_step  # step of the latest checkpoint on disk

    while True:
        match inbox.get():
            case LearnerStop():
                return
            case LearnerCheckpointRequest(step=step):
                if step != checkpointed:
                    full = _full_weights(model)  # a collective: every rank calls it
                    _checkpoint(model, optim, step, settings, run_dir, base_model, full)
                    checkpointed = step
                outbox.put(LearnerCheckpointed(rank=rank, step=step))
            case LearnerShard() as shard:
                result, weights = _step(model, optim, shard, settings, device, world)
                last = result.step == settings.optim.steps
                if result.step % settings.learner.checkpoint_every == 0 or last:
                    _checkpoint(model, optim, result.step, settings, run_dir, base_model, weights)
                    checkpointed = result.step
                outbox.put(LearnerStepped(result=result, weights=ray.put(weights) if rank == 0 else None))
            case other:
                raise ConflictError(f"learner rank {rank}: unexpected inbox message {type(other).__name__}")


@dataclass(frozen=True)
class Restored:
    """What a learner resumes from: a checkpoint's step, model, optimizer state and RNG state."""

    step: int
    model: "PreTrainedModel"
    optimizer_state: dict[str, Any]
    rng_state: torch.Tensor


def _restored(path: Path, device: str, dtype: DTypeName) -> Restored:
    """Load checkpoint ``path``; InputError when one of its files is damaged (``newest_loadable``)."""
    from safetensors import SafetensorError

    optimizer_state, rng_state = read_training_state(path)
    try:
        model = load_causal_lm(str(path), device=device, dtype=dtype)
    except (OSError, SafetensorError) as exc:
        raise InputError(f"{path}: the model does not load ({exc})") from None
    return Restored(int(read_state(path)["step"]), model, optimizer_state, rng_state)


def _step(
    model: torch.nn.Module,
    optim: torch.optim.Optimizer,
    shard: LearnerShard,
    settings: LearnerServiceSettings,
    device: torch.device,
    world: int,
) -> tuple[LearnerRankResult, dict[str, torch.Tensor] | None]:
    """One step: ``[optim] mini_batches`` updates, each over its share of the step's trajectories."""
    samples, sample_ids = shard.samples, shard.sample_ids
    kl_by_sample: list[torch.Tensor] = [torch.empty(0)] * len(samples)
    weighted, kl_sum, tokens = 0.0, 0.0, 0
    forward_backward_s, optimizer_s, grad_norms = 0.0, 0.0, []
    members = mini_batch_members(sample_ids, settings.optim.mini_batches)
    # The blended weights sum over the whole step's batch; a mini-batch's loss is scaled back up to
    # that size, so one update's gradient estimates the whole batch's.
    scale = float(world * len(members))
    for member in members:
        t0 = time.perf_counter()
        groups = plan_micro_batches(
            [len(samples[i].token_ids) for i in member],
            settings.learner.token_budget,
            settings.learner.pass_overhead_tokens,
        )
        passes = _most_passes(len(groups), device)
        for group in ([member[i] for i in g] for g in groups):
            mb = collate([samples[i] for i in group], pad_id=0, device=device)
            loss, kl_N = micro_batch_loss(
                model,
                mb,
                settings.distill.topk_support,
                settings.distill.clip_ratio,
                loss_scale=scale,
                chunk_tokens=settings.learner.logits_chunk_tokens,
            )
            loss.backward()
            weighted += loss.item() / scale
            kl_sum += kl_N.sum().item()
            tokens += kl_N.numel()
            for i, part in zip(group, torch.split(kl_N.cpu(), mb.counts), strict=True):
                kl_by_sample[i] = part
        for _ in range(passes - len(groups)):
            _dummy_pass(model, device)
        t1 = time.perf_counter()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.optim.grad_clip)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        grad_norms.append(float(grad_norm))
        optim.step()
        optim.zero_grad(set_to_none=True)
        forward_backward_s += t1 - t0
        optimizer_s += time.perf_counter() - t1
    t2 = time.perf_counter()
    weights = _full_weights(model)
    optimizer_s += time.perf_counter() - t2
    result = LearnerRankResult(
        step=shard.step,
        rank=dist.get_rank(),
        sample_ids=sample_ids,
        turn_stats=[turn_stats(s, kl) for s, kl in zip(samples, kl_by_sample, strict=True)],
        weighted_loss=weighted,
        kl_sum=kl_sum,
        tokens=tokens,
        grad_norm=sum(grad_norms) / len(grad_norms),
        forward_backward_s=forward_backward_s,
        optimizer_s=optimizer_s,
    )
    return result, weights if dist.get_rank() == 0 else None


def _most_passes(passes: int, device: torch.device) -> int:
    """The most micro-batches any rank has in this update. Every rank must run that many forward/
    backward passes (each is a collective under FSDP), so they agree on it before the first one."""
    most = torch.tensor([passes], device=device)
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    return int(most.item())


def _dummy_pass(model: torch.nn.Module, device: torch.device) -> None:
    """A zero-loss forward/backward on a 2-token input: a rank's padding up to the agreed passes."""
    dummy = torch.full((1, 2), 0, dtype=torch.long, device=device)
    (model(input_ids=dummy).logits.sum() * 0.0).backward()


def _full_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The full (unsharded, CPU) state dict; a collective under FSDP, so every rank calls it."""
    weights: dict[str, torch.Tensor] = dict(get_model_state_dict(model, options=FULL_CPU))  # type: ignore[arg-type]
    if getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        # Tied heads are the embedding; whether the state dict lists them depends on the world size.
        weights.pop("lm_head.weight", None)
    return weights


def _checkpoint(
    model: torch.nn.Module,
    optim: torch.optim.Optimizer,
    step: int,
    settings: LearnerServiceSettings,
    run_dir: Path,
    base_model: Path,
    weights: dict[str, torch.Tensor] | None,
) -> None:
    optim_state = get_optimizer_state_dict(model, optim, options=FULL_CPU)
    if dist.get_rank() == 0 and weights is not None:
        save_checkpoint(
            run_dir,
            step,
            model,
            weights,
            optim_state,
            settings.run_id or "run",
            base_model,
        )
    dist.barrier()
