"""From files and a trained model to a fit: the path shared by ``kinemesh ik`` and ``kinemesh eval ik``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinemesh.errors import InputFileError, KinemeshError


@dataclass
class ReductionConfig:
    """How the per-instance active subspace is built (NeuROK Sec. 4.3)."""

    enabled: bool = True
    """False fits the raw latent z (the "w/o model reduction" ablation)."""
    k_q: int | None = None
    """Fixed number of reduced coordinates; None picks it from ``explained``."""
    explained: float = 0.99
    """Fraction of the trace of C kept when ``k_q`` is None."""
    max_k: int = 32
    """Upper bound on the automatically chosen k_q."""
    method: str = "jacobian"
    """"jacobian" (E[J^T J], default) or "gradient" (the paper's scalar G = ||delta||)."""
    n_samples: int = 64
    """Prior samples of the Monte Carlo estimate."""
    n_probes: int = 2
    """Random probes per sample (jacobian method)."""
    calibrated_prior: bool = False
    """Take the subspace, prior starts and barrier in the calibrated prior (``kinemesh.model.calibration``)
    instead of N(mu_cond, I). Off by default for inverse kinematics: on the 24 held-out test targets it is
    the same with known correspondences (90.2 % vs 90.1 % motion explained) and mixed on scans (54.8 % vs
    48.8 % motion explained, Chamfer-L1 0.0054 vs 0.0048; docs/results/ik_calibrated.md); the dynamics use it."""


def neurok_decoder(model, vertices: np.ndarray, faces: np.ndarray, reduction: ReductionConfig | None = None,
                   n_points: int = 2048, seed: int = 0):
    """Bind ``model`` to a rest mesh and reduce it: returns (decoder, subspace or None).

    The decoder is a :class:`~kinemesh.reduce.ReducedDecoder` (latent q) unless reduction is disabled
    (latent z).
    """
    from kinemesh.reduce import ReducedDecoder, fit

    red = reduction or ReductionConfig()
    inst = model.instance(vertices, faces, n_points=n_points, seed=seed,
                          kind="auto" if red.calibrated_prior else None)
    if not red.enabled:
        return inst, None
    sub = fit(inst, k_q=red.k_q, explained=red.explained, max_k=red.max_k, n_samples=red.n_samples,
              method=red.method, n_probes=red.n_probes, seed=seed)
    return ReducedDecoder(inst, sub), sub


def load_target(path: str | os.PathLike):
    """A target file -> (vertices or points (n, 3) float64, faces (m, 3) int64 or None).

    Meshes: anything :func:`kinemesh.data.loaders.load_mesh` reads (vertex order kept). Point clouds:
    ``.npy`` (n, 3) (no pickles), ``.xyz`` / ``.txt`` / ``.csv`` (3 columns), ``.ply`` without faces.

    Raises
    ------
    InputFileError: missing, unreadable, empty or non-finite targets.
    """
    p = Path(path)
    if not p.is_file():
        raise InputFileError(p, "target file not found")
    ext = p.suffix.lower()
    faces = None
    try:
        if ext == ".npy":
            from kinemesh.data.arrays import load_npy

            v = load_npy(p)
        elif ext in (".xyz", ".txt", ".csv"):
            if p.stat().st_size == 0:
                raise InputFileError(p, "empty target (no points)")
            v = np.loadtxt(p, delimiter="," if ext == ".csv" else None, ndmin=2)[:, :3]
        else:
            import trimesh

            if p.stat().st_size == 0:
                raise InputFileError(p, "empty target file")
            geom = trimesh.load(str(p), process=False)
            if isinstance(geom, trimesh.PointCloud):
                v = np.asarray(geom.vertices)
            else:
                from kinemesh.data.loaders import load_mesh

                m = load_mesh(p, max_vertices=None, process=False)
                v, faces = np.asarray(m.vertices), np.asarray(m.faces)
    except InputFileError:
        raise
    except (ValueError, OSError, IndexError) as exc:
        raise InputFileError(p, f"cannot read target ({exc})") from None
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 2 or v.shape[-1] != 3:
        raise InputFileError(p, f"expected (n, 3) points, got shape {v.shape}")
    if len(v) == 0:
        raise InputFileError(p, "empty target (no points)")
    bad = ~np.isfinite(v).all(1)
    if bad.any():
        raise InputFileError(p, f"{int(bad.sum())} of {len(v)} target points are NaN or infinite")
    return v, faces


def load_rest(path: str | os.PathLike):
    """The rest mesh (vertices (n, 3), faces (m, 3)), vertex order kept."""
    from kinemesh.data.loaders import load_mesh

    m = load_mesh(path, max_vertices=None, process=False)
    return np.asarray(m.vertices, dtype=np.float64), np.asarray(m.faces, dtype=np.int64)


def check_target(target_vertices, name: str = "target") -> None:
    """Raise KinemeshError for empty or non-finite targets (in-memory arrays)."""
    v = np.asarray(target_vertices)
    if v.size == 0:
        raise KinemeshError(f"{name}: empty (no points)")
    if not np.isfinite(v).all():
        raise KinemeshError(f"{name}: contains NaN or infinite values")
