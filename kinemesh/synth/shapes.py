"""Watertight primitive meshes for the procedural object factory (metres, Z up).

Every helper returns a ``trimesh.Trimesh`` that is watertight (closed, consistently oriented). Booleans use
the manifold3d engine, which keeps results manifold.
"""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.errors import KinemeshError


def box(lo, hi) -> trimesh.Trimesh:
    """Axis-aligned box spanning corner ``lo`` (3,) to corner ``hi`` (3,) metres."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    if np.any(hi - lo <= 0):
        raise KinemeshError(f"box: empty extent lo={lo.tolist()} hi={hi.tolist()}")
    m = trimesh.creation.box(extents=hi - lo)
    m.apply_translation((lo + hi) / 2)
    return m


def cylinder(radius: float, p0, p1, sections: int = 20) -> trimesh.Trimesh:
    """Closed cylinder of ``radius`` m between the cap centres ``p0`` and ``p1`` (3,)."""
    return trimesh.creation.cylinder(radius=radius, segment=np.array([p0, p1], float), sections=sections)


def torus(
    major: float, minor: float, center=(0, 0, 0), axis=(0, 0, 1), sections: int = 20
) -> trimesh.Trimesh:
    """Torus of ``major``/``minor`` radius (m) around ``axis`` through ``center``."""
    m = trimesh.creation.torus(major, minor, major_sections=sections, minor_sections=max(8, sections // 2))
    m.apply_transform(trimesh.geometry.align_vectors([0, 0, 1], np.asarray(axis, float)))
    m.apply_translation(center)
    return m


def sphere(radius: float, center=(0, 0, 0), subdivisions: int = 2) -> trimesh.Trimesh:
    """Icosphere of ``radius`` m at ``center``."""
    m = trimesh.creation.icosphere(subdivisions=subdivisions, radius=radius)
    m.apply_translation(center)
    return m


def capsule(radius: float, p0, p1, count=(12, 12)) -> trimesh.Trimesh:
    """Capsule of ``radius`` m whose segment runs from ``p0`` to ``p1``."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    d = p1 - p0
    L = float(np.linalg.norm(d))
    m = trimesh.creation.capsule(height=L, radius=radius, count=list(count))
    # trimesh's capsule is centred at the origin along Z
    m.apply_transform(trimesh.geometry.align_vectors([0, 0, 1], d / max(L, 1e-12)))
    m.apply_translation((p0 + p1) / 2)
    return m


def _clean(m: trimesh.Trimesh) -> trimesh.Trimesh | None:
    """Merge coincident vertices and drop zero-area faces; None unless the result is a closed manifold."""
    clean = trimesh.Trimesh(m.vertices, m.faces, process=True)
    clean.update_faces(clean.nondegenerate_faces())
    clean.remove_unreferenced_vertices()
    if len(clean.faces) and clean.is_watertight and clean.is_winding_consistent:
        return clean
    return None


def _boolean(op: str, meshes: list[trimesh.Trimesh]) -> trimesh.Trimesh:
    """Run a manifold3d boolean; when coincident geometry leaves slivers that do not clean into a closed
    manifold, retry with the other operands nudged by a tiny rigid motion (~10 micrometres)."""
    fn = {"union": trimesh.boolean.union, "difference": trimesh.boolean.difference}[op]
    rng = np.random.default_rng(0)
    operands = list(meshes)
    for _ in range(5):
        out = _clean(fn(operands, engine="manifold"))
        if out is not None:
            return out
        nudged = [operands[0]]
        for m in operands[1:]:
            m = m.copy()
            T = trimesh.transformations.rotation_matrix(
                1e-4 * rng.standard_normal(), rng.standard_normal(3), m.centroid
            )
            T[:3, 3] += 1e-5 * rng.standard_normal(3)
            m.apply_transform(T)
            nudged.append(m)
        operands = nudged
    raise KinemeshError(f"{op}: boolean result is not a closed manifold")


def union(meshes) -> trimesh.Trimesh:
    """Boolean union of watertight meshes (manifold3d)."""
    meshes = list(meshes)
    if len(meshes) == 1:
        return meshes[0]
    return _boolean("union", meshes)


def difference(a: trimesh.Trimesh, *cutters: trimesh.Trimesh) -> trimesh.Trimesh:
    """``a`` minus every cutter (manifold3d)."""
    return _boolean("difference", [a, *cutters])


def open_box(lo, hi, wall: float, open_side: str = "-y") -> trimesh.Trimesh:
    """A hollow box (carcass) with walls of thickness ``wall`` m, open on ``open_side`` ("-y", "+z", ...)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    ilo, ihi = lo + wall, hi - wall
    axis = "xyz".index(open_side[1])
    if open_side[0] == "-":
        ilo[axis] = lo[axis] - wall
    else:
        ihi[axis] = hi[axis] + wall
    return difference(box(lo, hi), box(ilo, ihi))


def frame(lo, hi, border: float, axis: int = 1) -> trimesh.Trimesh:
    """A rectangular frame: the box ``lo..hi`` with a through-hole along ``axis`` leaving ``border`` m."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    ilo, ihi = lo + border, hi - border
    ilo[axis], ihi[axis] = lo[axis] - 1.0, hi[axis] + 1.0
    return difference(box(lo, hi), box(ilo, ihi))


def refine(m: trimesh.Trimesh, max_edge: float) -> trimesh.Trimesh:
    """Subdivide so no edge is longer than ``max_edge`` m (keeps watertightness and shape)."""
    v, f = trimesh.remesh.subdivide_to_size(m.vertices, m.faces, max_edge, max_iter=8)
    # no vertex merging: booleans can leave zero-length edges whose merge would break manifoldness
    return trimesh.Trimesh(v, f, process=False)
