"""Dataset generation: jobs (kind, category, index) -> KinematicSequence files + manifest.

Layout: ``DIR/<kind>/<category>/<id>.npz`` and ``DIR/manifest.jsonl`` (``kinemesh.data.manifest``: splits
``train`` / ``test`` (held-out instances) / ``test_category`` (held-out categories)). Every item's random
stream is derived from (seed, kind, category, index) only, so a dataset is deterministic for a seed whatever the
number of workers, and a rerun skips items whose files already exist (resume). Files are written atomically.
Articulated instances produce two sequences (``_kinematic`` random configurations, ``_dynamic`` a MuJoCo
trajectory) sharing one ``instance`` so splits never separate them.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kinemesh.geometry.kind import KINDS

DEFAULT_HOLDOUT = ("washing_machine", "torus", "curtain")


@dataclass
class SynthConfig:
    """What ``kinemesh synth`` generates."""

    out: Path  # output folder
    kinds: tuple[str, ...] = KINDS  # which kinds of motion to generate
    per_category: int = 4  # instances per category
    assembly_factor: float = 3.0  # random assemblies = per_category * assembly_factor
    kind_factors: dict = field(default_factory=dict)  # per-kind multiplier of per_category, e.g. {"cloth": 2}
    seed: int = 0  # base seed; items derive theirs from (seed, kind, category, index)
    categories: tuple[str, ...] | None = None  # restrict to these categories (all when None)
    kinematic_frames: int = 16  # frames of kinematic articulated sequences
    dynamic_frames: int = 24  # frames of simulated sequences
    write_assets: bool = False  # also write PartNet-style folders + MJCF for articulated instances
    holdout_categories: tuple[str, ...] = DEFAULT_HOLDOUT  # whole categories reserved for testing
    instance_fraction: float = 0.15  # fraction of instances per category reserved for testing
    val_fraction: float = 0.1  # fraction of instances per category in split val (model selection, curves)
    workers: int = 0  # worker processes (0 = all cores)
    scheduler: str | None = None  # Dask: "local:N" (LocalCluster of N processes) or a scheduler address
    elastic_meshes: tuple[
        str, ...
    ] = ()  # the user's own watertight meshes, simulated as extra elastic categories
    extra: dict = field(default_factory=dict)


def all_categories(kind: str) -> list[str]:
    """Category names of ``kind``."""
    if kind == "articulated":
        from kinemesh.synth.categories import CATEGORIES

        return list(CATEGORIES) + ["assembly"]
    if kind == "elastic":
        from kinemesh.synth.elastic import SHAPES

        return list(SHAPES)
    if kind == "cloth":
        from kinemesh.synth.cloth import SCENES

        return list(SCENES)
    from kinemesh.errors import ConfigError

    raise ConfigError(f"unknown kind {kind!r}; choose from {KINDS}")


def item_rng(seed: int, kind: str, category: str, index: int) -> np.random.Generator:
    """The random stream of one item, from (seed, kind, category, index) only."""
    return np.random.default_rng([seed, zlib.crc32(kind.encode()), zlib.crc32(category.encode()), index])


def item_paths(out: Path, kind: str, category: str, index: int) -> list[Path]:
    """The files one item writes."""
    base = out / kind / category
    iid = f"{category}_{index:04d}"
    if kind == "articulated":
        return [base / f"{iid}_kinematic.npz", base / f"{iid}_dynamic.npz"]
    return [base / f"{iid}.npz"]


def user_mesh_categories(paths) -> dict[str, str]:
    """Category name (``user_<file stem>``) -> path of each user mesh; raises InputFileError when missing."""
    from kinemesh.errors import InputFileError

    out = {}
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise InputFileError(path, "file not found (--elastic-meshes)")
        out[f"user_{path.stem}"] = str(path.resolve())
    return out


def make_jobs(cfg: SynthConfig) -> list[tuple[str, str, int]]:
    """All (kind, category, index) items of the configuration, slow kinds first (better load balance)."""
    jobs = []
    order = {"elastic": 0, "cloth": 1, "articulated": 2}
    for kind in sorted(cfg.kinds, key=lambda k: order.get(k, 9)):
        cats = all_categories(kind)
        if kind == "elastic":
            cats += list(user_mesh_categories(cfg.elastic_meshes))
        for cat in cats:
            if cfg.categories and cat not in cfg.categories:
                continue
            n = int(round(cfg.per_category * float(cfg.kind_factors.get(kind, 1.0))))
            if cat == "assembly":
                n = int(round(cfg.per_category * cfg.assembly_factor))
            jobs += [(kind, cat, i) for i in range(n)]
    return jobs


def run_item(args) -> dict:
    """Generate one item (in a worker). Returns a status dict: ``status`` ok | skipped | failed."""
    kind, cat, index, out, seed, kin_frames, dyn_frames, write_assets, user_meshes = args
    out = Path(out)
    paths = item_paths(out, kind, cat, index)
    if all(p.exists() for p in paths):
        return {"kind": kind, "category": cat, "index": index, "status": "skipped", "seconds": 0.0}
    from kinemesh.errors import KinemeshError

    t0 = time.perf_counter()
    rng = item_rng(seed, kind, cat, index)
    iid = f"{cat}_{index:04d}"
    try:
        if kind == "articulated":
            from kinemesh.synth.articulated_motion import kinematic_sequence

            obj = _articulated_object(cat, rng)
            obj.name = iid
            seqs = [kinematic_sequence(obj, rng, n_frames=kin_frames)]
            seqs.append(retry_dynamic(obj, rng, dyn_frames))
            if write_assets:
                _write_assets(obj, out / "assets" / cat / iid)
        elif kind == "elastic":
            from kinemesh.synth.elastic import elastic_sequence

            mesh = _user_mesh(user_meshes[cat]) if cat in user_meshes else None
            seqs = [elastic_sequence(cat, rng, n_frames=dyn_frames, mesh=mesh)]
        else:
            from kinemesh.synth.cloth import cloth_sequence

            seqs = [cloth_sequence(cat, rng, n_frames=dyn_frames)]
        from kinemesh.geometry.validity import motion_extent, moves

        for seq in seqs:  # a sequence that does not move teaches nothing: the item is dropped
            if not moves(seq):
                raise KinemeshError(f"no motion (extent {motion_extent(seq):.2g} of the size)")
        for seq, path in zip(seqs, paths):
            seq.meta["instance"] = iid
            seq.meta["seed"] = [seed, kind, cat, index]
            seq.save(path)
    except Exception as exc:  # noqa: BLE001 -- a diverged or failed item is dropped and reported, never written
        return {
            "kind": kind,
            "category": cat,
            "index": index,
            "status": "failed",
            "error": f"{exc.__class__.__name__}: {exc}",
            "seconds": time.perf_counter() - t0,
        }
    return {
        "kind": kind,
        "category": cat,
        "index": index,
        "status": "ok",
        "frames": int(sum(s.n_frames for s in seqs)),
        "seconds": time.perf_counter() - t0,
    }


def _user_mesh(path: str):
    """A user's mesh as a soft body: watertight, at most 3000 vertices, centred in x-y, standing on z = 0."""
    from kinemesh.data.meshes import load_mesh
    from kinemesh.errors import InputFileError

    mesh = load_mesh(path, max_vertices=3000)
    if not mesh.is_watertight:
        raise InputFileError(path, "an elastic body needs a watertight (closed) mesh")
    lo, hi = mesh.bounds
    mesh.apply_translation([-(lo[0] + hi[0]) / 2, -(lo[1] + hi[1]) / 2, -lo[2]])
    return mesh


def _articulated_object(cat: str, rng):
    if cat == "assembly":
        from kinemesh.synth.assemblies import random_assembly

        return random_assembly(rng)
    from kinemesh.synth.categories import build

    return build(cat, rng)


def retry_dynamic(obj, rng, n_frames, attempts: int = 3, sim_obj=None):
    """A dynamic sequence that moves: a diverged run is retried with half the step, a still one (no vertex
    moves 1% of the object's size, ``validity.moves``) with new random actions from the same stream."""
    from kinemesh.errors import KinemeshError, SimulationDivergedError
    from kinemesh.synth.articulated_motion import dynamic_sequence
    from kinemesh.geometry.validity import moves

    dt, still = 0.002, 0
    for _ in range(attempts):
        try:
            seq = dynamic_sequence(obj, rng, n_frames=n_frames, timestep=dt, sim_obj=sim_obj)
        except SimulationDivergedError:
            dt *= 0.5
            continue
        if moves(seq):
            return seq
        still += 1
    if still:
        raise KinemeshError(f"{obj.name}: no motion in {still} of {attempts} rigid simulations")
    raise SimulationDivergedError(f"{obj.name}: rigid simulation diverged even at dt={dt * 2:g} s")


def _write_assets(obj, folder: Path) -> None:
    """PartNet-style folder (URDF + OBJ parts + mobility_v2.json + semantics.txt) plus ``model.xml`` MJCF."""
    from kinemesh.atomic import write_text
    from kinemesh.data.partnet import write_partnet_folder
    from kinemesh.synth.mjcf import MjcfOptions, articulated_to_mjcf

    write_partnet_folder(obj, folder)
    write_text(folder.parent / f"{folder.name}.xml", articulated_to_mjcf(obj, MjcfOptions(floor=True)))


def check_scheduler(scheduler: str | None) -> None:
    """ConfigError for a malformed ``--scheduler`` (checked before any work), MissingDependencyError when
    Dask distributed is not installed."""
    from kinemesh.errors import ConfigError, MissingDependencyError

    if not scheduler:
        return
    if scheduler.startswith("local:"):
        n = scheduler[len("local:") :]
        if not n.isdigit() or int(n) < 1:
            raise ConfigError(f"--scheduler: expected local:N with N >= 1 worker processes, got {scheduler!r}")
    elif "://" not in scheduler and ":" not in scheduler:
        raise ConfigError(f"--scheduler: expected local:N or a Dask scheduler address host:port, got {scheduler!r}")
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise MissingDependencyError("kinemesh[cluster]", "--scheduler (Dask distributed)") from None


def map_items(fn, args: list, workers: int = 1, scheduler: str | None = None, progress: bool = True):
    """Yield ``fn(a)`` for every ``a`` of ``args`` as the items finish, with a progress bar.

    Engines: ``scheduler`` None runs a process pool of ``workers`` (1 = in this process); ``"local:N"`` a Dask
    ``LocalCluster`` of N single-threaded worker processes; any other string is the address of a running Dask
    scheduler (``tcp://host:8786``) whose workers import kinemesh and see the output folder. ``fn`` must be a
    module-level function returning a dict with ``status`` (failed items are printed above the bar). Each
    item's result depends on its arguments only, so every engine writes the same files.
    """
    from kinemesh.progress import tqdm

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # inherited by worker processes
    bar = tqdm(total=len(args), desc="synth", unit="item", disable=not progress)
    try:
        for r in _run_all(fn, args, workers, scheduler):
            bar.update(1)
            if r.get("status") == "failed":
                bar.write(f"dropped {r.get('kind', '')}/{r.get('category', '')}/{r.get('index', '')}: {r['error']}")
            yield r
    finally:
        bar.close()


def _run_all(fn, args, workers, scheduler):
    if scheduler:
        from distributed import Client, LocalCluster, as_completed

        from kinemesh.errors import ConfigError

        cluster = None
        if scheduler.startswith("local:"):
            cluster = LocalCluster(
                n_workers=int(scheduler[len("local:") :]),
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=40,
            )
        try:
            try:
                client = Client(cluster if cluster is not None else scheduler, timeout="20s")
            except OSError as exc:
                raise ConfigError(f"--scheduler: cannot reach the Dask scheduler {scheduler} ({exc})") from None
            try:
                for fut in as_completed(client.map(fn, args, pure=False)):
                    yield fut.result()
            finally:
                client.close()
        finally:
            if cluster is not None:
                cluster.close()
    elif workers <= 1:
        yield from map(fn, args)
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=workers) as pool:
            for fut in as_completed([pool.submit(fn, a) for a in args]):
                yield fut.result()


def _check_category_names(cfg: SynthConfig, user: dict[str, str]) -> None:
    """ConfigError for a name in ``--categories`` that no selected kind has (a typo would otherwise
    generate nothing and exit 0) or in ``--holdout-categories`` that no kind has (it would silently hold
    out nothing)."""
    from kinemesh.errors import ConfigError

    if cfg.categories:
        selected = {c for k in cfg.kinds for c in all_categories(k)}
        if "elastic" in cfg.kinds:
            selected |= set(user)
        unknown = [c for c in cfg.categories if c not in selected]
        if unknown:
            raise ConfigError(
                f"--categories: unknown {unknown} for kinds {','.join(cfg.kinds)}; "
                f"choose from {sorted(selected)}"
            )
    known = {c for k in KINDS for c in all_categories(k)} | set(user)
    unknown = [c for c in cfg.holdout_categories if c not in known and not c.startswith("user_")]
    if unknown:
        raise ConfigError(f"--holdout-categories: unknown {unknown}; choose from {sorted(known)}")


def generate(cfg: SynthConfig, progress: bool = True) -> dict:
    """Generate the dataset of ``cfg`` (process pool or Dask, ``map_items``); write the manifest and a report.

    Returns the report dict (counts per kind, failures, seconds). Raises ConfigError for bad options.
    """
    from kinemesh.atomic import write_text
    from kinemesh.data import manifest as mf
    from kinemesh.errors import ConfigError

    for k in cfg.kinds:
        if k not in KINDS:
            raise ConfigError(f"--kinds: unknown kind {k!r}; choose from {KINDS}")
    if cfg.per_category < 0:
        raise ConfigError(f"--per-category must be >= 0, got {cfg.per_category}")
    if not 0.0 <= cfg.instance_fraction < 1.0:  # checked up front, not after a long generation run
        raise ConfigError(f"--instance-fraction must be in [0, 1), got {cfg.instance_fraction}")
    if not 0.0 <= cfg.val_fraction < 1.0 - cfg.instance_fraction:
        raise ConfigError(f"--val-fraction must be in [0, 1 - instance fraction), got {cfg.val_fraction}")
    user = user_mesh_categories(cfg.elastic_meshes)
    for path in user.values():  # a user's bad mesh is an error up front, not a silently dropped item
        _user_mesh(path)
    _check_category_names(cfg, user)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = make_jobs(cfg)
    workers = cfg.workers or os.cpu_count() or 1
    check_scheduler(cfg.scheduler)
    args = [
        (k, c, i, str(out), cfg.seed, cfg.kinematic_frames, cfg.dynamic_frames, cfg.write_assets, user)
        for k, c, i in jobs
    ]
    t0 = time.perf_counter()
    results = list(map_items(run_item, args, workers, cfg.scheduler, progress))
    elapsed = time.perf_counter() - t0
    entries = [e for e in mf.scan_dataset(out) if e["kind"] in KINDS]
    entries = mf.assign_splits(
        entries,
        holdout_categories=cfg.holdout_categories,
        instance_fraction=cfg.instance_fraction,
        seed=cfg.seed,
        val_fraction=cfg.val_fraction,
    )
    mf.write_manifest(entries, out / "manifest.jsonl")
    report = {
        "seconds": elapsed,
        "workers": workers,
        "scheduler": cfg.scheduler,
        "items": len(results),
        "by_status": {s: sum(r["status"] == s for r in results) for s in ("ok", "skipped", "failed")},
        "by_kind": {},
        "failures": [r for r in results if r["status"] == "failed"],
        "sequences": len(entries),
        "frames": int(sum(e["n_frames"] for e in entries)),
        "splits": {s: sum(e["split"] == s for e in entries) for s in mf.SPLITS},
        "config": {
            "kinds": list(cfg.kinds),
            "per_category": cfg.per_category,
            "seed": cfg.seed,
            "assembly_factor": cfg.assembly_factor,
            "kind_factors": dict(cfg.kind_factors),
            "holdout_categories": list(cfg.holdout_categories),
        },
    }
    for k in cfg.kinds:
        rk = [r for r in results if r["kind"] == k and r["status"] == "ok"]
        report["by_kind"][k] = {"generated": len(rk), "seconds": float(sum(r["seconds"] for r in rk))}
    write_text(out / "synth_report.json", json.dumps(report, indent=2))
    return report
