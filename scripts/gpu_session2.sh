#!/usr/bin/env bash
# GPU session 2 (one H200): the demo's uncommitted diff hunted with the h200 preset, and the
# accuracy benchmark's key cells on the machine's spare CPU cores. BENCH=0 skips the benchmark:
# probes run beside it (one h200 step each, then) scattered by 5% against 0.2% alone before.
#   OUT=gpu-out bash scripts/gpu_session2.sh            # STORE_IN=path resumes an earlier store
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,memory.used --format=csv | tee "$OUT/gpus.txt"
[ "${BENCH:-1}" = 1 ] && timeout "${BENCH_LIMIT:-560}" taskset -c 4-15 python3 scripts/bench_accuracy.py --key-only --trials 200 \
  --jobs 12 --out "$OUT/accuracy_key.md" --out "$OUT/accuracy_key.json" > "$OUT/accuracy.log" 2>&1 &
BENCH_PID=$!
DEMO=/tmp/gdemo
python3 -m regressbisect demo "$DEMO" --build-only --preset h200 | tee "$OUT/demo_build.txt"
STORE="$DEMO/.git/regressbisect/store.sqlite"
if [ -n "${STORE_IN:-}" ]; then mkdir -p "$(dirname "$STORE")" && cp "$STORE_IN" "$STORE"; fi
start=$(date +%s)
( cd "$DEMO" && timeout "${HUNT_LIMIT:-470}" taskset -c 0-3 python3 -m regressbisect hunks \
    --json "$OUT/hunks_h200.json" > "$OUT/hunks_h200.out" 2> "$OUT/hunks_h200.err" )
echo "hunks rc=$? wall=$(( $(date +%s) - start ))s" | tee -a "$OUT/hunks_h200.out"
# a consistent copy of the WAL store, to resume from in a later call
python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
  "$STORE" "$OUT/store.sqlite"
[ "${BENCH:-1}" = 1 ] && wait $BENCH_PID; echo "bench rc=$?" >> "$OUT/accuracy.log"
tail -n 40 "$OUT/hunks_h200.out"
