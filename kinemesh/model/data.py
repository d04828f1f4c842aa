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

    Instances are chosen with equal probability per ``kind`` (articulated / elastic / cloth ...), then
    uniformly within the kind, so a small kind is not drowned out.
    """

    def __init__(self, entries: list[dict], n_points: int, augment: Augment, max_cached: int = 100000):
        if not entries:
            raise ConfigError("no dataset entries for this split")
        self.entries = entries
        self.n_points = n_points
        self.augment = augment
        self.max_cached = max_cached
        self._cache: OrderedDict[int, tuple[KinematicSequence, np.ndarray]] = OrderedDict()
        kinds: dict[str, list[int]] = {}
        for i, e in enumerate(entries):
            kinds.setdefault(str(e.get("kind", "unknown")), []).append(i)
        self.kinds = kinds

    def sequence(self, i: int) -> KinematicSequence:
        return self._load(i)[0]

    def _load(self, i: int) -> tuple[KinematicSequence, np.ndarray]:
        """(sequence, connected-component label of each face)."""
        item = self._cache.get(i)
        if item is None:
            path = self.entries[i]["_path"]
            seq = KinematicSequence.load(path)
            if seq.n_frames < 1:
                raise InputFileError(path, "has no frames")
            item = (seq, connected_components(seq.n_vertices, seq.faces)[seq.faces[:, 0]])
            self._cache[i] = item
            if len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(i)
        return item

    def pair(self, rng: np.random.Generator, index: int | None = None, frames: tuple[int, int] | None = None):
        """One pair: points (P,3), delta (P,3) float32 normalised, component labels (P,) int64, instance index."""
        if index is None:
            kind = list(self.kinds)[rng.integers(len(self.kinds))]
            index = int(self.kinds[kind][rng.integers(len(self.kinds[kind]))])
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
