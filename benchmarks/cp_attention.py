"""CP attention: time and bytes per rank for each algorithm, and causal work balance.

Two parts, both printed, nothing asserted:
1. Analytic balance from the masks: per rank, the attention score pairs each algorithm computes
   (dense blocks, what costs FLOPs) and the pairs the causal mask keeps (useful work), for
   cp = 2, 4, 8, with and without head-tail balancing. Target: max/min <= 1.1 with balancing.
2. Measured, in a world of its own (torch.multiprocessing, gloo on CPU or NCCL on GPUs): per
   algorithm, the median time of forward+backward vs single-process SDPA on the full sequence,
   the bytes each rank sends (counted at the collectives in `cpci.cp.comm`), and the per-rank
   time spent inside attention blocks (max/min over ranks).

    .venv/bin/python benchmarks/cp_attention.py [--world 4] [--seq 1024] [--reps 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from cpci.cp import (
    CPGroups,
    SequenceBalancer,
    a2a,
    all_gather,
    comm,
    cp_attention,
    hierarchical_groups,
    kernel,
    p2p,
)
from cpci.cp.backend import attention_policy
from cpci.cp.harness import CaseSpec, make_inputs
from cpci.cp.p2p import ring_step

# --- 1. analytic balance -------------------------------------------------------------------


def ring_pairs(rank: int, cp: int, local: int, *, load_balance: bool) -> int:
    """Score pairs rank `rank` computes over a causal ring (dense blocks of the step plan)."""
    total = 0
    for i in range(cp):
        step = ring_step(rank, (rank - i) % cp, causal=True, load_balance=load_balance)
        if step is not None:
            rows = local if step.q_half is None else local // 2
            cols = local if step.kv_half is None else local // 2
            total += rows * cols
    return total


def useful_pairs(rank: int, balancer: SequenceBalancer) -> int:
    """Score pairs the causal mask keeps for this rank's queries: position + 1 keys each."""
    return int((balancer.positions(rank) + 1).sum())


def ratio(values: list[int] | list[float]) -> float:
    return max(values) / min(values) if min(values) > 0 else float("inf")


def print_balance(seq: int) -> None:
    print(f"causal work balance, seq {seq} (score pairs per rank, max/min over ranks)")
    print(f"{'cp':>3} {'layout':>10} {'ring computed':>14} {'useful (any algorithm)':>23}")
    for cp in (2, 4, 8):
        for head_tail in (True, False):
            balancer = SequenceBalancer(seq, cp, head_tail=head_tail)
            ring = [ring_pairs(r, cp, seq // cp, load_balance=head_tail) for r in range(cp)]
            useful = [useful_pairs(r, balancer) for r in range(cp)]
            layout = "head-tail" if head_tail else "contiguous"
            verdict = "  (target <= 1.1)" if head_tail else ""
            print(f"{cp:>3} {layout:>10} {ratio(ring):>14.3f} {ratio(useful):>23.3f}{verdict}")
    print(
        "all_gather and a2a compute dense blocks (equal per rank whatever the layout); their "
        "useful work follows the 'useful' column.\n"
    )


# --- 2. measured ---------------------------------------------------------------------------


class Meter:
    """Bytes sent by this rank and seconds spent in attention blocks, while installed."""

    def __init__(self) -> None:
        self.bytes_sent = 0
        self.block_s = 0.0

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        patches: list[tuple[Any, str, Any]] = [(comm, "dist", _CountingDist(self))]
        for module in (kernel, p2p, all_gather, a2a):
            for name in ("block_forward", "block_backward"):
                if hasattr(module, name):
                    patches.append((module, name, self._timed(getattr(module, name))))
        saved = [(m, n, getattr(m, n)) for m, n, _ in patches]
        for module, name, value in patches:
            setattr(module, name, value)
        try:
            yield
        finally:
            for module, name, value in saved:
                setattr(module, name, value)

    def _timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.block_s += time.perf_counter() - start

        return timed


class _CountingDist:
    """`torch.distributed` as seen by `cpci.cp.comm`, counting the bytes this rank sends."""

    def __init__(self, meter: Meter) -> None:
        self._meter = meter

    def __getattr__(self, name: str) -> Any:
        return getattr(dist, name)

    def _add(self, tensor: Any, fraction: float = 1.0) -> None:
        self._meter.bytes_sent += int(tensor.numel() * tensor.element_size() * fraction)

    def P2POp(self, op: Any, tensor: Any, peer: int, group: Any = None) -> Any:
        if op is dist.isend:
            self._add(tensor)
        return dist.P2POp(op, tensor, peer, group)

    def all_gather(self, parts: list[Any], tensor: Any, group: Any = None) -> Any:
        self._add(tensor, len(parts) - 1)  # our shard reaches every peer
        return dist.all_gather(parts, tensor, group=group)

    def all_reduce(self, tensor: Any, group: Any = None) -> Any:
        n = dist.get_world_size(group)
        self._add(tensor, 2 * (n - 1) / n)  # ring all-reduce
        return dist.all_reduce(tensor, group=group)

    def reduce_scatter(self, out: Any, chunks: list[Any], group: Any = None) -> Any:
        self._add(out, len(chunks) - 1)
        return dist.reduce_scatter(out, chunks, group=group)

    def all_to_all_single(self, out: Any, tensor: Any, group: Any = None) -> Any:
        n = dist.get_world_size(group)
        self._add(tensor, (n - 1) / n)
        return dist.all_to_all_single(out, tensor, group=group)


def _median_time(fn: Callable[[], Any], reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cp_step(
    algorithm: str,
    groups: CPGroups,
    load_balance: bool,
    qkv: tuple[Any, ...],
    dout: Any,
    world: int,
) -> Callable[[], None]:
    def step() -> None:
        leaves = [x.detach().requires_grad_() for x in qkv]
        policy = attention_policy(
            device=dout.device, cp_size=world, head_dim=dout.shape[-1], dtype=dout.dtype
        )
        with policy:  # as in the suite: the SDPA backend policy around every CP call
            out = cp_attention(
                *leaves, algorithm=algorithm, groups=groups, causal=True, load_balance=load_balance
            )
            out.backward(dout)

    return step


def _rank_main(rank: int, world: int, init_file: str, args: argparse.Namespace) -> None:
    use_cuda = torch.cuda.is_available() and torch.cuda.device_count() >= world
    device = torch.device("cuda", rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if use_cuda else "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
    )
    torch.set_num_threads(1)
    a2a_group, p2p_group = hierarchical_groups(2, rank=rank, ranks=list(range(world)))
    rows = []
    # a2a_p2p needs a ring of 2+ a2a groups of 2: world >= 4.
    algorithms = ["all_gather", "p2p", "a2a"] + (["a2a_p2p"] if world >= 4 else [])
    for algorithm in algorithms:
        for load_balance in (True, False):
            spec = CaseSpec(
                batch=1,
                seq=args.seq,
                heads_q=4,
                heads_kv=4,
                head_dim=32,
                causal=True,
                load_balance=load_balance,
            )
            inputs = make_inputs(spec, device=device)
            balancer = SequenceBalancer(spec.seq, world, head_tail=load_balance)
            q, k, v, dout = (balancer.shard(x, 1, rank) for x in vars(inputs).values())
            groups = CPGroups(a2a=a2a_group, p2p=p2p_group)

            step = _cp_step(algorithm, groups, load_balance, (q, k, v), dout, world)
            seconds = _median_time(step, args.reps)
            meter = Meter()
            with meter.installed():
                step()
            stats = torch.tensor([seconds, meter.bytes_sent, meter.block_s], dtype=torch.float64)
            gathered = [torch.zeros_like(stats) for _ in range(world)]
            dist.all_gather_object(gathered, stats)  # object: works on gloo and NCCL alike
            rows.append((algorithm, load_balance, gathered))
    if rank == 0:
        _print_measured(rows, args, world, device)
    dist.destroy_process_group()


def _reference_seconds(args: argparse.Namespace, device: Any) -> float:
    spec = CaseSpec(batch=1, seq=args.seq, heads_q=4, heads_kv=4, head_dim=32, causal=True)
    inputs = make_inputs(spec, device=device)

    def step() -> None:
        q, k, v = (
            x.detach().transpose(1, 2).requires_grad_() for x in (inputs.q, inputs.k, inputs.v)
        )
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(inputs.dout.transpose(1, 2))

    return _median_time(step, args.reps)


def _print_measured(rows: list[Any], args: argparse.Namespace, world: int, device: Any) -> None:
    reference = _reference_seconds(args, device)
    full_kv = 2 * args.seq * 4 * 32 * 4  # fp32 K and V of the whole sequence, batch 1
    print(
        f"measured: world {world} ({device.type}), seq {args.seq}, 4 heads x 32, fp32, causal, "
        f"fwd+bwd, median of {args.reps}"
    )
    print(f"single-process SDPA on the full sequence: {reference * 1e3:.1f} ms")
    print(
        f"{'algorithm':>10} {'layout':>10} {'ms':>8} {'x SDPA':>7} {'MiB sent/rank':>14} "
        f"{'x full K+V':>10} {'block time max/min':>19}"
    )
    for algorithm, load_balance, gathered in rows:
        seconds = max(float(g[0]) for g in gathered)
        sent = max(float(g[1]) for g in gathered)
        blocks = [float(g[2]) for g in gathered]
        layout = "head-tail" if load_balance else "contiguous"
        print(
            f"{algorithm:>10} {layout:>10} {seconds * 1e3:>8.1f} {seconds / reference:>7.2f} "
            f"{sent / 2**20:>14.2f} {sent / full_kv:>10.2f} {ratio(blocks):>19.2f}"
        )
    print(
        "ms: slowest rank; bytes: what one rank sends in forward+backward; block time: seconds "
        "inside attention blocks per rank (on an oversubscribed CPU this is noisy)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--world", type=int, default=4, help="ranks (a2a_p2p uses a2a 2)")
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print_balance(args.seq)
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "init")
        mp.spawn(_rank_main, args=(args.world, init_file, args), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
