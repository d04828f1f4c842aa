#!/usr/bin/env bash
# Reproduce the shipped articulation predictor weights (kinemesh/assets/articulation/, pretrained +
# fine-tuned, and kinemesh/assets/articulation/no_pretrain/, the ablation) with the TrainConfig defaults
# (3-network ensembles, realism copies, handle-visible context). CPU, one torch thread,
# about 11 min on a shared 2-core machine. Extra arguments are passed on (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-kinemesh/assets/articulation}"
python -m kinemesh.articulation.train --out "$OUT" --threads 1 --seed 0 "$@"
