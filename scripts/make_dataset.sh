#!/usr/bin/env bash
# Default training set of the shipped checkpoint (kinemesh synth, MuJoCo 4), in two parts (PARTS, default both):
#   default: the first data set, unchanged (same categories, seeds and splits as before the soft set existed):
#     - 15 articulated categories x 8 instances + 40 random assemblies, each as a kinematic (16 random joint
#       configurations) and a dynamic (24-frame MuJoCo trajectory) sequence,
#     - 5 elastic shapes x 16 soft-body simulations (flexcomp dim=3) and 4 cloth scenes x 16 (flexcomp dim=2),
#     - about 460 sequences / 9.7k frames / ~75 MB in 2 minutes on 2 idle cores (bench/RESULTS_synth.md).
#   soft: shape change and hanging cloth (issue #17): 4 soft shapes (plush, beanbag, cylinder, rod) x 48 runs of
#     pokes, probes, squashes, presses, hangs, twists and bends (runs without shape change are dropped), and
#     5 cloth scenes (hang, corners, drape, windblown, dropped) x 24; see docs/synth.md for its measures.
# Splits: 15% of instances per category -> "test"; washing_machine, torus, curtain -> "test_category". They depend
# only on (seed, category, instance names), so adding the soft part never moves an old sequence between splits.
# Deterministic for a seed and resumable: rerunning skips finished files.
# Usage: [PARTS=default,soft] [KINEMESH="kinemesh"] scripts/make_dataset.sh [OUT_DIR] [extra kinemesh synth options...]
set -euo pipefail
OUT="${1:-data/default}"
shift || true
PARTS="${PARTS:-default,soft}"
KM="${KINEMESH:-kinemesh}"  # e.g. KINEMESH="python -m kinemesh.cli" for a checkout that is not installed
COMMON=(--per-category 8 --seed 0 --holdout-categories washing_machine,torus,curtain --out "$OUT")
if [[ ",$PARTS," == *",default,"* ]]; then
  $KM synth --kinds articulated --assembly-factor 5 "${COMMON[@]}" "$@"
  $KM synth --kinds elastic,cloth --categories beam,stem,blob,torus,toy,flag,tablecloth,curtain,towel \
    --kind-factors elastic=2,cloth=2 "${COMMON[@]}" "$@"
fi
if [[ ",$PARTS," == *",soft,"* ]]; then
  $KM synth --kinds elastic,cloth --categories plush,beanbag,cylinder,rod,hang,corners,drape,windblown,dropped \
    --kind-factors elastic=6,cloth=3 "${COMMON[@]}" "$@"
fi
