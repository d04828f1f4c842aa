"""Binding a mesh to the kinematic model: the one entry point shared by simulate, IK, the viewer, eval and bench.

``bind(vertices, faces)`` loads the checkpoint (the shipped default one when none is given; a missing or
unreadable checkpoint is an ``InputFileError``, never a silent untrained model), resolves the object kind once
(``kinemesh.geometry.kind.resolve_kind``), binds the model to the mesh in the calibrated prior of that kind
(``kinemesh.model.calibration``) and reduces its latent space to an active subspace (NeuROK Sec. 4.3).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from kinemesh.errors import ConfigError
from kinemesh.geometry.kind import resolve_kind
from kinemesh.model.api import KinematicModel, NeuralInstanceDecoder, load_model
from kinemesh.reduce.active_subspace import ReducedDecoder, Subspace, fit, fit_probes

BASES = ("auto", "probes", "prior")
AUTO_BASIS = {"articulated": "probes", "cloth": "probes", "elastic": "prior"}
"""The basis "auto" picks per kind. Measured (kinemesh eval dynamics against MuJoCo, demo): articulated doors
0.0212 -> 0.0121 Chamfer with probes and the demo door opens 75 deg instead of 4; a cloth hangs only with probes
(demo free-edge drop 0.009 -> 1.0) at some cost against MuJoCo's towel (0.148 -> 0.213); an elastic beam is
better in the prior basis (0.0237 vs 0.0606) and the toy squashes in both."""


@dataclass
class ReductionConfig:
    """How the per-instance active subspace is built (NeuROK Sec. 4.3); defaults are the dynamics' binding."""

    enabled: bool = True
    """False keeps the raw latent z (the "w/o model reduction" ablation of inverse kinematics)."""
    k_q: int | None = 8
    """Fixed number of reduced coordinates; None picks it from ``explained``."""
    explained: float = 0.99
    """Fraction of the trace of C kept when ``k_q`` is None."""
    max_k: int | None = None
    """Upper bound on the automatically chosen k_q."""
    min_k: int = 1
    """Lower bound on the automatically chosen k_q (kept below the number of probes and the latent dimension)."""
    method: str = "jacobian"
    """"jacobian" (E[J^T J], default) or "gradient" (the paper's scalar G = ||delta||)."""
    n_samples: int = 32
    """Prior samples of the Monte Carlo estimate."""
    n_probes: int = 1
    """Random probes per sample (jacobian method); each is a backward pass through the network. 1 (was 4): bind
    about 0.1 s faster on the bench beam, validation beams 0.0257 -> 0.0226 and towels 0.1367 -> 0.1351
    (bench/RESULTS_dynamics.md, within the estimator's seed-to-seed spread)."""
    basis: str = "auto"
    """"probes": directions of the posterior means of motion probes (``fit_probes``; elastic and cloth probes
    come from the geometry, an articulated object's from its joints, given to ``bind``); "prior": the active
    subspace of prior samples (Sec. 4.3; also what an articulated object without probes gets); "auto": probes
    for articulated objects and cloth, the prior for elastic bodies (``AUTO_BASIS``, measured in
    docs/results/dynamics.md)."""
    prior_share: float = 0.5
    """With the probe basis of an elastic or cloth object, this share of the k_q coordinates are the prior's
    active-subspace directions orthogonal to the probes (``fit_probes``' ``prior_dims``): the probes name the
    large motions (squash, hang), the prior adds the local ones. Articulated objects use probes only."""
    calibrated_prior: bool = True
    """Take the subspace, prior samples and barrier in the kind's calibrated prior N(mu_cond, L L^T) (the
    policy); False uses the uncalibrated N(mu_cond, I), which inverse kinematics sets
    (``kinemesh.ik.pipeline.IK_REDUCTION``, measured in docs/results/ik_calibrated.md)."""


@dataclass
class Binding:
    """A mesh bound to the model: ``decoder`` is what IK and the dynamics drive."""

    decoder: ReducedDecoder | NeuralInstanceDecoder
    """q (..., k) -> points / vertices (a ReducedDecoder), or the instance itself when reduction is off."""
    instance: NeuralInstanceDecoder
    """z (..., D) -> points / vertices of the full latent space."""
    subspace: Subspace | None
    """The active subspace, None when reduction is off."""
    kind: str
    """The resolved object kind (articulated / elastic / cloth), also when the prior is uncalibrated."""
    model: KinematicModel


def bind(vertices: np.ndarray, faces: np.ndarray, model: KinematicModel | str | os.PathLike | None = None,
         kind: str = "auto", part_ids: np.ndarray | None = None, reduction: ReductionConfig | None = None,
         n_points: int = 1024, seed: int = 0, device: str = "cpu", dtype=None, probes: np.ndarray | None = None,
         progress: bool = False) -> Binding:
    """Bind ``model`` (a loaded KinematicModel, a checkpoint folder, or None = the shipped default checkpoint)
    to a rest mesh and reduce it.

    Parameters
    ----------
    vertices, faces : (n, 3) metres, (m, 3) int; the rest mesh (or its segmented parts, see ``part_ids``).
    kind : articulated | elastic | cloth | auto (guessed from the mesh and ``part_ids``); picks the prior.
    part_ids : (n,) int part of each vertex (vertices follow samples of their own part), or None.
    reduction : the active subspace (default ``ReductionConfig()``, k_q = 8).
    n_points, seed : surface samples carrying the deformation and their seed.
    device, dtype : where the model runs; ``dtype`` (e.g. torch.float64) casts the model in place.
    probes : (n, N, 3) poses of the mesh for ``reduction.basis == "probes"``; None = made from the geometry for
        elastic and cloth objects (``kinemesh.geometry.probes``); an articulated object without probes (callers
        make them from its joints: ``kinemesh.articulation.probes``) falls back to the prior basis.
    progress : progress bar while encoding the probes.

    Raises
    ------
    InputFileError for a missing or unreadable checkpoint; ConfigError for a bad kind, n_points < 16 or k_q
    outside [1, latent dim].
    """
    red = reduction or ReductionConfig()
    if n_points < 16:
        raise ConfigError(f"points must be >= 16, got {n_points}")
    if not isinstance(model, KinematicModel):
        model = load_model(model, device=device)
    if dtype is not None:
        model.to(dtype=dtype)
    if red.basis not in BASES:
        raise ConfigError(f"reduction basis {red.basis!r}: expected one of {BASES}")
    kind = resolve_kind(kind, vertices, faces, part_ids)
    basis = AUTO_BASIS[kind] if red.basis == "auto" else red.basis
    inst = model.instance(vertices, faces, n_points=n_points, seed=seed, part_ids=part_ids,
                          kind=kind if red.calibrated_prior else None, rigid_parts=kind == "articulated")
    if not red.enabled:
        return Binding(inst, inst, None, kind, model)
    if basis == "probes" and probes is None and kind in ("elastic", "cloth"):
        from kinemesh.geometry.probes import cloth_probes, elastic_probes

        probes = (elastic_probes if kind == "elastic" else cloth_probes)(np.asarray(vertices, np.float64))
    if basis == "probes" and probes is not None:
        k_q = red.k_q if red.k_q is not None else red.max_k
        extra = int(round(red.prior_share * k_q)) if k_q and kind in ("elastic", "cloth") else 0
        sub = fit_probes(inst, probes, k_q=red.k_q, explained=red.explained, max_k=red.max_k, progress=progress,
                         prior_dims=extra, n_samples=red.n_samples, n_probes=red.n_probes, seed=seed,
                         min_k=red.min_k)
    else:
        sub = fit(inst, k_q=red.k_q, explained=red.explained, max_k=red.max_k, n_samples=red.n_samples,
                  method=red.method, n_probes=red.n_probes, seed=seed, min_k=red.min_k)
    return Binding(ReducedDecoder(inst, sub), inst, sub, kind, model)
