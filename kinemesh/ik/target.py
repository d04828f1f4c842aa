"""IK targets: a mesh (same topology or not) or a full/partial point cloud, validated and brought into the
rest mesh's frame (optionally rescaled when the target comes at a different scale)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kinemesh.errors import KinemeshError
from kinemesh.geometry.normalize import normalization
from kinemesh.geometry.sampling import sample_surface


@dataclass
class Target:
    """What the IK fits to, in the rest mesh's frame.

    Attributes
    ----------
    points : (M, 3) float32 tensor, surface samples of the target (or the cloud itself), metres, rest frame.
    vertices : (N, 3) float32 tensor or None, per-vertex target positions when the target shares the rest
        mesh's topology (correspondences known), rest frame.
    partial : bool, the target covers only part of the surface (fit with one-sided Chamfer).
    scale, translation : the map from the rest frame back to the target's own frame,
        ``x_target = x_rest * scale + translation`` (identity unless normalized).
    """

    points: torch.Tensor
    vertices: torch.Tensor | None = None
    partial: bool = False
    scale: float = 1.0
    translation: np.ndarray | None = None

    def to_target_frame(self, x: np.ndarray) -> np.ndarray:
        """Rest-frame positions (..., 3) -> the target's original frame."""
        t = np.zeros(3) if self.translation is None else self.translation
        return np.asarray(x) * self.scale + t


def _check_array(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 3:
        raise KinemeshError(f"IK target {name}: expected an (n, 3) array, got shape {a.shape}")
    if len(a) == 0:
        raise KinemeshError(f"IK target {name}: empty (no points or vertices)")
    bad = ~np.isfinite(a).all(1)
    if bad.any():
        raise KinemeshError(f"IK target {name}: {int(bad.sum())} of {len(a)} entries are NaN or infinite")
    return a


def sample_target_points(vertices: np.ndarray, faces: np.ndarray | None, n: int, seed: int = 0) -> np.ndarray:
    """Surface samples (n, 3) of a mesh, or a random subset of a point cloud (faces None or empty)."""
    if faces is not None and len(faces) > 0:
        return np.asarray(sample_surface(vertices, faces, n, seed=seed)[0], dtype=np.float64)
    rng = np.random.default_rng(seed)
    if len(vertices) > n:
        return vertices[rng.choice(len(vertices), n, replace=False)]
    return vertices


def make_target(
    vertices,
    faces=None,
    rest_vertices=None,
    rest_faces=None,
    n_points: int = 2048,
    correspondences: bool | None = None,
    partial: bool = False,
    normalize: bool = False,
    seed: int = 0,
) -> Target:
    """Build a validated :class:`Target`.

    Parameters
    ----------
    vertices : (n, 3) target vertices or point-cloud points, metres.
    faces : (m, 3) int or None (a bare point cloud).
    rest_vertices, rest_faces : the rest mesh, used to detect shared topology and for ``normalize``.
    correspondences : use per-vertex correspondences; None = automatic (same vertex count and faces).
    partial : the target is a partial observation (one-sided Chamfer).
    normalize : map the target's bounding box (centre, longest side) onto the rest mesh's, for targets given
        at another scale/position; the fit is reported back in the target's frame.

    Raises
    ------
    KinemeshError
        empty, wrongly shaped or non-finite targets, or faces indexing missing vertices.
    """
    v = _check_array(vertices, "vertices")
    f = None
    if faces is not None:
        f = np.asarray(faces)
        if f.size == 0:
            f = None
        else:
            f = f.reshape(-1, 3).astype(np.int64)
            if f.min() < 0 or f.max() >= len(v):
                raise KinemeshError(f"IK target faces: index {int(f.max())} out of range for {len(v)} vertices")
    rv = None if rest_vertices is None else _check_array(rest_vertices, "rest vertices")
    same = (
        rv is not None
        and len(rv) == len(v)
        and (rest_faces is None or f is None or np.array_equal(np.asarray(rest_faces).reshape(-1, 3), f))
    )
    if correspondences is None:
        correspondences = bool(same and f is not None and not partial)
    if correspondences and (rv is None or len(rv) != len(v)):
        raise KinemeshError(
            f"IK target: correspondences need the same vertex count as the rest mesh "
            f"({len(v)} vs {None if rv is None else len(rv)})"
        )
    scale, trans = 1.0, np.zeros(3)
    if normalize:
        if rv is None:
            raise KinemeshError("IK target: normalize needs the rest vertices")
        c_t, s_t = normalization(v)
        c_r, s_r = normalization(rv)
        # x_rest = (x_target - c_t) * s_t / s_r + c_r  <=>  x_target = x_rest * scale + translation
        scale = s_r / s_t
        trans = c_t - c_r * scale
    v_rest = (v - trans) / scale
    pts = sample_target_points(v_rest, f, n_points, seed)
    return Target(
        points=torch.as_tensor(pts, dtype=torch.float32),
        vertices=torch.as_tensor(v_rest, dtype=torch.float32) if correspondences else None,
        partial=partial,
        scale=float(scale),
        translation=trans,
    )
