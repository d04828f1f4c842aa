#!/usr/bin/env bash
# Reproduce the shipped default checkpoint (kinemesh/assets/checkpoints/default/).
#   1. generate the default synthetic dataset (articulated + elastic + cloth; scripts/make_dataset.sh,
#      about 4-12 min on 2 cores, resumable),
#   2. train the cpu-small conditional VAE for a fixed wall-clock budget (MINUTES, default 60, as for the shipped checkpoint) with NPROC
#      data-parallel processes (default 2 = one per core, torchrun + gloo; NPROC=1 trains in one process),
#      resumable: rerun with RESUME=1 to continue the same run, its steps accumulate,
#   3. copy config.json + model.safetensors (~5 MB) into the package.
# Total about 1 hour on the 2-core CPU machine (no GPU). On a GPU machine use e.g.
#   DEVICE=cuda PRESET=paper NPROC=8 MINUTES=600 scripts/make_checkpoint.sh
# Usage: [NPROC=2] [MINUTES=60] [RESUME=1] scripts/make_checkpoint.sh [DATA_DIR] [RUN_DIR]
set -euo pipefail
DATA="${1:-data/default}"
RUN="${2:-runs/default}"
MINUTES="${MINUTES:-60}"
PRESET="${PRESET:-cpu-small}"
DEVICE="${DEVICE:-cpu}"
THREADS="${THREADS:-1}"
SEED="${SEED:-0}"
NPROC="${NPROC:-2}"
DEST="kinemesh/assets/checkpoints/default"

if [ ! -f "$DATA/manifest.jsonl" ]; then
  bash scripts/make_dataset.sh "$DATA"
fi
EXTRA=()
if [ "${RESUME:-0}" = "1" ]; then EXTRA+=(--resume); fi
start=$(date +%s)
if [ "$NPROC" -gt 1 ]; then
  # data-parallel: NPROC processes (gloo on CPU, nccl on CUDA), each with its own batch
  LAUNCH=(torchrun --standalone --nproc_per_node "$NPROC" -m kinemesh.cli)
else
  LAUNCH=(kinemesh)
fi
"${LAUNCH[@]}" train --data "$DATA" --preset "$PRESET" --out "$RUN" --minutes "$MINUTES" --device "$DEVICE" \
  --threads "$THREADS" --seed "$SEED" --no-progress "${EXTRA[@]}"
echo "training took $(( ($(date +%s) - start) / 60 )) min"
mkdir -p "$DEST"
cp "$RUN/config.json" "$DEST/config.json"
cp "$RUN/model.safetensors" "$DEST/model.safetensors"
# the calibrated prior (written by `kinemesh train` at the end; `kinemesh calibrate` re-makes it)
cp "$RUN/prior_calibration.safetensors" "$DEST/prior_calibration.safetensors"
ls -la "$DEST"
echo "evaluate: kinemesh eval model --data $DATA --split test --out docs/results/model_test.json"
