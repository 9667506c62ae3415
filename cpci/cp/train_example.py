"""A tiny deterministic CP training run: a 2-layer transformer on synthetic tokens, on CPU.

With cp = 1 attention is plain SDPA on the whole sequence; with cp > 1 each rank holds a
head-tail shard of the tokens (positions from `SequenceBalancer`, used for the position
embedding), attention is `p2p_attention`, the loss is summed over ranks and the gradients are
all-reduced. The per-step losses of the two must agree: that is the end-to-end check that CP
changes nothing but the speed. Attention runs under the SDPA backend policy (`cpci.cp.backend`).

`python -m cpci.cp.train_example --cp 2 --steps 5` spawns its own 2-rank gloo world on CPU
(`--cp 1`, the default, trains on one process); under `torchrun` it joins torchrun's world
instead. Rank 0 prints `step: N | loss: X` lines (or writes them to `--out`). `--steps`
defaults to `CPCI_STEPS` (what `cpci loss-compare --steps` sets), else 20. The comparison:

    cpci loss-compare --steps 5 --rtol 1e-5 \
        --baseline-cmd "python -m cpci.cp.train_example --cp 1 --steps {steps}" \
        --test-cmd "python -m cpci.cp.train_example --cp 2 --steps {steps}"

Legend: B batch, S sequence (local shard under CP), H heads, D head dim, E model width, V vocab.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from cpci.cp.backend import attention_policy
from cpci.cp.balancer import SequenceBalancer
from cpci.cp.p2p import p2p_attention


@dataclass(frozen=True)
class TinyConfig:
    """Model and data sizes; small enough for 20 steps in well under a second on CPU."""

    vocab: int = 64
    width: int = 32
    heads: int = 4
    layers: int = 2
    seq: int = 32
    batch: int = 2
    lr: float = 0.5


class Block(nn.Module):
    """Pre-norm attention + MLP; attention is SDPA, or p2p CP when a group is given."""

    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.norm1, self.norm2 = nn.LayerNorm(cfg.width), nn.LayerNorm(cfg.width)
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width)
        )

    def forward(self, x_BSE: Any, group: Any) -> Any:
        b, s, e = x_BSE.shape
        q_BSHD, k_BSHD, v_BSHD = (
            t.view(b, s, self.heads, e // self.heads)
            for t in self.qkv(self.norm1(x_BSE)).chunk(3, -1)
        )
        if group is None:
            q_BHSD, k_BHSD, v_BHSD = (t.transpose(1, 2) for t in (q_BSHD, k_BSHD, v_BSHD))
            out_BHSD = F.scaled_dot_product_attention(q_BHSD, k_BHSD, v_BHSD, is_causal=True)
            out_BSHD = out_BHSD.transpose(1, 2)
        else:
            out_BSHD = p2p_attention(
                q_BSHD, k_BSHD, v_BSHD, group=group, causal=True, load_balance=True
            )
        x_BSE = x_BSE + self.proj(out_BSHD.reshape(b, s, e))
        return x_BSE + self.mlp(self.norm2(x_BSE))


class TinyTransformer(nn.Module):
    """Token + learned position embeddings, `layers` blocks, a linear head."""

    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.width)
        self.pos = nn.Embedding(cfg.seq, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.head = nn.Linear(cfg.width, cfg.vocab)

    def forward(self, tokens_BS: Any, positions_S: Any, group: Any) -> Any:
        x_BSE = self.tok(tokens_BS) + self.pos(positions_S)
        for block in self.blocks:
            x_BSE = block(x_BSE, group)
        return self.head(x_BSE)


def train(
    steps: int = 20, *, group: Any = None, cfg: TinyConfig | None = None, seed: int = 0
) -> list[float]:
    """The loss of each step; `group` None trains on one process, else CP over the group."""
    cfg = cfg or TinyConfig()
    torch.manual_seed(seed)
    model = TinyTransformer(cfg)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    data = torch.Generator().manual_seed(seed + 1)
    rank, cp = (0, 1) if group is None else (dist.get_rank(group), dist.get_world_size(group))
    balancer = SequenceBalancer(cfg.seq, cp, head_tail=cp > 1)
    positions_S = balancer.positions(rank)
    losses = []
    for _ in range(steps):
        # A learnable task: each token is the previous one plus one (mod vocab), random starts.
        start_B1 = torch.randint(0, cfg.vocab, (cfg.batch, 1), generator=data)
        tokens_BS = (start_B1 + torch.arange(cfg.seq + 1)) % cfg.vocab
        inputs_BS, labels_BS = tokens_BS[:, :-1], tokens_BS[:, 1:]
        with policy_for(cfg, cp):
            logits_BSV = model(inputs_BS[:, positions_S], positions_S, group)
            loss_sum = F.cross_entropy(
                logits_BSV.flatten(0, 1), labels_BS[:, positions_S].flatten(), reduction="sum"
            )
            loss = loss_sum / labels_BS.numel()  # the mean over the full sequence, once summed
            optimizer.zero_grad()
            loss.backward()
        total = loss.detach().clone()
        if group is not None:
            dist.all_reduce(total, group=group)
            for param in model.parameters():
                dist.all_reduce(param.grad, group=group)
        optimizer.step()
        losses.append(float(total))
    return losses


def policy_for(cfg: TinyConfig, cp: int) -> Any:
    """The SDPA backend policy of this model's attention (forward and backward) at CP size `cp`."""
    return attention_policy(
        device="cpu", cp_size=cp, head_dim=cfg.width // cfg.heads, dtype=torch.float32
    )


def format_log(losses: Sequence[float]) -> str:
    """Training-log lines in the format `cpci loss-compare` reads by default."""
    return "".join(f"step: {i} | loss: {loss!r}\n" for i, loss in enumerate(losses, 1))


def _spawned_rank(
    rank: int, cp: int, store_path: str, steps: int, cfg: TinyConfig, out: Path | None
) -> None:
    store = dist.FileStore(store_path, cp)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=cp)
    try:
        losses = train(steps, group=dist.group.WORLD, cfg=cfg)
        if rank == 0:
            _emit(format_log(losses), out)
    finally:
        dist.destroy_process_group()


def _default_steps() -> int:
    value = os.environ.get("CPCI_STEPS", "20")
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"CPCI_STEPS must be a whole number >= 1, got {value!r}")
    return int(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, help="steps to train (default: CPCI_STEPS, or 20)")
    parser.add_argument(
        "--cp", type=int, help="CP size: ranks to spawn (gloo, CPU); default 1, or torchrun's"
    )
    parser.add_argument("--lr", type=float, default=TinyConfig.lr, help="SGD learning rate")
    parser.add_argument("--out", type=Path, help="write the step/loss log here (rank 0)")
    args = parser.parse_args(argv)
    steps = args.steps if args.steps is not None else _default_steps()
    torchrun_world = int(os.environ["WORLD_SIZE"]) if "RANK" in os.environ else None
    cp = args.cp or torchrun_world or 1
    if steps < 1 or cp < 1:
        parser.error(f"--steps and --cp must be >= 1, got {steps} and {cp}")
    if torchrun_world is not None and cp != torchrun_world:
        parser.error(f"--cp {cp} under torchrun of {torchrun_world} ranks: drop --cp or match it")
    cfg = replace(TinyConfig(), lr=args.lr)
    if cfg.seq % (2 * cp):
        parser.error(
            f"--cp {cp}: the {cfg.seq} tokens must split into 2 x cp equal head-tail chunks; "
            f"use a cp that divides {cfg.seq // 2}"
        )
    if torchrun_world is not None:  # under torchrun: its world is the CP group
        dist.init_process_group("gloo")
        losses = train(steps, group=dist.group.WORLD, cfg=cfg)
        if dist.get_rank() == 0:
            _emit(format_log(losses), args.out)
        dist.destroy_process_group()
    elif cp == 1:
        _emit(format_log(train(steps, cfg=cfg)), args.out)
    else:
        _spawn(cp, steps, cfg, args.out)
    return 0


def _spawn(cp: int, steps: int, cfg: TinyConfig, out: Path | None) -> None:
    """Train on `cp` spawned ranks that meet through a file store (no port to race for)."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="cpci-train-") as tmp:
        config = (cp, f"{tmp}/store", steps, cfg, out)
        mp.start_processes(_spawned_rank, config, nprocs=cp, start_method="spawn")


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        print(text, end="", flush=True)
    else:
        out.write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
