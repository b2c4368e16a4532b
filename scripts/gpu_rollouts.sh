#!/usr/bin/env bash
# The rollout engine on a GPU machine, as one prepared run; figures land in $OUT (default: runs/gpu_rollouts):
#   1. the CUDA-graph check (tests/test_inference_engine.py's CUDA test: graphed steps against eager ones);
#   2. the rollout benchmark on CUDA: CUDA graphs off / on, the engine's reads of the writing rows off / on, batches
#      128, 512 and 2,048 of the 1,000 test problems; then each problem played 4 times (batches 2,048 and 4,096);
#   3. GRPO runs of the default configuration side by side (seeds 0, 1, 2), each bounded in time, with validation
#      every EVAL steps: how far the default learns when its steps cost less.
#
#   bash scripts/gpu_rollouts.sh            # on the GPU machine, from the repository root
#   QUICK=1 bash scripts/gpu_rollouts.sh    # a smoke run: 200 problems, batch 128, 2 GRPO steps (any machine)
#
# CHECK_S / BENCH_S / GRPO_S bound the parts (default 90, 150 and 250 s: together under a 9-minute device call; a
# GRPO run card is rewritten at every checkpoint, so a run cut short still reports its steps).
# A machine without the project's dependencies installs them from wheels in .whl/ first, when that folder exists
# (pure-Python wheels for what the image lacks, pytest included: see docs/benchmarks_rollouts.md).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/gpu_rollouts}"
mkdir -p "$OUT"
if [ -d .whl ] && ! python3 -c "import trl, gymnasium, tyro" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site:$PWD"
fi
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || echo "no GPU") | tee "$OUT/device.txt"
if [ "${QUICK:-0}" = 1 ]; then
  bench=(--problems 200 --batches 128) repeat=(--problems 50 --batches 128) grpo=(--steps 2 --eval-problems 16 --eval-samples 0)
  seeds=(0)
else
  bench=(--batches 128 512 2048) repeat=(--batches 2048 4096) seeds=(0 1 2)
  grpo=(--steps "${STEPS:-300}" --eval-interval "${EVAL:-20}" --save-steps "${EVAL:-20}")
fi

echo "--- 1. CUDA graphs against eager steps"
timeout "${CHECK_S:-90}" python3 -m pytest -q -p no:cacheprovider --noconftest -o addopts="" \
  tests/test_inference_engine.py -k cuda_graphs 2>&1 | tail -n 5 | tee "$OUT/check_graphs.log"

echo "--- 2. the rollout benchmark"
devices=(--devices cuda)
python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" || devices=(--devices cpu)
start=$SECONDS
timeout "${BENCH_S:-150}" python3 benchmarks/bench_rollouts.py "${devices[@]}" "${bench[@]}" --graphs off on \
  --peek-from 0 4 --runs 3 --json "$OUT/bench_rollouts.json" 2>&1 | grep -v "Loading weights" | tee "$OUT/bench_rollouts.log"
left=$(( ${BENCH_S:-150} - (SECONDS - start) ))
[ "$left" -gt 10 ] && timeout "$left" python3 benchmarks/bench_rollouts.py "${devices[@]}" "${repeat[@]}" --repeat 4 \
  --graphs off on --runs 3 --json "$OUT/bench_rollouts_repeat4.json" 2>&1 | grep -v "Loading weights" \
  | tee "$OUT/bench_rollouts_repeat4.log"

echo "--- 3. GRPO, seeds ${seeds[*]} side by side"
RUN="${RUN:-runs/gpu_rollouts_grpo}"  # the run directories (checkpoints too); $OUT gets cards, summaries and metrics
for seed in "${seeds[@]}"; do
  timeout "${GRPO_S:-250}" python3 baselines/llm_grpo.py "${grpo[@]}" --seed "$seed" --output-dir "$RUN/s$seed" \
    --report-to none > "$OUT/grpo_s$seed.log" 2>&1 &
done
wait
for seed in "${seeds[@]}"; do
  for f in README.md summary.json metrics.csv; do
    [ -f "$RUN/s$seed/$f" ] && cp "$RUN/s$seed/$f" "$OUT/grpo_s${seed}_$f"
  done
done
echo "--- summary"
cat "$OUT/check_graphs.log"
grep -h "batch" "$OUT"/bench_rollouts*.log
for seed in "${seeds[@]}"; do
  echo "seed $seed:"; grep -v "it/s]" "$OUT/grpo_s$seed.log" | tail -n 4
  [ -f "$OUT/grpo_s${seed}_metrics.csv" ] && cat "$OUT/grpo_s${seed}_metrics.csv"
done
