#!/usr/bin/env bash
# Train variants of the articulation predictor side by side from one samples file, on a GPU (or the CPU):
# the data are generated once on the CPU machine, then every variant reads them, so variants differ only in
# their schedule, network or loss. Each variant is a predictor folder (+ no_pretrain/) under DEST; pick one on
# the validation sets (`kinemesh eval articulation --validation --no-heuristic --real-val data/real_train
# --weights DEST/NAME`) before copying it to kinemesh/assets/articulation.
#   1. data (CPU, about 10 min on 2 cores):
#        python -m kinemesh.articulation.train --generate-only --samples runs/artsamples/b.npz --workers 2 $DATA
#   2. variants (this script; DEVICE=cuda on a GPU machine, all variants at once, a few minutes on one H200):
#        DEVICE=cuda DEST=runs/artvariants bash scripts/train_articulation_variants.sh
# DATA must be the data options of step 1 (the samples file records them and is only read when they match).
# Usage: [DEVICE=cpu] [DEST=runs/artvariants] [SAMPLES=runs/artsamples/b.npz] [LIMIT=seconds per variant]
#        [VARIANTS="base tb long wide"] [EXTRA="options for every variant"] scripts/train_articulation_variants.sh
set -uo pipefail
cd "$(dirname "$0")/.."
DEVICE="${DEVICE:-cpu}"
DEST="${DEST:-runs/artvariants}"
SAMPLES="${SAMPLES:-runs/artsamples/b.npz}"
LIMIT="${LIMIT:-0}"
PY="${PYTHON:-python3}"
DATA="${DATA:---real data/real_train --n-finetune 16 --n-pretrain 10 --n-assemblies-ft 60 --n-assemblies-pre 40 --n-augment 2 --real-copies 4}"
VARIANTS="${VARIANTS:-base tb long wide tb_long}"
EXTRA="${EXTRA:-}"
if [ ! -f "$SAMPLES" ]; then
  echo "train_articulation_variants.sh: $SAMPLES: no samples file (make it with --generate-only, step 1)" >&2
  exit 2
fi
declare -A OPTS=(
  [base]=""                                         # the TrainConfig schedule on the larger data
  [seed10]="--net-seed 10"                          # the same with other initial weights: run-to-run spread
  [tb]="--type-balance 1"                           # type classes weighted by inverse frequency
  [long]="--epochs-pre 60 --epochs-ft 80"           # twice the epochs
  [wide]="--width 96 --layers 3"                    # a wider, deeper network
  [tb_long]="--type-balance 1 --epochs-pre 60 --epochs-ft 80"
)
mkdir -p "$DEST"
start=$(date +%s)
pids=()
for v in $VARIANTS; do
  if [ -z "${OPTS[$v]+x}" ]; then echo "unknown variant $v (known: ${!OPTS[*]})" >&2; exit 2; fi
  cmd=("$PY" -m kinemesh.articulation.train --samples "$SAMPLES" --samples-only --device "$DEVICE" --out "$DEST/$v" $DATA ${OPTS[$v]} $EXTRA)
  if [ "$LIMIT" != "0" ]; then cmd=(timeout "$LIMIT" "${cmd[@]}"); fi
  ( "${cmd[@]}" > "$DEST/$v.log" 2>&1; rc=$?; echo "$v: exit $rc after $(( $(date +%s) - start )) s" | tee -a "$DEST/summary.txt"; exit $rc ) &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
echo "all variants: $(( $(date +%s) - start )) s on $DEVICE" | tee -a "$DEST/summary.txt"
for v in $VARIANTS; do
  if [ ! -f "$DEST/$v/model.safetensors" ]; then echo "variant $v failed: see $DEST/$v.log" >&2; failed=1; fi
done
exit "$failed"
