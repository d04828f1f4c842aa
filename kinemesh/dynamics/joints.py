"""Articulated decoders that move every part along its joint (issue 16: real objects, part by part).

The kinematic model turns each part of an articulated object rigidly (component-rigid skinning), but about the
pivot and axis it learnt, not necessarily the object's hinge: on real objects a dragged door turned 60 deg
left its frame by several centimetres, and samples of the reduced coordinates detached parts (docs/results/
real.md). When the articulation is known (a URDF) or predicted from the static shape (GEOPARD-style,
``kinemesh.articulation.infer``), :class:`JointDecoder` keeps the network's motion *along* each joint and
drops the rest: the decoded rigid motion of every part relative to its parent is projected on its joint's one
degree of freedom (the angle about a revolute axis, the slide along a prismatic axis), and the parts are posed by
forward kinematics of the joint tree (URDF convention: ``ArticulatedObject.part_transforms``). The latent state
stays the generalized coordinate; the map q -> joint values -> points is smooth, so the Lagrangian machinery
(``kinemesh.dynamics.eom``) differentiates it like any decoder, and parts cannot detach by construction.

Calibration. On real objects the network under-reaches: the posterior of a box flap opened 44 deg decodes to a
flap turned 9-15 deg (even a latent optimised to the pose reaches 15 deg), so the reduced coordinates could not
open it further. At construction the decoder poses its rest points along every joint at half and all of its
range both ways (``kinemesh.geometry.probes.joint_span``), encodes them, and fits one gain per joint, the least-
squares slope of the asked joint value on the decoded one (offset: the decoded value of the encoded rest
pose); in fact one J x J matrix for all J joints, the least-squares map from decoded to asked joint values over
these single-joint poses, so it also removes cross-talk (the network turning a neighbour door with the dragged
one), its singular values clipped to ``MAX_GAIN``. The network still decides where a state moves the parts; the
calibration only restores their range. ``calibrate=False`` keeps the decoded values. A joint the network does not
move at all cannot be given range this way: a cart wheel spinning about its own axis (a shape-preserving motion)
decodes to 0.001-0.005 rad for a 1.57 rad pose, so its calibration fits noise (docs/results/real.md).

Joints of their own (``direct=True``, what ``kinemesh simulate`` uses). A joint the network does not move - one
whose own calibration poses decode to less than 1 / ``MAX_GAIN`` of the asked value (a wheel, a knob, a flap the
network leaves shut) or whose part has fewer than ``MIN_POINTS`` sample points - gets a generalized coordinate
of its own appended to the network's (q = [q_network, d]), as ``kinemesh.dynamics.floating.FloatingDecoder``
appends rigid-body coordinates: its value is d, its part posed by the same forward kinematics, so its mass,
forces and stops come from the Lagrangian like any other coordinate; the network keeps every joint it does move.
Chosen on the real validation split (drag test, 8 objects: parts reaching 80 % of the asked motion 43 -> 76 %,
and 90 % with every part bound with at least ``kinemesh.model.api.PART_POINTS`` sample points; docs/results/real.md).
So does a joint the network moves only together with its neighbours (a row of equal piano keys, a camera's
buttons): its own poses decode to every neighbour moving a little, the calibration cannot separate them, and
the calibrated network reaches less than ``MIN_REACH`` of its poses; joints are moved to coordinates of their own
one at a time, the least reached first, until the calibrated network reaches the rest.

Prior samples (``kinemesh sample``) use the same decoder on the instance itself (its latent z; the calibration
then encodes the poses in the full latent space), with joints of their own chosen as ``simulate`` chooses them
and drawn uniformly over half their range (``prior_states``), and the joint values clipped to the joints' limits
(``vertices_within_limits``).
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from kinemesh.dynamics.floating import base_anchor_points, frame3
from kinemesh.dynamics.system import NormalPenalty
from kinemesh.errors import ConfigError

log = logging.getLogger(__name__)

CALIBRATION_TURN = 0.5 * np.pi
"""Largest turn (rad) of a calibration pose: a continuous joint's +-pi poses are the same shape."""
MAX_GAIN = 10.0
"""Largest singular value of the joint calibration (module docstring)."""
MIN_POINTS = 8
"""A part with fewer sample points is not read from the network (its joint stays at 0, or with ``direct`` has a
coordinate of its own): the rigid motion of three or four points of a small wheel is too noisy to follow (a
cart's wheels, 3-4 of 512 points, diverged). An instance bound with part ids gives every part
``kinemesh.model.api.PART_POINTS`` (16) points, so this applies only when there are more parts than points / 16."""
MIN_REACH = 0.8
"""With ``direct``: an active joint whose own calibration poses the calibrated network reaches to less than this
share of the asked value (the least-squares reach over those poses) gets a coordinate of its own as well: the
network moves it only together with its neighbours (module docstring). 0.8, the drag test's share of the asked
motion; chosen on the real validation split (0.5 and 0.8 both 91.1 -> 92.0 % of parts reaching it, 0.8 with less
motion of the rest, 0.07 -> 0.04 % of the size; docs/results/real.md)."""
OWN_PRIOR = 0.5
"""Prior samples (``prior_states``) draw a joint with a coordinate of its own uniformly over this share of its range.
Chosen on the real validation split (``kinemesh eval real``, 38 objects, predicted joints): the whole range
detached a camera's knobs that were predicted to slide (parts attached 0.994 -> 0.990), half of it kept them
(0.993); both move the same share of joints by >= 10 % of their range in 8 samples (0.70 -> 0.74)."""
HANDLE_POINTS = 12
"""Sample points of its part that carry a dragged / poked vertex (``JointDecoder.handle_weights``)."""


def _fit_calibration(R: torch.Tensor, A: torch.Tensor) -> torch.Tensor | None:
    """Ridge least squares C = argmin |A - R C^T|^2 (decoded -> asked joint values: the gain of every joint and
    the cross-talk between joints, a door that turns its neighbour), singular values clipped to ``MAX_GAIN``;
    None when not finite."""
    RtR = R.T @ R
    lam = 1e-3 * float(RtR.diagonal().mean()) + 1e-12
    C = A.T @ R @ torch.linalg.inv(RtR + lam * torch.eye(R.shape[1], dtype=R.dtype))
    if not bool(torch.isfinite(C).all()):
        return None
    U, S, Vh = torch.linalg.svd(C)
    return U @ torch.diag(S.clamp(max=MAX_GAIN)) @ Vh


def _rigid_from_anchors(rest: torch.Tensor, now: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(R (..., 3, 3), t (..., 3)) of the rigid motion taking anchor triples ``rest`` (3, 3) to ``now``
    (..., 3, 3): x_now = R x_rest + t (exact for a rigid motion)."""
    R = frame3(now) @ frame3(rest.to(now)).transpose(-1, -2)
    t = now[..., 0, :] - (R @ rest[0].to(now)[:, None])[..., 0]
    return R, t


def _axis_rotation(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotations (..., 3, 3) by ``angle`` (...,) rad about the unit ``axis`` (3,) (Rodrigues)."""
    a = axis.to(angle)
    K = torch.zeros(3, 3, dtype=angle.dtype)
    K[0, 1], K[0, 2], K[1, 0], K[1, 2], K[2, 0], K[2, 1] = -a[2], a[1], a[2], -a[0], -a[1], a[0]
    s, c = torch.sin(angle)[..., None, None], torch.cos(angle)[..., None, None]
    return torch.eye(3, dtype=angle.dtype) + s * K + (1.0 - c) * (K @ K)


def twist_angle(R: torch.Tensor, axis: torch.Tensor) -> torch.Tensor:
    """The angle (...,) rad of the rotation about the unit ``axis`` (3,) closest to R (..., 3, 3) in the
    Frobenius norm: for R = cos t I + sin t [a]x + (1 - cos t) a a^T, tr R - a^T R a = 2 cos t and
    a . vee(R - R^T) / 2 = sin t, so t = atan2 of the two (exact for a rotation about the axis)."""
    a = axis.to(R)
    c = R.diagonal(dim1=-2, dim2=-1).sum(-1) - torch.einsum("i,...ij,j->...", a, R, a)
    s = a[0] * (R[..., 2, 1] - R[..., 1, 2]) + a[1] * (R[..., 0, 2] - R[..., 2, 0]) + a[2] * (R[..., 1, 0] - R[..., 0, 1])
    return torch.atan2(s, c)


class JointDecoder:
    """An articulated decoder whose parts move only along the joints of ``articulation`` (module docstring).

    Parameters
    ----------
    decoder : an InstanceDecoder (or a ReducedDecoder of one) with ``point_groups`` / ``vertex_groups`` (or
        ``vertex_part``): the part index of every sample point and vertex, indexing ``part_names``; each part
        decoded rigidly.
    articulation : ArticulatedObject whose part names include ``part_names`` (joint axes and origins in the rest
        frame of the mesh, metres); parts of it without geometry (merged fixed links) pass their motion on.
    part_names : name of every part index.
    hold_base : the root part stands still (a cabinet on the floor); False = it follows the network's motion.
    calibrate : fit the joint calibration (module docstring; needs an instance that encodes, or a ReducedDecoder
        of one).
    direct : joints the network does not move get coordinates of their own (module docstring); ``direct`` names
        them and ``latent_dim`` / ``mu_cond`` grow by their number (``k_network`` = the wrapped decoder's). A list
        of joint names gives those joints coordinates of their own instead of choosing them (inverse kinematics
        poses the instance in z with the joints chosen through its reduced coordinates, as ``simulate`` chose).

    Same coordinates, prior and rest points as ``decoder``. ``joint_values(q)`` (..., J) gives the joint values
    (rad / m, order of ``joints``); ``active`` names the joints that can move (parts with ``MIN_POINTS``);
    ``vertices_within_limits(q)`` poses the vertices with the joint values clipped to the joints' limits (prior
    samples, ``kinemesh sample``). Raises ConfigError when a part of the mesh is not a part of the articulation.
    """

    def __init__(self, decoder, articulation, part_names, hold_base: bool = True, calibrate: bool = True,
                 direct: bool | list[str] = False):
        self.decoder = decoder
        self.mu_cond = decoder.mu_cond
        self.latent_dim = self.k_network = int(decoder.latent_dim)
        self.direct: list[str] = []  # joints with a coordinate of their own (``direct``)
        self._direct = direct is True or (not isinstance(direct, bool) and len(direct) > 0)
        self._chosen = None if isinstance(direct, bool) else set(direct)  # joints named by the caller
        self.rest_points = decoder.rest_points
        self.rest_vertices = decoder.rest_vertices
        self.hold_base = bool(hold_base)
        self.articulation = articulation
        names = self.part_names = list(part_names)
        known = {p.name for p in articulation.parts}
        pg = np.asarray(decoder.point_groups).reshape(-1)
        vg = getattr(decoder, "vertex_groups", None)
        vg = np.asarray(decoder.vertex_part if vg is None else vg).reshape(-1)
        missing = sorted({names[int(i)] for i in np.unique(pg)} - known)
        if missing:
            raise ConfigError(f"{articulation.name}: parts {missing} of the mesh are not parts of the articulation")
        rp = decoder.rest_points.detach().double().cpu().numpy()
        self._points_of = {names[int(g)]: torch.as_tensor(np.flatnonzero(pg == g)) for g in np.unique(pg)}
        self._vertices_of = {names[int(g)]: torch.as_tensor(np.flatnonzero(vg == g)) for g in np.unique(vg)}
        # three sample points spanning each part: its decoded rigid motion (the network keeps parts rigid)
        self._anchors = {}
        for name, idx in self._points_of.items():
            if len(idx) >= MIN_POINTS:
                self._anchors[name] = torch.as_tensor(base_anchor_points(rp, pg == names.index(name)))
        self.root = articulation.root
        self.joints = list(articulation._topological_joints())  # parents before children
        self._centroid = {n: torch.as_tensor(rp[i.numpy()].mean(0)) for n, i in self._points_of.items()}
        for j in self.joints:
            if j.movable and j.child not in self._anchors:
                log.info("%s: joint %s: its part has fewer than %d sample points; it stays at 0", articulation.name,
                         j.name, MIN_POINTS)
        self.active = [j.name for j in self.joints if j.movable and j.child in self._anchors
                       and j.parent in self._anchors]  # the joints that can move
        n = len(self.joints)
        self.calibration = torch.zeros(n, n, dtype=torch.float64)  # joint values = C (decoded - offset)
        for i, j in enumerate(self.joints):
            if j.name in self.active:
                self.calibration[i, i] = 1.0
        self.offset = torch.zeros(n, dtype=torch.float64)
        lim = [j.rest_limits() if j.limits is not None and j.type in ("revolute", "prismatic") else (-np.inf, np.inf)
               for j in self.joints]
        self.limits = torch.as_tensor(lim, dtype=torch.float64).reshape(n, 2)  # (J, 2) lower, upper, around rest
        self._weak: list[str] = []  # active joints the network hardly moves (calibration, ``direct``)
        if calibrate:
            self._calibrate()
        if self._direct:
            idx = [i for i, j in enumerate(self.joints) if j.movable and j.child in self._points_of
                   and (j.name not in self.active or j.name in self._weak if self._chosen is None
                        else j.name in self._chosen)]
            self.direct = [self.joints[i].name for i in idx]
            self._direct_index = torch.as_tensor(idx, dtype=torch.int64)
            self.calibration[self._direct_index, :] = 0.0
            self.calibration[:, self._direct_index] = 0.0
            m = len(idx)
            self.latent_dim = self.k_network + m
            self.mu_cond = torch.cat([self.mu_cond, torch.zeros(m, dtype=self.mu_cond.dtype,
                                                                device=self.mu_cond.device)])
            if m:
                log.info("%s: joints %s move by coordinates of their own (the network does not move them, or only "
                         "with their neighbours)",
                         articulation.name, self.direct)

    def _calibrate(self) -> None:
        """Fit ``calibration`` and ``offset`` (module docstring); a no-op for decoders that cannot encode."""
        from kinemesh.geometry.probes import joint_span

        inner, sub = getattr(self.decoder, "decoder", None), getattr(self.decoder, "subspace", None)
        if sub is not None and hasattr(inner, "encode_points"):  # a ReducedDecoder: z -> its coordinates q
            to_q = lambda z: sub.q(z.to(sub.basis.dtype)).to(self.mu_cond.dtype)  # noqa: E731
        elif hasattr(self.decoder, "encode_points"):  # an instance: its latent z itself (kinemesh sample)
            inner, to_q = self.decoder, lambda z: z.to(self.mu_cond.dtype)  # noqa: E731
        else:
            return
        rp = self.decoder.rest_points.detach().double().cpu().numpy()
        act = [i for i, j in enumerate(self.joints) if j.name in self.active]
        poses, asked = [rp], []
        for i in act:
            j = self.joints[i]
            lo, hi = joint_span(j, rp[self._points_of[j.child].numpy()])
            if j.type != "prismatic":  # a turn of +-pi is one pose: it cannot say which way the part turned
                lo, hi = max(lo, -CALIBRATION_TURN), min(hi, CALIBRATION_TURN)
            for value in (0.5 * lo, lo, 0.5 * hi, hi):
                if abs(value) > 1e-9:
                    T = self.articulation.part_transforms({j.name: value})
                    pose = rp.copy()
                    for name, idx in self._points_of.items():
                        pose[idx.numpy()] = rp[idx.numpy()] @ T[name][:3, :3].T + T[name][:3, 3]
                    poses.append(pose)
                    asked.append((i, value))
        if not asked:
            return
        with torch.no_grad():
            z = torch.stack([inner.encode_points(p)[0] for p in poses])
            x = self.decoder.points(to_q(z))
            raw = self._raw(x.reshape(len(poses), -1, 3))[1].double()
        offset = raw[0].clone()
        R = (raw[1:] - offset)[:, act]  # decoded values of the probes (n, a)
        A = torch.zeros_like(R)  # asked values: the probed joint at its value, the others at rest
        for r, (i, v) in enumerate(asked):
            A[r, act.index(i)] = v
        if self._chosen is not None:  # the caller named the joints of their own: calibrate the others
            keep = [c for c in range(len(act)) if self.joints[act[c]].name not in self._chosen]
            if not keep:
                return
            act, R, A = [act[c] for c in keep], R[:, keep], A[:, keep]
        elif self._direct:
            # joints whose own poses decode to less than 1 / MAX_GAIN of the asked value (a wheel spinning about
            # its axis keeps its shape) get coordinates of their own instead of a calibration of noise
            gain = (A * R).sum(0) / (A * A).sum(0).clamp_min(1e-12)
            weak = [c for c in range(len(act)) if abs(float(gain[c])) < 1.0 / MAX_GAIN]
            self._weak = [self.joints[act[c]].name for c in weak]
            keep = [c for c in range(len(act)) if c not in weak]
            if not keep:
                return
            act, R, A = [act[c] for c in keep], R[:, keep], A[:, keep]
        while True:
            C = _fit_calibration(R, A)
            if C is None:
                log.info("%s: joint calibration failed (non-finite); decoded values kept", self.articulation.name)
                return
            if not self._direct or self._chosen is not None or MIN_REACH <= 0:
                break
            # joints the calibrated network still cannot reach (their probes moved with their neighbours', so
            # the least squares spent them on cross-talk: 7 equal piano keys) get coordinates of their own too
            reach = (A * (R @ C.T)).sum(0) / (A * A).sum(0).clamp_min(1e-12)
            worst = int(torch.argmin(reach))  # one at a time: the others may separate without it
            if float(reach[worst]) >= MIN_REACH:
                break
            self._weak.append(self.joints[act[worst]].name)
            keep = [c for c in range(len(act)) if c != worst]
            if not keep:
                return
            act, R, A = [act[c] for c in keep], R[:, keep], A[:, keep]
        log.debug("%s: joint calibration %s (asked %s, decoded %s)", self.articulation.name, C.tolist(), A.tolist(),
                  R.tolist())
        ia = torch.as_tensor(act)
        self.calibration[ia[:, None], ia[None, :]] = C
        self.offset = offset

    # ------------------------------------------------------------------ kinematics
    def _decoded_motions(self, x: torch.Tensor) -> dict:
        """Rigid motion (R, t) of every part with anchors from decoded points x (B, P, 3)."""
        rp = self.decoder.rest_points.detach().to(x)
        return {n: _rigid_from_anchors(rp[a], x[:, a, :]) for n, a in self._anchors.items()}

    def _raw(self, x: torch.Tensor) -> tuple[dict, torch.Tensor]:
        """(decoded rigid motions of the parts, decoded joint values (B, J)) from decoded points x (B, P, 3): the
        twist of the child's rotation relative to its parent about a revolute axis, its centroid's slide along
        a prismatic one (0 for fixed joints and joints that cannot move)."""
        B, dt = x.shape[0], x.dtype
        dec = self._decoded_motions(x)
        raw = torch.zeros(B, len(self.joints), dtype=dt)
        for i, j in enumerate(self.joints):
            if j.name not in self.active:
                continue
            (Rdp, tdp), (Rdc, tdc) = dec[j.parent], dec[j.child]
            Rrel = Rdp.transpose(-1, -2) @ Rdc  # child relative to parent, rest frame
            axis = torch.as_tensor(j.axis, dtype=dt)
            if j.type in ("revolute", "continuous"):
                raw[:, i] = twist_angle(Rrel, axis)
            elif j.type == "prismatic":
                c = self._centroid[j.child].to(dt)
                moved = (Rdp.transpose(-1, -2) @ ((Rdc @ c) + tdc - tdp)[..., None])[..., 0]
                raw[:, i] = (moved - c) @ axis
        return dec, raw

    def _world(self, x: torch.Tensor, clip: bool = False, d: torch.Tensor | None = None) -> tuple[dict, torch.Tensor]:
        """(world (R, t) of every articulation part, joint values (B, J)) from decoded points x (B, P, 3): the
        calibrated joint values (``clip``: within the joints' limits), the ``direct`` joints' values d (B, m),
        posed by forward kinematics of the joint tree (parents first)."""
        B, dt = x.shape[0], x.dtype
        dec, raw = self._raw(x)
        values = (raw - self.offset.to(dt)) @ self.calibration.to(dt).T
        if self.direct:
            values = values.index_copy(1, self._direct_index, d.to(dt))
        if clip:
            values = torch.maximum(torch.minimum(values, self.limits[:, 1].to(dt)), self.limits[:, 0].to(dt))
        eye = torch.eye(3, dtype=dt).expand(B, 3, 3)
        zero = torch.zeros(B, 3, dtype=dt)
        world = {self.root: dec[self.root] if (not self.hold_base and self.root in dec) else (eye, zero)}
        for i, j in enumerate(self.joints):
            Rp, tp = world[j.parent]
            val = values[:, i]
            if j.type in ("revolute", "continuous"):
                Rj = _axis_rotation(torch.as_tensor(j.axis, dtype=dt), val)
                o = torch.as_tensor(j.origin, dtype=dt)
                tj = o - (Rj @ o[:, None])[..., 0]
            elif j.type == "prismatic":
                Rj, tj = eye, val[:, None] * torch.as_tensor(j.axis, dtype=dt)
            else:
                Rj, tj = eye, zero
            world[j.child] = (Rp @ Rj, (Rp @ tj[..., None])[..., 0] + tp)  # parent's motion after the joint's
        return world, values

    def _decoded(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the wrapped decoder's points (B, P, 3), the direct joints' values (B, m)) of q (..., k) flattened to
        B states (without gradients when they are off)."""
        if q.shape[-1] != self.latent_dim:
            raise ValueError(f"JointDecoder: q has {q.shape[-1]} coordinates, expected {self.latent_dim} "
                             f"({self.k_network} of the network, {len(self.direct)} direct joints)")
        qf = q.reshape(-1, q.shape[-1])
        decode = self.decoder.points if torch.is_grad_enabled() else getattr(self.decoder, "points_nograd",
                                                                             self.decoder.points)
        return decode(qf[:, :self.k_network]).reshape(qf.shape[0], -1, 3), qf[:, self.k_network:]

    def _pose(self, q: torch.Tensor, rest: torch.Tensor, groups: dict, clip: bool = False) -> torch.Tensor:
        x, d = self._decoded(q)
        world, _ = self._world(x, clip, d)
        rest = rest.detach().to(x)
        out = rest.expand(x.shape[0], *rest.shape).clone()
        for name, idx in groups.items():
            R, t = world[name]
            out[:, idx] = rest[idx] @ R.transpose(-1, -2) + t[:, None, :]
        return out.reshape(*q.shape[:-1], *rest.shape)

    def points(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., P, 3) metres: every part's rest points posed along its joints."""
        return self._pose(q, self.decoder.rest_points, self._points_of)

    def points_nograd(self, q: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.points(q)

    def vertices(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., N, 3) metres: every part's rest vertices posed along its joints."""
        return self._pose(q, self.decoder.rest_vertices, self._vertices_of)

    def vertices_within_limits(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., N, 3) metres: as ``vertices`` with every joint value clipped to its joint's limits
        (the prior samples of ``kinemesh sample``; not differentiable at the limits, so not for the dynamics)."""
        return self._pose(q, self.decoder.rest_vertices, self._vertices_of, clip=True)

    def spans(self) -> torch.Tensor:
        """(J, 2) the range (lo, hi) (rad / m) a calibration probe moves each joint over
        (``kinemesh.geometry.probes.joint_span``: its limits, else +-pi for a continuous joint, +-90 deg for a
        revolute one, +-half its part's extent for a prismatic one); (0, 0) for fixed joints and joints whose part
        has no sample points."""
        from kinemesh.geometry.probes import joint_span

        rp = self.decoder.rest_points.detach().double().cpu().numpy()
        return torch.as_tensor([joint_span(j, rp[self._points_of[j.child].numpy()])
                                if j.movable and j.child in self._points_of else (0.0, 0.0) for j in self.joints],
                               dtype=torch.float64).reshape(len(self.joints), 2)

    def prior_states(self, z: torch.Tensor, seed: int = 0, std: float = 1.0) -> torch.Tensor:
        """States q (n, ``latent_dim``) of prior samples z (n, ``k_network``) of the wrapped decoder: the joints
        with coordinates of their own (``direct``) have no learned prior, so their values are drawn uniformly over
        ``OWN_PRIOR`` x ``min(std, 1)`` x the span a calibration probe moves them over (``spans``: the limits,
        else +-pi for a continuous joint); without them, z itself. Before, prior samples left
        these joints at rest (a cart's wheels, an oven's knobs never turned in ``kinemesh sample``)."""
        if z.shape[-1] != self.k_network:
            raise ValueError(f"JointDecoder.prior_states: z has {z.shape[-1]} coordinates, expected {self.k_network}")
        if not self.direct:
            return z
        span = self.spans()[self._direct_index]  # (m, 2)
        g = torch.Generator().manual_seed(int(seed))
        u = torch.rand(z.shape[0], len(self.direct), generator=g, dtype=torch.float64)
        d = min(float(std), 1.0) * OWN_PRIOR * (span[:, 0] + u * (span[:, 1] - span[:, 0]))
        return torch.cat([z, d.to(z)], dim=-1)

    def prior_samples(self, z: torch.Tensor, seed: int = 0, std: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """(states q (n, ``latent_dim``), vertices (n, N, 3) m) of prior samples z (n, ``k_network``): every part
        along its joint within the joint limits (``prior_states``, then ``vertices_within_limits``), the samples
        ``kinemesh sample`` writes and ``kinemesh eval real`` scores."""
        q = self.prior_states(z, seed=seed, std=std)
        return q, self.vertices_within_limits(q)

    def joint_values(self, q: torch.Tensor, clip: bool = False) -> torch.Tensor:
        """q (..., k) -> (..., J) joint values (rad / m) in the order of ``joints`` (fixed joints: 0; ``clip``:
        within the joints' limits)."""
        with torch.no_grad():
            x, d = self._decoded(q)
            return self._world(x, clip, d)[1].reshape(*q.shape[:-1], -1)

    def carried_groups(self, groups) -> list[int]:
        """The part indices (of ``part_names``) that move with the parts ``groups``: those parts and every part below
        them in the joint tree (a door's handle, a flap's own flap), through parts without geometry."""
        from kinemesh.geometry.validity import subtree

        parents = {j.child: j.parent for j in self.joints}
        seen = {n for g in set(np.asarray(groups).reshape(-1).tolist()) for n in subtree(parents, self.part_names[g])}
        return sorted(i for i, n in enumerate(self.part_names) if n in seen)

    def handle_weights(self, vertex_ids, k: int = HANDLE_POINTS) -> tuple[np.ndarray, np.ndarray]:
        """(idx (h, k), w (h, k)): sample points and weights that carry mesh vertices ``vertex_ids`` (h,) exactly
        (:class:`kinemesh.dynamics.system.Handles`). Every part moves rigidly, so its displacement is an affine
        function of the rest position, reproduced exactly by weights with sum 1 and sum w_j p_j = v over the
        vertex's part's ``k`` nearest sample points p_j (least norm; parts with fewer points are padded with
        zero weights). Inverse-distance weights of nearby points instead average their displacements, which falls
        short for a vertex outside its neighbours' hull (oven knobs dragged 60 deg by their rim reached 3-39 % of
        the way). Vertices of no part keep the nearest points' inverse-distance weights."""
        from kinemesh.geometry.transfer import knn_weights

        ids = np.asarray(vertex_ids, dtype=np.int64).reshape(-1)
        rp = self.decoder.rest_points.detach().double().cpu().numpy()
        rv = self.decoder.rest_vertices.detach().double().cpu().numpy()[ids]
        idx, w = np.zeros((len(ids), k), np.int64), np.zeros((len(ids), k))
        owner = np.full(len(self.decoder.rest_vertices), -1)  # part (index into names) of every vertex
        names = [n for n in self._vertices_of if n in self._points_of]
        for i, n in enumerate(names):
            owner[self._vertices_of[n].numpy()] = i
        for h, vid in enumerate(ids):
            part = names[owner[vid]] if owner[vid] >= 0 else None
            if part is None:
                i, wt = knn_weights(rp, rv[h:h + 1], k=k)
                idx[h], w[h] = i[0], wt[0]
                continue
            pts = self._points_of[part].numpy()
            near = pts[np.argsort(np.linalg.norm(rp[pts] - rv[h], axis=1))[:k]]
            rel = rp[near] - rv[h]
            rel = rel / max(float(np.linalg.norm(rel, axis=1).max()), 1e-12)  # O(1) rows: rcond drops only
            A = np.vstack([rel.T, np.ones(len(near))])  # directions the points do not span (a flat panel's normal)
            sol = np.linalg.lstsq(A, np.array([0.0, 0.0, 0.0, 1.0]), rcond=1e-3)[0]  # sum w (p - v) = 0, sum w = 1
            idx[h, :len(near)], w[h, :len(near)] = near, sol
            idx[h, len(near):] = near[0]
        return idx, w

    def __getattr__(self, name):  # faces, part ids, knn transfer, ... of the wrapped decoder
        if name == "decoder":
            raise AttributeError(name)
        return getattr(self.decoder, name)


CLOSED_LIMIT = (np.radians(10.0), 0.01)
"""A revolute (rad) / prismatic (m) limit within this of the rest value 0 is a 'closed' stop (a door in its frame,
a drawer at its back, a lid on its seat): ``JointStops`` keeps those; the limits far from rest (how far a part
opens) are guesses for predicted joints and stay out, unless the limits are the object's own (``far``: a
URDF's, ``SimulationSpec.limit_stops``)."""


class JointStops(NormalPenalty):
    """Joint stops: a joint of a ``JointDecoder`` cannot pass the limit at which its part closes (with
    ``far``: nor any other of its limits, where the limits are the object's own, a URDF's).

    One stop point per stop: the child's sample point farthest from the joint axis (any child point for a
    prismatic joint), with the plane through its position at the limit whose normal is its direction of motion
    into the joint's range (a x r for a revolute joint, +-axis for a prismatic one). The signed distance
    d = (x_i - p) . n is >= 0 inside the range; beyond, the penalty law of ``NormalPenalty`` (the one of
    ``PartContacts``) with the child's mass (its sample points' mass). Only joints whose parent is the held root (their planes stand still).

    Attributes
    ----------
    i : (s,) int64 point indices; anchor : (s, 3) plane points (m); normals : (s, 3); parts : (s,) child names;
    offset : (s,) m of penetration allowed (0, or where a released state already was: ``relax``);
    weight_depth : the ``depth`` it was built with (``kinemesh.dynamics.scene.stiffen_stops`` lowers ``depth``
    for a part thrown at its stop, from this one).
    """

    def __init__(self, decoder: "JointDecoder", depth: float, damping_ratio: float = 0.7, far: bool = False):
        rp = decoder.rest_points.detach().double()
        ii, anchors, normals, parts = [], [], [], []
        for j in decoder.joints:
            if j.name not in decoder.active + decoder.direct or j.parent != decoder.root or not decoder.hold_base \
                    or j.limits is None or j.type not in ("revolute", "prismatic"):
                continue
            idx = decoder._points_of[j.child]
            a = torch.as_tensor(j.axis, dtype=torch.float64)
            o = torch.as_tensor(j.origin, dtype=torch.float64)
            near = CLOSED_LIMIT[0] if j.type == "revolute" else CLOSED_LIMIT[1]
            for v, side in ((j.limits[0], 1.0), (j.limits[1], -1.0)):
                if abs(v) > near and not far:
                    continue
                if j.type == "revolute":
                    r = rp[idx] - o
                    r = r - (r @ a)[:, None] * a
                    i = int(idx[int(torch.argmax(r.norm(dim=-1)))])
                    R = _axis_rotation(a, torch.tensor(float(v), dtype=torch.float64))
                    p = R @ (rp[i] - o) + o
                    n = torch.linalg.cross(a, p - o)
                    n = side * n / n.norm().clamp_min(1e-12)
                else:
                    i = int(idx[0])
                    p, n = rp[i] + float(v) * a, side * a
                ii.append(i)
                anchors.append(p)
                normals.append(n)
                parts.append(j.child)
        self.i = torch.as_tensor(ii, dtype=torch.int64)
        self.anchor = torch.stack(anchors) if anchors else torch.zeros(0, 3, dtype=torch.float64)
        self.normals = torch.stack(normals) if normals else torch.zeros(0, 3, dtype=torch.float64)
        self.parts = parts
        self._counts = torch.as_tensor([len(decoder._points_of[n]) for n in parts], dtype=torch.float64)
        self.offset = torch.zeros(len(ii), dtype=torch.float64)
        self.depth, self.damping_ratio = float(depth), float(damping_ratio)
        self.weight_depth = self.depth  # carries the weight (``scene.stiffen_stops`` may lower ``depth``)

    def __len__(self) -> int:
        return int(len(self.i))

    def _penetration(self, x: torch.Tensor) -> torch.Tensor:
        d = ((x[self.i] - self.anchor) * self.normals).sum(-1)
        return (-d - self.offset).clamp_min(0.0)

    def relax(self, x: torch.Tensor) -> None:
        """Start at points x (P, 3) (the released state): a stop already passed there is held where it is, not
        pushed back (no energy at release)."""
        self.offset = (-((x[self.i] - self.anchor) * self.normals).sum(-1)).clamp_min(0.0).detach().to(self.offset)

    def contact_forces(self, x: torch.Tensor, xd: torch.Tensor | None, point_mass: torch.Tensor) -> torch.Tensor:
        """(P, 3) forces on points at x (P, 3) with velocities xd (P, 3) (None = at rest)."""
        f = torch.zeros_like(x)
        pen = self._penetration(x)
        if not bool((pen > 0).any()):
            return f
        dd = torch.zeros_like(pen) if xd is None else (xd[self.i] * self.normals).sum(-1)
        fn = self.normal_forces(pen, dd, self._counts.to(x) * point_mass[self.i])  # the child's mass
        f.index_add_(0, self.i, fn[:, None] * self.normals)
        return f

    def gauss_newton(self, x: torch.Tensor, xd: torch.Tensor | None, J: torch.Tensor,
                     point_mass: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stiffness and damping (k, k) of the active stops for the implicit solve's preconditioner."""
        k = J.shape[0]
        on = self._penetration(x) > 0
        if not bool(on.any()):
            return torch.zeros(k, k, dtype=torch.float64), torch.zeros(k, k, dtype=torch.float64)
        Jg = (J[:, self.i[on]] * self.normals[on]).sum(-1)  # (k, s)
        return self.penalty_matrices(Jg, self._counts[on] * point_mass[self.i[on]])
