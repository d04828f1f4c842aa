"""The geometry the model needs, taken from ``kinemesh.geometry`` when it provides it.

``kinemesh.geometry`` (normalize, sampling, transfer, dualquat) is written in parallel by another engineer;
until a function lands there this module supplies a small reference version with the same signature, so
the model works either way. Every function here dispatches at call time.
"""

from __future__ import annotations

import importlib

import numpy as np
import torch


def _geometry(module: str, name: str):
    try:
        mod = importlib.import_module(f"kinemesh.geometry.{module}")
    except ImportError:
        return None
    return getattr(mod, name, None)


# ---------------------------------------------------------------------------------------------- normalize
def normalization(vertices: np.ndarray) -> tuple[np.ndarray, float]:
    """(center (3,), scale) so that ``(v - center) * scale`` has its bbox centred at 0, longest side 1."""
    fn = _geometry("normalize", "normalization")
    if fn is not None:
        c, s = fn(np.asarray(vertices))
        return np.asarray(c, dtype=np.float64), float(s)
    v = np.asarray(vertices, dtype=np.float64)
    lo, hi = v.min(0), v.max(0)
    side = float((hi - lo).max())
    return (lo + hi) / 2, 1.0 / max(side, 1e-12)


# ---------------------------------------------------------------------------------------------- sampling
def sample_surface(vertices, faces, n: int, seed=None):
    """Area-uniform surface samples: (points (n,3), face_ids (n,), bary (n,3))."""
    fn = _geometry("sampling", "sample_surface")
    if fn is not None:
        return fn(vertices, faces, n, seed=seed)
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    tri = v[f]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    p = area / area.sum() if area.sum() > 0 else np.full(len(f), 1.0 / len(f))
    face_ids = rng.choice(len(f), size=n, p=p)
    r1, r2 = rng.random(n), rng.random(n)
    s = np.sqrt(r1)
    bary = np.stack([1 - s, s * (1 - r2), s * r2], axis=1)
    return points_from_barycentric(v, f, face_ids, bary), face_ids, bary


def points_from_barycentric(vertices, faces, face_ids, bary):
    """Points at barycentric coordinates of faces; numpy (n,3) or torch (..., n, 3) vertices."""
    fn = _geometry("sampling", "points_from_barycentric")
    if fn is not None:
        return fn(vertices, faces, face_ids, bary)
    f = np.asarray(faces)[np.asarray(face_ids)]
    if isinstance(vertices, torch.Tensor):
        b = torch.as_tensor(np.asarray(bary), dtype=vertices.dtype, device=vertices.device)
        idx = torch.as_tensor(f, device=vertices.device)
        return (vertices[..., idx, :] * b[..., None]).sum(-2)
    return (np.asarray(vertices)[..., f, :] * np.asarray(bary)[..., None]).sum(-2)


# ---------------------------------------------------------------------------------------------- transfer
def knn_weights(points, vertices, k=8, point_groups=None, vertex_groups=None):
    """Inverse-distance weights of the k nearest points of each vertex: (idx (N,k), w (N,k))."""
    fn = _geometry("transfer", "knn_weights")
    if fn is not None:
        return fn(points, vertices, k=k, point_groups=point_groups, vertex_groups=vertex_groups)
    from scipy.spatial import cKDTree

    points = np.asarray(points, dtype=np.float64)
    vertices = np.asarray(vertices, dtype=np.float64)
    k = min(k, len(points))
    idx = np.zeros((len(vertices), k), dtype=np.int64)
    dist = np.zeros((len(vertices), k))
    if point_groups is None or vertex_groups is None:
        groups = [(np.arange(len(points)), np.arange(len(vertices)))]
    else:
        pg, vg = np.asarray(point_groups), np.asarray(vertex_groups)
        groups = []
        for g in np.unique(vg):
            pi = np.nonzero(pg == g)[0]
            if len(pi) == 0:
                pi = np.arange(len(points))
            groups.append((pi, np.nonzero(vg == g)[0]))
    for pi, vi in groups:
        kk = min(k, len(pi))
        d, j = cKDTree(points[pi]).query(vertices[vi], k=kk)
        d, j = d.reshape(len(vi), kk), j.reshape(len(vi), kk)
        if kk < k:  # pad by repeating the nearest with zero weight below
            d = np.concatenate([d, np.full((len(vi), k - kk), np.inf)], 1)
            j = np.concatenate([j, np.repeat(j[:, :1], k - kk, 1)], 1)
        idx[vi], dist[vi] = pi[j], d
    w = 1.0 / np.maximum(dist, 1e-9)
    w = w / w.sum(1, keepdims=True)
    return idx, w


def to_vertices(values, idx, w):
    """Weighted average of point values: values (..., P, C) -> (..., N, C)."""
    fn = _geometry("transfer", "to_vertices")
    if fn is not None:
        return fn(values, idx, w)
    if isinstance(values, torch.Tensor):
        idx_t = torch.as_tensor(idx, device=values.device)
        w_t = torch.as_tensor(w, dtype=values.dtype, device=values.device)
        return (values[..., idx_t, :] * w_t[..., None]).sum(-2)
    return (np.asarray(values)[..., idx, :] * np.asarray(w)[..., None]).sum(-2)


# ---------------------------------------------------------------------------------------------- dual quaternions
def _qmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
         aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def _qconj(q: torch.Tensor) -> torch.Tensor:
    return q * q.new_tensor([1.0, -1.0, -1.0, -1.0])


def dq_from_rt(quat: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Unit dual quaternion (..., 8) [real wxyz, dual wxyz] of rotation ``quat`` (..., 4) then translation t."""
    fn = _geometry("dualquat", "from_rt")
    if fn is not None:
        return fn(quat, t)
    tq = torch.cat([torch.zeros_like(t[..., :1]), t], -1)
    return torch.cat([quat, 0.5 * _qmul(tq, quat)], -1)


def dq_normalize(dq: torch.Tensor) -> torch.Tensor:
    """Project (..., 8) onto unit dual quaternions (|real| = 1, real . dual = 0)."""
    fn = _geometry("dualquat", "normalize")
    if fn is not None:
        return fn(dq)
    r, d = dq[..., :4], dq[..., 4:]
    n = torch.sqrt((r * r).sum(-1, keepdim=True) + 1e-20)
    r, d = r / n, d / n
    d = d - (r * d).sum(-1, keepdim=True) * r
    return torch.cat([r, d], -1)


def dq_blend(dq: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Dual-quaternion linear blending: dq (..., K, 8), weights (..., K) -> unit (..., 8).

    Signs are aligned with the first transform (antipodal quaternions are the same rotation).
    """
    fn = _geometry("dualquat", "blend")
    if fn is not None:
        return fn(dq, weights)
    ref = dq[..., :1, :4]
    sign = torch.where((dq[..., :4] * ref).sum(-1, keepdim=True) < 0, -1.0, 1.0).to(dq.dtype)
    return dq_normalize(((dq * sign) * weights[..., None]).sum(-2))


def dq_apply(dq: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Transform points (..., 3) by unit dual quaternions (..., 8)."""
    fn = _geometry("dualquat", "apply")
    if fn is not None:
        return fn(dq, points)
    r, d = dq[..., :4], dq[..., 4:]
    t = 2.0 * _qmul(d, _qconj(r))[..., 1:]
    w, v = r[..., :1], r[..., 1:]
    # Rodrigues form of q p q*: p + 2w (v x p) + 2 v x (v x p)
    v, points = torch.broadcast_tensors(v, points)
    c = torch.cross(v, points, dim=-1)
    return points + 2.0 * w * c + 2.0 * torch.cross(v, c, dim=-1) + t
