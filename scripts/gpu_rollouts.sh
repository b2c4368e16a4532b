#!/usr/bin/env bash
# The rollout engine on a GPU machine, as one prepared run: the rollout benchmark (CUDA and the machine's CPU),
# then the default GRPO run, each bounded in time; figures land in $OUT (default: runs/gpu_rollouts).
#
#   bash scripts/gpu_rollouts.sh            # on the GPU machine, from the repository root
#   QUICK=1 bash scripts/gpu_rollouts.sh    # a smoke run: 200 problems, batch 128, 2 GRPO steps (any machine)
#
# BENCH_S / GRPO_S bound the two parts (default 240 s and 290 s: together under a 10-minute device call; the GRPO
# run card is rewritten at every checkpoint, so a run cut short still reports its steps).
# A machine without the project's dependencies installs them from wheels in .whl/ first, when that folder exists
# (pure-Python wheels for what the image lacks: see the GPU notes in docs/benchmarks_rollouts.md).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/gpu_rollouts}"
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site:$PWD"
fi
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || echo "no GPU") | tee "$OUT/device.txt"
if [ "${QUICK:-0}" = 1 ]; then
  bench=(--quick) grpo=(--steps 2 --eval-problems 16 --eval-samples 0)
else
  bench=() grpo=()
fi
timeout "${BENCH_S:-240}" python3 benchmarks/bench_rollouts.py "${bench[@]}" --json "$OUT/bench_rollouts.json" 2>&1 | tee "$OUT/bench_rollouts.log"
RUN="${RUN:-runs/gpu_rollouts_grpo}"  # the run directory (checkpoints too); $OUT gets its card, summary and metrics
timeout "${GRPO_S:-290}" python3 baselines/llm_grpo.py "${grpo[@]}" --output-dir "$RUN" --report-to none 2>&1 \
  | grep -v "it/s]" | tee "$OUT/grpo.log"
for f in README.md summary.json metrics.csv; do
  [ -f "$RUN/$f" ] && cp "$RUN/$f" "$OUT/grpo_$f"
done
echo "--- summary"
tail -n 4 "$OUT/bench_rollouts.log"
tail -n 6 "$OUT/grpo.log"
