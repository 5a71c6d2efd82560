#!/usr/bin/env bash
# The demo hunt with the h200 preset on one GPU (docs/results/demo-hunt-h200.md, "The demo hunt on one H200"):
# HEAD~20..HEAD of the demo repository, two planted culprits. The hunt is stopped after LIMIT
# seconds and resumes from the stored samples when run again (STORE_IN=a copied store).
# GRID=1 first runs the accuracy grid (docs/results/accuracy-runs.md) on the machine's CPU cores.
# TOKENS (default 76800) is the demo's budget, HUNT_FLAGS (default "--instrument separate") the
# run's flags: TOKENS=38400 HUNT_FLAGS="" is the demo as built, every cost lever on (docs/cost.md):
# its pyproject sets overlap = 3 (three probes at once, windows alone; three fit on an H200), and
# probes compile without inductor's worker pool; HUNT_FLAGS="--overlap 1" runs one at a time.
# HUNKS=1 hunts the demo's uncommitted diff (`regressbisect hunks`) instead of its commits.
#   OUT=gpu-out bash scripts/h200_demo_hunt.sh    # LIMIT=seconds, STORE_IN=path resumes the hunt
set -uo pipefail
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# the checkout's package, where it is not installed (a machine without PyPI cannot build an
# editable install: `python3 -m pip install --no-deps` the wheels of gitpython, gitdb, smmap and
# ruptures first)
python3 -c "import regressbisect" 2>/dev/null || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$(date +%s)
LIMIT=${LIMIT:-570}                       # seconds for the whole script; run it again to resume
nvidia-smi --query-gpu=name,clocks.sm,memory.used --format=csv > "$OUT/gpus.txt"
if [ "${GRID:-0}" = 1 ]; then
  python3 scripts/bench_accuracy.py --key-only --trials 200 --jobs 16 --out "$OUT/key.json" > "$OUT/accuracy.log" 2>&1
  python3 scripts/bench_accuracy.py --resume "$OUT/key.json" --trials 200 --trials-other 60 --jobs 16 \
    --out "$OUT/accuracy.md" >> "$OUT/accuracy.log" 2>&1
  echo "grid wall=$(( $(date +%s) - start ))s" >> "$OUT/accuracy.log"
fi
DEMO=/tmp/gdemo
[ -d "$DEMO" ] || python3 -m regressbisect demo "$DEMO" --build-only --preset h200 --tokens "${TOKENS:-76800}" > "$OUT/demo_run.out" 2>&1
STORE="$DEMO/.git/regressbisect/store.sqlite"
if [ -n "${STORE_IN:-}" ]; then mkdir -p "$(dirname "$STORE")" && cp "$STORE_IN" "$STORE"; fi
left=$(( LIMIT - ($(date +%s) - start) - 15 ))
hunt_start=$(date +%s)
if [ "${HUNKS:-0}" = 1 ]; then hunt=(hunks); report="$OUT/demo_hunks_h200.json"
else hunt=(run HEAD~20 HEAD); report="$OUT/demo_h200.json"; fi
( cd "$DEMO" && timeout "$left" python3 -m regressbisect "${hunt[@]}" ${HUNT_FLAGS---instrument separate} \
    --json "$report" >> "$OUT/demo_run.out" 2> "$OUT/demo_run.err" )
echo "hunt rc=$? wall=$(( $(date +%s) - hunt_start ))s (limit ${left}s)" >> "$OUT/demo_run.out"
# a consistent copy of the WAL store, to resume from on another machine (STORE_IN)
python3 -c "import sqlite3,sys; s=sqlite3.connect(sys.argv[1]); d=sqlite3.connect(sys.argv[2]); s.backup(d); d.close()" \
  "$STORE" "$OUT/store.sqlite"
tail -n 30 "$OUT/demo_run.out"; [ ! -f "$OUT/accuracy.log" ] || tail -n 5 "$OUT/accuracy.log"
