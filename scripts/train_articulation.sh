#!/usr/bin/env bash
# Reproduce the shipped articulation predictor weights (kinemesh/assets/articulation/, pretrained +
# fine-tuned, and kinemesh/assets/articulation/no_pretrain/, the ablation) with the TrainConfig defaults
# (3-network ensembles, realism copies, handle-visible context) plus the train split of the real
# PartNet-Mobility objects in REAL (default data/real_train: `tar xf ../shared/real_train.tar.xz -C data/`,
# or any folder of PartNet-Mobility object folders / URDFs; the validation split, 1 id in 5 by CRC32, is
# never trained on). CPU, one torch thread; see docs/results/articulation.md for the measured time.
# Extra arguments are passed on (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-kinemesh/assets/articulation}"
REAL="${REAL:-data/real_train}"
if [ ! -d "$REAL" ]; then
  echo "train_articulation.sh: $REAL: not a folder of real PartNet-Mobility objects (unpack real_train.tar.xz into data/ or set REAL=DIR)" >&2
  exit 2
fi
python -m kinemesh.articulation.train --out "$OUT" --threads 1 --seed 0 --real "$REAL" "$@"
