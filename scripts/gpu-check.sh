#!/usr/bin/env bash
# The CP checks that need CUDA, in one short run: the SDPA backend policy's kernel on a GPU
# (one process), then, with 2+ GPUs, PyTorch's CP (torchtitan's path) and TransformerEngine
# against the oracle, and the policy inside torch's ring, through the batched runner on NCCL.
# On CPU everything here skips, with its reason. Usage: scripts/gpu-check.sh [RESULTS_DIR]
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
if (( gpus < 2 )); then
  echo "gpu-check: $gpus GPU(s) visible; the 2-rank NCCL configs need 2, skipped" >&2
  exit 0
fi
"$python" -m pytest -q -rs -p no:cacheprovider --pyargs cpci.suites.cp \
  -k "test_adapters or test_backend_policy" \
  --cpci-backend nccl --cpci-results "$out/results.jsonl" --junitxml "$out/suite.xml"
