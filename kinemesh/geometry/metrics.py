"""Evaluation metrics: Chamfer-L1/L2 to the other surface, volumetric IoU, joint-axis errors, motion-type
precision/recall, motion explained, vertex error and within-part rigidity.

Normalization: callers normalize the rest shape with :mod:`kinemesh.geometry.normalize` and apply
the same transform to every compared shape *before* calling these functions; the functions themselves work in
whatever units they are given.

Chamfer: the distance from surface samples of each shape to the **other shape's surface**
(exact point-to-triangle distance), averaged over both directions with weight 0.5 each, so that two identical
meshes score 0 regardless of the sample count. Point-to-point nearest neighbours are used only for a side given
as a bare point cloud (no faces).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from kinemesh.errors import ConfigError
from kinemesh.geometry.sampling import sample_surface

# ------------------------------------------------------------------------------------ point-triangle kernel


def _seg_sqdist(p, u, v):
    """Squared distance from points p to segments [u, v] (all (n, 3))."""
    e = v - u
    ee = np.einsum("ij,ij->i", e, e)
    t = np.einsum("ij,ij->i", p - u, e) / np.where(ee > 0, ee, 1.0)
    t = np.clip(t, 0.0, 1.0)
    diff = p - u - t[:, None] * e
    return np.einsum("ij,ij->i", diff, diff)


def point_triangle_sqdist(p, a, b, c):
    """Exact squared distance from points to triangles, row by row.

    Parameters
    ----------
    p, a, b, c : (n, 3) float, query points and triangle corners (metres).

    Returns
    -------
    (n,) float64 squared distances (m^2). Degenerate (zero-area) triangles are treated as their edges.

    Notes
    -----
    If the orthogonal projection of ``p`` onto the triangle's plane falls inside the triangle the distance is
    the plane distance; otherwise the closest point lies on one of the three edges.
    """
    p = np.asarray(p, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    n = np.cross(b - a, c - a)
    nn = np.einsum("ij,ij->i", n, n)
    pa, pb, pc = p - a, p - b, p - c
    s1 = np.einsum("ij,ij->i", np.cross(b - a, pa), n)
    s2 = np.einsum("ij,ij->i", np.cross(c - b, pb), n)
    s3 = np.einsum("ij,ij->i", np.cross(a - c, pc), n)
    # relative threshold: triangles whose area is negligible vs their edge lengths are handled as segments
    scale = np.maximum.reduce([np.einsum("ij,ij->i", x, x) for x in (b - a, c - b, a - c)])
    good = nn > 1e-24 * np.maximum(scale, 1e-300) ** 2
    inside = good & (s1 >= 0) & (s2 >= 0) & (s3 >= 0)
    plane = np.einsum("ij,ij->i", pa, n) ** 2 / np.where(good, nn, 1.0)
    edge = np.minimum(np.minimum(_seg_sqdist(p, a, b), _seg_sqdist(p, b, c)), _seg_sqdist(p, c, a))
    return np.where(inside, plane, edge)


# ---------------------------------------------------------------------------------- point-to-surface (fast)


class _SurfaceIndex:
    """Exact nearest-triangle search for many points: a binary kd-tree of triangles (bounding volume hierarchy)
    traversed breadth-first with numpy for all queries of a chunk at once. numpy/scipy only.

    Triangles are split recursively at the median centroid along the longest axis until a node holds at most
    ``leaf`` triangles. Every node stores a PCA-oriented bounding box and a representative surface point (a
    vertex). Traversal first dives greedily to one leaf per query for an upper bound, then keeps (query, node)
    pairs whose oriented-box lower bound is below the query's upper bound; the bound is lowered by distances to
    representative points and exact triangle distances. Triangles are screened with the plane + bounding-disk
    bound before the exact distance. Oriented boxes of nearly flat patches are thin, so far and concave
    configurations (points inside a sphere) stay cheap.
    """

    def __init__(self, vertices, faces, leaf: int = 16):
        v = np.asarray(vertices, dtype=np.float64)
        f = np.asarray(faces, dtype=np.int64)
        tri = v[f]
        centroid = tri.mean(axis=1)
        order, start, stop, left, right, levels = _kd_tree(centroid, leaf)
        tri = tri[order]  # faces in tree order: every node covers a contiguous range
        centroid = centroid[order]
        n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        nn = np.linalg.norm(n, axis=1)
        self.unit_n = n / np.where(nn > 0, nn, 1.0)[:, None]  # zero rows for degenerate faces: bound 0
        self.centroid = centroid
        self.face_r = np.linalg.norm(tri - centroid[:, None, :], axis=2).max(axis=1)
        self.start, self.stop, self.left, self.right = start, stop, left, right
        self.leaf = leaf
        self.tri = tri
        self.face_data = np.column_stack([centroid, self.unit_n, self.face_r])
        self.center, self.axes, self.half, self.rep = _node_bounds(tri.reshape(-1, 3), start, stop, levels)
        self.node_data = np.column_stack([self.center, self.axes.reshape(-1, 9), self.half])

    def _node_lb2(self, q, rows, nodes):
        """Lower bound on squared distance from q[rows] to the triangles of nodes (oriented box)."""
        nd = self.node_data[nodes]  # one gather: centre (3), axes (9, row-major columns), half extents (3)
        d = q[rows] - nd[:, 0:3]
        local = np.einsum("ki,kij->kj", d, nd[:, 3:12].reshape(-1, 3, 3))
        out = np.maximum(np.abs(local) - nd[:, 12:15], 0.0)
        return np.einsum("ij,ij->i", out, out)

    def _leaves(self, q, rows, nodes, ub2):
        """Test the triangles of leaf nodes: plane + bounding-disk bound, then the exact distance.

        ``rows`` must be sorted (it is: traversal keeps query order).
        """
        fid = self.start[nodes][:, None] + np.arange(self.leaf)[None, :]
        ok = fid < self.stop[nodes][:, None]
        rows = np.broadcast_to(rows[:, None], fid.shape)[ok]
        fid = fid[ok]
        fd = self.face_data[fid]  # centroid (3), unit normal (3), bounding radius (1)
        off = q[rows] - fd[:, 0:3]
        h = np.einsum("ij,ij->i", off, fd[:, 3:6])
        lateral = np.sqrt(np.maximum(np.einsum("ij,ij->i", off, off) - h * h, 0.0))
        gap = np.maximum(lateral - fd[:, 6], 0.0)
        keep = h * h + gap * gap < ub2[rows]
        rows, fid = rows[keep], fid[keep]
        if len(rows):
            tri = self.tri[fid]
            _min_into(ub2, rows, point_triangle_sqdist(q[rows], tri[:, 0], tri[:, 1], tri[:, 2]))

    def _dive(self, q):
        """Upper bound: descend to the child with the nearer box (then centre) down to one leaf per query."""
        nq = len(q)
        ar = np.arange(nq)
        nodes = np.zeros(nq, dtype=np.int64)
        while True:
            internal = self.left[nodes] >= 0
            if not internal.any():
                break
            r = ar[internal]
            kids = np.stack([self.left[nodes[r]], self.right[nodes[r]]], axis=1)
            rr = np.repeat(r, 2)
            flat = kids.ravel()
            dc = q[rr] - self.center[flat]
            key = self._node_lb2(q, rr, flat) + np.einsum("ij,ij->i", dc, dc)
            nodes[r] = kids[np.arange(len(r)), key.reshape(-1, 2).argmin(axis=1)]
        ub2 = np.full(nq, np.inf)
        self._leaves(q, ar, nodes, ub2)
        return ub2

    def sqdist(self, q, chunk: int = 4096) -> np.ndarray:
        out = np.empty(len(q))
        for s in range(0, len(q), chunk):
            out[s : s + chunk] = self._sqdist_chunk(q[s : s + chunk])
        return out

    def _sqdist_chunk(self, q):
        ub2 = self._dive(q)
        rows = np.arange(len(q))
        nodes = np.zeros(len(q), dtype=np.int64)
        while len(rows):
            rep = q[rows] - self.rep[nodes]
            _min_into(ub2, rows, np.einsum("ij,ij->i", rep, rep))
            keep = self._node_lb2(q, rows, nodes) < ub2[rows]
            rows, nodes = rows[keep], nodes[keep]
            leaf = self.left[nodes] < 0
            if leaf.any():
                self._leaves(q, rows[leaf], nodes[leaf], ub2)
            rows, nodes = rows[~leaf], nodes[~leaf]
            rows = np.repeat(rows, 2)
            nodes = np.stack([self.left[nodes], self.right[nodes]], axis=1).ravel()
        return ub2


def _min_into(target, rows, values):
    """``target[rows] = min(target[rows], values)`` for *sorted* rows with repeats (faster than ufunc.at)."""
    if len(rows) == 0:
        return
    if np.any(rows[1:] < rows[:-1]):  # not sorted: fall back to the unbuffered ufunc
        np.minimum.at(target, rows, values)
        return
    first = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
    m = np.minimum.reduceat(values, first)
    r = rows[first]
    target[r] = np.minimum(target[r], m)


def _kd_tree(x, leaf):
    """Balanced binary kd-tree over points x (n, 3): median split along each node's longest axis.

    Returns ``order`` (n,) (points in tree order); per node ``start, stop`` (ranges into ``order``) and
    ``left, right`` child ids (-1 for leaves), node 0 being the root; and ``levels``: for every depth a tuple
    (starts, stops, node_ids) of disjoint ranges covering [0, n) (leaves of smaller depth are repeated).
    All nodes of one depth are split at once (one lexsort per depth).
    """
    n = len(x)
    order = np.arange(n)
    start, stop = [np.array([0])], [np.array([n])]
    left = np.full(1, -1)
    n_nodes = 1
    seg_s, seg_e, seg_id = np.array([0]), np.array([n]), np.array([0])
    levels = [(seg_s, seg_e, seg_id)]
    while True:
        size = seg_e - seg_s
        split = size > leaf
        if not split.any():
            break
        elem_seg = np.repeat(np.arange(len(seg_s)), size)
        xs = x[order]
        lo = np.minimum.reduceat(xs, seg_s, axis=0)
        hi = np.maximum.reduceat(xs, seg_s, axis=0)
        axis = np.argmax(hi - lo, axis=1)
        key = np.where(split[elem_seg], xs[np.arange(n), axis[elem_seg]], 0.0)
        order = order[np.lexsort((key, elem_seg))]
        mid = (seg_s + seg_e) // 2
        k = int(split.sum())
        kids = (n_nodes + np.arange(2 * k)).reshape(k, 2)
        start.append(np.stack([seg_s[split], mid[split]], 1).ravel())
        stop.append(np.stack([mid[split], seg_e[split]], 1).ravel())
        left = np.concatenate([left, np.full(2 * k, -1)])
        left[seg_id[split]] = kids[:, 0]
        n_nodes += 2 * k
        # next depth: split segments become two, the others are carried unchanged
        new_s = np.stack([seg_s, np.where(split, mid, seg_s)], 1)
        new_e = np.stack([np.where(split, mid, seg_e), seg_e], 1)
        new_id = np.stack([seg_id, seg_id], 1)
        new_id[split] = kids
        keep = np.stack([np.ones(len(seg_s), bool), split], 1)
        seg_s, seg_e, seg_id = new_s[keep], new_e[keep], new_id[keep]
        levels.append((seg_s, seg_e, seg_id))
    right = np.where(left >= 0, left + 1, -1)
    return order, np.concatenate(start), np.concatenate(stop), left, right, levels


def _node_bounds(pts, starts, stops, levels):
    """PCA-oriented boxes (centre, axes as columns, half extents) and a representative point per node.

    ``pts`` (3F, 3): the 3 corners of every tree-ordered face; ``starts, stops`` node face ranges; ``levels``
    as returned by :func:`_kd_tree` (disjoint covering face ranges per depth).
    """
    n_nodes = len(starts)
    counts = (3 * (stops - starts)).astype(np.float64)[:, None]
    c1 = np.concatenate([np.zeros((1, 3)), np.cumsum(pts, axis=0)])
    mean = (c1[3 * stops] - c1[3 * starts]) / counts
    outer = pts[:, :, None] * pts[:, None, :]
    c2 = np.concatenate([np.zeros((1, 3, 3)), np.cumsum(outer, axis=0)])
    cov = (c2[3 * stops] - c2[3 * starts]) / counts[:, :, None] - mean[:, :, None] * mean[:, None, :]
    _, axes = np.linalg.eigh(cov)  # only the directions matter; extents below are exact
    lo = np.empty((n_nodes, 3))
    hi = np.empty((n_nodes, 3))
    for seg_s, seg_e, ids in levels:
        elem = np.repeat(np.arange(len(seg_s)), 3 * (seg_e - seg_s))
        local = np.einsum("ki,kij->kj", pts - mean[ids][elem], axes[ids][elem])
        lo[ids] = np.minimum.reduceat(local, 3 * seg_s, axis=0)
        hi[ids] = np.maximum.reduceat(local, 3 * seg_s, axis=0)
    center = mean + np.einsum("cij,cj->ci", axes, 0.5 * (lo + hi))
    return center, axes, 0.5 * (hi - lo), pts[3 * ((starts + stops) // 2)]


def point_to_surface_distance(points, vertices, faces, squared: bool = False) -> np.ndarray:
    """Exact distance from each point to a triangle mesh surface (fast KD-tree prefilter).

    Parameters
    ----------
    points : (n, 3) float, query points (metres).
    vertices : (N, 3) float; faces : (M, 3) int, the surface.
    squared : return squared distances (m^2).

    Returns
    -------
    (n,) float64 distances in metres.

    Raises
    ------
    ConfigError
        If the mesh has no faces or shapes are wrong.
    """
    q = _points(points, "points")
    if len(q) == 0:
        return np.zeros(0)
    d2 = surface_index(vertices, faces).sqdist(q)
    return d2 if squared else np.sqrt(d2)


def surface_index(vertices, faces) -> _SurfaceIndex:
    """The search structure of :func:`point_to_surface_distance`, to query one surface many times:
    ``surface_index(v, f).sqdist(points)`` -> (n,) squared distances. Raises ConfigError like it."""
    v = _points(vertices, "vertices")
    return _SurfaceIndex(v, _faces(faces, len(v)))


# -------------------------------------------------------------------------------------------------- Chamfer


def chamfer(
    a,
    b,
    a_faces=None,
    b_faces=None,
    n_samples: int = 10000,
    seed: int = 0,
    squared: bool = False,
    one_sided: bool = False,
) -> float:
    """Chamfer distance between two shapes, each a mesh (vertices + faces) or a bare point cloud.

    Parameters
    ----------
    a, b : (n, 3) float vertices or points (metres); a ``trimesh.Trimesh`` is also accepted (its faces are used).
    a_faces, b_faces : (m, 3) int or None. With faces, ``n_samples`` area-weighted surface samples are drawn and
        distances *to* that shape are exact point-to-triangle distances; without, all given points are used and
        distances to it are nearest-point distances (scipy cKDTree).
    n_samples : samples per meshed side.
    seed : sampling seed (side a uses stream 0, side b stream 1).
    squared : Chamfer-L2 (mean squared distances, m^2) instead of Chamfer-L1 (mean distances, m).
    one_sided : return only the mean over a's samples of the distance to b (for partial observations a).

    Returns
    -------
    float: ``0.5 * (mean d(a -> b) + mean d(b -> a))``, or ``mean d(a -> b)`` when ``one_sided``.
    """
    av, af = _mesh_or_points(a, a_faces, "a")
    bv, bf = _mesh_or_points(b, b_faces, "b")
    pa = _samples(av, af, n_samples, seed, 0)
    d_ab = _dist_to(pa, bv, bf, squared)
    if one_sided:
        return float(d_ab.mean())
    pb = _samples(bv, bf, n_samples, seed, 1)
    d_ba = _dist_to(pb, av, af, squared)
    return float(0.5 * (d_ab.mean() + d_ba.mean()))


def _samples(v, f, n, seed, stream):
    if f is None:
        return v
    return sample_surface(v, f, n, seed=np.random.default_rng([int(seed), stream]))[0]


def _dist_to(p, v, f, squared):
    if f is None:
        d, _ = cKDTree(v).query(p, k=1, workers=-1)
        return d**2 if squared else d
    return point_to_surface_distance(p, v, f, squared=squared)


# ------------------------------------------------------------------------------------------ volumetric IoU


def volumetric_iou(mesh_a, mesh_b, n_points: int = 100000, seed: int = 0, method: str = "auto",
                   voxel_resolution: int = 64) -> float:
    """Volumetric IoU of two meshes.

    Parameters
    ----------
    mesh_a, mesh_b : ``trimesh.Trimesh`` or ``(vertices (n, 3), faces (m, 3))``.
    n_points : uniform random query points in the union bounding box (``method="contains"``).
    seed : query-point seed.
    method : ``"contains"`` (occupancy of the same random points, ray-tested with embree; needs watertight
        meshes), ``"voxel"`` (filled voxel occupancy on a shared grid whose pitch is the union bounding box's
        longest side / ``voxel_resolution``; open surfaces then count only their surface voxels), or
        ``"auto"``: contains when both meshes are watertight, voxel otherwise. Voxel occupancy counts voxels
        crossed by the surface as half occupied (removes the first-order bias of counting them fully); holes
        smaller than a voxel are closed by the fill, larger holes leave only the shell occupied.

    Returns
    -------
    float in [0, 1]; 1.0 if both shapes are empty.
    """
    ma, mb = _trimesh(mesh_a), _trimesh(mesh_b)
    if method == "auto":
        method = "contains" if (ma.is_watertight and mb.is_watertight) else "voxel"
    lo = np.minimum(ma.bounds[0], mb.bounds[0])
    hi = np.maximum(ma.bounds[1], mb.bounds[1])
    if method == "contains":
        rng = np.random.default_rng(seed)
        q = lo + rng.random((int(n_points), 3)) * (hi - lo)
        ina = ma.contains(q)
        inb = mb.contains(q)
        union = np.count_nonzero(ina | inb)
        return 1.0 if union == 0 else float(np.count_nonzero(ina & inb) / union)
    if method == "voxel":
        pitch = float((hi - lo).max()) / float(voxel_resolution)
        surf_a, fill_a = _voxel_keys(ma, pitch)
        surf_b, fill_b = _voxel_keys(mb, pitch)
        keys = np.union1d(fill_a, fill_b)
        # occupancy 1 inside, 0.5 for voxels crossed by the surface (on average half inside), 0 outside
        occ_a = np.where(np.isin(keys, surf_a), 0.5, np.isin(keys, fill_a).astype(np.float64))
        occ_b = np.where(np.isin(keys, surf_b), 0.5, np.isin(keys, fill_b).astype(np.float64))
        union = np.maximum(occ_a, occ_b).sum()
        return 1.0 if union == 0 else float(np.minimum(occ_a, occ_b).sum() / union)
    raise ConfigError(f"volumetric_iou: method must be auto, contains or voxel, got {method!r}")


def _voxel_keys(mesh, pitch):
    """Integer keys of surface voxels and of filled voxels on the lattice pitch * Z^3 (shared by all meshes).

    Surface voxels: those holding a point of the surface grid (every triangle sampled on a barycentric grid
    whose spacing is at most pitch / 2, the resolution of trimesh's subdivision voxelizer, without building
    the subdivided mesh); filled: the surface voxels with their enclosed holes filled (scipy
    ``binary_fill_holes``, as trimesh's ``fill``)."""
    from scipy import ndimage

    def keys(idx):
        idx = idx + (1 << 20)
        return (idx[..., 0] << 42) | (idx[..., 1] << 21) | idx[..., 2]

    tri = np.asarray(mesh.vertices, dtype=np.float64)[np.asarray(mesh.faces, dtype=np.int64)] / pitch  # (M, 3, 3)
    longest = np.linalg.norm(tri - np.roll(tri, 1, axis=1), axis=2).max(axis=1)
    steps = np.maximum(np.ceil(2.0 * longest), 1).astype(np.int64)
    found = []
    for n in np.unique(steps):
        i, j = np.nonzero(np.add.outer(np.arange(n + 1), np.arange(n + 1)) <= n)  # barycentric grid (i + j <= n)
        sel = tri[steps == n]
        chunk = max(1, (1 << 20) // len(i))  # ~1M points at a time
        for c in range(0, len(sel), chunk):
            t = sel[c: c + chunk]
            pts = t[:, None, 0] + (i / n)[None, :, None] * (t[:, None, 1] - t[:, None, 0]) \
                + (j / n)[None, :, None] * (t[:, None, 2] - t[:, None, 0])
            found.append(np.unique(keys(np.round(pts).astype(np.int64))))
    surf_keys = np.unique(np.concatenate(found))
    surf = np.stack([(surf_keys >> 42) & 0x1FFFFF, (surf_keys >> 21) & 0x1FFFFF, surf_keys & 0x1FFFFF], 1)
    lo = surf.min(axis=0)
    grid = np.zeros(tuple(surf.max(axis=0) - lo + 1), dtype=bool)
    grid[tuple((surf - lo).T)] = True
    filled = np.argwhere(ndimage.binary_fill_holes(grid)) + lo - (1 << 20)
    return surf_keys, np.sort(keys(filled))


# ------------------------------------------------------------------------------------------- joint errors


def axis_angle_error_deg(a, b):
    """Angle in degrees between axis lines ``a`` and ``b`` (..., 3); sign-invariant (a vs -a is 0 deg).

    Returns a float for single axes, else an array of shape (...).

    Raises
    ------
    ConfigError
        If an axis has zero length.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    na = np.linalg.norm(a, axis=-1)
    nb = np.linalg.norm(b, axis=-1)
    if np.any(na == 0) or np.any(nb == 0):
        raise ConfigError("axis_angle_error_deg: zero-length axis")
    c = np.abs((a * b).sum(-1)) / (na * nb)
    # arctan2 of |cross| and |dot| is accurate near 0 deg as well (arccos is not)
    s = np.linalg.norm(np.cross(a, b), axis=-1) / (na * nb)
    out = np.degrees(np.arctan2(s, c))
    return float(out) if out.ndim == 0 else out


def axis_line_distance(o1, d1, o2, d2) -> float:
    """Distance (metres) between the axis lines ``o1 + s d1`` and ``o2 + t d2`` ((3,) each) where the joint is:
    near their given points. With ``c`` the midpoint of ``o1`` and ``o2`` and ``p1``, ``p2`` its feet on the two
    lines, the larger of the distances of ``p1`` from line 2 and of ``p2`` from line 1.

    For lines that cross near the joint this is their shortest distance; for (nearly) parallel lines it is their
    separation. The shortest distance between the infinite lines, |(o2 - o1) . (d1 x d2)| / |d1 x d2|, is not:
    two hinges on opposite edges of a 0.8 m door, 0.1 deg apart, come closest metres away from the door and
    would read a few centimetres apart.
    """
    o1, d1, o2, d2 = (np.asarray(x, dtype=np.float64).reshape(3) for x in (o1, d1, o2, d2))
    n1, n2 = np.linalg.norm(d1), np.linalg.norm(d2)
    if n1 == 0 or n2 == 0:
        raise ConfigError("axis_line_distance: zero-length direction")
    u1, u2 = d1 / n1, d2 / n2
    c = 0.5 * (o1 + o2)
    p1 = o1 + ((c - o1) @ u1) * u1
    p2 = o2 + ((c - o2) @ u2) * u2

    def off(p, o, u):  # distance of the point p from the line o + t u
        w = p - o
        return float(np.linalg.norm(w - (w @ u) * u))

    return max(off(p1, o2, u2), off(p2, o1, u1))


def joint_origin_error(o1, d1, o2, d2, joint_type: str) -> float:
    """Origin error of a predicted joint (metres).

    Revolute/continuous (and screw) joints: distance between the axis lines (:func:`axis_line_distance`);
    prismatic joints, whose axis line position is arbitrary: distance between the two origin points.
    """
    if joint_type == "prismatic":
        return float(np.linalg.norm(np.asarray(o1, dtype=np.float64) - np.asarray(o2, dtype=np.float64)))
    return axis_line_distance(o1, d1, o2, d2)


def type_precision_recall(pred, true, classes) -> dict:
    """Per-class precision, recall and F1 of predicted motion types.

    Parameters
    ----------
    pred, true : sequences of labels of equal length.
    classes : the labels to report.

    Returns
    -------
    ``{cls: {"precision", "recall", "f1", "support"}}``. A ratio with a zero denominator (no prediction / no
    true instance of a class) is NaN.
    """
    pred = list(pred)
    true = list(true)
    if len(pred) != len(true):
        raise ConfigError(f"type_precision_recall: {len(pred)} predictions for {len(true)} labels")
    out = {}
    for c in classes:
        tp = sum(1 for p, t in zip(pred, true) if p == c and t == c)
        n_pred = sum(1 for p in pred if p == c)
        n_true = sum(1 for t in true if t == c)
        prec = tp / n_pred if n_pred else float("nan")
        rec = tp / n_true if n_true else float("nan")
        f1 = 2 * prec * rec / (prec + rec) if (n_pred and n_true and prec + rec > 0) else (
            0.0 if (n_pred and n_true) else float("nan"))
        out[c] = {"precision": prec, "recall": rec, "f1": f1, "support": n_true}
    return out


# ------------------------------------------------------------------------------------------ motion metrics


def mean_vertex_error(a, b) -> float:
    """Mean Euclidean distance between corresponding vertices, (..., N, 3) vs (..., N, 3), in metres."""
    a = _np(a)
    b = _np(b)
    if a.shape != b.shape:
        raise ConfigError(f"mean_vertex_error: shapes differ {a.shape} vs {b.shape}")
    return float(np.linalg.norm(a - b, axis=-1).mean())


def motion_explained(fit_vertices, target_vertices, rest_vertices) -> float:
    """Fraction of the target motion explained by a fit: ``1 - mean|fit - target| / mean|rest - target|``
    (mean Euclidean vertex errors, the headline number of the IK evaluation; not squared, so halving the
    error explains 50 %, not 75 %).

    Parameters
    ----------
    fit_vertices, target_vertices : (..., N, 3) float (e.g. (T, N, 3) frames), metres.
    rest_vertices : (N, 3), broadcast over the leading dimensions.

    Returns
    -------
    float: 1 for a perfect fit, 0 for doing nothing (staying at rest), negative when worse than rest; NaN if the
    target does not move.
    """
    f = _np(fit_vertices)
    t = _np(target_vertices)
    r = _np(rest_vertices)
    if f.shape != t.shape:
        raise ConfigError(f"motion_explained: fit {f.shape} and target {t.shape} differ")
    den = np.linalg.norm(np.broadcast_to(r, t.shape) - t, axis=-1).mean()
    if den <= 0:
        return float("nan")
    return float(1.0 - np.linalg.norm(f - t, axis=-1).mean() / den)


def within_part_rigidity(rest_vertices, posed_vertices, part_ids, n_pairs: int = 2000, seed: int = 0) -> float:
    """Mean change of within-part pairwise distances, as a fraction of the object size.

    Parameters
    ----------
    rest_vertices : (N, 3) float, metres.
    posed_vertices : (N, 3) or (T, N, 3) float, metres.
    part_ids : (N,) int; vertices with negative ids are ignored.
    n_pairs : random vertex pairs (both in the same part) to evaluate.
    seed : pair-sampling seed.

    Returns
    -------
    float: ``mean |d_posed(i, j) - d_rest(i, j)| / L`` over pairs (and frames), L the longest side of the rest
    bounding box. 0 for rigid parts.
    """
    r = _np(rest_vertices)
    p = _np(posed_vertices)
    ids = np.asarray(part_ids).reshape(-1)
    if p.shape[-2:] != r.shape or len(ids) != len(r):
        raise ConfigError(
            f"within_part_rigidity: rest {r.shape}, posed {p.shape}, part_ids {ids.shape} do not match"
        )
    size = float((r.max(axis=0) - r.min(axis=0)).max())
    if size <= 0:
        raise ConfigError("within_part_rigidity: rest shape has zero size")
    valid = np.flatnonzero(ids >= 0)
    order = valid[np.argsort(ids[valid], kind="stable")]
    sid = ids[order]
    starts = np.searchsorted(sid, sid, side="left")
    ends = np.searchsorted(sid, sid, side="right")
    count = ends - starts
    eligible = np.flatnonzero(count >= 2)
    if len(eligible) == 0:
        raise ConfigError("within_part_rigidity: no part has two or more vertices")
    rng = np.random.default_rng(seed)
    pos_i = eligible[rng.integers(0, len(eligible), n_pairs)]
    # pick a different member of the same part: offset in [1, count - 1] cyclically within the part's range
    off = 1 + (rng.random(n_pairs) * (count[pos_i] - 1)).astype(np.int64)
    pos_j = starts[pos_i] + (pos_i - starts[pos_i] + off) % count[pos_i]
    i, j = order[pos_i], order[pos_j]
    d_rest = np.linalg.norm(r[i] - r[j], axis=-1)
    d_pose = np.linalg.norm(p[..., i, :] - p[..., j, :], axis=-1)
    return float(np.abs(d_pose - d_rest).mean() / size)


# ------------------------------------------------------------------------------------------------- helpers


def _np(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _points(x, name) -> np.ndarray:
    x = _np(x)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ConfigError(f"{name} must be an (n, 3) array, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ConfigError(f"{name} contain NaN or inf")
    return x


def _faces(f, n_vertices) -> np.ndarray:
    f = np.asarray(f, dtype=np.int64)
    if f.ndim != 2 or f.shape[1] != 3 or len(f) == 0:
        raise ConfigError(f"faces must be a non-empty (m, 3) int array, got shape {f.shape}")
    if f.min() < 0 or f.max() >= n_vertices:
        raise ConfigError(f"faces index outside [0, {n_vertices})")
    return f


def _mesh_or_points(x, faces, name):
    if faces is None and hasattr(x, "vertices"):  # trimesh.Trimesh (faces used) or trimesh.PointCloud
        x, faces = x.vertices, getattr(x, "faces", None)
    v = _points(x, name)
    if len(v) == 0:
        raise ConfigError(f"chamfer: {name} is empty")
    if faces is None:
        return v, None
    return v, _faces(faces, len(v))


def _trimesh(m):
    import trimesh

    if isinstance(m, trimesh.Trimesh):
        return m
    v, f = m
    return trimesh.Trimesh(vertices=_np(v), faces=np.asarray(f, dtype=np.int64), process=False)
