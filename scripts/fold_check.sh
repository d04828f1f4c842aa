#!/usr/bin/env bash
# The category-held-out check of the articulation decoding (issue 16): four networks, each trained without some
# real PartNet-Mobility categories, read every object of those categories (both splits of REAL), seeds 0-3.
# A fold measures reading categories never trained on through ONE trained network (members 1, the TrainConfig
# recipe, not the shipped 27-network ensemble); training is seeded (same code and libraries, same bytes),
# but a network trained with other code reads a fold differently (session 40: fold 3 17.50 deg with the
# sessions 32-39 network, 25.72 with today's), so compare decodings on the same networks only.
# Time on the shared 2-core machine: 13-20 min per network (data 250-420 s), 1-3 min per fold and seed (the real
# validation split is scored too).
# Usage: [REAL=data/real_train] [FOLDS="1 2 3 4"] [SEEDS="0 1 2 3"] [OUT=runs/folds] scripts/fold_check.sh
# Networks go to runs/fold/NAME (kept: a second run only evaluates); reports to OUT/foldF_sS.md; the last lines
# print each report's row of the held-out categories (axis deg mean / median, origin, type P, type R, parent).
set -euo pipefail
cd "$(dirname "$0")/.."
REAL="${REAL:-data/real_train}"
OUT="${OUT:-runs/folds}"
KINEMESH="${KINEMESH:-.venv/bin/kinemesh}"
PYTHON="${PYTHON:-.venv/bin/python}"
if [ ! -d "$REAL" ]; then
  echo "fold_check.sh: $REAL: not a folder of real PartNet-Mobility objects (unpack real_train.tar.xz into data/ or set REAL=DIR)" >&2
  exit 2
fi
declare -A NAME=([1]=nosfdm [2]=notob [3]=nosmall [4]=noround)
declare -A CATS=([1]=StorageFurniture,Dishwasher,Microwave [2]=Table,Oven,Box
                 [3]=Camera,Eyeglasses,Faucet,Knife,Stapler
                 [4]=Bottle,Cart,Chair,FoldingChair,KitchenPot,Refrigerator,Scissors)
mkdir -p "$OUT" runs/fold
for f in ${FOLDS:-1 2 3 4}; do
  w="runs/fold/${NAME[$f]}"
  if [ ! -f "$w/config.json" ]; then
    "$PYTHON" -m kinemesh.articulation.train --out "$w" --real "$REAL" --exclude-categories "${CATS[$f]}" \
      --members 1 --workers "${WORKERS:-2}" --samples "$w.npz"
  fi
  for s in ${SEEDS:-0 1 2 3}; do
    "$KINEMESH" eval articulation --real-only --no-heuristic --real-val "$REAL" --holdout-categories "${CATS[$f]}" \
      --weights "$w" --seed "$s" --out "$OUT/fold${f}_s$s.md" > /dev/null
  done
done
for r in "$OUT"/fold*_s*.md; do
  row=$(grep -A 4 "^### category-held-out" "$r" | grep "^| ours" | cut -d'|' -f5-9)
  echo "$(basename "$r" .md): $row"
done
