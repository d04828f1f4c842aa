"""From files to a fit: target and rest loading and the reduction settings shared by ``kinemesh ik``,
``kinemesh eval ik`` and the IK benchmark (the model is bound by :func:`kinemesh.reduce.bind`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from kinemesh.errors import InputFileError, KinemeshError
from kinemesh.reduce.bind import ReductionConfig


IK_REDUCTION = ReductionConfig(k_q=None, max_k=32, n_samples=64, n_probes=2, calibrated_prior=False, basis="prior")
"""The reduction of inverse kinematics: k_q from 99 % of the active-subspace trace (at most 32), and the
uncalibrated prior N(mu_cond, I) instead of the binding's default calibrated one: on the 24 held-out test
targets the calibrated prior is the same with known correspondences (90.2 % vs 90.1 % motion explained) and
mixed on scans (54.8 % vs 48.8 % motion explained, Chamfer-L1 0.0054 vs 0.0048; docs/results/ik_calibrated.md),
so the measured IK numbers keep the uncalibrated one."""


@dataclass
class URDFBinding:
    """How inverse kinematics binds an object whose links and joints are known (a URDF / PartNet-Mobility input):
    the defaults were chosen on the real validation objects (docs/results/ik_real.md)."""

    basis: str = "probes"
    """"probes": reduced coordinates from motion probes along the object's joints (``predicted-probes``: along
    joints predicted from the static shape), "prior": the active subspace of prior samples (``IK_REDUCTION``)."""
    min_k: int = 8
    """At least this many reduced coordinates in the probe basis (capped at the number of probes), more where 99 %
    of the probes' squared norm needs them (up to the reduction's ``max_k``, 32): 8, as ``kinemesh simulate``
    binds an articulated object. 99 % alone gave 2-3 coordinates for one or two doors: the network traces a door's
    turn on a curve in its latent space, and the third direction of a two-door cabinet (kitchenmodels__46481) held
    too little of it to reach the pose (reduced fit 0.031 vertex error against the rest pose's 0.052). A floor, not
    a fixed 8, so that an object whose probes need more keeps them (an unlike folding fan with 6 joints: 9). Real
    validation scans 88.6 -> 89.7 % motion explained; on the unlike categories the scans got worse (75.3 -> 59.0 %:
    a toy piano's search lands farther off with 8 coordinates than with 4; docs/results/ik_real.md, first
    section). 1 keeps the 99 % rule alone; a fixed ``k_q`` of the reduction overrides both."""
    fixed_base: bool = True
    """The base part (the largest) stays at rest (:func:`base_fixed`); with ``joints`` the articulation's root."""
    anchored: bool = False
    """Parts move relative to their decoded rest pose, applied to the true rest mesh (:class:`RestAnchoredDecoder`)."""
    joints: bool = True
    """Parts move only along the object's joints (:class:`kinemesh.dynamics.joints.JointDecoder`, calibrated, as
    ``kinemesh simulate`` moves them): the decoded motion of every part relative to its parent projected on its
    joint, the rest mesh posed by forward kinematics. Replaces ``anchored`` (the rest mesh is posed exactly).
    Real validation objects: 92.0 % -> 96.4 % motion explained and 0.18x -> 0.01x the rest pose's Chamfer with
    known correspondences, 72.8 % -> 94.0 % and 0.10x -> 0.02x as a scan (docs/results/ik_real.md). A joint the
    network does not move through the reduced coordinates (a knob, a caster, one of a row of buttons) gets a
    coordinate of its own, as ``kinemesh simulate`` gives it (:func:`joint_bound`; since session 31: real
    validation 98.3 -> 99.9 % with correspondences, 89.5 -> 89.8 % as a scan)."""


def bind_ik(vertices, faces, model, reduction: ReductionConfig, part_ids=None, part_names=None, articulation=None,
            how: URDFBinding | None = None, seed: int = 0, device: str = "cpu"):
    """The model bound for inverse kinematics: :func:`kinemesh.reduce.bind` with ``reduction``; for an object
    whose articulation (an ArticulatedObject: a URDF / PartNet-Mobility input) and parts (``part_ids`` (N,)
    indexing ``part_names``) are known, it is bound as articulated with those parts and reduced and held as
    ``how`` says (default :class:`URDFBinding`). Returns (decoder, subspace or None, Binding). Raises like bind;
    ConfigError when ``how.joints`` and a part is not a part of the articulation."""
    from dataclasses import replace

    from kinemesh.reduce import bind
    from kinemesh.reduce.active_subspace import AppendedSubspace, ReducedDecoder

    if articulation is None or part_ids is None:
        b = bind(vertices, faces, model, part_ids=part_ids, reduction=reduction, n_points=2048, seed=seed,
                 device=device)
        return b.decoder, b.subspace, b
    how = how or URDFBinding()
    probes = None
    if how.basis != "prior" and reduction.enabled:
        from kinemesh.articulation.probes import motion_probes

        probes = motion_probes(vertices, faces, part_ids, part_names,
                               articulation if how.basis == "probes" else None, seed=seed)[0]
        reduction = replace(reduction, basis="probes", min_k=max(reduction.min_k, how.min_k))
    b = bind(vertices, faces, model, kind="articulated", part_ids=part_ids, reduction=reduction, n_points=2048,
             seed=seed, device=device, probes=probes)
    dec, sub = b.instance, b.subspace
    if how.joints:
        dec = joint_bound(dec, sub, articulation, part_names, how.fixed_base)
        if sub is None:
            return dec, sub, b
        m = len(getattr(dec, "direct", ()))  # joints of their own pass through the reduction
        return ReducedDecoder(dec, AppendedSubspace(sub, m) if m else sub), sub, b
    if how.anchored:  # the rest pose: q = 0 (reduced), the prior mean (z)
        dec = RestAnchoredDecoder(dec, dec.mu_cond if sub is None else sub.z(torch.zeros(sub.k)))
    if how.fixed_base:
        dec = base_fixed(dec)
    return (dec if sub is None else ReducedDecoder(dec, sub)), sub, b


def base_fixed(decoder):
    """``decoder`` (z or q -> shapes) seen from its base part, the part with the largest bounding box, as
    `kinemesh simulate` holds an articulated object's base (:class:`kinemesh.dynamics.floating.BaseFrameDecoder`):
    a fit can then move only what moves relative to the base, never the whole object to trade errors. The
    decoder itself when it has fewer than two parts (``point_groups``)."""
    from kinemesh.dynamics.floating import held_base

    groups = getattr(decoder, "point_groups", None)
    if groups is None or len(np.unique(groups)) < 2:
        return decoder
    return held_base(decoder)[0]


def joint_bound(instance, subspace, articulation, part_names, hold_base: bool = True):
    """``instance`` (z -> shapes) whose parts move only along the joints of ``articulation``: a
    :class:`kinemesh.dynamics.joints.JointDecoder` in z (so that the solver's full-latent polish stays on the
    joints too; the reduced fit is ``ReducedDecoder(joint_bound(...), subspace)``, with
    :class:`kinemesh.reduce.active_subspace.AppendedSubspace` when it has joints of their own), with the joint
    calibration and the joints of their own chosen through the reduced coordinates of ``subspace``, as ``kinemesh
    simulate`` chooses them (joints the network does not move, or only with their neighbours, get a coordinate of
    their own appended to z); uncalibrated and without joints of their own when ``subspace`` is None.
    ``hold_base``: the articulation's root stays at rest. The instance itself when no joint can move (parts too
    small to follow). Raises ConfigError as JointDecoder."""
    from kinemesh.dynamics.joints import JointDecoder
    from kinemesh.reduce.active_subspace import ReducedDecoder

    jq = None if subspace is None else JointDecoder(ReducedDecoder(instance, subspace), articulation, part_names,
                                                    hold_base=hold_base, direct=True)
    jd = JointDecoder(instance, articulation, part_names, hold_base=hold_base, calibrate=False,
                      direct=False if jq is None else jq.direct)
    if not jd.active:  # (a screw cap hung on a link without geometry: the network moves it freely)
        return base_fixed(instance) if hold_base else instance
    if jq is not None:  # the calibration of the same network seen through q, carried over to z
        jd.calibration, jd.offset = jq.calibration, jq.offset
    return jd


class RestAnchoredDecoder:
    """A part-rigid decoder whose parts move relative to their decoded rest pose: each part of the shape at z is
    the true rest part moved by the rigid motion that takes the part decoded at ``z0`` (the latent of the rest
    pose) to the part decoded at z. The shape at z0 is then exactly the rest mesh, not the model's reconstruction
    of it, whose error (0.4-1.4 % of the object's size on real validation objects) is as large as the turn of
    a knob or a cap. The motion of a part comes exactly from three of its points (``base_anchor_points``), as
    :class:`kinemesh.dynamics.floating.BaseFrameDecoder` holds a base. Same coordinates and prior as the
    wrapped decoder (z (..., D) -> points (..., P, 3) / vertices (..., N, 3), metres)."""

    def __init__(self, decoder, z0: torch.Tensor):
        from kinemesh.dynamics.floating import frame3, base_anchor_points

        self.decoder = decoder
        self.mu_cond, self.latent_dim = decoder.mu_cond, decoder.latent_dim
        self.rest_points, self.rest_vertices = decoder.rest_points, decoder.rest_vertices
        self.point_groups, self.vertex_groups = decoder.point_groups, decoder.vertex_groups
        with torch.no_grad():
            x0 = (decoder.points(z0[None])[0], decoder.vertices(z0[None])[0])
        self._sides = []
        for rest, groups, dec0 in ((self.rest_points, self.point_groups, x0[0]),
                                   (self.rest_vertices, self.vertex_groups, x0[1])):
            groups = np.asarray(groups).reshape(-1)
            ids, member = np.unique(groups, return_inverse=True)
            r = rest.detach().double().cpu().numpy()
            anchors, keep = [], np.zeros(len(ids), bool)  # parts with a proper triangle of anchors; others
            for k, g in enumerate(ids):                         # (under 3 samples) stay as decoded
                if (groups == g).sum() >= 3:
                    idx = base_anchor_points(r, groups == g)
                    e = r[idx[1:]] - r[idx[0]]
                    keep[k] = np.linalg.norm(np.cross(e[0], e[1])) > 1e-9 * max(np.ptp(r, 0).max(), 1e-9) ** 2
                    anchors += [idx] if keep[k] else []
            slot = np.cumsum(keep) - 1  # group -> row of anchors
            sel = np.flatnonzero(keep[member.reshape(-1)])  # points / vertices that follow their part's anchors
            anchors = torch.as_tensor(np.asarray(anchors, np.int64).reshape(-1, 3))
            a0 = dec0[anchors]  # (G', 3, 3) decoded rest anchors
            part = torch.as_tensor(slot[member.reshape(-1)[sel]])
            self._sides.append((anchors, torch.as_tensor(sel), part, frame3(a0), a0[:, 0], rest.detach()[sel]))

    @staticmethod
    def _move(x: torch.Tensor, side) -> torch.Tensor:
        from kinemesh.dynamics.floating import frame3

        anchors, sel, part, f0, o0, rest = side
        a = x[..., anchors, :]  # (..., G', 3, 3)
        R = frame3(a) @ f0.to(x).transpose(-1, -2)  # decoded rest -> decoded now, per part
        d = rest.to(x) - o0.to(x)[part]  # rest relative to the part's decoded rest anchor
        out = x.clone()
        out[..., sel, :] = (R[..., part, :, :] @ d[..., None])[..., 0] + a[..., part, 0, :]
        return out

    def points(self, z: torch.Tensor) -> torch.Tensor:
        return self._move(self.decoder.points(z), self._sides[0])

    def vertices(self, z: torch.Tensor) -> torch.Tensor:
        return self._move(self.decoder.vertices(z), self._sides[1])

    def __getattr__(self, name):  # faces, posterior encoder, ... of the wrapped decoder
        if name == "decoder":
            raise AttributeError(name)
        return getattr(self.decoder, name)


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
