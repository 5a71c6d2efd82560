#!/usr/bin/env bash
# The reference workload on one or two GPUs (docs/results/workload.md, "The reference workload"):
# a smoke run, five probe runs on one GPU, a 1-target -> 1-drafter run on two GPUs when there
# are two, and the counters shim's overhead. Writes logs and JSON under $OUT (or ./gpu-out).
#   OUT=gpu-out bash scripts/h200_workload.sh
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,memory.used,temperature.gpu --format=csv | tee "$OUT/gpus.txt"
python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())" | tee -a "$OUT/gpus.txt"
echo "== smoke: one h200 run"
python3 scripts/bench_workload.py --preset h200 --runs 1 --json "$OUT/smoke.json" 2>&1 | tail -n 30 | tee "$OUT/smoke.log"
grep -q "tok/s" "$OUT/smoke.log" || { echo "smoke failed"; exit 1; }
echo "== five probe runs, one GPU"
CUDA_VISIBLE_DEVICES=0 python3 scripts/bench_workload.py --preset h200 --runs 5 --json "$OUT/h200_1gpu.json" 2>&1 | tee "$OUT/h200_1gpu.log"
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  echo "== two GPUs: 1 target rank -> 1 drafter rank"
  python3 scripts/bench_workload.py --preset h200 --nproc 2 --runs 3 --json "$OUT/h200_2gpu.json" 2>&1 | tee "$OUT/h200_2gpu.log"
fi
echo "== counters shim overhead, interleaved pairs"
CUDA_VISIBLE_DEVICES=0 python3 scripts/bench_instrument.py --preset h200 --pairs 3 2>&1 | tee "$OUT/instrument.log"
