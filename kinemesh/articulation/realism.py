"""Asset-realism augmentation of synthetic training objects for the articulation predictor.

Synthetic objects are built closed, facing -Y, from watertight boxes. Real assets (PartNet-Mobility) face any
direction, are often stored with doors, lids and flaps partly open, have other proportions, and their parts
are open shells (a carcass without a back, a drawer tray without a top). ``augment`` applies these changes
while keeping the ground-truth joints exact:

- ``yaw``: the whole object turned about +Z (any angle; a quarter of the time a multiple of 90 deg);
- ``repose``: the rest pose moved to a random configuration (joint axes/origins carried along, limits
  shifted so that value 0 is the new rest pose);
- ``stretch``: anisotropic scaling along the world axes (joint lines mapped by the same linear map);
- ``open_shell``: the faces of a part facing one random box direction are removed;
- ``sheet``: a thin board (a door, flap or panel) collapsed onto its mid-plane, a zero-thickness sheet as
  many real assets model it;

All functions are pure: they return new objects and never modify their input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kinemesh.articulation.dataset import random_yaw, rotate_object
from kinemesh.data.articulated import ArticulatedObject, Joint, Part


@dataclass
class RealismConfig:
    """Probabilities and ranges of the augmentations (each applied independently)."""

    p_yaw: float = 0.75  # turn the object about +Z
    p_quarter: float = 0.25  # a turn is a multiple of 90 deg with this probability, else uniform
    p_repose: float = 0.5  # move the rest pose to a random configuration
    repose_fraction: float = 0.5  # at most this fraction of each joint's range (continuous: of pi)
    p_stretch: float = 0.5  # anisotropic scaling
    stretch: float = 0.35  # log-uniform scale factors in [exp(-s), exp(s)] per world axis
    p_open: float = 0.3  # per part: remove the faces facing one box direction
    p_sheet: float = 0.0  # per thin part: collapse it onto its mid-plane
    sheet_ratio: float = 0.2  # a part is thin when its thinnest box side is below this fraction of the middle one


def repose(obj: ArticulatedObject, values: dict[str, float]) -> ArticulatedObject:
    """``obj`` with its rest pose moved to joint ``values`` (name -> rad or m).

    Parts are posed; every joint's axis and origin are carried by its parent's transform; limits are shifted
    by the joint's value so that 0 is the new rest pose (continuous joints keep ``None``).
    """
    T = obj.part_transforms(values)
    posed = obj.posed_parts(values)
    parts = [Part(p.name, posed[p.name], p.faces, p.label) for p in obj.parts]
    joints = []
    for j in obj.joints:
        Tp = T[j.parent]
        v = float(values.get(j.name, 0.0)) if j.movable else 0.0
        lim = None if j.limits is None else (j.limits[0] - v, j.limits[1] - v)
        axis = Tp[:3, :3] @ j.axis if j.movable else j.axis
        joints.append(Joint(j.name, j.type, j.parent, j.child, axis, Tp[:3, :3] @ j.origin + Tp[:3, 3], lim))
    return ArticulatedObject(parts, joints, obj.category, obj.name, dict(obj.meta))


def stretch(obj: ArticulatedObject, scales) -> ArticulatedObject:
    """``obj`` scaled by ``scales`` (3,) along the world axes about the origin.

    Joint lines map by the same linear map (axis direction S a, normalized); prismatic limits (m) scale with
    |S a|. Revolute joints about axes that are not world-aligned become slightly non-rigid; the synthetic
    categories hinge about world axes.
    """
    s = np.asarray(scales, float).reshape(3)
    parts = [Part(p.name, p.vertices * s, p.faces, p.label) for p in obj.parts]
    joints = []
    for j in obj.joints:
        a = j.axis * s if j.movable else j.axis
        n = float(np.linalg.norm(a)) if j.movable else 1.0
        lim = j.limits
        if j.type == "prismatic" and lim is not None:
            lim = (lim[0] * n, lim[1] * n)
        joints.append(Joint(j.name, j.type, j.parent, j.child, a / n if j.movable else a, j.origin * s, lim))
    return ArticulatedObject(parts, joints, obj.category, obj.name, dict(obj.meta))


def open_shell(part: Part, direction) -> Part:
    """``part`` without the faces whose normal points along ``direction`` (3,) (cosine > 0.9): an open box.
    The part is returned unchanged when that would remove more than 60% of its faces or leave fewer than 4."""
    v, f = part.vertices, part.faces
    if len(f) < 8:
        return part
    n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
    keep = n @ (np.asarray(direction, float) / np.linalg.norm(direction)) <= 0.9
    if keep.sum() < max(4, 0.4 * len(f)):
        return part
    ff = f[keep]
    used, inv = np.unique(ff, return_inverse=True)
    return Part(part.name, v[used], inv.reshape(-1, 3), part.label)


def sheet(part: Part, box) -> Part:
    """``part`` collapsed onto the mid-plane of its box ``box`` (:class:`PartBox`) across the thinnest side."""
    k = int(np.argmin(box.extents))
    v = box.to_box(part.vertices)
    v[:, k] = 0.0
    return Part(part.name, box.from_box(v), part.faces, part.label)


def augment(obj: ArticulatedObject, rng: np.random.Generator,
            config: RealismConfig | None = None) -> ArticulatedObject:
    """A randomly augmented copy of ``obj`` (see module doc); ground-truth joints stay exact."""
    from kinemesh.articulation.candidates import part_box

    c = config or RealismConfig()
    out = obj
    if rng.random() < c.p_repose and out.movable_joints:
        vals = {}
        for j in out.movable_joints:
            lo, hi = j.limits if j.limits is not None else (-np.pi, np.pi)
            vals[j.name] = float(rng.uniform(0.0, c.repose_fraction)) * (hi if abs(hi) >= abs(lo) else lo)
        out = repose(out, vals)
    if rng.random() < c.p_stretch:
        out = stretch(out, np.exp(rng.uniform(-c.stretch, c.stretch, 3)))
    if rng.random() < c.p_yaw:
        out = rotate_object(out, random_yaw(rng, c.p_quarter))
    if c.p_open > 0:
        parts = []
        for p in out.parts:
            if len(p.faces) and rng.random() < c.p_open:
                try:
                    box = part_box(p.vertices, p.name)
                except Exception:  # degenerate part: leave it closed
                    parts.append(p)
                    continue
                parts.append(open_shell(p, box.axes[rng.integers(0, 3)] * rng.choice([-1.0, 1.0])))
            else:
                parts.append(p)
    if c.p_sheet > 0:
        parts_in, parts = parts if c.p_open > 0 else list(out.parts), []
        for p in parts_in:
            if len(p.faces) and p.name != out.root and rng.random() < c.p_sheet:
                try:
                    box = part_box(p.vertices, p.name)
                except Exception:
                    parts.append(p)
                    continue
                e = np.sort(box.extents)
                parts.append(sheet(p, box) if e[0] < c.sheet_ratio * e[1] else p)
            else:
                parts.append(p)
    if c.p_open > 0 or c.p_sheet > 0:
        out = ArticulatedObject(parts, list(out.joints), out.category, out.name, dict(out.meta))
    return out
