"""The object kind of a mesh (articulated / elastic / cloth) and its connected components.

The kind picks the calibrated prior of the model (``kinemesh.model.calibration``) and the per-kind physics
defaults of the dynamics (``kinemesh.dynamics.scene``); :func:`resolve_kind` is the one place where "auto"
becomes a kind.
"""

from __future__ import annotations

import numpy as np

from kinemesh.errors import ConfigError

KINDS = ("articulated", "elastic", "cloth")


def connected_components(n_vertices: int, faces: np.ndarray) -> np.ndarray:
    """Connected-component label per vertex (n,) int (isolated vertices get their own label)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as cc

    f = np.asarray(faces, dtype=np.int64)
    rows = np.concatenate([f[:, 0], f[:, 1], f[:, 2]])
    cols = np.concatenate([f[:, 1], f[:, 2], f[:, 0]])
    g = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_vertices, n_vertices))
    return cc(g, directed=False)[1]


def guess_kind(vertices: np.ndarray, faces: np.ndarray, part_ids: np.ndarray | None = None) -> str:
    """articulated | elastic | cloth from the mesh alone: an open thin sheet is cloth; two or more sizeable
    given parts (``part_ids`` (n,), e.g. URDF links) or three or more sizeable connected components (after
    merging coincident vertices) articulated; anything else elastic."""
    import trimesh

    vertices = np.asarray(vertices, dtype=np.float64)
    m = trimesh.Trimesh(vertices, faces, process=False)
    ext = np.sort(np.ptp(vertices, axis=0))
    if not m.is_watertight and ext[0] < 0.05 * ext[2]:
        return "cloth"
    if part_ids is not None:
        sizes = np.unique(np.asarray(part_ids).reshape(-1), return_counts=True)[1]
        if (sizes >= max(8, 0.02 * len(vertices))).sum() >= 2:
            return "articulated"
    # merge coincident vertices first (files often split vertices along UV/normal seams)
    _, inverse = np.unique(np.round(vertices / (1e-6 * max(ext[2], 1e-12))), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    labels = connected_components(int(inverse.max()) + 1, inverse[np.asarray(faces)])
    counts = np.bincount(labels)
    # a soft toy can have a separate shell or two; cabinets, ovens, laptops have body + parts + handles
    if (counts >= max(8, 0.02 * len(vertices))).sum() >= 3:
        return "articulated"
    return "elastic"


def resolve_kind(kind: str, vertices: np.ndarray, faces: np.ndarray, part_ids: np.ndarray | None = None) -> str:
    """``kind`` itself (one of KINDS) or, for "auto", :func:`guess_kind` of the mesh. Raises ConfigError."""
    if kind == "auto":
        return guess_kind(vertices, faces, part_ids)
    if kind not in KINDS:
        raise ConfigError(f"kind {kind!r}: choose one of {', '.join(KINDS)} or auto")
    return kind
