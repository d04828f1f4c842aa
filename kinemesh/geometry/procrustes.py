"""Per-point local rigid transforms fitted to a neighbourhood (orthogonal Procrustes / Kabsch)."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from kinemesh.errors import ConfigError


def kabsch(src, dst, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Best rigid fits ``dst ~ R src + t`` in the weighted least-squares sense, batched (Kabsch 1976; the
    one rigid solver of the package: local fits here, per-part motion in articulation, the viewer's axes).

    Parameters
    ----------
    src, dst : (..., k, 3) float corresponding point sets (metres); leading dimensions broadcast, e.g. a rest
        (k, 3) against frames (T, k, 3).
    weights : optional (..., k) non-negative weights (e.g. 0 drops an outlier).

    Returns
    -------
    R : (..., 3, 3) rotations (det +1; reflections are excluded).
    t : (..., 3) translations, metres.
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    if weights is None:
        w = np.ones(src.shape[:-1])
    else:
        w = np.broadcast_to(np.asarray(weights, dtype=np.float64), src.shape[:-1])
    w = w / np.maximum(w.sum(axis=-1, keepdims=True), 1e-300)
    cs = (w[..., None] * src).sum(axis=-2)
    cd = (w[..., None] * dst).sum(axis=-2)
    H = np.einsum("...k,...ki,...kj->...ij", w, src - cs[..., None, :], dst - cd[..., None, :])
    U, _, Vt = np.linalg.svd(H)
    d = np.sign(np.linalg.det(np.swapaxes(Vt, -1, -2) @ np.swapaxes(U, -1, -2)))
    d = np.where(d == 0, 1.0, d)
    D = np.zeros(H.shape)
    D[..., 0, 0] = 1.0
    D[..., 1, 1] = 1.0
    D[..., 2, 2] = d
    R = np.swapaxes(Vt, -1, -2) @ D @ np.swapaxes(U, -1, -2)
    t = cd - np.einsum("...ij,...j->...i", R, cs)
    return R, t


def kabsch_matrix(src, dst, weights=None) -> np.ndarray:
    """:func:`kabsch` as homogeneous transforms (..., 4, 4) with ``dst ~ T[:3, :3] src + T[:3, 3]``."""
    R, t = kabsch(src, dst, weights)
    T = np.zeros(R.shape[:-2] + (4, 4))
    T[..., :3, :3], T[..., :3, 3], T[..., 3, 3] = R, t, 1.0
    return T


def local_rigid_transforms(rest_points, deformed_points, k: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Rigid transform of every point's neighbourhood from the rest to the deformed configuration.

    Parameters
    ----------
    rest_points : (P, 3) float, metres.
    deformed_points : (P, 3) or (..., P, 3) float (e.g. (T, P, 3) frames), same point order.
    k : neighbourhood size (the point and its k - 1 nearest rest neighbours); clipped to P.

    Returns
    -------
    R : (..., P, 3, 3) rotations, t : (..., P, 3) translations with
        ``deformed[nbrs] ~ R @ rest[nbrs] + t`` (least squares over the neighbourhood).

    Raises
    ------
    ConfigError
        On shape mismatch or ``k < 3`` (fewer points do not determine a rotation).
    """
    rest = np.asarray(rest_points.detach().cpu() if hasattr(rest_points, "detach") else rest_points,
                      dtype=np.float64)
    dfm = np.asarray(deformed_points.detach().cpu() if hasattr(deformed_points, "detach") else deformed_points,
                     dtype=np.float64)
    if rest.ndim != 2 or rest.shape[1] != 3 or dfm.shape[-2:] != rest.shape:
        raise ConfigError(
            f"local_rigid_transforms: rest {rest.shape} and deformed {dfm.shape} must be (P, 3) and (..., P, 3)"
        )
    if k < 3:
        raise ConfigError(f"local_rigid_transforms: k must be >= 3, got {k}")
    k = min(int(k), len(rest))
    _, nbr = cKDTree(rest).query(rest, k=k)
    nbr = np.asarray(nbr).reshape(len(rest), k)
    return kabsch(rest[nbr], dfm[..., nbr, :])
