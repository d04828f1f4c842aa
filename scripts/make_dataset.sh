#!/usr/bin/env bash
# Default training set of the shipped checkpoint (kinemesh synth, MuJoCo 4).
#   - 15 articulated categories x 8 instances + 40 random assemblies, each as a kinematic (16 random joint
#     configurations) and a dynamic (24-frame MuJoCo trajectory) sequence,
#   - 5 elastic shapes x 16 soft-body simulations (flexcomp dim=3) and 4 cloth scenes x 16 (flexcomp dim=2),
#   - splits: 15% of instances per category -> "test"; washing_machine, torus, curtain -> "test_category".
# About 460 sequences / 9.7k frames / ~75 MB in 2 minutes on 2 idle cores, ~12 when shared (bench/RESULTS_synth.md).
# Deterministic for a seed and resumable: rerunning skips finished files.
# Usage: scripts/make_dataset.sh [OUT_DIR] [extra kinemesh synth options...]
set -euo pipefail
OUT="${1:-data/default}"
shift || true
exec kinemesh synth \
  --kinds articulated,elastic,cloth \
  --per-category 8 \
  --assembly-factor 5 \
  --kind-factors elastic=2,cloth=2 \
  --seed 0 \
  --holdout-categories washing_machine,torus,curtain \
  --out "$OUT" "$@"
