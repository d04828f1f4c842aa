"""Physical validity of articulated objects: parts must not interpenetrate over the joint range.

Used to reject procedural objects and random assemblies (GEOPARD-style filtering of candidate motions: no
self-collision). A part's surface samples must lie outside every other part at a set of joint configurations
(rest, each joint at both limits, random combinations). Parts welded together by fixed joints form one rigid
group and are not tested against each other.
"""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.data.articulated import ArticulatedObject


def rigid_groups(obj: ArticulatedObject) -> dict[str, str]:
    """Map each part name to the name of its rigid group (parts joined by fixed joints share a group)."""
    group = {p.name: p.name for p in obj.parts}
    for j in obj._order:  # topological, so the parent's group is already final
        if j.type == "fixed":
            group[j.child] = group[j.parent]
    return group


def check_configurations(obj: ArticulatedObject, rng: np.random.Generator, n_random: int = 4) -> list[dict]:
    """Joint configurations to test: rest, each joint at each limit (others at rest), all at hi, random."""
    configs: list[dict[str, float]] = [{}]
    movable = obj.movable_joints
    for j in movable:
        lo, hi = j.limits if j.limits is not None else (-np.pi, np.pi)
        configs += [{j.name: lo}, {j.name: hi}, {j.name: 0.5 * (lo + hi)}]
    if movable:
        configs.append({j.name: (j.limits[1] if j.limits else np.pi / 2) for j in movable})
        configs.append({j.name: (j.limits[0] if j.limits else -np.pi / 2) for j in movable})
    configs += [obj.sample_values(rng) for _ in range(n_random)]
    return configs


def interpenetrations(
    obj: ArticulatedObject,
    configs: list[dict[str, float]] | None = None,
    n_samples: int = 300,
    seed: int = 0,
    tolerance: float = 0.0,
) -> list[tuple[str, str, dict]]:
    """Pairs of parts (of different rigid groups) that interpenetrate at some configuration.

    Returns a list of ``(part_a, part_b, config)``; empty when the object is valid. ``tolerance`` (m) lets
    samples lie that deep inside another part without counting (0 = strict).
    """
    rng = np.random.default_rng(seed)
    if configs is None:
        configs = check_configurations(obj, rng)
    group = rigid_groups(obj)
    parts = [p for p in obj.parts if len(p.vertices)]
    samples = {}
    for p in parts:
        m = trimesh.Trimesh(p.vertices, p.faces, process=False)
        pts, _ = trimesh.sample.sample_surface(m, n_samples, seed=int(rng.integers(1 << 31)))
        samples[p.name] = np.concatenate([pts, p.vertices])
    bad = []
    for cfg in configs:
        T = obj.part_transforms(cfg)
        posed = {}
        for p in parts:
            R, t = T[p.name][:3, :3], T[p.name][:3, 3]
            posed[p.name] = (
                trimesh.Trimesh(p.vertices @ R.T + t, p.faces, process=False),
                samples[p.name] @ R.T + t,
            )
        for ia, a in enumerate(parts):
            for b in parts[ia + 1 :]:
                if group[a.name] == group[b.name]:
                    continue
                ma, pa = posed[a.name]
                mb, pb = posed[b.name]
                lo = np.maximum(ma.bounds[0], mb.bounds[0])
                hi = np.minimum(ma.bounds[1], mb.bounds[1])
                if np.any(lo >= hi):
                    continue
                if _inside(mb, pa, tolerance) or _inside(ma, pb, tolerance):
                    bad.append((a.name, b.name, cfg))
    return bad


def _inside(mesh: trimesh.Trimesh, points: np.ndarray, tolerance: float) -> bool:
    lo, hi = mesh.bounds
    sel = np.all((points > lo) & (points < hi), axis=1)
    if not sel.any():
        return False
    pts = points[sel]
    inside = mesh.contains(pts)
    if not inside.any():
        return False
    if tolerance <= 0:
        return True
    _, dist, _ = trimesh.proximity.closest_point(mesh, pts[inside])
    return bool(np.any(dist > tolerance))


def is_valid(obj: ArticulatedObject, seed: int = 0, n_samples: int = 200, tolerance: float = 1e-3) -> bool:
    """True when no two parts interpenetrate deeper than ``tolerance`` m over the tested configurations."""
    return not interpenetrations(obj, n_samples=n_samples, seed=seed, tolerance=tolerance)
