"""``kinemesh calibrate``: fit the calibrated prior of a checkpoint (the aggregate posterior per object kind)."""

from __future__ import annotations


def register(sub):
    from kinemesh.commands import kinds_arg

    p = sub.add_parser(
        "calibrate", help="calibrate a checkpoint's prior on its training data (prior_calibration.safetensors)",
        description="Moment-match the prior N(mu_cond, Sigma) to the aggregate posterior of the training split, "
                    "one Sigma per object kind (see kinemesh/model/calibration.py). `kinemesh train` runs this "
                    "at the end of training; run it by hand for older checkpoints.")
    p.add_argument("checkpoint", help="checkpoint folder (config.json + model.safetensors); the file is written there")
    p.add_argument("--data", required=True, action="append",
                   help="the dataset folder the checkpoint was trained on (repeat for several)")
    p.add_argument("--kinds", type=kinds_arg, default=None, metavar="KIND[,KIND]",
                   help="the object kinds the checkpoint was trained on (`kinemesh train --kinds`; default: all)")
    p.add_argument("--split", default="train", help="split to encode (default train)")
    p.add_argument("--per-kind", type=int, default=150, help="sequences per kind (default 150)")
    p.add_argument("--frames", type=int, default=3, help="random frames encoded per sequence (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from kinemesh.model.calibration import calibrate_checkpoint

    path, counts = calibrate_checkpoint(Path(args.checkpoint), [Path(d) for d in args.data], split=args.split,
                                        per_kind=args.per_kind, frames_per_sequence=args.frames, seed=args.seed,
                                        progress=not args.no_progress, kinds=args.kinds)
    print(f"wrote {path} ({', '.join(f'{k} {n} poses' for k, n in counts.items())})")
    return 0
