#!/usr/bin/env bash
# Reproduce the shipped default checkpoint (kinemesh/assets/checkpoints/default/: stages 1 and 3) or the
# fine-tuned candidate (FINETUNE=1, stage 2; not shipped: its prior samples detach parts more often,
# docs/results/model.md "Fine-tune on synthetic + real + soft data").
#   1. pre-train: generate the synthetic dataset data/default (scripts/make_dataset.sh, 4-12 min on 2 cores,
#      resumable) and train the cpu-small conditional VAE on it from scratch for MINUTES (default 60) with
#      NPROC data-parallel processes (default 2 = one per core, torchrun + gloo; NPROC=1 trains in one process)
#      into PRE_RUN (default runs/default),
#   2. fine-tune (FINETUNE=1): generate the soft + hanging-cloth set data/soft
#      (`PARTS=default,soft scripts/make_dataset.sh data/soft`: the synthetic set again plus the soft part,
#      with a val split; about 40 min shared) and the real 4D set data/real4d (`kinemesh synth --from-urdf
#      data/real_train`: 158 PartNet-Mobility objects of the PartNet-Mobility download unpacked into data/,
#      about 15 min), then train from PRE_RUN's weights (--init) on both for FT_MINUTES (default 45) at half the
#      learning rate, soft:real sampled 2:1, into RUN (default runs/retrain; 45 min, 3,536 steps, 113k pairs),
#   3. posterior fine-tune (POSTERIOR=1, the default; skipped with FINETUNE=1): the posterior encoder alone
#      retrained from PRE_RUN's weights on the soft set and the real 4D set of stage 2 (generated as there when
#      missing), sampled 2:1, for POST_MINUTES (default 30) at lr 3e-4 with the prior and the decoder frozen
#      (`--freeze prior,decoder`), into POST_RUN (default runs/posterior; 30 min, 8,913 steps, 285k pairs). The
#      state space (prior and decoder) stays PRE_RUN's, and so does its calibrated prior (copied, not re-fitted:
#      docs/results/model.md, "A posterior fine-tune on soft and real data"),
#   4. copy config.json + model.safetensors (~5 MB) + the calibrated prior into the package.
# Resumable: rerun with RESUME=1 to continue the last stage's run, its steps accumulate (POSTERIOR=0 RESUME=1
# continues stage 1).
# Total about 1 h (stage 1) + 1 h 10 min (stage 3 with its data), about 3 h with FINETUNE=1, on the 2-core CPU
# machine (no GPU). On a GPU machine use e.g.
#   DEVICE=cuda PRESET=paper NPROC=8 MINUTES=600 scripts/make_checkpoint.sh
# Usage: [NPROC=2] [MINUTES=60] [FT_MINUTES=45] [POST_MINUTES=30] [FINETUNE=1] [POSTERIOR=0] [RESUME=1]
#        scripts/make_checkpoint.sh [DATA_DIR] [RUN_DIR]
set -euo pipefail
DATA="${1:-data/default}"
RUN="${2:-runs/retrain}"
PRE_RUN="${PRE_RUN:-runs/default}"
MINUTES="${MINUTES:-60}"
FT_MINUTES="${FT_MINUTES:-45}"
FINETUNE="${FINETUNE:-0}"
POSTERIOR="${POSTERIOR:-1}"
POST_RUN="${POST_RUN:-runs/posterior}"
POST_MINUTES="${POST_MINUTES:-30}"
PRESET="${PRESET:-cpu-small}"
DEVICE="${DEVICE:-cpu}"
THREADS="${THREADS:-1}"
SEED="${SEED:-0}"
NPROC="${NPROC:-2}"
DEST="kinemesh/assets/checkpoints/default"

if [ "$NPROC" -gt 1 ]; then
  # data-parallel: NPROC processes (gloo on CPU, nccl on CUDA), each with its own batch
  LAUNCH=(torchrun --standalone --nproc_per_node "$NPROC" -m kinemesh.cli)
else
  LAUNCH=(kinemesh)
fi
COMMON=(--preset "$PRESET" --device "$DEVICE" --threads "$THREADS" --seed "$SEED" --no-progress)
if [ "${RESUME:-0}" = "1" ]; then COMMON+=(--resume); fi
start=$(date +%s)

if [ ! -f "$PRE_RUN/model.safetensors" ] || { [ "$FINETUNE" != "1" ] && [ "$POSTERIOR" != "1" ] && [ "${RESUME:-0}" = "1" ]; }; then
  if [ ! -f "$DATA/manifest.jsonl" ]; then bash scripts/make_dataset.sh "$DATA"; fi
  "${LAUNCH[@]}" train --data "$DATA" --out "$PRE_RUN" --minutes "$MINUTES" "${COMMON[@]}"
fi
FINAL="$PRE_RUN"
if [ "$FINETUNE" = "1" ] || [ "$POSTERIOR" = "1" ]; then  # the soft set and the real 4D set (stages 2 and 3)
  if [ ! -f data/soft/manifest.jsonl ]; then PARTS=default,soft bash scripts/make_dataset.sh data/soft; fi
  if [ ! -f data/real4d/manifest.jsonl ]; then
    kinemesh synth --from-urdf data/real_train --out data/real4d --workers 1 --no-progress
  fi
fi
if [ "$FINETUNE" = "1" ]; then
  "${LAUNCH[@]}" train --data data/soft:2 --data data/real4d:1 --init "$PRE_RUN" --lr 5e-4 --out "$RUN" \
    --minutes "$FT_MINUTES" "${COMMON[@]}"
  FINAL="$RUN"
elif [ "$POSTERIOR" = "1" ]; then
  "${LAUNCH[@]}" train --data data/soft:2 --data data/real4d:1 --init "$PRE_RUN" --freeze prior,decoder --lr 3e-4 \
    --out "$POST_RUN" --minutes "$POST_MINUTES" --no-calibrate "${COMMON[@]}"
  cp "$PRE_RUN/prior_calibration.safetensors" "$POST_RUN/prior_calibration.safetensors"
  FINAL="$POST_RUN"
fi
echo "training took $(( ($(date +%s) - start) / 60 )) min"
mkdir -p "$DEST"
cp "$FINAL/config.json" "$DEST/config.json"
cp "$FINAL/model.safetensors" "$DEST/model.safetensors"
# the calibrated prior (written by `kinemesh train` at the end; `kinemesh calibrate` re-makes it)
cp "$FINAL/prior_calibration.safetensors" "$DEST/prior_calibration.safetensors"
ls -la "$DEST"
echo "evaluate: kinemesh eval model --data data/real4d --split val --parts; kinemesh eval model --data data/soft --split val"
