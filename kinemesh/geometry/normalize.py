"""The one bounding-box normalization of the package (metrics, the model's input, IK, the articulation
predictor, the renderer's framing).

The rest shape is translated so that its axis-aligned bounding box is centred at the origin and scaled so that
its longest bounding-box side is 1. The same ``(center, scale)`` is then applied to every frame of a sequence
so that motion is measured in units of the object's size. The renderer sizes its scene by the box diagonal
instead (``size="diagonal"``).
"""

from __future__ import annotations

import numpy as np

from kinemesh.errors import ConfigError


def normalization(vertices, size: str = "side") -> tuple[np.ndarray, float]:
    """Centre and scale that map ``vertices`` to a bounding box centred at 0 with longest side 1.

    Parameters
    ----------
    vertices : (n, 3) float array (numpy or torch), metres.
    size : ``"side"`` (the longest bounding-box side becomes 1; everything but the renderer) or ``"diagonal"``
        (the box diagonal becomes 1; ``viz.render.SceneRenderer``'s floor, light and arrow sizes).

    Returns
    -------
    center : (3,) float64, metres, the bounding-box centre.
    scale : float, 1 / (longest bounding-box side, or diagonal) in 1/metres; ``(v - center) * scale`` is
        normalized.

    Raises
    ------
    ConfigError
        If ``vertices`` is empty, not (n, 3), non-finite, or has a zero-size bounding box, or ``size`` is unknown.
    """
    v = _as_numpy(vertices)
    if v.ndim != 2 or v.shape[1] != 3 or v.shape[0] == 0:
        raise ConfigError(f"normalization: vertices must be a non-empty (n, 3) array, got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ConfigError("normalization: vertices contain NaN or inf")
    lo, hi = v.min(axis=0), v.max(axis=0)
    if size not in ("side", "diagonal"):
        raise ConfigError(f"normalization: size must be 'side' or 'diagonal', got {size!r}")
    extent = float((hi - lo).max() if size == "side" else np.linalg.norm(hi - lo))
    if extent <= 0.0:
        raise ConfigError("normalization: all vertices coincide (zero-size bounding box)")
    return (0.5 * (lo + hi)).astype(np.float64), 1.0 / extent


def apply(v, center, scale):
    """Return ``(v - center) * scale`` for numpy arrays or torch tensors of shape (..., 3).

    The result keeps the type, dtype and device of ``v``.
    """
    try:
        import torch

        if isinstance(v, torch.Tensor):
            c = torch.as_tensor(np.asarray(center), dtype=v.dtype, device=v.device)
            return (v - c) * float(scale)
    except ImportError:  # pragma: no cover - torch is a core dependency
        pass
    v = np.asarray(v)
    out_dtype = v.dtype if np.issubdtype(v.dtype, np.floating) else np.float64
    return ((v - np.asarray(center)) * float(scale)).astype(out_dtype, copy=False)


def invert(v, center, scale):
    """Undo :func:`apply`: ``v / scale + center`` (numpy or torch, shape (..., 3))."""
    try:
        import torch

        if isinstance(v, torch.Tensor):
            c = torch.as_tensor(np.asarray(center), dtype=v.dtype, device=v.device)
            return v / float(scale) + c
    except ImportError:  # pragma: no cover
        pass
    v = np.asarray(v)
    out_dtype = v.dtype if np.issubdtype(v.dtype, np.floating) else np.float64
    return (v / float(scale) + np.asarray(center)).astype(out_dtype, copy=False)


def _as_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)
