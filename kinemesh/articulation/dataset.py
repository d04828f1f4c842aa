"""Training and evaluation samples for the articulation predictor, generated from the synthetic factory.

Splits (fixed, so training and ``kinemesh eval articulation`` never overlap):
- categories in ``HOLDOUT_CATEGORIES`` are never trained on (held-out categories);
- instances are seeded: training uses seeds < ``TEST_SEED_BASE``, held-out instances use seeds from it on;
- random assemblies (``kinemesh.synth.assemblies.random_assembly``) are used for training only;
- real PartNet-Mobility / URDF objects (:func:`real_objects`, parts = links) are split by the CRC32 of their
  id (:func:`kinemesh.synth.real.hash_split`, 20% validation, the rule of ``eval articulation --real-val``):
  only the train split is ever trained on.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint, Part

HOLDOUT_CATEGORIES = ("refrigerator", "trash_can", "pliers")
TEST_SEED_BASE = 100_000
PRETRAIN_SEED_BASE = 50_000


def build_object(kind: str, seed: int) -> ArticulatedObject:
    """A synthetic object: a category name from ``CATEGORIES``, ``"assembly"`` (random assembly of the basic
    part kinds) or ``"assembly+"`` (the extended kinds, 30% of the parts turned obliquely on their face),
    seeded."""
    rng = np.random.default_rng(seed)
    if kind in ("assembly", "assembly+"):
        from kinemesh.synth.assemblies import EXTENDED_KINDS, random_assembly

        obj = random_assembly(rng) if kind == "assembly" else random_assembly(rng, kinds=EXTENDED_KINDS, p_tilt=0.3)
    else:
        from kinemesh.synth.categories import CATEGORIES

        obj = CATEGORIES[kind](rng)
    obj.meta["seed"] = seed
    return obj


def rotate_object(obj: ArticulatedObject, yaw: float) -> ArticulatedObject:
    """The object rotated by ``yaw`` rad about +Z (parts, joint axes and origins)."""
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    parts = [Part(p.name, p.vertices @ R.T, p.faces, p.label) for p in obj.parts]
    joints = [Joint(j.name, j.type, j.parent, j.child, R @ j.axis if j.type != "fixed" else j.axis,
                    R @ j.origin, j.limits) for j in obj.joints]
    return ArticulatedObject(parts, joints, obj.category, obj.name, dict(obj.meta))


def random_yaw(rng: np.random.Generator, p_quarter: float = 0.5) -> float:
    """A yaw angle (rad) for full-circle augmentation: with probability ``p_quarter`` a multiple of 90 deg
    (real assets face a world axis: PartNet-Mobility -X, the synthetic factory -Y), else uniform."""
    if rng.random() < p_quarter:
        return float(rng.integers(0, 4) * 0.5 * np.pi)
    return float(rng.uniform(-np.pi, np.pi))


REAL_CACHE_FORMAT = "kinemesh-real-articulated-1"


def _save_cached(obj: ArticulatedObject, path: Path, stamp: str) -> None:
    """Write ``obj`` (parts, joints, names) to the npz cache file ``path`` atomically (no pickles)."""
    from kinemesh.atomic import atomic_path

    head = {"format": REAL_CACHE_FORMAT, "stamp": stamp, "category": obj.category, "name": obj.name,
            "meta": {k: v for k, v in obj.meta.items() if isinstance(v, (str, int, float))},
            "parts": [[p.name, p.label] for p in obj.parts], "joints": [j.to_dict() for j in obj.joints]}
    arrays = {"head": np.frombuffer(json.dumps(head).encode(), np.uint8)}
    for i, p in enumerate(obj.parts):
        arrays[f"v{i}"], arrays[f"f{i}"] = np.asarray(p.vertices, np.float64), np.asarray(p.faces, np.int64)
    with atomic_path(path) as tmp:
        np.savez(tmp, **arrays)


def _load_cached(path: Path, stamp: str) -> ArticulatedObject | None:
    """The object cached in ``path``, or None when it is missing, stale (other ``stamp``) or unreadable."""
    try:
        with np.load(path, allow_pickle=False) as z:
            head = json.loads(bytes(z["head"]).decode())
            if head.get("format") != REAL_CACHE_FORMAT or head.get("stamp") != stamp:
                return None
            parts = [Part(n, z[f"v{i}"], z[f"f{i}"], lab) for i, (n, lab) in enumerate(head["parts"])]
    except (OSError, ValueError, KeyError):
        return None
    return ArticulatedObject(parts, [Joint.from_dict(d) for d in head["joints"]], head["category"], head["name"],
                             head["meta"])


def real_objects(folder, split: str = "train", cache_dir=None,
                 val_fraction: float = 0.2) -> list[tuple[str, ArticulatedObject]]:
    """[(object id, ArticulatedObject)] for the real PartNet-Mobility / URDF objects under ``folder`` of one
    ``split`` ("train", "val" or "all"; :func:`kinemesh.synth.real.hash_split` on the id), loaded with
    :func:`kinemesh.data.partnet.load_articulated` (URDF world frame, parts = links, ground-truth joints;
    helper links stay geometry-less parts and are skipped as samples). With ``cache_dir`` each object is
    cached there as ``<id>.npz`` (re-read unless its URDF changed). Unreadable objects are reported on
    stderr and skipped. Raises InputFileError when ``folder`` holds no object."""
    import sys

    from kinemesh.data.partnet import find_urdf, load_articulated
    from kinemesh.progress import tqdm
    from kinemesh.synth.real import find_objects, hash_split, object_id

    if split not in ("train", "val", "all"):
        raise ValueError(f"split must be train, val or all, got {split!r}")
    out = []
    for path in tqdm(find_objects(folder), desc=f"real objects ({split})", unit="obj"):
        oid = object_id(path)
        if split != "all" and hash_split(oid, val_fraction) != split:
            continue
        urdf = find_urdf(path) if path.is_dir() else path
        st = urdf.stat()
        stamp = f"{urdf.resolve()}:{st.st_size}:{st.st_mtime_ns}"
        cpath = Path(cache_dir) / f"{oid}.npz" if cache_dir else None
        obj = _load_cached(cpath, stamp) if cpath is not None and cpath.is_file() else None
        if obj is None:
            try:
                obj = load_articulated(path)
            except Exception as exc:  # a broken asset must not stop training on the others
                print(f"skip {path}: {exc}", file=sys.stderr)
                continue
            if cpath is not None:
                _save_cached(obj, cpath, stamp)
        out.append((oid, obj))
    return out


def strip_joints(obj: ArticulatedObject, root: str | None = None) -> ArticulatedObject:
    """The same parts with the articulation hidden: every part welded (fixed joint) to ``root`` (default
    the object's root). This is what the predictor sees: a segmented static shape."""
    root = root or obj.root
    joints = [Joint(f"static_{p.name}", "fixed", root, p.name, (0, 0, 1), (0, 0, 0))
              for p in obj.parts if p.name != root]
    meta = dict(obj.meta)
    meta["joints_hidden"] = True
    return ArticulatedObject([Part(p.name, p.vertices, p.faces, p.label) for p in obj.parts], joints,
                             obj.category, obj.name, meta)


def gt_joint_of(obj: ArticulatedObject) -> dict[str, Joint]:
    """Child part name -> its ground-truth joint."""
    return {j.child: j for j in obj.joints}


def part_samples(obj: ArticulatedObject, rng: np.random.Generator, config, with_validity: bool = False,
                 validity_config=None) -> list[dict]:
    """Network samples (inputs + targets) for every non-root part with geometry of ``obj``."""
    from kinemesh.articulation.predictor import joint_targets, part_features, validity_targets

    geo = [(p.vertices, p.faces) for p in obj.parts]
    names = [p.name for p in obj.parts]
    joints = gt_joint_of(obj)
    labels = None
    if with_validity:
        from kinemesh.articulation.candidates import label_valid_candidates
        from kinemesh.geometry.normalize import normalization

        # labels on the normalized object so the boxes match the network's box frame
        center, scale = normalization(np.concatenate([v for v, _ in geo if len(v)]))
        norm = ArticulatedObject([Part(p.name, (p.vertices - center) * scale, p.faces, p.label) for p in obj.parts],
                                 [Joint(j.name, j.type, j.parent, j.child, j.axis, (j.origin - center) * scale,
                                        j.limits) for j in obj.joints], obj.category, obj.name)
        labels = label_valid_candidates(norm, config=validity_config)
    out = []
    for i, p in enumerate(obj.parts):
        if p.name == obj.root or len(p.faces) == 0 or p.name not in joints:
            continue
        try:
            pts, bf, box, (center, scale) = part_features(geo, i, rng, config, p.name)
        except Exception:
            continue
        j = joints[p.name]
        tg = joint_targets(box, j.type, j.axis, j.origin, j.limits, scale, center)
        s = {"points": pts, "box": bf, "name": names[i], **tg}
        if labels is not None:
            s["valid"] = validity_targets(labels[p.name]) if p.name in labels else np.zeros(60, np.float32)
        out.append(s)
    return out
