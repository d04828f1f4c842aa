"""Oriented bounding boxes (used by ATOP-style axis candidates: box centre/face centres x box directions)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from kinemesh.errors import ConfigError

# corner sign patterns (x, y, z) in itertools.product order: corner i has signs _SIGNS[i]
_SIGNS = np.array(list(itertools.product((-1.0, 1.0), repeat=3)))
# the 12 edges join corners whose sign patterns differ in exactly one axis
_EDGES = np.array([(i, j) for i in range(8) for j in range(i + 1, 8) if np.abs(_SIGNS[i] - _SIGNS[j]).sum() == 2])


@dataclass
class OBB:
    """An oriented box: ``x = center + sum_i s_i * extents[i] / 2 * axes[i]`` with ``s_i`` in [-1, 1]."""

    center: np.ndarray  # (3,) float64, metres
    axes: np.ndarray  # (3, 3) float64, rows are the unit box directions (right-handed)
    extents: np.ndarray  # (3,) float64, full side lengths along the rows of ``axes``, metres

    def corners(self) -> np.ndarray:
        """The 8 corners, (8, 3) float64; corner i uses signs ``itertools.product((-1, 1), repeat=3)[i]``."""
        return self.center + (_SIGNS * (0.5 * self.extents)) @ self.axes

    def face_centers(self) -> np.ndarray:
        """The 6 face centres, (6, 3) float64, ordered -axis0, +axis0, -axis1, +axis1, -axis2, +axis2."""
        off = (0.5 * self.extents)[:, None] * self.axes  # (3, 3) half-extent vectors
        return np.stack([self.center + s * off[i] for i in range(3) for s in (-1.0, 1.0)])

    def edges(self) -> np.ndarray:
        """The 12 edges as corner pairs, (12, 2, 3) float64."""
        return self.corners()[_EDGES]

    def volume(self) -> float:
        """Box volume in m^3."""
        return float(np.prod(self.extents))

    def to_local(self, points) -> np.ndarray:
        """Coordinates of points (n, 3) in the box frame (origin at the centre, columns along ``axes``)."""
        return (np.asarray(points, dtype=np.float64) - self.center) @ self.axes.T


def oriented_bounding_box(points, method: str = "auto") -> OBB:
    """Oriented bounding box of a point set.

    Parameters
    ----------
    points : (n, 3) float, metres (numpy or torch).
    method : ``"hull"`` (minimum-volume box of the convex hull via ``trimesh.bounds.oriented_bounds``),
        ``"pca"`` (box aligned with the principal axes), or ``"auto"`` (hull, falling back to PCA when the
        hull is degenerate, e.g. for planar or collinear points).

    Returns
    -------
    OBB with right-handed unit row axes sorted by decreasing extent.

    Raises
    ------
    ConfigError
        If ``points`` is empty, not (n, 3) or non-finite, or ``method`` is unknown.
    """
    p = points.detach().cpu().numpy() if hasattr(points, "detach") else points
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3 or len(p) == 0:
        raise ConfigError(f"oriented_bounding_box: points must be a non-empty (n, 3) array, got {p.shape}")
    if not np.isfinite(p).all():
        raise ConfigError("oriented_bounding_box: points contain NaN or inf")
    if method not in ("auto", "hull", "pca"):
        raise ConfigError(f"oriented_bounding_box: method must be auto, hull or pca, got {method!r}")
    axes = None
    if method in ("auto", "hull") and len(p) >= 4:
        try:
            import trimesh

            with np.errstate(all="ignore"):  # planar hulls have zero volume; the 2D fallback still works
                to_origin, _ = trimesh.bounds.oriented_bounds(p)
            axes = np.asarray(to_origin[:3, :3], dtype=np.float64)  # rows: box axes in world coordinates
            if not np.isfinite(axes).all():
                axes = None
        except Exception:  # degenerate hull (planar/collinear points): qhull raises
            if method == "hull":
                raise
            axes = None
    if axes is None:
        centred = p - p.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=True)
        axes = vt
    return _box_from_axes(p, axes)


def _box_from_axes(p, axes) -> OBB:
    local = p @ axes.T
    lo, hi = local.min(axis=0), local.max(axis=0)
    ext = hi - lo
    order = np.argsort(-ext, kind="stable")
    axes, lo, hi, ext = axes[order], lo[order], hi[order], ext[order]
    if np.linalg.det(axes) < 0:  # keep a right-handed frame
        axes = axes.copy()
        axes[2] = -axes[2]
        lo[2], hi[2] = -hi[2], -lo[2]
    center = (0.5 * (lo + hi)) @ axes
    return OBB(center=center, axes=axes, extents=ext)
