#!/usr/bin/env bash
# Reproduce the shipped default checkpoint (kinemesh/assets/checkpoints/default/).
#   1. generate the default synthetic dataset (articulated + elastic + cloth; scripts/make_dataset.sh,
#      ~5-10 min on 2 cores, resumable),
#   2. train the cpu-small conditional VAE for a fixed wall-clock budget (default 45 min, 1 torch thread:
#      on the shared 2-core machine 2 threads were 2-3x slower than 1; resumable: rerun with RESUME=1 to
#      continue the same run, its steps accumulate),
#   3. copy config.json + model.safetensors (~5 MB) into the package.
# Total about 55 minutes on the 2-core CPU machine (no GPU). On a GPU machine use e.g.
#   DEVICE=cuda PRESET=paper MINUTES=600 scripts/make_checkpoint.sh
# or many GPUs: torchrun --nproc_per_node 8 -m kinemesh train --data data/default --preset paper ...
# Usage: scripts/make_checkpoint.sh [DATA_DIR] [RUN_DIR]
set -euo pipefail
DATA="${1:-data/default}"
RUN="${2:-runs/default}"
MINUTES="${MINUTES:-45}"
PRESET="${PRESET:-cpu-small}"
DEVICE="${DEVICE:-cpu}"
THREADS="${THREADS:-1}"
SEED="${SEED:-0}"
DEST="kinemesh/assets/checkpoints/default"

if [ ! -f "$DATA/manifest.jsonl" ]; then
  bash scripts/make_dataset.sh "$DATA"
fi
EXTRA=()
if [ "${RESUME:-0}" = "1" ]; then EXTRA+=(--resume); fi
start=$(date +%s)
kinemesh train --data "$DATA" --preset "$PRESET" --out "$RUN" --minutes "$MINUTES" --device "$DEVICE" \
  --threads "$THREADS" --seed "$SEED" "${EXTRA[@]}"
echo "training took $(( ($(date +%s) - start) / 60 )) min"
mkdir -p "$DEST"
cp "$RUN/config.json" "$DEST/config.json"
cp "$RUN/model.safetensors" "$DEST/model.safetensors"
ls -la "$DEST"
echo "evaluate: kinemesh eval model --data $DATA --split test --out docs/results/model_test.json"
