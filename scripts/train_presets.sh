#!/usr/bin/env bash
# The kinematic model's presets side by side on one device (issue 16: "train the larger preset there and
# compare"): each preset is trained MINUTES from scratch on the same data, then scored on the data's held-out
# split with `kinemesh eval model` (posterior reconstruction, prior-sample plausibility). cpu-small is the shipped
# size (1.3 M parameters); paper is NeuROK-sized (width 512, 64 tokens, 6 + 6 layers), meant for GPUs.
#   1. data, on the CPU machine (about 2 min on 2 cores, 20 MB: small enough to travel to a GPU machine):
#        STAGE=data bash scripts/train_presets.sh
#   2. train and score, on a GPU machine carrying runs/presets (it needs torch, numpy, scipy, tqdm and
#      matplotlib only):
#        DEVICE=cuda MINUTES=4 bash scripts/train_presets.sh OUT
# Usage: [STAGE=data|train] [DEVICE=cpu|cuda] [MINUTES=4] [PRESETS="cpu-small paper"] [MAX_INSTANCES=24]
#        bash scripts/train_presets.sh [OUT]      (OUT: the scores and logs; default runs/presets/out)
# Not yet run on a GPU: the session that wrote it (47) lost its GPU loan before the call.
set -uo pipefail
cd "$(dirname "$0")/.."
STAGE="${STAGE:-train}"; DEVICE="${DEVICE:-cpu}"; MINUTES="${MINUTES:-4}"; PRESETS="${PRESETS:-cpu-small paper}"
PY="${PYTHON:-python3}"; DATA=runs/presets/data; OUTD="${1:-runs/presets/out}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [ "$STAGE" = data ]; then
  exec "$PY" -m kinemesh.cli synth --kinds articulated,elastic,cloth --per-category 2 --seed 5 --out "$DATA" --no-progress
fi
if [ ! -f "$DATA/manifest.jsonl" ]; then
  echo "train_presets.sh: $DATA: no dataset (make it first: STAGE=data bash scripts/train_presets.sh)" >&2
  exit 2
fi
mkdir -p "$OUTD"
: > "$OUTD/summary.txt"
failed=0
for p in $PRESETS; do
  extra=""; [ "$p" = paper ] && [ "$DEVICE" = cuda ] && extra="--bf16"
  t0=$(date +%s)
  rm -rf "runs/presets/$p"  # this script's own run folder: a fresh run each time (train refuses a used one)
  status="ok"
  if ! "$PY" -m kinemesh.cli train --data "$DATA" --preset "$p" --device "$DEVICE" --out "runs/presets/$p" \
      --minutes "$MINUTES" --no-progress --no-calibrate $extra > "$OUTD/train_$p.log" 2>&1; then
    status="training failed: see $OUTD/train_$p.log"; failed=1
  elif ! "$PY" -m kinemesh.cli eval model --data "$DATA" --checkpoint "runs/presets/$p" --device "$DEVICE" \
      --max-instances "${MAX_INSTANCES:-24}" --out "$OUTD/eval_$p.json" > "$OUTD/eval_$p.log" 2>&1; then
    status="scoring failed: see $OUTD/eval_$p.log"; failed=1
  fi
  {  # a group, not a pipeline around the loop: failed must stay in this shell
    echo "== $p: $(( $(date +%s) - t0 )) s on $DEVICE, $status"
    tail -n 1 "runs/presets/$p/log.csv" 2>/dev/null | awk -F, '{print "   step " $1 ", pairs " $2 ", pairs/s " $12}'
    grep -E "^\| (kind|all|articulated|elastic|cloth) " "$OUTD/eval_$p.log" 2>/dev/null | head -5
  } | tee -a "$OUTD/summary.txt"
done
exit "$failed"
