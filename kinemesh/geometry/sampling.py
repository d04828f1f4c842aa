"""Area-weighted surface sampling that also returns where each sample lies (face id + barycentrics).

Keeping ``(face_ids, bary)`` lets a deformed mesh with the same topology be re-sampled at exactly the same
material points (:func:`points_from_barycentric`), which is how rest samples are tracked through a sequence.
"""

from __future__ import annotations

import numpy as np

from kinemesh.errors import ConfigError


def face_areas(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Triangle areas, (m,) float64 in m^2, for ``vertices`` (n, 3) and ``faces`` (m, 3) int."""
    v = np.asarray(_np(vertices), dtype=np.float64)
    f = np.asarray(_np(faces), dtype=np.int64)
    tri = v[f]
    return 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)


def sample_surface(vertices, faces, n: int, seed=None, face_groups=None, min_per_group: int = 0
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample ``n`` points uniformly by area on a triangle mesh, optionally with a minimum per group of faces.

    Parameters
    ----------
    vertices : (N, 3) float, metres (numpy or torch).
    faces : (M, 3) int, vertex indices.
    n : number of samples.
    seed : None, int or ``np.random.Generator``; the same seed gives the same samples.
    face_groups : (M,) int group of every face (e.g. the part of its first vertex), or None.
    min_per_group : every group with area receives at least this many of the ``n`` points (fewer, n // groups,
        when they do not fit), drawn by area within the group; the remaining points are drawn by area over the
        whole mesh. A small part (a wheel, a knob) then carries enough points to follow its own rigid motion.

    Returns
    -------
    points : (n, 3) float64, metres.
    face_ids : (n,) int64, the triangle each point lies on.
    bary : (n, 3) float64, barycentric weights of the triangle's three vertices (rows sum to 1).

    Raises
    ------
    ConfigError
        If the mesh has no faces, ``n`` is negative or the total area is zero/non-finite.
    """
    v = np.asarray(_np(vertices), dtype=np.float64)
    f = np.asarray(_np(faces), dtype=np.int64)
    if f.ndim != 2 or f.shape[1] != 3 or f.shape[0] == 0:
        raise ConfigError(f"sample_surface: faces must be a non-empty (m, 3) array, got shape {f.shape}")
    if n < 0:
        raise ConfigError(f"sample_surface: n must be >= 0, got {n}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    areas = face_areas(v, f)
    total = areas.sum()
    if not np.isfinite(total) or total <= 0.0:
        raise ConfigError("sample_surface: mesh has zero or non-finite surface area")
    if face_groups is None or min_per_group <= 0:
        face_ids = _by_area(areas, n, rng)
    else:
        g = np.asarray(face_groups).reshape(-1)
        if g.shape != (len(f),):
            raise ConfigError(f"sample_surface: face_groups must be ({len(f)},), got {g.shape}")
        labels = [x for x in np.unique(g) if areas[g == x].sum() > 0.0]
        m = min(int(min_per_group), n // max(len(labels), 1))
        ids = [_by_area(areas, n - m * len(labels), rng)]
        for x in labels:
            sel = np.flatnonzero(g == x)
            ids.append(sel[_by_area(areas[sel], m, rng)])
        face_ids = rng.permutation(np.concatenate(ids))
    # Uniform point in a triangle: fold the unit square onto the triangle (r1 + r2 <= 1).
    r = rng.random((n, 2))
    flip = r.sum(axis=1) > 1.0
    r[flip] = 1.0 - r[flip]
    bary = np.column_stack([1.0 - r[:, 0] - r[:, 1], r[:, 0], r[:, 1]])
    points = points_from_barycentric(v, f, face_ids, bary)
    return points, face_ids.astype(np.int64), bary


def _by_area(areas: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n,) indices into ``areas`` (m,) drawn with probability proportional to area."""
    cdf = np.cumsum(areas)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(areas) - 1)  # round-off at the top


def points_from_barycentric(vertices, faces, face_ids, bary):
    """Points at barycentric coordinates ``bary`` on triangles ``face_ids``.

    Parameters
    ----------
    vertices : (N, 3) numpy array, or torch tensor (..., N, 3) (batched frames; differentiable).
    faces : (M, 3) int.
    face_ids : (n,) int.
    bary : (n, 3) float.

    Returns
    -------
    (n, 3) numpy array, or (..., n, 3) torch tensor with the dtype/device of ``vertices``.
    """
    try:
        import torch

        if isinstance(vertices, torch.Tensor):
            dev = vertices.device
            f = torch.as_tensor(np.asarray(faces), dtype=torch.long, device=dev)
            fid = torch.as_tensor(np.asarray(face_ids), dtype=torch.long, device=dev)
            b = torch.as_tensor(np.asarray(bary), dtype=vertices.dtype, device=dev)
            corners = f[fid]  # (n, 3) vertex indices
            out = b[:, 0:1] * vertices[..., corners[:, 0], :]
            out = out + b[:, 1:2] * vertices[..., corners[:, 1], :]
            return out + b[:, 2:3] * vertices[..., corners[:, 2], :]
    except ImportError:  # pragma: no cover
        pass
    v = np.asarray(vertices)
    f = np.asarray(faces, dtype=np.int64)
    b = np.asarray(bary)
    corners = f[np.asarray(face_ids, dtype=np.int64)]
    return (
        b[:, 0:1] * v[..., corners[:, 0], :]
        + b[:, 1:2] * v[..., corners[:, 1], :]
        + b[:, 2:3] * v[..., corners[:, 2], :]
    )


def _np(x):
    """numpy view of a numpy array or (possibly grad-tracking) torch tensor."""
    return x.detach().cpu().numpy() if hasattr(x, "detach") else x
