"""From files to a fit: target and rest loading and the reduction settings shared by ``kinemesh ik``,
``kinemesh eval ik`` and the IK benchmark (the model is bound by :func:`kinemesh.reduce.bind`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kinemesh.errors import InputFileError, KinemeshError
from kinemesh.reduce.bind import ReductionConfig


IK_REDUCTION = ReductionConfig(k_q=None, max_k=32, n_samples=64, n_probes=2, calibrated_prior=False, basis="prior")
"""The reduction of inverse kinematics: k_q from 99 % of the active-subspace trace (at most 32), and the
uncalibrated prior N(mu_cond, I) instead of the binding's default calibrated one: on the 24 held-out test
targets the calibrated prior is the same with known correspondences (90.2 % vs 90.1 % motion explained) and
mixed on scans (54.8 % vs 48.8 % motion explained, Chamfer-L1 0.0054 vs 0.0048; docs/results/ik_calibrated.md),
so the measured IK numbers keep the uncalibrated one."""


def load_target(path: str | os.PathLike):
    """A target file -> (vertices or points (n, 3) float64, faces (m, 3) int64 or None).

    Meshes: anything :func:`kinemesh.data.meshes.load_mesh` reads (vertex order kept). Point clouds:
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
                from kinemesh.data.meshes import load_mesh

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
    from kinemesh.data.meshes import load_mesh

    m = load_mesh(path, max_vertices=None, process=False)
    return np.asarray(m.vertices, dtype=np.float64), np.asarray(m.faces, dtype=np.int64)


def check_target(target_vertices, name: str = "target") -> None:
    """Raise KinemeshError for empty or non-finite targets (in-memory arrays)."""
    v = np.asarray(target_vertices)
    if v.size == 0:
        raise KinemeshError(f"{name}: empty (no points)")
    if not np.isfinite(v).all():
        raise KinemeshError(f"{name}: contains NaN or infinite values")
