#!/usr/bin/env bash
# Reproduce the shipped articulation predictor (kinemesh/assets/articulation/, pretrained + fine-tuned, and
# kinemesh/assets/articulation/no_pretrain/, the ablation): one float16 ensemble of 15 networks, merged from
#   - the 3 networks shipped before it (made by this script's previous version, commit 68e5f0d: the TrainConfig
#     defaults, 56 min on the 2-core CPU machine; read back from git history, so they are the same bytes), and
#   - 4 variants x 3 networks trained on the larger samples file runs/artsamples/b.npz (synthetic training
#     categories and assemblies with 2 realism copies each, and the train split of the real PartNet-Mobility
#     objects in REAL with 4 yawed copies each): the TrainConfig schedule, type-balanced, twice the epochs, and
#     both; batch 256 at learning rate 2e-3.
# The validation split of REAL (1 id in 5 by CRC32) is never trained on; docs/results/articulation.md, section
# "GPU-trained variants and the 15-network ensemble", has the validation table behind the choice.
# Time: data 161 s on 2 cores; the variants 144 s on one H200 (DEVICE=cuda); on the CPU not timed (one wide
# variant had not finished after 15 min on one core).
# Usage: [REAL=data/real_train] [DEVICE=cpu|cuda] [OUT=kinemesh/assets/articulation] scripts/train_articulation.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-kinemesh/assets/articulation}"
REAL="${REAL:-data/real_train}"
DEVICE="${DEVICE:-cpu}"
PREVIOUS=68e5f0d  # the commit whose kinemesh/assets/articulation holds the first 3 networks
if [ ! -d "$REAL" ]; then
  echo "train_articulation.sh: $REAL: not a folder of real PartNet-Mobility objects (unpack real_train.tar.xz into data/ or set REAL=DIR)" >&2
  exit 2
fi
DATA="--real $REAL --n-finetune 16 --n-pretrain 10 --n-assemblies-ft 60 --n-assemblies-pre 40 --n-augment 2 --real-copies 4"
python -m kinemesh.articulation.train --generate-only --samples runs/artsamples/b.npz --workers "${WORKERS:-2}" $DATA
DATA="$DATA" DEVICE="$DEVICE" DEST=runs/artvariants EXTRA="--batch 256 --lr 2e-3" VARIANTS="base tb long tb_long" \
  bash scripts/train_articulation_variants.sh
rm -rf runs/artvariants/previous && mkdir -p runs/artvariants/previous
git archive "$PREVIOUS" kinemesh/assets/articulation | tar x -C runs/artvariants/previous
python -m kinemesh.articulation.train --float16 --out "$OUT" --merge \
  runs/artvariants/previous/kinemesh/assets/articulation runs/artvariants/{base,tb,long,tb_long}
