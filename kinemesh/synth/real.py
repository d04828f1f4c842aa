"""Real 4D training data: PartNet-Mobility folders or URDF files -> KinematicSequences (issue 16, item 1).

``kinemesh synth --from-urdf DIR`` loads every object of DIR with ``partnet.load_articulated`` (Z up, axes
normalised, limits from the URDF or ``mobility_v2.json``, the geometry-less ``_helper`` link of a slider that
also turns kept so both degrees of freedom move), cleans each part's mesh (:func:`clean_part`) and decimates
the parts to a shared vertex budget. Each object then gives ``kinematic`` sequences (joint configurations
sampled within the limits, continuous joints over a full turn; NeuROK Sec. 4.2's (rest, state) pairs) and
``dynamic`` MuJoCo rollouts (gravity on released doors and lids, drags = joint motors, pokes = impulses;
``articulated_motion.dynamic_sequence``). One part id per link (all its visual meshes), ``meta.joints`` in the
rest frame.

Validity, as for the procedural data: a sequence is kept only when it moves (``validity.moves``), no two parts
interpenetrate beyond their overlap at rest (:class:`kinemesh.geometry.validity.RestOverlap`; real parts
often overlap at rest, so the rest pose is the baseline) and every part follows the forward kinematics of the
recorded joint values (:func:`detachment`). Kinematic configurations that interpenetrate are resampled; other failures drop the
sequence and are reported.

Splits: an object is ``val`` when the hash of its PartNet-Mobility id falls below ``val_fraction``
(:func:`hash_split`), so an object gets the same split on any machine, for any seed and in any subset of the
full PartNet-Mobility download.
"""

from __future__ import annotations

import json
import logging
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint


@dataclass
class RealConfig:
    """What ``kinemesh synth --from-urdf`` generates."""

    source: Path  # folder of PartNet-Mobility object folders and/or .urdf files (or one object)
    out: Path  # output folder
    seed: int = 0  # base seed; each sequence's stream comes from (seed, object id, sequence index)
    kinematic: int = 2  # kinematic sequences per object
    dynamic: int = 4  # MuJoCo rollouts per object
    kinematic_frames: int = 16  # frames per kinematic sequence
    dynamic_frames: int = 24  # frames per rollout
    max_vertices: int = 4000  # vertex budget per object, shared by its parts (quadric decimation)
    val_fraction: float = 0.2  # fraction of objects in split val (by hash of the object id)
    workers: int = 1  # worker processes (process pool) when no scheduler
    scheduler: str | None = None  # Dask: "local:N" or a scheduler address (see dataset.map_items)


def find_objects(source: str | Path) -> list[Path]:
    """The objects under ``source``, sorted: sub-folders holding a URDF and ``*.urdf`` files in ``source``, or
    ``source`` itself when it is one object (a folder with a URDF, or a ``.urdf`` file).

    Raises InputFileError when ``source`` is missing or holds no object.
    """
    from kinemesh.data.partnet import find_urdf
    from kinemesh.errors import InputFileError

    src = Path(source)
    if not src.exists():
        raise InputFileError(src, "folder not found (--from-urdf)")
    if src.is_file():
        if src.suffix.lower() != ".urdf":
            raise InputFileError(src, "expected a folder of objects or a .urdf file (--from-urdf)")
        return [src]
    if (src / "mobility.urdf").is_file():
        return [src]
    found = [p for p in sorted(src.iterdir()) if (p.is_dir() and find_urdf(p, required=False) is not None)]
    found += [p for p in sorted(src.glob("*.urdf")) if p.is_file()]
    if not found:
        raise InputFileError(src, "holds no object (sub-folders with mobility.urdf or a .urdf, or .urdf files)")
    return found


def object_id(path: Path) -> str:
    """A file-name-safe id of an object: its folder name, or the stem of a ``.urdf`` file."""
    name = path.stem if path.suffix.lower() == ".urdf" else path.name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "object"


def hash_split(oid: str, val_fraction: float) -> str:
    """``val`` or ``train`` from the CRC32 of the PartNet-Mobility id (the part of ``oid`` after its last
    ``__``, so ``kitchenmodels__7236`` and ``7236`` fall alike); independent of seed, order and machine."""
    key = oid.rsplit("__", 1)[-1].encode()
    return "val" if zlib.crc32(key) / 2**32 < val_fraction else "train"


def clean_part(vertices: np.ndarray, faces: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """Weld, then drop degenerate, duplicate and unused elements of one part mesh.

    Vertices on the same ``tol``-grid cell (m) are welded; faces with a repeated vertex or an area below
    ``tol``^2, and faces repeating another's three vertices (either orientation: double-sided panels) are
    dropped; then vertices no face uses. Small connected components and open shells are kept: they belong to
    the link and move with it. Returns (vertices (k, 3) float64, faces (m, 3) int64, counts).
    """
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    counts = {"vertices_in": len(v), "faces_in": len(f)}
    if len(f) == 0:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64), counts | {"vertices": 0, "faces": 0}
    _, first, inverse = np.unique(
        np.floor(v / tol + 0.5).astype(np.int64), axis=0, return_index=True, return_inverse=True
    )
    v, f = v[first], inverse.ravel()[f]
    counts["welded"] = counts["vertices_in"] - len(v)
    area2 = np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
    ok = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2]) & (area2 > 2 * tol**2)
    counts["degenerate_faces"] = int((~ok).sum())
    f = f[ok]
    _, unique = np.unique(np.sort(f, axis=1), axis=0, return_index=True)
    counts["duplicate_faces"] = len(f) - len(unique)
    f = f[np.sort(unique)]
    used = np.unique(f)
    remap = np.full(len(v), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    counts["unused_vertices"] = len(v) - len(used)
    v, f = v[used], remap[f]
    return v, f, counts | {"vertices": len(v), "faces": len(f)}


def prepare_object(path: Path, max_vertices: int = 4000) -> tuple[ArticulatedObject, dict]:
    """Load one object, clean every part (:func:`clean_part`, weld grid 1e-5 x the object's diagonal) and
    decimate the parts to ``max_vertices`` in all (shared in proportion to their sizes).

    A joint whose limits are equal cannot move and becomes fixed. Returns (object, stats: per-object counts
    of frozen joints and of what was welded, dropped and decimated). Raises
    InputFileError / UnsafePathError naming the file (``load_articulated``), KinemeshError when no moving
    part has geometry.
    """
    import trimesh

    from kinemesh.data.partnet import apply_vertex_budget, load_articulated
    from kinemesh.errors import KinemeshError

    obj = load_articulated(path, max_vertices=None)
    frozen = [i for i, j in enumerate(obj.joints) if j.limits is not None and j.limits[0] == j.limits[1]]
    for i in frozen:  # an empty range cannot move (and MuJoCo refuses it): the joint is fixed
        j = obj.joints[i]
        obj.joints[i] = Joint(j.name, "fixed", j.parent, j.child, j.axis, j.origin, None)
    obj = ArticulatedObject(obj.parts, obj.joints, obj.category, obj.name, obj.meta)
    geo = [p for p in obj.parts if len(p.vertices)]
    if not geo:
        raise KinemeshError(f"{path}: no part has geometry")
    allv = np.concatenate([p.vertices for p in geo])
    tol = 1e-5 * float(np.linalg.norm(np.ptp(allv, axis=0)))
    stats = {"parts": len(obj.parts), "movable_joints": len(obj.movable_joints), "frozen_joints": len(frozen)}
    for p in geo:
        p.vertices, p.faces, c = clean_part(p.vertices, p.faces, tol)
        c["components"] = len(np.unique(trimesh.graph.connected_component_labels(
            trimesh.Trimesh(p.vertices, p.faces, process=False).face_adjacency, node_count=len(p.faces))))
        for k, n in c.items():
            stats[k] = stats.get(k, 0) + int(n)
    warnings: list[str] = []
    apply_vertex_budget(obj.parts, max_vertices, Path(path), warnings)
    stats["decimated"] = bool(warnings)
    stats["vertices_out"] = int(sum(len(p.vertices) for p in obj.parts))
    stats["faces_out"] = int(sum(len(p.faces) for p in obj.parts))
    stats["load_warnings"] = len(obj.meta.get("load_warnings", []))
    if not obj.movable_joints:
        raise KinemeshError(f"{path}: no movable joint")
    moving = {j.child for j in obj.movable_joints}
    for j in obj._order:  # parts below a moving joint move too
        if j.parent in moving:
            moving.add(j.child)
    if not any(len(obj.part(n).vertices) for n in moving):
        raise KinemeshError(f"{path}: no moving part has geometry")
    return obj, stats


def thickened(obj: ArticulatedObject, rel: float = 1e-3) -> ArticulatedObject:
    """A copy of ``obj`` for MuJoCo in which every flat part (zero-thickness panel: all vertices within
    1e-9 x the object's diagonal of one plane) gets a second copy of its vertices ``rel`` x the diagonal
    along the plane's normal, so that MuJoCo can build its convex hull (it refuses coplanar meshes).
    Mass and inertia change a little; the recorded frames pose the original meshes."""
    from kinemesh.data.articulated import Part

    diag = float(np.linalg.norm(np.ptp(np.concatenate([p.vertices for p in obj.parts if len(p.vertices)]), axis=0)))
    parts = []
    for p in obj.parts:
        v, f = p.vertices, p.faces
        if len(v) >= 3:
            _, sv, vt = np.linalg.svd(v - v.mean(0), full_matrices=False)
            if sv[-1] <= 1e-9 * diag * np.sqrt(len(v)):
                v, f = np.concatenate([v, v + rel * diag * vt[-1]]), np.concatenate([f, f[:, ::-1] + len(v)])
        parts.append(Part(p.name, v, f, p.label))
    return ArticulatedObject(parts, obj.joints, obj.category, obj.name, obj.meta)


def detachment(obj: ArticulatedObject, seq) -> float:
    """Largest distance between a frame's vertices and the forward kinematics of its recorded joint values
    (``meta.joint_values``), over the object's bounding-box diagonal: 0 when every part stays rigidly on its
    joints (nothing detaches, nothing deforms), float32 rounding aside."""
    diag = float(np.linalg.norm(np.ptp(seq.rest_vertices, axis=0)))
    err = max(
        float(np.abs(obj.merged(vals)[0] - frame).max())
        for vals, frame in zip(seq.meta["joint_values"], seq.frames)
    )
    return err / max(diag, 1e-12)


def _kinematic(obj, rng, n_frames: int, overlap, tries: int = 4):
    """A kinematic sequence whose configurations pass ``overlap``; interpenetrating ones are resampled."""
    from kinemesh.errors import KinemeshError
    from kinemesh.synth.articulated_motion import kinematic_sequence

    keep, rejected = [], 0
    for _ in range(tries):
        for vals in kinematic_sequence(obj, rng, n_frames=n_frames).meta["joint_values"]:
            if len(keep) < n_frames and overlap(vals):
                rejected += 1
            elif len(keep) < n_frames:
                keep.append(vals)
        if len(keep) == n_frames:
            extra = {"motion": "kinematic", "conditions": {"p_closed": 0.25, "rejected_configurations": rejected}}
            return obj.to_sequence(keep, fps=10.0, source="kinemesh.synth.real", extra_meta=extra)
    raise KinemeshError(f"interpenetration: {rejected} of {rejected + len(keep)} configurations")


def run_real_item(args) -> dict:
    """Generate every sequence of one object (in a worker); ``args`` = (path, out, seed, kinematic, dynamic,
    kinematic frames, dynamic frames, max vertices). Returns a status dict for ``map_items``."""
    path = Path(args[0])
    done = Path(args[1]) / "objects" / f"{object_id(path)}.json"
    if done.is_file():
        return json.loads(done.read_text()) | {"status": "skipped", "seconds": 0.0}
    quiet = logging.getLogger("kinemesh.data")  # load and decimation warnings are counted, not printed
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return _object_sequences(*args, done=done)
    finally:
        quiet.setLevel(level)


def _object_sequences(path, out, seed, n_kin, n_dyn, kin_frames, dyn_frames, max_vertices, done: Path) -> dict:
    from kinemesh.atomic import write_text
    from kinemesh.errors import KinemeshError
    from kinemesh.synth.dataset import retry_dynamic, item_rng
    from kinemesh.geometry.validity import RestOverlap, moves

    path, out = Path(path), Path(out)
    oid = object_id(path)
    t0 = time.perf_counter()
    res = {"kind": "real", "category": "", "index": oid, "source": str(path), "dropped": []}
    try:
        obj, res["stats"] = prepare_object(path, max_vertices)
        overlap = RestOverlap(obj)
    except Exception as exc:  # noqa: BLE001 -- an object that cannot be used is dropped and reported
        return res | {"status": "failed", "error": f"{exc.__class__.__name__}: {exc}",
                      "seconds": time.perf_counter() - t0}
    cat = re.sub(r"[^A-Za-z0-9_.-]", "_", obj.category) or "unknown"
    obj.name, res["category"] = oid, cat
    written, sim = [], thickened(obj)
    for k in range(n_kin + n_dyn):
        motion, i = ("kinematic", k) if k < n_kin else ("dynamic", k - n_kin)
        rng = item_rng(seed, "real", oid, k)
        try:
            with np.errstate(all="ignore"):  # open shells give trimesh NaN volumes (force bound only)
                if motion == "kinematic":
                    seq = _kinematic(obj, rng, kin_frames, overlap)
                else:
                    seq = retry_dynamic(obj, rng, dyn_frames, sim_obj=sim)
                    seq.meta["source"] = "kinemesh.synth.real"
                    step = max(1, dyn_frames // 8)  # 8 evenly spaced frames' joint values
                    hits = [h for v in seq.meta["joint_values"][::step] for h in overlap(v)]
                    if hits:
                        raise KinemeshError(f"interpenetration {hits[0][0]}/{hits[0][1]} "
                                            f"({hits[0][2]:.0%} of the part beyond rest)")
            if not moves(seq):
                raise KinemeshError("no motion")
            gap = detachment(obj, seq)
            if gap > 1e-4:
                raise KinemeshError(f"detachment ({gap:.2g} of the size)")
        except Exception as exc:  # noqa: BLE001 -- a failed sequence is dropped and reported
            msg = str(exc) if isinstance(exc, KinemeshError) else f"{exc.__class__.__name__}: {exc}"
            msg = msg.removeprefix(f"{oid}: ")
            res["dropped"].append(f"{motion}_{i:02d}: {msg}")
            continue
        seq.meta.update(instance=oid, seed=[seed, "real", oid, k], source_path=str(path))
        written.append(seq.save(out / "articulated" / cat / f"{oid}_{motion}_{i:02d}.npz"))
        res["frames"] = res.get("frames", 0) + seq.n_frames
    res |= {"status": "ok" if written else "failed", "sequences": len(written),
            "seconds": time.perf_counter() - t0}
    if not written:
        res["error"] = "; ".join(res["dropped"]) or "no sequence"
    else:
        write_text(done, json.dumps(res))
    return res


def generate_real(cfg: RealConfig, progress: bool = True) -> dict:
    """Generate the real dataset of ``cfg``: sequences, ``manifest.jsonl`` (train / val by
    :func:`hash_split`) and ``synth_report.json`` (counts, cleaning totals, dropped objects and sequences).

    Resumes: an object whose ``OUT/objects/<id>.json`` exists is skipped. Raises ConfigError / InputFileError
    for bad options before any work.
    """
    from kinemesh.atomic import write_text
    from kinemesh.data import manifest as mf
    from kinemesh.errors import ConfigError
    from kinemesh.synth.dataset import KINDS, check_scheduler, map_items

    if not 0.0 <= cfg.val_fraction < 1.0:
        raise ConfigError(f"--val-fraction must be in [0, 1), got {cfg.val_fraction}")
    for name in ("kinematic", "dynamic", "kinematic_frames", "dynamic_frames"):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"--real-{name.replace('_', '-')} must be >= 0, got {getattr(cfg, name)}")
    if cfg.max_vertices < 100:
        raise ConfigError(f"--max-vertices must be >= 100, got {cfg.max_vertices}")
    check_scheduler(cfg.scheduler)
    objects = find_objects(cfg.source)
    ids = [object_id(p) for p in objects]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"--from-urdf: several objects share the ids {dup[:5]}")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    args = [
        (str(p), str(out), cfg.seed, cfg.kinematic, cfg.dynamic, cfg.kinematic_frames, cfg.dynamic_frames,
         cfg.max_vertices)
        for p in objects
    ]
    t0 = time.perf_counter()
    results = list(map_items(run_real_item, args, cfg.workers, cfg.scheduler, progress))
    elapsed = time.perf_counter() - t0
    entries = [e for e in mf.scan_dataset(out) if e["kind"] in KINDS]
    for e in entries:
        e["split"] = hash_split(e["instance"].split("/", 1)[1], cfg.val_fraction)
    mf.write_manifest(entries, out / "manifest.jsonl")
    ok = [r for r in results if r["status"] != "failed"]
    totals: dict = {}
    for r in ok:
        for k, v in r.get("stats", {}).items():
            totals[k] = totals.get(k, 0) + int(v)
    reasons: dict = {}
    for r in results:
        for d in r.get("dropped", []):
            key = re.sub(r"\d+(\.\d+)?%?", "N", d.split(": ", 1)[1].split(" (")[0])
            reasons[key] = reasons.get(key, 0) + 1
    report = {
        "seconds": elapsed,
        "source": str(cfg.source),
        "workers": cfg.workers,
        "scheduler": cfg.scheduler,
        "objects": len(results),
        "by_status": {s: sum(r["status"] == s for r in results) for s in ("ok", "skipped", "failed")},
        "sequences": len(entries),
        "frames": int(sum(e["n_frames"] for e in entries)),
        "splits": {s: sum(e["split"] == s for e in entries) for s in ("train", "val")},
        "cleaning": totals,
        "dropped_sequences": reasons,
        "failures": [{k: r.get(k) for k in ("index", "category", "error")} for r in results
                     if r["status"] == "failed"],
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()},
    }
    write_text(out / "synth_report.json", json.dumps(report, indent=2))
    return report
