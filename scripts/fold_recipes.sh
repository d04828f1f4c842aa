#!/usr/bin/env bash
# Category-held-out articulation networks of four recipes (issue 16, session 47): each of the four folds of
# scripts/fold_check.sh (a network trained without some real categories) trained as base (width 64, 2 layers),
# wide (96, 3), xl (128, 4) and xl_long (128, 4, twice the epochs), 3 seeds each: 48 one-member processes, PAR at
# a time, seed-major so every recipe has its first members if LIMIT cuts the run short. Reads the fold samples
# files runs/gpu/samples/{nosfdm,notob,nosmall,noround}.npz (scripts/fold_check.sh writes them to runs/fold/;
# np.savez_compressed shrinks them to 7 MB each, so all four travel to a GPU machine). Batch 256 at lr 2e-3 (the
# GPU schedule of scripts/train_articulation.sh), no ablation. One H200: 162 s for all 48.
# First, on the CPU machine: bash scripts/fold_recipes.sh --pack (compresses runs/fold/NAME.npz into
# runs/gpu/samples/; run scripts/fold_check.sh first if they are missing); then on the GPU machine, carrying runs/gpu:
# Usage: [DEVICE=cuda] [PAR=16] [LIMIT=420] [SMOKE="--epochs-pre 1 --epochs-ft 1"] \
#        bash scripts/fold_recipes.sh OUTDIR      (OUTDIR gets one tar per fold: FOLD/RECIPE/mSEED, float16)
# Back on the CPU machine: untar into runs/gpu/nets, merge a recipe's seeds into one predictor and score its fold:
#   python -m kinemesh.articulation.train --merge runs/gpu/nets/notob/xl/m{0,1,2} --out runs/fold/xl/notob
#   kinemesh eval articulation --real-only --no-heuristic --real-val data/real_train \
#     --holdout-categories Table,Oven,Box --weights runs/fold/xl/notob --seed 0
set -u
cd "$(dirname "$0")/.."
FOLDS="nosfdm notob nosmall noround"
if [ "${1:-}" = "--pack" ]; then
  mkdir -p runs/gpu/samples
  for f in $FOLDS; do
    [ -f "runs/fold/$f.npz" ] || { echo "fold_recipes.sh: runs/fold/$f.npz: no fold samples file (run scripts/fold_check.sh)" >&2; exit 2; }
    "${PY:-python3}" -c "import sys, numpy as np; np.savez_compressed(sys.argv[2], **dict(np.load(sys.argv[1])))" \
      "runs/fold/$f.npz" "runs/gpu/samples/$f.npz"
  done
  du -sh runs/gpu/samples; exit 0
fi
for f in $FOLDS; do
  [ -f "runs/gpu/samples/$f.npz" ] || { echo "fold_recipes.sh: runs/gpu/samples/$f.npz: missing (bash scripts/fold_recipes.sh --pack)" >&2; exit 2; }
done
if [ $# -lt 1 ]; then echo "usage: bash scripts/fold_recipes.sh OUTDIR (or --pack)" >&2; exit 2; fi
OUTD="$1"; DEVICE="${DEVICE:-cuda}"; PAR="${PAR:-16}"; LIMIT="${LIMIT:-420}"; SMOKE="${SMOKE:-}"
PY="${PY:-python3}"
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
W=$(mktemp -d /tmp/fold_recipes.XXXXXX)  # this run's networks and logs
trap 'rm -rf "$W"' EXIT
mkdir -p "$OUTD" "$W/nets" "$W/logs"
(nvidia-smi --query-gpu=name,memory.total --format=csv 2>&1 | tail -1; $PY -c "import torch; print(torch.__version__, torch.cuda.is_available())") | tee "$OUTD/summary.txt"
declare -A CATS=([nosfdm]=StorageFurniture,Dishwasher,Microwave [notob]=Table,Oven,Box
  [nosmall]=Camera,Eyeglasses,Faucet,Knife,Stapler [noround]=Bottle,Cart,Chair,FoldingChair,KitchenPot,Refrigerator,Scissors)
declare -A OPTS=([base]="" [wide]="--width 96 --layers 3" [xl]="--width 128 --layers 4"
  [xl_long]="--width 128 --layers 4 --epochs-pre 60 --epochs-ft 80")
T0=$(date +%s)
: > "$W/jobs.txt"
for s in 0 1 2; do for r in base wide xl xl_long; do for f in $FOLDS; do
  echo "$PY -m kinemesh.articulation.train --samples runs/gpu/samples/$f.npz --samples-only --device $DEVICE --out $W/nets/$f/$r/m$s --real data/real_train --exclude-categories ${CATS[$f]} --members 1 --net-seed $s --batch 256 --lr 2e-3 --ablation 0 ${OPTS[$r]} $SMOKE > $W/logs/$f.$r.$s.log 2>&1; echo \"$f $r $s rc=\$? \$(( \$(date +%s) - $T0 ))s\"" >> "$W/jobs.txt"
done; done; done
timeout "$LIMIT" xargs -P "$PAR" -d '\n' -I CMD bash -c CMD < "$W/jobs.txt" | tee -a "$OUTD/summary.txt"
pkill -f -- "--out $W/nets/"; sleep 1  # only this script's training processes
echo "stopped after $(( $(date +%s) - T0 )) s; finished: $(ls "$W"/nets/*/*/m*/model.safetensors 2>/dev/null | wc -l) of 48" | tee -a "$OUTD/summary.txt"
$PY - "$W" <<'PY'
import glob, sys
from safetensors.torch import load_file, save_file
for p in glob.glob(sys.argv[1] + "/nets/*/*/m*/model.safetensors"):
    save_file({k: v.half().contiguous() for k, v in load_file(p).items()}, p)
PY
for f in $FOLDS; do [ -d "$W/nets/$f" ] && tar cf "$OUTD/$f.tar" -C "$W/nets" "$f"; done
tar czf "$OUTD/logs.tgz" -C "$W" logs
ls -la "$OUTD"
