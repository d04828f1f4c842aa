"""``kinemesh train``: train the kinematic model (conditional VAE) on a dataset folder."""

from __future__ import annotations


def register(sub):
    from kinemesh.checks import number
    from kinemesh.commands import kinds_arg

    p = sub.add_parser(
        "train", help="train the kinematic model on a dataset folder (resumable; torchrun for many devices)",
        description="Train the NeuROK-style conditional VAE. Multi-process: "
                    "torchrun --nproc_per_node N -m kinemesh train ... (gloo on CPU, nccl on CUDA).")
    p.add_argument("--data", required=True, action="append", metavar="DIR[:WEIGHT]",
                   help="dataset folder with manifest.jsonl (from `kinemesh synth`); repeat for several, each "
                        "keeping its own splits, with an optional sampling weight (default: proportional to "
                        "their training sequences)")
    p.add_argument("--kinds", type=kinds_arg, default=None, metavar="KIND[,KIND]",
                   help="train on the sequences of these object kinds only, e.g. elastic,cloth (default: all)")
    p.add_argument("--init", default=None, metavar="CKPT",
                   help="start from this checkpoint's weights (fine-tuning; its model config must match)")
    p.add_argument("--out", required=True, help="run folder (checkpoints, log.csv, training_curves.png, tb/)")
    p.add_argument("--preset", default="cpu-small", help="tiny | cpu-small (default) | paper")
    p.add_argument("--steps", type=number(int, 1), default=None, help="stop at this total step count")
    p.add_argument("--minutes", type=number(float, 0, lo_open=True), default=None, help="stop after this many minutes of wall clock")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="device (default cpu)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation and data sampling")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast (faster on recent CPUs and GPUs)")
    p.add_argument("--threads", type=number(int, 1), default=None, help="torch CPU threads per process")
    p.add_argument("--head", default=None, choices=["dq_skinning", "per_point_dq", "displacement"],
                   help="decoder head (default: the preset's, dq_skinning)")
    p.add_argument("--batch-size", type=number(int, 1), default=None, help="pairs per step per process")
    p.add_argument("--n-points", type=number(int, 8), default=None, help="surface points per pair")
    p.add_argument("--lr", type=number(float, 0, lo_open=True), default=None, help="peak learning rate")
    p.add_argument("--no-rotate", action="store_true", help="ablation: no random rotation about Z")
    p.add_argument("--no-scale", action="store_true", help="ablation: no random scale")
    p.add_argument("--no-resample", action="store_true", help="ablation: fixed point samples per instance")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--freeze", default=None, metavar="NET[,NET]",
                   help="keep these networks as --init gives them (prior, posterior, decoder; train.frozen): "
                        "--freeze prior,decoder fine-tunes the posterior alone, leaving the state space as it is")
    p.add_argument("--no-calibrate", action="store_true",
                   help="skip the prior calibration at the end (see `kinemesh calibrate`)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override any config field, e.g. --set model.component_rigid=false "
                        "--set train.kl_weight=0.02 (VALUE is JSON; repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    import json
    import os
    from pathlib import Path

    from kinemesh.atomic import remove_stale
    from kinemesh.checks import out_dir
    from kinemesh.model.config import preset
    from kinemesh.model.data import parse_data_spec
    from kinemesh.model.train import RunOptions, train

    config = preset(args.preset)
    if args.head:
        config.model.use_head(args.head)
    tc = config.train
    if args.bf16:
        tc.bf16 = True
    if args.batch_size:
        tc.batch_size = args.batch_size
    if args.n_points:
        tc.n_points = args.n_points
    if args.lr:
        tc.lr = args.lr
    tc.rotate_z = not args.no_rotate
    if args.no_scale:
        tc.scale_range = (1.0, 1.0)
    tc.resample_points = not args.no_resample
    if args.freeze:
        tc.frozen = args.freeze  # a comma list, parsed and checked by TrainConfig
    for item in args.set:
        _override(config, item)
    config.model.__post_init__()
    config.train.__post_init__()
    out_dir(args.out, force=True)  # a run folder is refused by train() unless --resume; check the place only
    if args.resume and int(os.environ.get("RANK", "0")) == 0 and Path(args.out).is_dir():
        for p in remove_stale(args.out):  # left by a run killed mid-write
            print(f"removed stale temporary {p}")
    folders, weights = zip(*[parse_data_spec(d) for d in args.data])
    opts = RunOptions(data=list(folders), data_weights=list(weights), out=Path(args.out), steps=args.steps,
                      minutes=args.minutes, device=args.device, resume=args.resume, seed=args.seed,
                      threads=args.threads, progress=not args.no_progress,
                      kinds=args.kinds, init=Path(args.init) if args.init else None)
    result = train(config, opts)
    print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in result.items()}))
    _plot_curves(opts.out)
    if not args.no_calibrate and int(os.environ.get("RANK", "0")) == 0:
        from kinemesh.model.calibration import calibrate_checkpoint

        path, counts = calibrate_checkpoint(opts.out, opts.data, progress=not args.no_progress, kinds=opts.kinds)
        print(f"wrote {path} ({', '.join(f'{k} {n} poses' for k, n in counts.items())})")
    return 0


def _plot_curves(out) -> None:
    """Write ``training_curves.png`` beside ``log.csv`` (rank 0 writes the log; a plot failure never fails
    a finished training run)."""
    import logging
    import os

    from kinemesh.errors import KinemeshError

    if int(os.environ.get("RANK", "0")) != 0 or not (out / "log.csv").is_file():
        return
    try:
        from kinemesh.viz.plots import plot_training_curves

        print(f"wrote {plot_training_curves(out / 'training_curves.png', out / 'log.csv')}")
    except (KinemeshError, OSError, ValueError) as exc:
        logging.getLogger(__name__).warning("training curves not plotted: %s", exc)


def _override(config, item: str) -> None:
    """Apply one ``section.field=value`` override (value parsed as JSON, else taken as a string)."""
    import dataclasses
    import json

    from kinemesh.errors import ConfigError

    key, sep, raw = item.partition("=")
    section, _, name = key.strip().partition(".")
    if not sep or section not in ("model", "train") or not name:
        raise ConfigError(f"--set {item!r}: expected model.FIELD=VALUE or train.FIELD=VALUE")
    target = getattr(config, section)
    if name not in {f.name for f in dataclasses.fields(target)}:
        raise ConfigError(f"--set {item!r}: {section} has no field {name!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    setattr(target, name, value)
