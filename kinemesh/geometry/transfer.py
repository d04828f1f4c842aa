"""Transfer of per-point quantities (sampled surface points) to mesh vertices.

NeuROK drives every vertex by averaging the k nearest sampled points (NeuROK Sec. 4.1, decoder). We use
inverse-distance weights over those k points, which reduces to the plain average when the distances are equal
and reproduces a point's value exactly when a vertex coincides with it. Optional groups (e.g. connected
component ids) keep the average inside one component so that separate parts do not blend near joints.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from kinemesh.errors import ConfigError


def knn_weights(points, vertices, k: int = 8, point_groups=None, vertex_groups=None, eps: float = 1e-9):
    """Indices and inverse-distance weights of the ``k`` nearest points of every vertex.

    Parameters
    ----------
    points : (P, 3) float, sampled points (metres).
    vertices : (N, 3) float, mesh vertices (metres).
    k : neighbours per vertex (clipped to the number of available points).
    point_groups, vertex_groups : optional (P,) and (N,) int group ids. When both are given, a vertex only uses
        points of its own group; a vertex whose group has no points falls back to all points.
    eps : distance floor in metres added before inverting, so coincident points get finite weights.

    Returns
    -------
    idx : (N, k) int64 point indices.
    w : (N, k) float64 weights, each row sums to 1. If a group has fewer than ``k`` points, the missing
        slots repeat the nearest point with weight 0.

    Raises
    ------
    ConfigError
        On bad shapes, ``k < 1``, or when only one of the group arrays is given.
    """
    p = _np(points)
    v = _np(vertices)
    if p.ndim != 2 or p.shape[1] != 3 or len(p) == 0:
        raise ConfigError(f"knn_weights: points must be a non-empty (P, 3) array, got shape {p.shape}")
    if v.ndim != 2 or v.shape[1] != 3:
        raise ConfigError(f"knn_weights: vertices must be (N, 3), got shape {v.shape}")
    if k < 1:
        raise ConfigError(f"knn_weights: k must be >= 1, got {k}")
    if (point_groups is None) != (vertex_groups is None):
        raise ConfigError("knn_weights: give both point_groups and vertex_groups, or neither")
    k = int(k)
    idx = np.zeros((len(v), k), dtype=np.int64)
    w = np.zeros((len(v), k), dtype=np.float64)
    if point_groups is None:
        _fill(p, np.arange(len(p)), v, np.arange(len(v)), k, eps, idx, w)
        return idx, w
    pg = np.asarray(point_groups).reshape(-1)
    vg = np.asarray(vertex_groups).reshape(-1)
    if len(pg) != len(p) or len(vg) != len(v):
        raise ConfigError(
            f"knn_weights: group arrays must match points ({len(p)}) and vertices ({len(v)}), "
            f"got {len(pg)} and {len(vg)}"
        )
    for g in np.unique(vg):
        vsel = np.flatnonzero(vg == g)
        psel = np.flatnonzero(pg == g)
        if len(psel) == 0:  # no samples on this group (e.g. a tiny component): use every point
            psel = np.arange(len(p))
        _fill(p[psel], psel, v[vsel], vsel, k, eps, idx, w)
    return idx, w


def _fill(p, p_index, v, v_rows, k, eps, idx, w):
    if len(v_rows) == 0:
        return
    kk = min(k, len(p))
    d, j = cKDTree(p).query(v, k=kk)
    d = np.asarray(d, dtype=np.float64).reshape(len(v), kk)
    j = np.asarray(j).reshape(len(v), kk)
    inv = 1.0 / (d + eps)
    ww = inv / inv.sum(axis=1, keepdims=True)
    gi = p_index[j]
    if kk < k:  # pad with the nearest point at zero weight to keep a rectangular (N, k) layout
        gi = np.concatenate([gi, np.repeat(gi[:, :1], k - kk, axis=1)], axis=1)
        ww = np.concatenate([ww, np.zeros((len(v), k - kk))], axis=1)
    idx[v_rows] = gi
    w[v_rows] = ww


def to_vertices(values, idx, w):
    """Weighted average of per-point ``values`` over each vertex's neighbours.

    Parameters
    ----------
    values : (..., P, C) numpy array or torch tensor (differentiable).
    idx : (N, k) int, from :func:`knn_weights`.
    w : (N, k) float, from :func:`knn_weights`.

    Returns
    -------
    (..., N, C), same library and dtype as ``values``.
    """
    try:
        import torch

        if isinstance(values, torch.Tensor):
            ti = torch.as_tensor(np.asarray(idx) if not isinstance(idx, torch.Tensor) else idx,
                                 dtype=torch.long, device=values.device)
            tw = torch.as_tensor(np.asarray(w) if not isinstance(w, torch.Tensor) else w,
                                 dtype=values.dtype, device=values.device)
            gathered = values[..., ti, :]  # (..., N, k, C)
            return (gathered * tw[..., None]).sum(dim=-2)
    except ImportError:  # pragma: no cover
        pass
    vals = np.asarray(values)
    gathered = vals[..., np.asarray(idx), :]
    out = (gathered * np.asarray(w)[..., None]).sum(axis=-2)
    return out.astype(vals.dtype, copy=False) if np.issubdtype(vals.dtype, np.floating) else out


def _np(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)
