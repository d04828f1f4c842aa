"""Training pairs from a dataset folder (NeuROK Sec. 4.2).

A dataset folder holds ``manifest.jsonl`` (one JSON object per instance with at least the ``.npz`` path
relative to the folder, under ``path``/``file``/``npz``, and a ``split``) and the KinematicSequence files.
A training pair is: one instance, two random frames a != b, M0 = frame a and the target deformation
frame b - frame a at the same surface samples (barycentric correspondences), both orders occurring.
Augmentation: random rotation about Z, random uniform scale, fresh point samples per pair.
Elastic and cloth frames have the body's rigid motion removed (``remove_rigid_motion``).
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import ConfigError, InputFileError
from kinemesh.geometry.kind import connected_components
from kinemesh.geometry.normalize import normalization
from kinemesh.geometry.procrustes import kabsch
from kinemesh.geometry.sampling import points_from_barycentric, sample_surface

log = logging.getLogger(__name__)
HELD_OUT_SPLITS = ("val", "valid", "validation", "test", "test_category", "holdout", "heldout")


def read_manifest_entries(data_dir: str | os.PathLike) -> list[dict]:
    """Entries of ``data_dir/manifest.jsonl`` with an absolute ``_path``. Raises InputFileError."""
    data_dir = Path(data_dir)
    path = data_dir / "manifest.jsonl"
    if not path.is_file():
        raise InputFileError(path, "missing: a dataset folder needs manifest.jsonl (see `kinemesh synth`)")
    entries = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except ValueError as exc:
            raise InputFileError(path, f"line {i}: not JSON ({exc})") from exc
        rel = e.get("path") or e.get("file") or e.get("npz")
        if not rel:
            raise InputFileError(path, f"line {i}: no 'path' field")
        full = (data_dir / rel).resolve()
        if data_dir.resolve() not in full.parents:
            raise InputFileError(path, f"line {i}: path {rel!r} leaves the dataset folder")
        e["_path"] = full
        e.setdefault("split", "train")
        entries.append(e)
    if not entries:
        raise InputFileError(path, "has no entries")
    return entries


def select_split(entries: list[dict], split: str) -> list[dict]:
    """``train``, a named split, or ``heldout`` (every split in HELD_OUT_SPLITS; ``val`` preferred)."""
    if split == "heldout":
        for name in ("val", "valid", "validation"):
            sel = [e for e in entries if e["split"] == name]
            if sel:
                return sel
        return [e for e in entries if e["split"] in HELD_OUT_SPLITS]
    return [e for e in entries if e["split"] == split]


def parse_data_spec(spec: str) -> tuple[Path, float | None]:
    """``DIR`` or ``DIR:WEIGHT`` (a number >= 0) -> (folder, weight or None). Raises ConfigError."""
    head, sep, tail = str(spec).rpartition(":")
    if not sep or "/" in tail or "\\" in tail:
        return Path(spec), None
    try:
        weight = float(tail)
    except ValueError:
        return Path(spec), None
    if not (np.isfinite(weight) and weight >= 0):
        raise ConfigError(f"--data {spec}: the weight must be a finite number >= 0")
    return Path(head), weight


def data_folders(data) -> list[Path]:
    """One dataset folder or a list of them, as a list of Paths."""
    return [Path(data)] if isinstance(data, (str, os.PathLike)) else [Path(d) for d in data]


def read_datasets(folders, weights=None, kinds=None) -> tuple[list[dict], dict[str, float]]:
    """Entries of several dataset folders, each tagged with ``_dataset`` (its folder) and keeping its own
    split, and the sampling weight of each folder: ``weights`` (one per folder, None = not given) when every
    weight is given, else the folders' shares of training sequences. ``kinds`` (e.g. ("elastic", "cloth")):
    keep only sequences of these object kinds (None = all). Raises InputFileError, ConfigError."""
    folders = [Path(f) for f in folders]
    weights = list(weights) if weights is not None else [None] * len(folders)
    if len(weights) != len(folders):
        raise ConfigError(f"{len(folders)} dataset folders but {len(weights)} weights")
    if len({str(f.resolve()) for f in folders}) != len(folders):
        raise ConfigError("--data: the same dataset folder is given twice")
    given = [w is not None for w in weights]
    if any(given) and not all(given):
        raise ConfigError("--data: give a :WEIGHT to every dataset folder or to none (default: proportional "
                          "to their training sequences)")
    entries, shares = [], {}
    for folder, w in zip(folders, weights):
        es = read_manifest_entries(folder)
        if kinds is not None:
            es = [e for e in es if e.get("kind") in kinds]
            if not es:
                raise ConfigError(f"{folder}: no sequences of kind {', '.join(kinds)}")
        for e in es:
            e["_dataset"] = str(folder)
        entries += es
        shares[str(folder)] = float(w) if w is not None else float(len(select_split(es, "train")))
    if sum(shares.values()) <= 0:
        raise ConfigError("--data: the dataset weights are all 0")
    _warn_shared_instances(entries)
    return entries, shares


def _warn_shared_instances(entries: list[dict]) -> None:
    """Warn when one instance (same name and vertex count) is trained on in one dataset and held out in
    another: the validation curve would then see training data."""
    seen: dict[tuple, tuple[str, str]] = {}
    for e in entries:
        key = (e.get("instance"), e.get("n_vertices"))
        if key[0] is None:
            continue
        prev = seen.setdefault(key, (e["_dataset"], e["split"]))
        if prev[0] != e["_dataset"] and (prev[1] == "train") != (e["split"] == "train"):
            log.warning("instance %s is '%s' in %s and '%s' in %s: held-out numbers see training data",
                        key[0], prev[1], prev[0], e["split"], e["_dataset"])
            return


FREE_BODY_KINDS = ("elastic", "cloth")


def remove_rigid_motion(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``target`` (N, 3) with the best-fit rigid motion source -> target undone (Kabsch, no scale).

    Elastic and cloth sequences are free bodies in the simulator (dropped, thrown): most of their motion
    is the whole body flying, which is not a kinematic state of the object. The model learns their shape
    change; the dynamics module moves the body.
    """
    R, t = kabsch(target, source)  # the rigid motion taking target back onto source
    return (target @ R.T + t).astype(np.result_type(source, target))


@dataclass
class Augment:
    """Per-pair augmentation switches (TrainConfig fields of the same names)."""

    rotate_z: bool = True
    scale_range: tuple[float, float] = (1.0, 1.0)
    resample_points: bool = True


class PairSampler:
    """Draws batches of (points on M0, deformation) pairs in normalised coordinates.

    Entries from several datasets (``_dataset`` key, see ``read_datasets``) are drawn by dataset with
    probabilities ``dataset_weights`` ({name: weight}, default equal); within a dataset instances are chosen
    with equal probability per ``kind`` (articulated / elastic / cloth ...), then uniformly within the kind,
    so a small kind is not drowned out.
    """

    def __init__(self, entries: list[dict], n_points: int, augment: Augment, max_cached: int = 100000,
                 dataset_weights: dict[str, float] | None = None):
        if not entries:
            raise ConfigError("no dataset entries for this split")
        self.entries = entries
        self.n_points = n_points
        self.augment = augment
        self.max_cached = max_cached
        self._cache: OrderedDict[int, tuple[KinematicSequence, np.ndarray]] = OrderedDict()
        self.datasets: dict[str, dict[str, list[int]]] = {}
        for i, e in enumerate(entries):
            self.datasets.setdefault(str(e.get("_dataset", "")), {}).setdefault(str(e.get("kind", "unknown")),
                                                                                []).append(i)
        w = np.array([float((dataset_weights or {}).get(name, 1.0)) for name in self.datasets])
        if not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
            raise ConfigError(f"dataset weights must be >= 0 and not all 0, got {dataset_weights}")
        self.dataset_p = w / w.sum()

    def sequence(self, i: int) -> KinematicSequence:
        return self._load(i)[0]

    def _load(self, i: int) -> tuple[KinematicSequence, np.ndarray]:
        """(sequence, group label of each face): the sequence's part (``part_ids``) when it has them, else
        the connected component, as ``KinematicModel.instance`` groups points at inference (a real part is
        many components and must move as one)."""
        item = self._cache.get(i)
        if item is None:
            path = self.entries[i]["_path"]
            seq = KinematicSequence.load(path)
            if seq.n_frames < 1:
                raise InputFileError(path, "has no frames")
            groups = seq.part_ids if seq.part_ids is not None else connected_components(seq.n_vertices, seq.faces)
            item = (seq, np.asarray(groups)[seq.faces[:, 0]])
            self._cache[i] = item
            if len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(i)
        return item

    def pair(self, rng: np.random.Generator, index: int | None = None, frames: tuple[int, int] | None = None):
        """One pair: points (P,3), delta (P,3) float32 normalised, part/component labels (P,) int64, instance index."""
        if index is None:
            kinds = next(iter(self.datasets.values()))
            if len(self.datasets) > 1:  # one dataset: the draws of the single-dataset sampler, unchanged
                kinds = list(self.datasets.values())[rng.choice(len(self.datasets), p=self.dataset_p)]
            kind = list(kinds)[rng.integers(len(kinds))]
            index = int(kinds[kind][rng.integers(len(kinds[kind]))])
        seq, face_comp = self._load(index)
        states = np.concatenate([seq.rest_vertices[None], seq.frames]).astype(np.float64)
        if frames is None:
            a = int(rng.integers(len(states)))
            b = int(rng.integers(len(states) - 1)) if len(states) > 1 else 0
            b = b + 1 if (len(states) > 1 and b >= a) else b
        else:
            a, b = frames
        va, vb = states[a], states[b]
        if seq.kind in FREE_BODY_KINDS:
            vb = remove_rigid_motion(va, vb)
        if self.augment.resample_points:
            _, fid, bary = sample_surface(va, seq.faces, self.n_points, seed=rng)
        else:  # a fixed sample set per instance (on the rest mesh's faces)
            _, fid, bary = sample_surface(seq.rest_vertices, seq.faces, self.n_points, seed=index)
        pa = points_from_barycentric(va, seq.faces, fid, bary)
        pb = points_from_barycentric(vb, seq.faces, fid, bary)
        if self.augment.rotate_z:
            th = rng.uniform(0, 2 * np.pi)
            c, s = np.cos(th), np.sin(th)
            R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
            va, pa, pb = va @ R.T, pa @ R.T, pb @ R.T
        center, scale = normalization(va)
        lo, hi = self.augment.scale_range
        scale *= rng.uniform(lo, hi) if hi > lo else lo
        groups = np.unique(face_comp[fid], return_inverse=True)[1].reshape(-1).astype(np.int64)
        return ((pa - center) * scale).astype(np.float32), ((pb - pa) * scale).astype(np.float32), groups, index

    def batch(self, rng: np.random.Generator, size: int):
        """(points (B,P,3), delta (B,P,3)) float32 and component labels (B,P) int64 numpy arrays."""
        pts, dls, grp = zip(*[self.pair(rng)[:3] for _ in range(size)])
        return np.stack(pts), np.stack(dls), np.stack(grp)
