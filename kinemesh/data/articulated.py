"""Articulated objects in memory: parts (meshes) connected by joints, with forward kinematics.

This is the common currency of the synthetic object factory (writer), the PartNet-Mobility/URDF loaders
(readers), articulation inference and export, and per-part materials. Everything is in the kinemesh frame:
metres, Z up, joint axes and origins expressed in the rest (world) frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import KinemeshError

JOINT_TYPES = ("revolute", "prismatic", "continuous", "fixed")


@dataclass
class Part:
    """One rigid part. ``vertices`` (n, 3) float64 metres in the rest frame; ``faces`` (m, 3) int64.
    ``label`` is the semantic label (e.g. "door", "drawer", "handle", "body"). A part may have no geometry
    (a helper link of a screw joint): then ``vertices`` is (0, 3)."""

    name: str
    vertices: np.ndarray
    faces: np.ndarray
    label: str = ""

    def __post_init__(self) -> None:
        self.vertices = np.asarray(self.vertices, dtype=np.float64).reshape(-1, 3)
        self.faces = np.asarray(self.faces, dtype=np.int64).reshape(-1, 3)


@dataclass
class Joint:
    """A joint moving ``child`` relative to ``parent``.

    ``axis`` (3,) unit vector and ``origin`` (3,) metres, both in the rest frame. ``limits`` (lo, hi) in
    radians (revolute) or metres (prismatic); None for continuous and fixed joints. Joint value 0 is the rest
    pose.
    """

    name: str
    type: str
    parent: str
    child: str
    axis: np.ndarray
    origin: np.ndarray
    limits: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.type not in JOINT_TYPES:
            raise KinemeshError(f"joint '{self.name}': unknown type {self.type!r}, expected one of {JOINT_TYPES}")
        axis = np.asarray(self.axis, dtype=np.float64).reshape(3)
        norm = np.linalg.norm(axis)
        if self.type != "fixed":
            if not np.isfinite(norm) or norm < 1e-9:
                raise KinemeshError(f"joint '{self.name}': axis {axis.tolist()} has zero length")
            axis = axis / norm
        self.axis = axis
        self.origin = np.asarray(self.origin, dtype=np.float64).reshape(3)
        if self.limits is not None:
            lo, hi = float(self.limits[0]), float(self.limits[1])
            if lo > hi:
                lo, hi = hi, lo
            self.limits = (lo, hi)

    @property
    def movable(self) -> bool:
        return self.type != "fixed"

    def rest_limits(self) -> tuple[float, float] | None:
        """``limits`` widened to contain 0, the rest pose the meshes are in, as every exporter writes them: a
        range such as [0.054, 1.87] rad (measured, or predicted for a closed door) would otherwise make a
        simulator snap the part to its limit at start."""
        return None if self.limits is None else (min(self.limits[0], 0.0), max(self.limits[1], 0.0))

    def motion(self, value: float) -> np.ndarray:
        """The rigid motion (4, 4) this joint applies at ``value`` (rad or m), in the rest frame."""
        return joint_motion(self.type, self.axis, self.origin, value)

    def to_dict(self) -> dict[str, Any]:
        """The joint dict of the KinematicSequence ``meta.joints`` contract."""
        return {
            "name": self.name,
            "type": self.type,
            "parent": self.parent,
            "child": self.child,
            "axis": [float(a) for a in self.axis],
            "origin": [float(o) for o in self.origin],
            "limits": None if self.limits is None else [float(self.limits[0]), float(self.limits[1])],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Joint":
        return cls(d["name"], d["type"], d["parent"], d["child"], d["axis"], d["origin"], d.get("limits"))


def joint_motion(type_: str, axis: np.ndarray, origin: np.ndarray, value: float) -> np.ndarray:
    """The rigid motion (4, 4) of a joint of type ``type_`` (unit ``axis`` (3,), ``origin`` (3,) m on its line)
    at ``value`` (rad or m), in the rest frame; the identity for a fixed joint."""
    T = np.eye(4)
    if type_ in ("revolute", "continuous"):
        R = axis_angle_matrix(axis, value)
        T[:3, :3] = R
        T[:3, 3] = origin - R @ origin
    elif type_ == "prismatic":
        T[:3, 3] = axis * value
    return T


def axis_angle_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix (3, 3) for a rotation of ``angle`` rad about the unit ``axis`` (Rodrigues)."""
    a = np.asarray(axis, dtype=np.float64)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * (K @ K)


@dataclass
class ArticulatedObject:
    """Parts connected by a tree of joints. Exactly one part (``root``) has no parent joint."""

    parts: list[Part]
    joints: list[Joint]
    category: str = "unknown"
    name: str = "object"
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [p.name for p in self.parts]
        if not all(names):
            raise KinemeshError(f"{self.name}: a part has an empty name")
        if len(set(names)) != len(names):
            raise KinemeshError(f"{self.name}: duplicate part names")
        known = set(names)
        children = set()
        for j in self.joints:
            for end in (j.parent, j.child):
                if end not in known:
                    raise KinemeshError(f"{self.name}: joint '{j.name}' names unknown part '{end}'")
            if j.child in children:
                raise KinemeshError(f"{self.name}: part '{j.child}' has two parent joints")
            children.add(j.child)
        roots = [n for n in names if n not in children]
        if len(roots) != 1:
            raise KinemeshError(f"{self.name}: expected one root part, found {roots}")
        self._order = self._topological_joints()

    # ------------------------------------------------------------------ structure
    @property
    def root(self) -> str:
        children = {j.child for j in self.joints}
        return next(p.name for p in self.parts if p.name not in children)

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise KinemeshError(f"{self.name}: no part named '{name}'")

    @property
    def movable_joints(self) -> list[Joint]:
        return [j for j in self.joints if j.movable]

    def _topological_joints(self) -> list[Joint]:
        by_parent: dict[str, list[Joint]] = {}
        for j in self.joints:
            by_parent.setdefault(j.parent, []).append(j)
        order, stack = [], [self.root]
        while stack:
            name = stack.pop()
            for j in by_parent.get(name, []):
                order.append(j)
                stack.append(j.child)
        if len(order) != len(self.joints):
            raise KinemeshError(f"{self.name}: joints do not form a tree (cycle)")
        return order

    # ------------------------------------------------------------------ kinematics
    def part_transforms(self, values: dict[str, float] | None = None) -> dict[str, np.ndarray]:
        """World transform (4, 4) of every part for joint ``values`` (name -> rad or m; missing = 0)."""
        values = values or {}
        T = {self.root: np.eye(4)}
        for j in self._order:
            T[j.child] = T[j.parent] @ j.motion(float(values.get(j.name, 0.0)))
        return T

    def posed_parts(self, values: dict[str, float] | None = None) -> dict[str, np.ndarray]:
        """Vertices (n_i, 3) of every part at joint ``values``."""
        T = self.part_transforms(values)
        return {p.name: p.vertices @ T[p.name][:3, :3].T + T[p.name][:3, 3] for p in self.parts}

    def merged(self, values: dict[str, float] | None = None):
        """One mesh of all parts: (vertices (n, 3), faces (m, 3), part_ids (n,)) in part order."""
        posed = self.posed_parts(values)
        verts, faces, ids, offset = [], [], [], 0
        for i, p in enumerate(self.parts):
            if len(p.vertices) == 0:
                continue
            verts.append(posed[p.name])
            faces.append(p.faces + offset)
            ids.append(np.full(len(p.vertices), i, dtype=np.int32))
            offset += len(p.vertices)
        if not verts:
            raise KinemeshError(f"{self.name}: no part has geometry")
        return np.concatenate(verts), np.concatenate(faces), np.concatenate(ids)

    def scaled(self, factor: float) -> "ArticulatedObject":
        """A copy ``factor`` times as large about the world origin: vertices, joint origins and slide limits
        (turn limits unchanged)."""
        f = float(factor)
        if not np.isfinite(f) or f <= 0:
            raise KinemeshError(f"{self.name}: scale factor must be positive and finite, got {factor}")
        parts = [replace(p, vertices=p.vertices * f) for p in self.parts]
        joints = [replace(j, origin=j.origin * f, limits=(j.limits[0] * f, j.limits[1] * f)
                          if j.type == "prismatic" and j.limits is not None else j.limits) for j in self.joints]
        return replace(self, parts=parts, joints=joints, meta=dict(self.meta))

    def open_values(self, fraction: float = 0.6) -> dict[str, float]:
        """Every movable joint at ``fraction`` of its larger excursion from rest (the opening side: a door's
        swing, a drawer's pull; a joint without limits: +-pi/2)."""
        out = {}
        for j in self.movable_joints:
            lo, hi = j.limits if j.limits is not None else (-np.pi / 2, np.pi / 2)
            out[j.name] = (hi if abs(hi) >= abs(lo) else lo) * fraction
        return out

    def sample_values(self, rng: np.random.Generator, continuous_range: float = np.pi) -> dict[str, float]:
        """Uniformly random joint values within limits (continuous joints in [-range, range])."""
        out = {}
        for j in self.movable_joints:
            lo, hi = j.limits if j.limits is not None else (-continuous_range, continuous_range)
            out[j.name] = float(rng.uniform(lo, hi))
        return out

    def to_sequence(
        self,
        configurations: list[dict[str, float]],
        fps: float = 30.0,
        source: str = "kinemesh",
        extra_meta: dict[str, Any] | None = None,
    ) -> KinematicSequence:
        """A KinematicSequence whose frames are the object at each joint configuration (frame 0 = first)."""
        rest, faces, part_ids = self.merged(None)
        frames = np.stack([self.merged(c)[0] for c in configurations]).astype(np.float32)
        meta = {
            "category": self.category,
            "kind": "articulated",
            "source": source,
            "units": "m",
            "up": "z",
            "name": self.name,
            "parts": [{"name": p.name, "label": p.label} for p in self.parts if len(p.vertices)],
            "joints": [j.to_dict() for j in self.joints],
            "joint_values": [{k: float(v) for k, v in c.items()} for c in configurations],
        }
        meta.update(extra_meta or {})
        return KinematicSequence(rest, faces, frames, np.arange(len(frames)) / fps, part_ids, meta)


def part_owners(names: list[str], fixed: dict[str, str]) -> tuple[np.ndarray, list[str]]:
    """(the part of each of ``names`` (n,) int indexing the kept names, the kept names): a link welded to its
    parent (``fixed``: child -> parent) belongs to its nearest movable ancestor or the root."""
    def owner(n: str) -> str:
        m, seen = n, {n}
        while m in fixed:
            m = fixed[m]
            if m in seen:  # a cycle of fixed joints (malformed input): the link stays a part of its own
                return n
            seen.add(m)
        return m

    owners = [owner(n) for n in names]
    kept = [n for n, o in zip(names, owners) if o == n]
    return np.array([kept.index(o) for o in owners], dtype=np.int64), kept


def face_parts_of(part_ids, faces, meta: dict) -> tuple[np.ndarray, list[str]]:
    """(face part (m,) int indexing ``names``, names) of vertex ``part_ids`` (n,) with a sequence's ``meta``:
    names are those of ``meta["parts"]`` (the parts with geometry, in vertex order) when it lists one per
    part, else part_<id>; links welded by a fixed joint of ``meta["joints"]`` join their parent."""
    ids, inverse = np.unique(np.asarray(part_ids), return_inverse=True)
    parts, joints = (v if isinstance(v, list) else [] for v in (meta.get("parts"), meta.get("joints")))
    listed = [str(q.get("name", "")) for q in parts if isinstance(q, dict)]
    names = listed if len(listed) == len(ids) and len(set(listed)) == len(ids) else [f"part_{i}" for i in ids]
    fixed = {str(j.get("child")): str(j.get("parent")) for j in joints
             if isinstance(j, dict) and j.get("type") == "fixed" and j.get("parent") in names}
    to_part, kept = part_owners(names, fixed)
    return to_part[inverse.reshape(-1)[np.asarray(faces)[:, 0]]], kept
