"""``kinemesh synth``: generate a synthetic 4D dataset (articulated objects, soft bodies, cloth) with MuJoCo."""

from __future__ import annotations


def register(sub):
    from kinemesh.checks import number
    from kinemesh.commands import kinds_arg

    p = sub.add_parser(
        "synth", help="generate synthetic 4D training data (articulated, elastic, cloth) with MuJoCo"
    )
    p.add_argument(
        "--kinds",
        type=kinds_arg,
        default=("articulated", "elastic", "cloth"),
        help="comma-separated kinds: articulated, elastic, cloth (default: all)",
    )
    p.add_argument("--per-category", type=int, default=4, help="instances per category (default 4)")
    p.add_argument(
        "--assembly-factor",
        type=float,
        default=3.0,
        help="random assemblies = per-category x this factor (default 3)",
    )
    p.add_argument(
        "--kind-factors",
        default="",
        help="per-kind multipliers of --per-category, e.g. 'elastic=2,cloth=2' (default 1)",
    )
    p.add_argument("--categories", default=None, help="comma-separated subset of categories (default: all)")
    p.add_argument("--seed", type=int, default=0, help="base random seed (default 0)")
    p.add_argument("--out", default=None, help="output folder (required unless only --preview)")
    p.add_argument("--workers", type=int, default=0, help="worker processes (default: all cores)")
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run on Dask distributed instead of the process pool: local:N (a LocalCluster of N processes) "
        "or a scheduler address such as tcp://host:8786 (workers need kinemesh and the --out folder; "
        "pip install 'kinemesh[cluster]')",
    )
    p.add_argument(
        "--from-urdf",
        default=None,
        metavar="DIR",
        help="real data instead of procedural: every PartNet-Mobility object folder (mobility.urdf) or .urdf "
        "file in DIR gives kinematic sequences and MuJoCo rollouts; splits train/val by object id",
    )
    p.add_argument(
        "--unlike",
        action="store_true",
        help="write the held-out unlike categories (kinemesh.synth.unlike; --categories picks some) as "
        "PartNet-Mobility folders OUT/<category>_<seed> (seeds 100000 + 1000 x --seed + i, those of "
        "eval articulation) for eval real, eval ik, simulate; no sequences",
    )
    count = number(int, 0, 1000)
    p.add_argument("--real-kinematic", type=count, default=2, help="--from-urdf: kinematic sequences per object (2)")
    p.add_argument("--real-dynamic", type=count, default=4, help="--from-urdf: MuJoCo rollouts per object (4)")
    p.add_argument(
        "--max-vertices",
        type=number(int, 100, 10**7),
        default=4000,
        help="--from-urdf: vertex budget per object, shared by its parts (default 4000)",
    )
    p.add_argument(
        "--holdout-categories",
        default=",".join(_default_holdout()),
        help="categories held out entirely as split test_category ('' for none)",
    )
    p.add_argument(
        "--instance-fraction",
        type=float,
        default=0.15,
        help="fraction of instances per category in split test (default 0.15)",
    )
    p.add_argument(
        "--val-fraction",
        type=float,
        default=None,
        help="fraction of instances per category in split val, for model selection and training curves; "
        "drawn after the test split, which it never changes (default 0.1; with --from-urdf the fraction of "
        "objects, by hash of the object id, default 0.2)",
    )
    p.add_argument(
        "--elastic-meshes",
        nargs="*",
        default=(),
        metavar="MESH",
        help="your own watertight meshes (metres, Z up), simulated as extra elastic categories user_<name>",
    )
    p.add_argument(
        "--write-assets",
        action="store_true",
        help="also write each articulated instance as a PartNet-style folder + MJCF under OUT/assets",
    )
    p.add_argument(
        "--preview",
        action="store_true",
        help="render a contact sheet of every category and kind (rest and moved) to --preview-path",
    )
    p.add_argument("--preview-path", default="docs/synth_preview.png", help="PNG written by --preview")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


def _default_holdout():
    return ("washing_machine", "torus", "curtain")


def run(args) -> int:
    from pathlib import Path

    from kinemesh.errors import ConfigError

    kinds = args.kinds
    if args.out is None and not args.preview:
        raise ConfigError("--out is required (or use --preview alone)")
    if args.preview:
        from kinemesh.synth.preview import preview_meshes
        from kinemesh.viz.render import contact_sheet

        path = contact_sheet(preview_meshes(kinds, args.seed), args.preview_path, cols=6, size=(300, 225))
        print(f"wrote {path}")
    if args.out is None:
        return 0
    if args.unlike and args.from_urdf is not None:
        raise ConfigError("--unlike writes the unlike categories; it does not read --from-urdf")
    if args.from_urdf is not None:
        return _run_real(args)
    if args.unlike:
        return _run_unlike(args)
    from kinemesh.synth.dataset import SynthConfig, generate

    factors = {}
    for item in filter(None, (x.strip() for x in args.kind_factors.split(","))):
        k, _, v = item.partition("=")
        try:
            factors[k.strip()] = float(v)
        except ValueError:
            raise ConfigError(f"--kind-factors: bad entry {item!r}, expected kind=number") from None
    cfg = SynthConfig(
        out=Path(args.out),
        kinds=kinds,
        per_category=args.per_category,
        assembly_factor=args.assembly_factor,
        kind_factors=factors,
        seed=args.seed,
        categories=tuple(c.strip() for c in args.categories.split(",")) if args.categories else None,
        write_assets=args.write_assets,
        holdout_categories=tuple(c.strip() for c in args.holdout_categories.split(",") if c.strip()),
        instance_fraction=args.instance_fraction,
        val_fraction=0.1 if args.val_fraction is None else args.val_fraction,
        workers=args.workers,
        scheduler=args.scheduler,
        elastic_meshes=tuple(args.elastic_meshes or ()),
    )
    _drop_stale(cfg.out)
    report = generate(cfg, progress=not args.no_progress)
    st = report["by_status"]
    print(
        f"synth: {st['ok']} generated, {st['skipped']} already present, {st['failed']} dropped "
        f"in {report['seconds']:.1f} s; {report['sequences']} sequences, {report['frames']} frames; "
        f"splits {report['splits']}; manifest {Path(args.out) / 'manifest.jsonl'}"
    )
    for f in report["failures"]:
        print(f"  dropped {f['kind']}/{f['category']}/{f['index']}: {f['error']}")
    return 0


def _drop_stale(out) -> None:
    """A rerun resumes: first remove what a run killed mid-write left in ``out``."""
    from kinemesh.atomic import remove_stale

    if out.is_dir():
        for p in remove_stale(out):
            print(f"removed stale temporary {p}")


def _run_real(args) -> int:
    import os
    from pathlib import Path

    from kinemesh.synth.real import RealConfig, generate_real

    cfg = RealConfig(
        source=Path(args.from_urdf),
        out=Path(args.out),
        seed=args.seed,
        kinematic=args.real_kinematic,
        dynamic=args.real_dynamic,
        max_vertices=args.max_vertices,
        val_fraction=0.2 if args.val_fraction is None else args.val_fraction,
        workers=args.workers or os.cpu_count() or 1,
        scheduler=args.scheduler,
    )
    _drop_stale(cfg.out)
    r = generate_real(cfg, progress=not args.no_progress)
    st = r["by_status"]
    print(
        f"synth --from-urdf: {st['ok']} objects done, {st['skipped']} already present, {st['failed']} dropped "
        f"in {r['seconds']:.1f} s; {r['sequences']} sequences, {r['frames']} frames; splits {r['splits']}; "
        f"dropped sequences {r['dropped_sequences']}; manifest {Path(args.out) / 'manifest.jsonl'}"
    )
    for f in r["failures"]:
        print(f"  dropped {f['index']}: {f['error']}")
    return 0


def _run_unlike(args) -> int:
    """``--unlike``: every (category, instance) of kinemesh.synth.unlike as a PartNet-Mobility folder (each
    written atomically: write_partnet_folder), read back by load_articulated with the same joints."""
    from pathlib import Path

    from kinemesh.articulation.dataset import TEST_SEED_BASE
    from kinemesh.data.partnet import write_partnet_folder
    from kinemesh.progress import tqdm
    from kinemesh.synth.unlike import UNLIKE_CATEGORIES, build_unlike

    cats = [c.strip() for c in args.categories.split(",") if c.strip()] if args.categories else UNLIKE_CATEGORIES
    seeds = [(c, TEST_SEED_BASE + 1000 * args.seed + i) for c in cats for i in range(args.per_category)]
    objs = [(c, s, build_unlike(c, s)) for c, s in seeds]  # unknown categories fail before anything is written
    for c, s, obj in tqdm(objs, desc="unlike objects", unit="obj", disable=args.no_progress):
        write_partnet_folder(obj, Path(args.out) / f"{c}_{s}")
    print(f"synth --unlike: {len(objs)} objects ({len(cats)} categories x {args.per_category}) in {args.out}")
    return 0
