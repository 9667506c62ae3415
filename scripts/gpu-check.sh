#!/usr/bin/env bash
# The checks that need CUDA, in one short run (<= 8 minutes on one 8-GPU machine):
# 1. the SDPA backend policy's kernel on a GPU, cp = 1 and cp > 1 (one process);
# 2. with 2+ GPUs: PyTorch's CP (torchtitan's path) and TransformerEngine against the oracle, and
#    the policy inside torch's ring, through the batched runner on NCCL;
# 3. NCCL world start-up per world (size: every GPU present, 1 at least): torchrun per config,
#    forked ranks per config, and the pool with forked ranks;
# 4. a forced hang (rank 0 waits in an all_reduce rank 1 never joins): the timeout result must
#    carry NCCL's flight recorder;
# then one summary table. On CPU the GPU tests skip, with their reasons.
# Usage: scripts/gpu-check.sh [RESULTS_DIR]
# GPU_CHECK_ON_CPU=1 runs steps 3 and 4 on gloo with 2 ranks where no GPU is visible (to try the
# script itself; the hang then has no flight recorder to attach).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-check}}"
mkdir -p "$out"
python="${PYTHON:-python}"
if [[ -z "${PYTHON:-}" && -x .venv/bin/python ]]; then
  python=.venv/bin/python
fi

"$python" - <<'PY' | tee "$out/environment.txt"
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPUs {torch.cuda.device_count()}")
for i in range(torch.cuda.device_count()):
    print(f"  cuda:{i} {torch.cuda.get_device_name(i)}")
PY

"$python" -m pytest -q -rs -p no:cacheprovider \
  tests/cp/test_policy_in_force.py tests/cp/test_torch_cp.py tests/cp/test_backend.py \
  --junitxml "$out/single-gpu.xml"

gpus="$("$python" -c 'import torch; print(torch.cuda.device_count())')"
if (( gpus >= 2 )); then
  "$python" -m pytest -q -rs -p no:cacheprovider --pyargs cpci.suites.cp \
    -k "test_adapters or test_backend_policy" \
    --cpci-backend nccl --cpci-results "$out/results.jsonl" --junitxml "$out/suite.xml" || true
else
  echo "gpu-check: $gpus GPU(s) visible; the 2-rank CP configs need 2, skipped" >&2
fi
backend=nccl
world=$(( gpus > 8 ? 8 : gpus ))
if (( gpus < 1 )); then
  if [[ "${GPU_CHECK_ON_CPU:-}" != 1 ]]; then
    echo "gpu-check: no GPU visible; NCCL start-up and the forced hang need one" >&2
    exit 0
  fi
  backend=gloo
  world=2
fi

# 3 and 4: a small suite, written next to the results.
suite="$out/nccl_suite"
mkdir -p "$suite"
cat > "$suite/test_nccl_worlds.py" <<PY
import pytest
import torch
import torch.distributed as dist


@pytest.mark.cpci(world_size=$world)
@pytest.mark.parametrize("i", range(8))
def test_all_reduce(i, cpci_dist):
    x = torch.ones(1024, device=cpci_dist.device)
    dist.all_reduce(x)
    assert x[0].item() == dist.get_world_size()


@pytest.mark.cpci(world_size=max(2, $world), timeout=20)
def test_forced_hang(cpci_dist):
    x = torch.ones(8, device=cpci_dist.device)
    if dist.get_rank() == 0:
        dist.all_reduce(x)  # rank 1 never joins: the world times out
    else:
        import time
        time.sleep(120)
PY
run_mode() {  # name, extra pytest args...
  local name="$1"; shift
  local start="$EPOCHREALTIME"
  "$python" -m pytest -q -p no:cacheprovider "$suite/test_nccl_worlds.py" -k test_all_reduce \
    --cpci-backend "$backend" --cpci-results "$out/startup-$name.jsonl" "$@" > "$out/startup-$name.log" 2>&1 || true
  echo "$name $start $EPOCHREALTIME" >> "$out/startup-walls.txt"
}
rm -f "$out/startup-walls.txt"
run_mode torchrun-per-config --cpci-batch-size=1 --cpci-launcher=torchrun
run_mode fork-per-config --cpci-batch-size=1
run_mode pool-fork
if (( world >= 2 )); then
  "$python" -m pytest -q -p no:cacheprovider "$suite/test_nccl_worlds.py" -k test_forced_hang \
    --cpci-backend "$backend" --cpci-results "$out/hang.jsonl" > "$out/hang.log" 2>&1 || true
fi

"$python" - "$out" <<'PY' | tee "$out/summary.txt"
import json
import statistics
import sys
from pathlib import Path

out = Path(sys.argv[1])


def records(name):
    path = out / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def outcomes(name):
    counts = {}
    for r in records(name):
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    return ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "not run"


print("| check | result |")
print("|---|---|")
print(f"| environment | {(out / 'environment.txt').read_text().splitlines()[0]} |")
print(f"| CP suite on NCCL (adapters, backend policy) | {outcomes('results.jsonl')} |")
walls = {}
if (out / "startup-walls.txt").exists():
    for line in (out / "startup-walls.txt").read_text().splitlines():
        name, start, end = line.split()
        walls[name] = float(end) - float(start)
for name in ("torchrun-per-config", "fork-per-config", "pool-fork"):
    rs = records(f"startup-{name}.jsonl")
    starts = {}
    for r in rs:
        batch = r.get("batch") or {}
        if batch.get("start_s") is not None:
            starts.setdefault((batch["index"], batch["world"]), batch["start_s"])
    ordered = [starts[k] for k in sorted(starts)]
    later = f"{statistics.median(ordered[1:]):.2f} s" if len(ordered) > 1 else "-"
    first = f"{ordered[0]:.2f} s" if ordered else "-"
    print(
        f"| start-up, {name} | {outcomes(f'startup-{name}.jsonl')}; wall "
        f"{walls.get(name, float('nan')):.1f} s; {len(ordered)} world(s); first {first}, "
        f"later median {later} |"
    )
hang = records("hang.jsonl")
if hang:
    text = "\n".join(e.get("detail") or e.get("message", "") for e in hang[0]["rank_errors"])
    recorder = "flight recorder attached" if "NCCL flight recorder" in text else "NO flight recorder"
    print(f"| forced hang | {hang[0]['outcome']}; {recorder} |")
else:
    print("| forced hang | not run (needs 2 GPUs) |")
PY
