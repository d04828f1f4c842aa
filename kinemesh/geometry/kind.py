"""The object kind of a mesh (articulated / elastic / cloth), its connected components and their grouping into parts.

The kind picks the calibrated prior of the model (``kinemesh.model.calibration``) and the per-kind physics
defaults of the dynamics (``kinemesh.dynamics.scene``); :func:`resolve_kind` is the one place where "auto"
becomes a kind.
"""

from __future__ import annotations

import numpy as np

from kinemesh.errors import ConfigError

KINDS = ("articulated", "elastic", "cloth")


def parse_kinds(text: str) -> tuple[str, ...]:
    """The object kinds of a comma-separated list such as "elastic,cloth" (each one of ``KINDS``). Raises
    ConfigError for an unknown kind or an empty list."""
    kinds = tuple(k.strip() for k in str(text).split(",") if k.strip())
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ConfigError(f"expected kinds among {', '.join(KINDS)}, got {text!r}")
    return kinds


def connected_components(n_vertices: int, faces: np.ndarray) -> np.ndarray:
    """Connected-component label per vertex (n,) int (isolated vertices get their own label)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as cc

    f = np.asarray(faces, dtype=np.int64)
    rows = np.concatenate([f[:, 0], f[:, 1], f[:, 2]])
    cols = np.concatenate([f[:, 1], f[:, 2], f[:, 0]])
    g = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_vertices, n_vertices))
    return cc(g, directed=False)[1]


def _union_find(n: int):
    parent = np.arange(n)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(a: int, b: int) -> None:
        a, b = find(a), find(b)
        if a != b:
            parent[max(a, b)] = min(a, b)

    return find, union


def _shared(keys: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of owners (p, 2) sharing a key and how many keys each pair shares (p,), from unique
    (key, owner) rows."""
    order = np.lexsort((owner, keys))
    k, o = keys[order], owner[order]
    pairs = []
    for d in range(1, len(k)):  # every pair of owners of one key: rows d apart in the sorted run
        same = np.flatnonzero(k[d:] == k[:-d])
        if not len(same):
            break
        pairs.append(np.stack([o[same], o[same + d]], 1))
    if not pairs:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    return np.unique(np.sort(np.concatenate(pairs), axis=1), axis=0, return_counts=True)


def _boxes(points: np.ndarray, owner: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Axis-aligned bounds (lo, hi) (n, 3) of the ``points`` (k, 3) of each group ``owner`` (k,) in 0..n-1
    (+inf / -inf for a group without points)."""
    lo, hi = np.full((n, 3), np.inf), np.full((n, 3), -np.inf)
    np.minimum.at(lo, owner, points)
    np.maximum.at(hi, owner, points)
    return lo, hi


def group_components(vertices: np.ndarray, faces: np.ndarray, small: float = 0.05,
                     seam: float = 0.5) -> np.ndarray:
    """Group the connected components of a mesh into parts, so that a part made of many components (a door's
    panel, glass and handle) moves as one.

    Works on the file's own topology (vertices not merged): real meshes are welded at a few coincident
    vertices where a door touches its frame, so merging coincident vertices first would make the whole
    object one component. Two rules, in this order:

    1. seams: two components are one surface split by the file (UV seams, a button glued into a panel, a
       window in a door) when at least ``seam`` of the smaller one's vertex positions coincide with vertices
       of the other, or ``seam`` of one's open-boundary edges coincide with edges of the other; a door
       touching its frame at a hinge shares a few positions and edges and stays apart;
    2. small details: a group whose bounding-box diagonal is below ``small`` of the object's joins the big
       group nearest to it (buttons, knobs, screws).

    Parameters
    ----------
    vertices, faces : (n, 3) metres and (m, 3) int; the file's topology (coincident vertices not merged).
    small : bounding-box diagonal, as a fraction of the object's, below which a group is a detail of its
        nearest group.
    seam : fraction of a component's vertex positions or open-boundary edges that, shared (coincident) with
        another component, makes them one surface.

    Returns
    -------
    (n,) int part id per vertex, 0..P-1 (0 = the part with the most vertices); vertices no face uses take the
    part of their nearest used vertex.
    """
    from scipy.spatial import cKDTree

    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    comp = connected_components(len(v), f)
    n_comp = int(comp.max()) + 1 if len(comp) else 0
    size = float(np.linalg.norm(np.ptp(v[np.unique(f)], axis=0))) if len(f) else 0.0
    find, union = _union_find(n_comp)
    if n_comp > 1 and size > 0:
        # 1. seams, by coincident vertex positions and by coincident open-boundary edges
        _, pos = np.unique(np.round(v / (1e-6 * size)).astype(np.int64), axis=0, return_inverse=True)
        pos = pos.reshape(-1)
        pc = np.unique(np.stack([pos, comp], 1)[np.unique(f)], axis=0)  # (position, component)
        e = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
        uniq, counts = np.unique(e, axis=0, return_counts=True)
        ek = np.sort(pos[uniq], axis=1)
        edge_comps: dict[tuple[int, int], set] = {}
        for key, c in zip(map(tuple, ek), comp[uniq[:, 0]]):
            edge_comps.setdefault(key, set()).add(int(c))
        open_e = counts == 1  # open boundary (a UV seam, a panel's edge)
        n_open = np.bincount(comp[uniq[open_e, 0]], minlength=n_comp)
        shared_open: dict[tuple[int, int], int] = {}
        for key, c in zip(map(tuple, ek[open_e]), comp[uniq[open_e, 0]]):
            for o in edge_comps[key] - {int(c)}:
                shared_open[(int(c), o)] = shared_open.get((int(c), o), 0) + 1
        for (a, b), s in shared_open.items():
            if n_open[a] >= 3 and s >= seam * n_open[a]:
                union(a, b)
        n_pos = np.bincount(pc[:, 1], minlength=n_comp)
        for (a, b), s in zip(*_shared(pc[:, 0], pc[:, 1])):
            if s >= seam * min(n_pos[a], n_pos[b]):
                union(int(a), int(b))
    root = np.array([find(i) for i in range(n_comp)], dtype=np.int64)
    group = root[comp]
    # 2. small details join the nearest big group (big groups never move)
    ids = np.unique(group[np.unique(f)])
    member = np.flatnonzero(np.isin(group, ids))
    lo, hi = _boxes(v[member], np.searchsorted(ids, group[member]), len(ids))
    diag = np.linalg.norm(hi - lo, axis=1)
    big = diag >= small * size
    if big.any() and not big.all():
        from kinemesh.geometry.metrics import surface_index

        # every small group's vertices against the surfaces of the big groups that can be nearest: a big group
        # whose bounding box is farther than the nearest big group's vertex cannot be (exact, pruned)
        small_vs = np.flatnonzero(np.isin(group, ids[~big]))
        owner = np.searchsorted(ids[~big], group[small_vs])
        n_small = int((~big).sum())
        big_faces = [f[group[f[:, 0]] == g] for g in ids[big]]
        big_vs = np.unique(np.concatenate(big_faces))
        upper = np.full(n_small, np.inf)
        np.minimum.at(upper, owner, cKDTree(v[big_vs]).query(v[small_vs])[0])
        lo_s, hi_s = _boxes(v[small_vs], owner, n_small)
        nearest = np.full((n_small, int(big.sum())), np.inf)
        for k, bf in enumerate(big_faces):
            bv = v[np.unique(bf)]
            gap = np.maximum(np.maximum(bv.min(0) - hi_s, lo_s - bv.max(0)), 0.0)
            near = np.einsum("ij,ij->i", gap, gap) <= upper ** 2 * (1 + 1e-9) + 1e-30
            rows = near[owner]
            if rows.any():
                d2 = surface_index(v, bf).sqdist(v[small_vs[rows]])
                np.minimum.at(nearest[:, k], owner[rows], d2)
        target = ids[big][np.argmin(nearest, axis=1)]
        group[small_vs] = target[owner]
    used = np.zeros(len(v), bool)
    used[f.reshape(-1)] = True
    if (~used).any() and used.any():
        group[~used] = group[used][cKDTree(v[used]).query(v[~used])[1]]
    ids, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
    rank = np.empty(len(ids), np.int64)
    rank[np.argsort(-counts, kind="stable")] = np.arange(len(ids))
    return rank[inverse.reshape(-1)]


# guess_kind: a part is sizeable with >= [0] of the vertices, or a box diagonal >= [1] x the object's
SIZEABLE = (0.02, 0.1)


def guess_kind(vertices: np.ndarray, faces: np.ndarray, part_ids: np.ndarray | None = None) -> str:
    """articulated | elastic | cloth from the mesh alone: two or more sizeable parts articulated (``part_ids``
    (n,), e.g. URDF links, else :func:`group_components` of the mesh, so a door welded to its frame at a few
    vertices still counts; sizeable: ``SIZEABLE``, by vertex count or by size, so a cart's low-poly wheels
    and a box's eight-vertex lid count); else an open thin sheet is cloth; anything else elastic. A knife or
    scissors (thin open blades in two parts) are articulated, not cloth."""
    import trimesh

    vertices = np.asarray(vertices, dtype=np.float64)
    if part_ids is None:
        part_ids = group_components(vertices, faces)
    part_ids = np.asarray(part_ids).reshape(-1)
    ids, inverse, sizes = np.unique(part_ids, return_inverse=True, return_counts=True)
    used = np.zeros(len(vertices), bool)
    used[np.asarray(faces, dtype=np.int64).reshape(-1)] = True
    diag = float(np.linalg.norm(np.ptp(vertices[used], axis=0))) if used.any() else 0.0
    big = sizes >= max(8, SIZEABLE[0] * len(vertices))
    # a low-poly part counts by its size (the vertices its faces use)
    lo, hi = _boxes(vertices[used], inverse.reshape(-1)[used], len(ids))
    placed = np.isfinite(lo).all(axis=1)  # parts with a face
    extent = np.linalg.norm(np.where(placed[:, None], hi - lo, 0.0), axis=1)
    big |= placed & (extent >= SIZEABLE[1] * diag) & (diag > 0)
    # a soft toy's eyes are details of its body; cabinets, ovens, laptops, carts have a body and moving parts
    if big.sum() >= 2:
        return "articulated"
    m = trimesh.Trimesh(vertices, faces, process=False)
    ext = np.sort(np.ptp(vertices, axis=0))
    return "cloth" if not m.is_watertight and ext[0] < 0.05 * ext[2] else "elastic"


def resolve_kind(kind: str, vertices: np.ndarray, faces: np.ndarray, part_ids: np.ndarray | None = None) -> str:
    """``kind`` itself (one of KINDS) or, for "auto", :func:`guess_kind` of the mesh. Raises ConfigError."""
    if kind == "auto":
        return guess_kind(vertices, faces, part_ids)
    if kind not in KINDS:
        raise ConfigError(f"kind {kind!r}: choose one of {', '.join(KINDS)} or auto")
    return kind
