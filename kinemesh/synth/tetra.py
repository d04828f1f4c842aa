"""A tetrahedral cage for a watertight surface: voxel grid cells split into 6 tetrahedra (Kuhn), with the
surface vertices embedded by barycentric coordinates.

MuJoCo's ``flexcomp dim="3"`` simulates the cage; the smooth input surface follows it through the embedding,
so the recorded mesh keeps the input's topology and looks like the input (not like voxels).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import trimesh
from scipy.spatial import cKDTree

from kinemesh.errors import KinemeshError

# Kuhn (Freudenthal) subdivision: one tetrahedron per permutation of the axes, all sharing the 000-111
# diagonal, so neighbouring cubes conform.
_CORNER = {c: i for i, c in enumerate(itertools.product((0, 1), repeat=3))}
_KUHN = []
for perm in itertools.permutations(range(3)):
    c = [0, 0, 0]
    tet = [_CORNER[tuple(c)]]
    for ax in perm:
        c[ax] = 1
        tet.append(_CORNER[tuple(c)])
    _KUHN.append(tet)
_KUHN = np.array(_KUHN)  # (6, 4) indices into the 8 cube corners


@dataclass
class TetCage:
    """Nodes (n, 3) m, tetrahedra (k, 4) int (positive volume), and the embedding of the surface vertices:
    ``embed_tet`` (s,) tet index and ``embed_bary`` (s, 4) barycentric weights (may be slightly negative for
    vertices just outside the cage)."""

    nodes: np.ndarray
    tets: np.ndarray
    embed_tet: np.ndarray
    embed_bary: np.ndarray

    def surface(self, node_positions: np.ndarray) -> np.ndarray:
        """Surface vertex positions (..., s, 3) from node positions (..., n, 3)."""
        corners = node_positions[..., self.tets[self.embed_tet], :]  # (..., s, 4, 3)
        return np.einsum("...sk,...skc->...sc", np.broadcast_to(self.embed_bary, corners.shape[:-1]), corners)

    def boundary_faces(self) -> np.ndarray:
        """Triangles (m, 3) of the cage boundary (faces used by exactly one tetrahedron)."""
        f = np.concatenate(
            [
                self.tets[:, [1, 2, 3]],
                self.tets[:, [0, 3, 2]],
                self.tets[:, [0, 1, 3]],
                self.tets[:, [0, 2, 1]],
            ]
        )
        key = np.sort(f, axis=1)
        _, inv, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
        return f[counts[inv.ravel()] == 1]


def _bary(points: np.ndarray, corners: np.ndarray) -> np.ndarray:
    """Barycentric coordinates (..., 4) of points (..., 3) in tetrahedra (..., 4, 3)."""
    T = np.stack(
        [
            corners[..., 1, :] - corners[..., 0, :],
            corners[..., 2, :] - corners[..., 0, :],
            corners[..., 3, :] - corners[..., 0, :],
        ],
        axis=-1,
    )
    lam = np.linalg.solve(T, (points - corners[..., 0, :])[..., None])[..., 0]
    return np.concatenate([1 - lam.sum(-1, keepdims=True), lam], axis=-1)


def build_cage(mesh: trimesh.Trimesh, resolution: int = 10, min_cells: int = 2) -> TetCage:
    """Tetrahedralize the watertight ``mesh`` on a voxel grid with ``resolution`` cells along its longest side
    (at least ``min_cells`` across its thinnest side). Raises KinemeshError when no cell is inside."""
    lo, hi = mesh.bounds
    ext = hi - lo
    h = min(float(ext.max()) / resolution, float(ext.min()) / min_cells)
    counts = np.maximum(np.ceil(ext / h).astype(int), 1)
    lo = (lo + hi) / 2 - counts * h / 2
    idx = np.stack(np.meshgrid(*[np.arange(c) for c in counts], indexing="ij"), -1).reshape(-1, 3)
    centers = lo + (idx + 0.5) * h
    inside = mesh.contains(centers)
    # also keep cells whose centre lies just outside, so the cage covers the surface
    near = np.zeros(len(centers), bool)
    if (~inside).any():
        _, dist, _ = trimesh.proximity.closest_point(mesh, centers[~inside])
        near[np.where(~inside)[0][dist < 0.45 * h]] = True
    active = idx[inside | near]
    if len(active) == 0:
        raise KinemeshError("tetrahedralization: no grid cell lies inside the mesh")
    corners = np.array(list(itertools.product((0, 1), repeat=3)))
    cell_nodes = active[:, None, :] + corners[None]  # (c, 8, 3) integer grid coordinates
    dims = counts + 1
    flat = np.ravel_multi_index(cell_nodes.reshape(-1, 3).T, dims).reshape(-1, 8)
    tets_flat = flat[:, _KUHN].reshape(-1, 4)
    used, tets = np.unique(tets_flat, return_inverse=True)
    tets = tets.reshape(-1, 4)
    nodes = lo + np.stack(np.unravel_index(used, dims), -1) * h
    # positive orientation
    c = nodes[tets]
    vol = np.einsum("ij,ij->i", np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0]), c[:, 3] - c[:, 0])
    neg = vol < 0
    tets[neg] = tets[neg][:, [0, 2, 1, 3]]
    # embed the surface vertices: pick among the 6 tets of the nearest active cell the best-fitting one
    v = np.asarray(mesh.vertices)
    cell_centers = lo + (active + 0.5) * h
    _, cell = cKDTree(cell_centers).query(v)
    cand = cell[:, None] * 6 + np.arange(6)[None]  # (s, 6)
    bary = _bary(np.repeat(v[:, None], 6, 1), nodes[tets[cand]])
    best = np.argmax(bary.min(-1), axis=1)
    embed_tet = cand[np.arange(len(v)), best]
    embed_bary = bary[np.arange(len(v)), best]
    return TetCage(nodes, tets, embed_tet, embed_bary)
