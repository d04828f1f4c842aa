"""The KinematicSequence: one 4D object (a fixed-topology mesh moving over time) in one ``.npz`` file.

Contract (docs/data.md): ``rest_vertices`` (n, 3) float32, ``faces`` (m, 3) int32, ``frames`` (T, n, 3) float32
absolute vertex positions in metres, ``times`` (T,) float32 seconds, optional ``part_ids`` (n,) int32, and
``meta``, a JSON string with at least ``category``, ``kind`` (articulated | elastic | cloth | mixed),
``source``, ``units`` ("m"), ``up`` ("z") and, for articulated objects, ``joints``.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kinemesh.atomic import atomic_path
from kinemesh.data.arrays import check_npz
from kinemesh.errors import InputFileError

KINDS = ("articulated", "elastic", "cloth", "mixed")
JOINT_TYPES = ("revolute", "prismatic", "continuous", "fixed")
REQUIRED_META = ("category", "kind", "source", "units", "up")


@dataclass
class KinematicSequence:
    """A mesh moving over time with fixed topology.

    Attributes
    ----------
    rest_vertices : (n, 3) float32, metres, Z up.
    faces : (m, 3) int32 indices into the vertices.
    frames : (T, n, 3) float32 absolute vertex positions per frame, metres.
    times : (T,) float32 seconds, non-decreasing.
    part_ids : (n,) int32 part label per vertex, or None.
    meta : dict with ``category``, ``kind``, ``source``, ``units``, ``up`` and, for articulated objects,
        ``joints`` (list of ``{name, type, parent, child, axis, origin, limits}`` in the rest frame).
    """

    rest_vertices: np.ndarray
    faces: np.ndarray
    frames: np.ndarray
    times: np.ndarray
    part_ids: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rest_vertices = np.asarray(self.rest_vertices, dtype=np.float32)
        self.faces = np.asarray(self.faces, dtype=np.int32)
        self.frames = np.asarray(self.frames, dtype=np.float32)
        self.times = np.asarray(self.times, dtype=np.float32)
        if self.part_ids is not None:
            self.part_ids = np.asarray(self.part_ids, dtype=np.int32)
        meta = {"units": "m", "up": "z", "source": "unknown", "category": "unknown"}
        meta.update(self.meta or {})
        self.meta = meta

    # ------------------------------------------------------------------ properties
    @property
    def n_frames(self) -> int:
        return int(self.frames.shape[0])

    @property
    def n_vertices(self) -> int:
        return int(self.rest_vertices.shape[0])

    @property
    def n_faces(self) -> int:
        return int(self.faces.shape[0])

    @property
    def kind(self) -> str:
        return str(self.meta.get("kind", "mixed"))

    @property
    def category(self) -> str:
        return str(self.meta.get("category", "unknown"))

    @property
    def joints(self) -> list[dict[str, Any]]:
        return list(self.meta.get("joints", []))

    # ------------------------------------------------------------------ validation
    def validate(self, name: str | os.PathLike = "<sequence>") -> "KinematicSequence":
        """Check shapes, dtypes, finiteness, topology and meta; raise InputFileError naming the field."""
        v, f, fr, t = self.rest_vertices, self.faces, self.frames, self.times

        def bad(field_name: str, problem: str) -> InputFileError:
            return InputFileError(name, f"field '{field_name}' {problem}")

        if v.ndim != 2 or v.shape[1] != 3:
            raise bad("rest_vertices", f"must have shape (n, 3), got {v.shape}")
        if v.shape[0] == 0:
            raise bad("rest_vertices", "is empty")
        if not np.isfinite(v).all():
            raise bad("rest_vertices", "contains NaN or inf")
        if f.ndim != 2 or f.shape[1] != 3:
            raise bad("faces", f"must have shape (m, 3), got {f.shape}")
        if f.shape[0] == 0:
            raise bad("faces", "is empty")
        if f.min() < 0 or f.max() >= v.shape[0]:
            raise bad("faces", f"indices must lie in [0, {v.shape[0] - 1}], got [{f.min()}, {f.max()}]")
        if fr.ndim != 3 or fr.shape[2] != 3:
            raise bad("frames", f"must have shape (T, n, 3), got {fr.shape}")
        if fr.shape[0] == 0:
            raise bad("frames", "is empty (no frames)")
        if fr.shape[1] != v.shape[0]:
            raise bad(
                "frames",
                f"topology mismatch: frames have {fr.shape[1]} vertices, rest_vertices has {v.shape[0]}",
            )
        if not np.isfinite(fr).all():
            bad_frame = int(np.where(~np.isfinite(fr).all(axis=(1, 2)))[0][0])
            raise bad("frames", f"contains NaN or inf (first at frame {bad_frame})")
        if t.shape != (fr.shape[0],):
            raise bad("times", f"must have shape ({fr.shape[0]},), got {t.shape}")
        if not np.isfinite(t).all():
            raise bad("times", "contains NaN or inf")
        if t.shape[0] > 1 and np.any(np.diff(t) < 0):
            raise bad("times", "must be non-decreasing")
        if self.part_ids is not None and self.part_ids.shape != (v.shape[0],):
            raise bad("part_ids", f"must have shape ({v.shape[0]},), got {self.part_ids.shape}")
        for key in REQUIRED_META:
            if key not in self.meta:
                raise bad("meta", f"is missing the key '{key}'")
        if self.meta["kind"] not in KINDS:
            raise bad("meta", f"kind must be one of {KINDS}, got {self.meta['kind']!r}")
        for i, joint in enumerate(self.meta.get("joints", [])):
            validate_joint(joint, name, i)
        return self

    # ------------------------------------------------------------------ I/O
    def save(self, path: str | os.PathLike) -> Path:
        """Validate and write atomically to ``path`` (``.npz``). Returns the path."""
        path = Path(path)
        self.validate(path)
        arrays: dict[str, np.ndarray] = {
            "rest_vertices": self.rest_vertices,
            "faces": self.faces,
            "frames": self.frames,
            "times": self.times,
            "meta": np.array(json.dumps(self.meta, default=_json_default)),
        }
        if self.part_ids is not None:
            arrays["part_ids"] = self.part_ids
        with atomic_path(path, suffix=".npz") as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, **arrays)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "KinematicSequence":
        """Read and validate a ``.npz`` sequence. Never unpickles (``allow_pickle=False``)."""
        path = Path(path)
        if not path.is_file():
            raise InputFileError(path, "file not found")
        if path.stat().st_size == 0:
            raise InputFileError(path, "file is empty")
        check_npz(path)  # declared sizes first: a small file may decompress to gigabytes
        try:
            with np.load(path, allow_pickle=False) as data:
                keys = set(data.files)
                for key in ("rest_vertices", "faces", "frames", "times", "meta"):
                    if key not in keys:
                        raise InputFileError(path, f"field '{key}' is missing")
                arrays = {k: data[k] for k in keys}
        except InputFileError:
            raise
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
            raise InputFileError(path, f"not a readable .npz sequence ({exc.__class__.__name__}: {exc})") from None
        try:
            meta = json.loads(str(arrays["meta"]))
        except json.JSONDecodeError as exc:
            raise InputFileError(path, f"field 'meta' is not valid JSON ({exc})") from None
        if not isinstance(meta, dict):
            raise InputFileError(path, "field 'meta' must be a JSON object")
        for key in ("rest_vertices", "frames", "times"):
            if not np.issubdtype(arrays[key].dtype, np.floating):
                raise InputFileError(path, f"field '{key}' must be floating point, got {arrays[key].dtype}")
        for key in ("faces", "part_ids"):
            if key in arrays and not np.issubdtype(arrays[key].dtype, np.integer):
                raise InputFileError(path, f"field '{key}' must be integer, got {arrays[key].dtype}")
        seq = cls(
            rest_vertices=arrays["rest_vertices"],
            faces=arrays["faces"],
            frames=arrays["frames"],
            times=arrays["times"],
            part_ids=arrays.get("part_ids"),
            meta=meta,
        )
        return seq.validate(path)

    # ------------------------------------------------------------------ helpers
    def frame_mesh(self, index: int):
        """Return frame ``index`` as a ``trimesh.Trimesh`` (no processing, topology kept)."""
        import trimesh

        return trimesh.Trimesh(self.frames[index], self.faces, process=False)

    def rest_mesh(self):
        """Return the rest shape as a ``trimesh.Trimesh`` (no processing, topology kept)."""
        import trimesh

        return trimesh.Trimesh(self.rest_vertices, self.faces, process=False)

    def summary(self) -> str:
        """A few human-readable lines describing the sequence."""
        lo, hi = self.rest_vertices.min(0), self.rest_vertices.max(0)
        motion = float(np.linalg.norm(self.frames - self.rest_vertices[None], axis=-1).max())
        lines = [
            f"KinematicSequence: {self.meta.get('category')} ({self.kind}), source {self.meta.get('source')}",
            f"  vertices {self.n_vertices}, faces {self.n_faces}, frames {self.n_frames}, "
            f"duration {float(self.times[-1] - self.times[0]):.3f} s",
            f"  bounds [{lo[0]:.3f} {lo[1]:.3f} {lo[2]:.3f}] .. [{hi[0]:.3f} {hi[1]:.3f} {hi[2]:.3f}] m, "
            f"max vertex motion {motion:.4f} m",
        ]
        if self.part_ids is not None:
            lines.append(f"  parts {len(np.unique(self.part_ids))}")
        for j in self.joints:
            lims = j.get("limits")
            lines.append(
                f"  joint {j['name']}: {j['type']} {j.get('parent')} -> {j.get('child')}, axis "
                f"{np.round(j['axis'], 3).tolist()}, origin {np.round(j['origin'], 3).tolist()}, limits {lims}"
            )
        return "\n".join(lines)


def validate_joint(joint: dict[str, Any], name: str | os.PathLike = "<joint>", index: int = 0) -> None:
    """Check one joint dict of the contract; raise InputFileError naming the joint and field."""
    where = f"meta.joints[{index}]"
    for key in ("name", "type", "parent", "child", "axis", "origin"):
        if key not in joint:
            raise InputFileError(name, f"{where} is missing '{key}'")
    if joint["type"] not in JOINT_TYPES:
        raise InputFileError(name, f"{where} ({joint['name']}) has unknown type {joint['type']!r}; "
                             f"expected one of {JOINT_TYPES}")
    axis = np.asarray(joint["axis"], dtype=float)
    if axis.shape != (3,) or not np.isfinite(axis).all():
        raise InputFileError(name, f"{where} ({joint['name']}) axis must be 3 finite numbers")
    if joint["type"] != "fixed" and abs(np.linalg.norm(axis) - 1.0) > 1e-3:
        raise InputFileError(name, f"{where} ({joint['name']}) axis must be unit length, got |axis|="
                             f"{np.linalg.norm(axis):.4f}")
    origin = np.asarray(joint["origin"], dtype=float)
    if origin.shape != (3,) or not np.isfinite(origin).all():
        raise InputFileError(name, f"{where} ({joint['name']}) origin must be 3 finite numbers")
    limits = joint.get("limits")
    if limits is not None:
        lim = np.asarray(limits, dtype=float)
        if lim.shape != (2,) or not np.isfinite(lim).all() or lim[0] > lim[1]:
            raise InputFileError(name, f"{where} ({joint['name']}) limits must be [lo, hi] with lo <= hi")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
