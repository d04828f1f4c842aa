"""Parts along their joints (kinemesh.dynamics.joints): the twist angle, the projection of decoded part motions
onto the joints of an articulation, the per-joint calibration, and how build_system picks it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinemesh.data.articulated import ArticulatedObject, Joint, Part, axis_angle_matrix
from tests.toys import ToyCabinetDecoder, moving_model, toy_cabinet


def _toy_articulation() -> ArticulatedObject:
    """The joints ToyCabinetDecoder moves its parts along: the lid about y through (-0.4, 0, 0.6) (opening for
    angle > 0 turns +x towards +z, i.e. about -y), the drawer along +x."""
    v, f, ids = toy_cabinet(1)
    parts = [Part(n, v[ids == i], np.zeros((0, 3), np.int64)) for i, n in enumerate(("body", "lid", "drawer"))]
    return ArticulatedObject(parts, [
        Joint("hinge", "revolute", "body", "lid", np.array([0.0, -1.0, 0.0]), np.array([-0.4, 0.0, 0.6]), (0.0, 1.0)),
        Joint("slide", "prismatic", "body", "drawer", np.array([1.0, 0.0, 0.0]), np.zeros(3), (0.0, 0.2))],
        name="toy")


class DriftingDecoder:
    """ToyCabinetDecoder whose lid also slides off its hinge by 0.1 m per radian and whose drawer also rises by
    0.2 m per metre of slide (what the network does on real objects); float64."""

    def __init__(self, reach: float = 1.0, cross: float = 0.0):
        self.toy = ToyCabinetDecoder(latent_dim=4, n_points=256, subdivisions=1)
        for name in ("A", "mu_cond", "rest_points", "rest_vertices"):
            setattr(self.toy, name, getattr(self.toy, name).double())
        self.reach, self.cross = reach, cross
        for name in ("rest_points", "rest_vertices", "mu_cond"):
            setattr(self, name, getattr(self.toy, name).double())
        self.point_groups, self.vertex_part, self.latent_dim = self.toy.point_groups, self.toy.vertex_part, 4

    def _drift(self, x, part, z):
        jv = self.toy.joint_values(z)
        d = torch.zeros(*jv.shape[:-1], 3, 3, dtype=x.dtype)  # per part: body, lid, drawer
        d[..., 1, 0] = 0.1 * jv[..., 0]
        d[..., 2, 2] = 0.2 * jv[..., 1]
        return x + d[..., part, :]

    def _reached(self, z):  # the latent whose pose is ``reach`` times the joint values of z, the drawer also
        jv = self.toy.joint_values(z) * self.reach  # sliding ``cross`` m per radian of the lid
        jv = torch.stack([jv[..., 0], jv[..., 1] + self.cross * jv[..., 0]], -1)
        s = torch.stack([torch.atanh(jv[..., 0] / self.toy.max_angle), torch.atanh(jv[..., 1] / self.toy.max_slide)], -1)
        return self.toy.mu_cond.to(z) + s @ self.toy.A.to(z).T

    def points(self, z):
        z = self._reached(z)
        return self._drift(self.toy.points(z), self.toy.point_part, z)

    def vertices(self, z):
        z = self._reached(z)
        return self._drift(self.toy.vertices(z), self.toy.vertex_part, z)


def test_twist_angle_is_the_rotation_about_the_axis():
    from kinemesh.dynamics.joints import twist_angle

    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.normal(size=3)
        a /= np.linalg.norm(a)
        t = rng.uniform(-3.0, 3.0)
        R = torch.as_tensor(axis_angle_matrix(a, t))
        assert float(twist_angle(R, torch.as_tensor(a))) == pytest.approx(t, abs=1e-9)
        # a small rotation about a perpendicular axis changes the twist only to second order
        p = np.cross(a, rng.normal(size=3))
        p /= np.linalg.norm(p)
        Rp = torch.as_tensor(axis_angle_matrix(p, 0.05) @ axis_angle_matrix(a, t))
        assert abs(float(twist_angle(Rp, torch.as_tensor(a))) - t) < 0.01


def test_joint_decoder_keeps_parts_on_their_joints():
    """A decoder whose lid drifts off its hinge and whose drawer rises: JointDecoder poses the parts exactly along
    the joints at the decoded joint values (the toy's own pose), holds the body, and drops the drift."""
    from kinemesh.dynamics.joints import JointDecoder

    dec = DriftingDecoder()
    names = ["body", "lid", "drawer"]
    jd = JointDecoder(dec, _toy_articulation(), names, calibrate=False)
    z = torch.stack([dec.toy.latent_for(a, s) for a, s in ((0.3, 0.05), (1.0, 0.2), (0.0, 0.1))]).double()
    with torch.no_grad():
        exact_p, exact_v = dec.toy.points(z), dec.toy.vertices(z)
        drift_p = dec.points(z)
        jp, jv = jd.points(z), jd.vertices(z)
        values = jd.joint_values(z)
    assert (drift_p - exact_p).abs().max() > 0.02  # the wrapped decoder does drift
    assert torch.allclose(jp, exact_p, atol=1e-9) and torch.allclose(jv, exact_v, atol=1e-9)
    assert torch.allclose(values, dec.toy.joint_values(z), atol=1e-7)
    assert jd.points(z[0]).shape == exact_p[0].shape  # unbatched q
    with pytest.raises(Exception, match="not parts of the articulation"):
        JointDecoder(dec, _toy_articulation(), ["body", "lid", "shelf"], calibrate=False)


class _Subspace:
    """Reduced coordinates = the latent itself (identity subspace) for the calibration test."""

    def __init__(self, dim):
        self.basis = torch.eye(dim, dtype=torch.float64)

    def q(self, z):
        return z


class _Reduced(DriftingDecoder):
    """A DriftingDecoder that reaches only ``reach`` of a pose and whose 'encoder' returns the latent of the
    pose's true joint values (the toy's coordinates), as a ReducedDecoder of an encoding instance."""

    def __init__(self, reach, cross=0.0):
        super().__init__(reach, cross)
        self.subspace = _Subspace(4)
        self.decoder = self
        self.art = _toy_articulation()

    def encode_points(self, pts):
        pts = torch.as_tensor(pts)
        rest = self.rest_points
        lid, drawer = self.toy.point_part == 1, self.toy.point_part == 2
        slide = float((pts[drawer] - rest[drawer])[:, 0].mean())
        d = pts[lid] - rest[lid]
        i = int(torch.argmax((rest[lid][:, 0] + 0.4).abs()))  # the lid point farthest from the hinge
        r = rest[lid][i] - torch.tensor([-0.4, 0.0, 0.6], dtype=torch.float64)
        angle = float(torch.atan2(d[i, 2] + r[2], d[i, 0] + r[0]) - torch.atan2(r[2], r[0]))
        return self.toy.latent_for(angle, slide).double(), None


def test_joint_decoder_calibration_restores_the_range():
    """A decoder that reaches only half of every pose: the fitted calibration is 2 I (gains 2, no cross-talk)
    and the calibrated decoder poses the encoded probe at the asked joint values."""
    from kinemesh.dynamics.joints import JointDecoder

    dec = _Reduced(reach=0.5)
    jd = JointDecoder(dec, dec.art, ["body", "lid", "drawer"])
    assert jd.calibration.numpy() == pytest.approx(2.0 * np.eye(2), abs=0.04)
    assert jd.offset.abs().max() < 1e-9
    z = dec.toy.latent_for(0.8, 0.15).double()
    assert jd.joint_values(z).numpy() == pytest.approx([0.8, 0.15], rel=0.02)
    raw = JointDecoder(dec, dec.art, ["body", "lid", "drawer"], calibrate=False)
    assert raw.joint_values(z).numpy() == pytest.approx([0.4, 0.075], rel=0.02)
    # cross-talk: the network also slides the drawer when it turns the lid; the calibration removes it
    dec = _Reduced(reach=0.5, cross=0.1)
    jd = JointDecoder(dec, dec.art, ["body", "lid", "drawer"])
    z = dec.toy.latent_for(0.8, 0.0).double()
    assert JointDecoder(dec, dec.art, ["body", "lid", "drawer"], calibrate=False).joint_values(z)[1] > 0.03
    assert jd.joint_values(z).numpy() == pytest.approx([0.8, 0.0], abs=0.01)


def test_build_system_moves_parts_along_the_articulation():
    """build_system wraps an articulated decoder in a JointDecoder when an articulation is given (info["joints"]),
    in the base-frame decoder with SimulationSpec(joints=False) or without one; a drag simulation runs."""
    from kinemesh.dynamics.floating import BaseFrameDecoder
    from kinemesh.dynamics.joints import JointDecoder
    from kinemesh.dynamics.scene import SimulationSpec, build_system, simulate_mesh
    from kinemesh.reduce import ReductionConfig, bind

    v, f, pid = toy_cabinet(1)
    b = bind(v, f, moving_model(), kind="articulated", part_ids=pid, n_points=128,
             reduction=ReductionConfig(k_q=3, basis="prior"), dtype=torch.float64)
    art, names = _toy_articulation(), ["body", "lid", "drawer"]
    system, info = build_system(b.decoder, v, f, SimulationSpec(kind="articulated"), articulation=art,
                                part_names=names)
    assert isinstance(system.decoder, JointDecoder) and info["joints"] and info["fixed_base"]
    off, info_off = build_system(b.decoder, v, f, SimulationSpec(kind="articulated", joints=False),
                                 articulation=art, part_names=names)
    assert isinstance(off.decoder, BaseFrameDecoder) and not info_off["joints"]
    q = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        x = system.decoder.points(q)
    rest = b.decoder.rest_points.double()
    body = torch.as_tensor(np.asarray(b.decoder.point_groups) == 0)
    assert (x[:, body] - rest[body]).abs().max() < 1e-9  # the base is held
    hinge = torch.tensor([-0.4, 0.0, 0.6], dtype=torch.float64)
    lid = torch.as_tensor(np.asarray(b.decoder.point_groups) == 1)
    # lid points keep their distance to the hinge line (y axis through hinge): they turn about it
    r0 = (rest[lid] - hinge)[:, [0, 2]].norm(dim=-1)
    assert ((x[:, lid] - hinge)[..., [0, 2]].norm(dim=-1) - r0).abs().max() < 1e-9
    top = int(np.flatnonzero(pid == 1)[np.argmax(v[pid == 1, 0])])
    spec = SimulationSpec(kind="articulated", frames=4, drag_vertex=top, drag_to=(0.3, 0.0, 0.9), hold=True,
                          lead_in=2)
    res = simulate_mesh(b.decoder, v, f, spec, part_ids=pid, progress=False, articulation=art, part_names=names)
    frames = res.sequence.frames
    assert np.isfinite(frames).all() and res.info["joints"]
    assert np.abs(frames[:, pid == 0] - v[pid == 0]).max() < 1e-4  # the body stays where it is


def test_joint_stops_push_a_part_back_into_its_range():
    """JointStops: no force inside the joint range; past the closed limit (lid below 0 rad, drawer behind its
    rest) a force on the stop point pointing back into the range; ``relax`` holds a state already past it."""
    from kinemesh.dynamics.joints import JointDecoder, JointStops

    dec = DriftingDecoder()
    jd = JointDecoder(dec, _toy_articulation(), ["body", "lid", "drawer"], calibrate=False)
    stops = JointStops(jd, depth=0.01)
    assert len(stops) == 2 and stops.parts == ["lid", "drawer"]  # both joints close at 0 (their lower limits)
    m = torch.full((len(dec.rest_points),), 0.01, dtype=torch.float64)

    def force(angle, slide):
        x = jd.points(dec.toy.latent_for(angle, slide).double())
        return stops.contact_forces(x, None, m)[stops.i], x

    f, _ = force(0.3, 0.1)
    assert f.abs().max() == 0.0
    f, x = force(-0.1, -0.02)
    lid_dir = (force(-0.09, -0.02)[1] - x)[stops.i[0]]  # the lid's stop point as the angle grows back
    assert float(f[0] @ lid_dir) > 0 and float(f[1][0]) > 0 and abs(float(f[1][2])) < 1e-12
    stops.relax(x)
    assert stops.contact_forces(x, None, m).abs().max() == 0.0
    assert float(force(-0.15, -0.03)[0][0] @ lid_dir) > 0
