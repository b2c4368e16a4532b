#!/usr/bin/env bash
# The seed paper's reward comparison at equal wall-clock on one GPU machine, as one prepared run; the write-up
# (reward_comparison.md and its per-run records: Welch's t against sparse, Holm, bootstrap, curves), the runs' small files and the best variant's model land in $OUT (default: runs/gpu_compare_out):
#   every (variant, seed) is one baselines/llm_grpo.py run of MINUTES minutes of training, all side by side, then
#   every run plays the 1,000 test problems greedily at its end (baselines/compare_llm_rewards.py).
#
#   bash scripts/gpu_compare.sh            # on the GPU machine, from the repository root
#   QUICK=1 bash scripts/gpu_compare.sh    # a smoke run: 2 variants x 2 seeds, 2 steps, 10 test problems (any machine)
#
# VARIANTS / SEEDS / MINUTES / BOUND_S change the comparison and bound the whole of it (default: 4 variants x 5 seeds,
# 4.5 minutes, 500 s: under a 9-minute device call with the start-up). A machine without the project's dependencies
# installs them from wheels in .whl/ first (docs/benchmarks_rollouts.md).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/gpu_compare_out}"
RUNS="${RUNS:-runs/gpu_compare}"
mkdir -p "$OUT" "$RUNS"
if [ -d .whl ] && ! python3 -c "import trl, gymnasium, tyro" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site:$PWD"
fi
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || echo "no GPU"; nproc) | tee "$OUT/device.txt"
variants="${VARIANTS:-sparse,oracle-perfect,oracle-perfect@step,critic}"
if [ "${QUICK:-0}" = 1 ]; then
  seeds="${SEEDS:-0,1}" variants="${VARIANTS:-sparse,critic@step}"
  size=(--steps 2 --max-minutes "${MINUTES:-0.02}" --prompts-per-step 2 --eval-problems 8 --test-problems 10)
else
  seeds="${SEEDS:-0,1,2,3,4}"
  size=(--steps 1000 --max-minutes "${MINUTES:-4.5}" --eval-interval 25)
fi
# every run side by side: the comparison's own reading of the lists (SEEDS=0-4 is five seeds, not one)
jobs=$(python3 - "$variants" "$seeds" <<'PY'
import sys
from countdown_gym.dataclass_cli import parse
from baselines.compare_llm_rewards import Options
o = parse(Options, ["--variants", sys.argv[1], "--seeds", sys.argv[2]], prog="gpu_compare.sh")
print(len(o.variants) * len(o.seed_list))
PY
) || exit 2
echo "--- $jobs runs side by side: $variants x seeds $seeds"
timeout "${BOUND_S:-500}" python3 baselines/compare_llm_rewards.py --variants "$variants" --seeds "$seeds" "${size[@]}" \
  --jobs "$jobs" --runs-dir "$RUNS" --results-dir "$OUT" 2>&1 | tee "$OUT/compare.log"
echo "--- exit ${PIPESTATUS[0]}; the runs' small files -> $OUT/runs.tar.gz"
tar -czf "$OUT/runs.tar.gz" --exclude='checkpoint-*' --exclude='final' --exclude='best' --exclude='tensorboard' \
  --exclude='*.safetensors' "$RUNS"
# the best variant's model for the leaderboard: the variant of the highest mean test success, its seed of the highest
# last validation (validation picks the seed, not test)
python3 - "$RUNS" "$OUT" <<'PY'
import json, pathlib, shutil, statistics, sys
runs, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
by = {}
for t in runs.glob("*/held_out.json"):
    held, summary = json.loads(t.read_text()), t.parent / "summary.json"
    if "result" not in held or not summary.is_file():
        continue
    by.setdefault(t.parent.name.rsplit("-s", 1)[0], []).append(
        (json.loads(summary.read_text())["last"]["greedy_success"], held["result"]["end"], t.parent))
if by:
    variant = max(by, key=lambda v: statistics.mean(x[1] for x in by[v]))
    run = max(by[variant], key=lambda x: x[0])[2]
    shutil.make_archive(str(out / "best_model"), "gztar", run, "final")
    print(f"best variant {variant}: {run.name}/final -> {out}/best_model.tar.gz")
PY
for run in "$RUNS"/*/; do
  echo "$(basename "$run"): $(grep -h "stopped at step\|total .* s;" "$run/stdout.log" 2>/dev/null | tr '\n' ' ')"
done
