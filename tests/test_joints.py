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


class _KeysDecoder:
    """A body and three keys side by side, each pressed along -z (prismatic, 0-2 cm), and a network that can
    only press all three together by z[0] cm: a probe of one key decodes to every key pressed by a third of it
    (the cross-talk of a toy piano's equal keys). Its own ReducedDecoder (identity subspace) with an encoder."""

    names = ["body", "key0", "key1", "key2"]

    def __init__(self):
        from tests.toys import box, merge_meshes, subdivide

        meshes = [subdivide(*box((-0.2, -0.1, -0.1), (0.2, 0.1, 0.0)), 1)]
        meshes += [subdivide(*box((-0.15 + 0.1 * i, -0.05, 0.0), (-0.07 + 0.1 * i, 0.05, 0.03)), 1) for i in range(3)]
        v, self.faces = merge_meshes(*meshes)
        groups = np.concatenate([np.full(len(m[0]), i) for i, m in enumerate(meshes)])
        self.rest_points = self.rest_vertices = torch.as_tensor(v)
        self.point_groups = self.vertex_part = groups
        self.keys = torch.as_tensor(groups > 0)
        self.mu_cond, self.latent_dim = torch.zeros(1, dtype=torch.float64), 1
        self.subspace, self.decoder = _Subspace(1), self
        parts = [Part(n, v[groups == i], np.zeros((0, 3), np.int64)) for i, n in enumerate(self.names)]
        self.art = ArticulatedObject(parts, [
            Joint(f"press{i}", "prismatic", "body", f"key{i}", np.array([0.0, 0.0, -1.0]), np.zeros(3), (0.0, 0.02))
            for i in range(3)], name="keys")

    def points(self, z):
        z = torch.as_tensor(z, dtype=torch.float64)
        down = torch.zeros(*z.shape[:-1], len(self.rest_points), 3, dtype=torch.float64)
        down[..., self.keys, 2] = -0.01 * z[..., :1]
        return self.rest_points + down

    vertices = points

    def encode_points(self, pts):
        pressed = -(torch.as_tensor(pts) - self.rest_points)[self.keys, 2].mean() / 0.01
        return pressed.reshape(1), None


def test_joints_the_calibrated_network_cannot_reach_get_coordinates_of_their_own(monkeypatch):
    """Three keys the network only presses together: each key's own poses decode to a third of the asked press
    (above 1 / MAX_GAIN, so not weak by the raw gain), and no calibration can separate them. With ``direct`` every
    key gets a coordinate of its own (the least-squares reach of the calibrated network is below MIN_REACH), so
    one key can be pressed alone; the rule switched off leaves them on the network's coordinate."""
    from kinemesh.dynamics import joints
    from kinemesh.dynamics.joints import JointDecoder

    dec = _KeysDecoder()
    jd = JointDecoder(dec, dec.art, dec.names, direct=True)
    assert sorted(jd.direct) == ["press0", "press1", "press2"] and jd.latent_dim == 4
    q = torch.tensor([0.0, 0.0, 0.015, 0.0], dtype=torch.float64)  # the network's coordinate, then d per key
    assert jd.joint_values(q).numpy() == pytest.approx([0.0, 0.015, 0.0], abs=1e-9)
    with torch.no_grad():
        moved = (jd.vertices(q) - dec.rest_vertices).norm(dim=-1)
    groups = torch.as_tensor(dec.vertex_part)
    assert moved[groups == 2].min() == pytest.approx(0.015) and moved[groups != 2].max() < 1e-9
    monkeypatch.setattr(joints, "MIN_REACH", 0.0)
    assert JointDecoder(dec, dec.art, dec.names, direct=True).direct == []


def _bound_cabinet():
    """(vertices, faces, part ids, Binding) of the toy cabinet bound to ``moving_model`` as articulated (128
    points, 3 prior-basis coordinates, float64)."""
    from kinemesh.reduce import ReductionConfig, bind

    v, f, pid = toy_cabinet(1)
    return v, f, pid, bind(v, f, moving_model(), kind="articulated", part_ids=pid, n_points=128,
                           reduction=ReductionConfig(k_q=3, basis="prior"), dtype=torch.float64)


def test_build_system_moves_parts_along_the_articulation():
    """build_system wraps an articulated decoder in a JointDecoder when an articulation is given (info["joints"]),
    in the base-frame decoder with SimulationSpec(joints=False) or without one; a drag simulation runs."""
    from kinemesh.dynamics.floating import BaseFrameDecoder
    from kinemesh.dynamics.joints import JointDecoder
    from kinemesh.dynamics.scene import SimulationSpec, build_system, simulate_mesh

    v, f, pid, b = _bound_cabinet()
    art, names = _toy_articulation(), ["body", "lid", "drawer"]
    system, info = build_system(b.decoder, v, f, SimulationSpec(kind="articulated"), articulation=art,
                                part_names=names)
    assert isinstance(system.decoder, JointDecoder) and info["joints"] and info["fixed_base"]
    off, info_off = build_system(b.decoder, v, f, SimulationSpec(kind="articulated", joints=False),
                                 articulation=art, part_names=names)
    assert isinstance(off.decoder, BaseFrameDecoder) and not info_off["joints"]
    q = torch.randn(5, system.decoder.latent_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
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


def test_far_joint_stops_also_hold_the_limits_a_part_opens_to():
    """JointStops(far=True), a URDF's limits: the open limits stop the parts too (lid past 1 rad, drawer past
    0.2 m), pushing back into the range; without ``far`` nothing holds them there."""
    from kinemesh.dynamics.joints import JointDecoder, JointStops

    dec = DriftingDecoder()
    jd = JointDecoder(dec, _toy_articulation(), ["body", "lid", "drawer"], calibrate=False)
    closed, every = JointStops(jd, depth=0.01), JointStops(jd, depth=0.01, far=True)
    assert len(every) == 4 and every.parts == ["lid", "lid", "drawer", "drawer"]
    m = torch.full((len(dec.rest_points),), 0.01, dtype=torch.float64)
    x_in, x_out = (jd.points(dec.toy.latent_for(a, s).double()) for a, s in ((0.9, 0.15), (1.1, 0.22)))
    assert every.contact_forces(x_in, None, m).abs().max() == 0.0
    assert closed.contact_forces(x_out, None, m).abs().max() == 0.0
    f = every.contact_forces(x_out, None, m)[every.i]
    back = jd.points(dec.toy.latent_for(1.09, 0.21).double()) - x_out  # both parts moving back into the range
    assert float(f[1] @ back[every.i[1]]) > 0 and float(f[3] @ back[every.i[3]]) > 0
    # the closed stops stay clear
    assert (every._penetration(x_out) > 0).tolist() == [False, True, False, True]


def test_stops_stiffen_to_catch_a_part_thrown_at_them_within_their_depth():
    """stiffen_stops: a state whose stop points start at speed v makes every joint stop at least
    v^2 / depth^2 stiff per kg (the energy per kg v^2 / 2 is stored within the stop's depth) and asks for the
    substeps that resolve it; a state at rest (a drag) leaves the weight-carrying stiffness g / depth."""
    from kinemesh.dynamics.eom import point_velocities
    from kinemesh.dynamics.joints import JointStops
    import math

    from kinemesh.dynamics.scene import STOP_STEPS, SimulationSpec, build_system, stiffen_stops
    from kinemesh.dynamics.system import State

    v, f, pid, b = _bound_cabinet()
    spec = SimulationSpec(kind="articulated", limit_stops=True)
    system, info = build_system(b.decoder, v, f, spec, articulation=_toy_articulation(),
                                part_names=["body", "lid", "drawer"])
    stops = next(s for s in system.forces if isinstance(s, JointStops))
    assert info["joint_stops"] == len(stops) == 4
    depth = stops.depth
    assert stiffen_stops(system, State(system.q_rest, torch.zeros_like(system.q_rest))) == 1
    assert stops.depth == depth
    qd = torch.full_like(system.q_rest, 20.0)
    xd = point_velocities(system, system.q_rest, qd)[1]
    v2 = float((xd[stops.i] ** 2).sum(-1).max())
    assert v2 > 9.81 * depth  # fast enough that the weight-carrying stiffness would let it through
    n = stiffen_stops(system, State(system.q_rest, qd), fps=30.0)
    assert stops.stiffness == pytest.approx(v2 / depth ** 2)
    # substeps per frame resolving the stiffened stop's period in STOP_STEPS steps (unresolved, it bounces)
    assert n == math.ceil(STOP_STEPS * math.sqrt(v2) / depth / (2 * math.pi * 30.0)) and n > 2
    stiffen_stops(system, State(system.q_rest, 0.0 * qd))  # a later release at rest: back to its weight depth
    assert stops.depth == depth


def test_a_urdfs_limits_replace_the_rest_contacts_of_the_parts_they_stop():
    """With ``limit_stops`` (a URDF's joints) the parts the joint stops hold at both ends keep no rest
    contacts with the base (``PartContacts.subset``): on a real microwave those blocked a poked door from
    opening. Without it (predicted joints) the contacts stay."""
    from kinemesh.dynamics.scene import SimulationSpec, build_system
    from kinemesh.dynamics.system import PartContacts

    v, f, pid, b = _bound_cabinet()
    moving = torch.as_tensor(np.asarray(b.decoder.point_groups) != 0)
    pairs = {}
    for given in (False, True):
        system, _ = build_system(b.decoder, v, f, SimulationSpec(kind="articulated", limit_stops=given),
                                 articulation=_toy_articulation(), part_names=["body", "lid", "drawer"])
        pc = [s for s in system.forces if isinstance(s, PartContacts)]
        pairs[given] = int(moving[pc[0].i].sum()) if pc else 0
    assert pairs[False] > 0 and pairs[True] == 0


def _knob_cabinet():
    """(vertices, faces, part ids, articulation) of a 0.8 x 0.5 x 0.6 m body with a 12 cm knob on its front (1.6 %
    of the area) turning about +x through its centre (limits +-1 rad)."""
    from tests.toys import box, merge_meshes

    body, knob = box([-0.4, -0.25, 0.0], [0.4, 0.25, 0.6]), box([0.4, -0.06, 0.24], [0.42, 0.06, 0.36])
    v, f = merge_meshes(body, knob)
    pid = np.repeat([0, 1], 8)
    parts = [Part(n, v[pid == i], np.zeros((0, 3), np.int64)) for i, n in enumerate(("body", "knob"))]
    art = ArticulatedObject(parts, [Joint("turn", "revolute", "body", "knob", np.array([1.0, 0.0, 0.0]),
                                          np.array([0.41, 0.0, 0.3]), (-1.0, 1.0))], name="knob")
    return v, f, pid, art


class _Turning:
    """A decoder of ``_knob_cabinet``'s instance ``inst`` turning the knob by z[..., 0] rad (and sliding it 5 mm per
    rad off its axis, as the network drifts on real objects); float64."""

    def __init__(self, inst):
        self.mu_cond, self.latent_dim = torch.zeros(2, dtype=torch.float64), 2
        self.rest_points, self.rest_vertices = inst.rest_points.double(), inst.rest_vertices.double()
        self.point_groups, self.vertex_groups = inst.point_groups, inst.vertex_groups

    def _turn(self, rest, groups, z):
        from kinemesh.dynamics.joints import _axis_rotation

        R = _axis_rotation(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), z[..., 0])
        o = torch.tensor([0.41, 0.0, 0.3], dtype=torch.float64)
        knob = torch.as_tensor(np.asarray(groups) == 1)
        x = rest.expand(*z.shape[:-1], *rest.shape).clone()
        x[..., knob, :] = (rest[knob] - o) @ R.transpose(-1, -2) + o + 0.005 * z[..., :1, None]
        return x

    def points(self, z):
        return self._turn(self.rest_points, self.point_groups, z)

    def vertices(self, z):
        return self._turn(self.rest_vertices, self.vertex_groups, z)


def test_a_small_part_follows_its_joint_and_samples_clip_to_limits():
    """A knob of 1.6 % of the area (enough sample points): JointDecoder moves it (it is active) and poses it
    exactly on its joint at the value a decoder turning it (and drifting it off its axis) decodes;
    ``vertices_within_limits`` clips to the limits."""
    from kinemesh.dynamics.joints import MIN_POINTS, JointDecoder

    v, f, pid, art = _knob_cabinet()
    inst = moving_model().instance(v, f, n_points=1024, part_ids=pid, kind="articulated")
    assert np.bincount(inst.point_groups).tolist()[1] >= MIN_POINTS

    dec = _Turning(inst)
    jd = JointDecoder(dec, art, ["body", "knob"], calibrate=False)
    assert jd.active == ["turn"]
    z = torch.tensor([[0.7, 0.0], [-0.3, 0.0], [1.6, 0.0]], dtype=torch.float64)
    assert jd.joint_values(z)[:, 0].numpy() == pytest.approx([0.7, -0.3, 1.6], abs=1e-9)
    exact = dec.vertices(z) - 0.005 * z[:, :1, None] * torch.as_tensor(pid == 1)[:, None]  # on the joint
    assert torch.allclose(jd.vertices(z), exact, atol=1e-9)
    clipped = jd.vertices_within_limits(z)
    assert torch.allclose(clipped[:2], exact[:2], atol=1e-9)
    at_limit = dec.vertices(torch.tensor([1.0, 0.0], dtype=torch.float64)) - 0.005 * torch.as_tensor(pid == 1)[:, None]
    assert torch.allclose(clipped[2], at_limit, atol=1e-9)  # 1.6 rad -> the limit 1
    assert jd.joint_values(z, clip=True)[:, 0].numpy() == pytest.approx([0.7, -0.3, 1.0], abs=1e-9)


def test_sample_of_a_urdf_keeps_parts_on_their_joints(tmp_path):
    """``kinemesh sample`` of a PartNet-Mobility folder decodes the parts along the URDF's joints: every touching
    pair of parts stays attached in every sample (the network's own decoding, --free-parts, detaches them), the
    parts move, and the joint values written lie within the limits; so do the samples of the reduced coordinates
    simulate moves in (``--space reduced``: q ~ N(0, I) of the motion probes along the joints), whose samples.json
    records the space and the k_q coordinates of every sample."""
    import json

    import trimesh

    from kinemesh.cli import main
    from kinemesh.eval.model import attachment
    from kinemesh.geometry.segments import load_segmented
    from tests.data_fixtures import make_partnet_folder

    folder = make_partnet_folder(tmp_path / "obj")
    moving_model().save(tmp_path / "ckpt")
    wm = load_segmented(folder)
    rest = wm.to_file(np.asarray(wm.mesh.vertices))
    pid = wm.to_file(wm.part_ids[:, None].astype(float))[:, 0].round().astype(int)
    size = float(np.ptp(rest, axis=0).max())
    limits = {j.name: j.rest_limits() for j in wm.articulation.joints}
    attached = {}
    options = {"joints": [], "free": ["--free-parts"], "reduced": ["--space", "reduced", "--k-q", "3"]}
    for mode, extra in options.items():
        out = tmp_path / mode
        assert main(["sample", str(folder), "--n", "4", "--out", str(out), "--checkpoint", str(tmp_path / "ckpt"),
                     "--n-points", "128"] + extra) == 0
        s = np.stack([trimesh.load(out / f"sample_{i:02d}.obj", process=False).vertices for i in range(4)])
        assert s.shape == (4, *rest.shape) and np.abs(s - rest).max() > 0.01 * size  # the parts move
        attached[mode] = attachment(rest, s, pid, size)[0]
        meta = json.loads((out / "samples.json").read_text())
        assert meta["space"] == ("reduced" if mode == "reduced" else "prior")
        # the samples keep the folder's links as o groups (read back as the same parts)
        back = load_segmented(out / "sample_00.obj")
        assert back.part_source == "groups"
        def file_parts(w):  # the part name of every file vertex
            return np.array(w.part_names)[w.to_file(w.part_ids[:, None])[:, 0]]
        assert np.array_equal(file_parts(back), file_parts(wm))
        if mode == "free":
            continue
        assert meta["kind"] == "articulated" and meta["joints"]["from"] == "given"
        for k, name in enumerate(meta["joints"]["names"]):
            lo, hi = limits[name] or (-np.inf, np.inf)
            assert all(lo - 1e-9 <= row[k] <= hi + 1e-9 for row in meta["joints"]["values"])
    assert attached["joints"] == 1.0 and attached["reduced"] == 1.0 and attached["free"] < 1.0
    meta = json.loads((tmp_path / "reduced" / "samples.json").read_text())
    assert "z" not in meta and np.asarray(meta["q"]).shape == (4, meta["k"]) and meta["k"] <= 3
    assert main(["sample", str(folder), "--n", "2", "--out", str(tmp_path / "bad"), "--checkpoint",
                 str(tmp_path / "ckpt"), "--space", "reduced", "--k-q", "0"]) != 0
    assert not (tmp_path / "bad").exists()


def test_simulate_of_a_urdf_stops_every_joint_at_its_limits(tmp_path):
    """``kinemesh simulate`` of a PartNet-Mobility folder: the URDF's limits are the object's own, so every
    limit of a joint on the held base is a stop (``SimulationSpec.limit_stops``), not only the closed ones;
    the run records it (conditions and the number of stops)."""
    from kinemesh.cli import main
    from kinemesh.data.sequence import KinematicSequence
    from tests.data_fixtures import make_partnet_folder

    folder = make_partnet_folder(tmp_path / "obj")
    moving_model().save(tmp_path / "ckpt")
    assert main(["simulate", str(folder), "--checkpoint", str(tmp_path / "ckpt"), "--action", "none",
                 "--velocity", "0,0,0.5", "--frames", "3", "--points", "128", "--out",
                 str(tmp_path / "s.glb"), "--npz", str(tmp_path / "s.npz")]) == 0
    meta = KinematicSequence.load(tmp_path / "s.npz").meta
    assert meta["conditions"]["limit_stops"] is True
    # door_hinge [0, pi/2] and drawer_slide (both on the body): four stops; the closed ones alone would be two
    assert meta["simulation"]["joint_stops"] == 4


def test_joints_the_network_does_not_move_get_coordinates_of_their_own():
    """``direct=True``: a joint whose own poses decode to less than 1 / MAX_GAIN of the asked value (here the
    network reaches 5 %) gets a coordinate of its own appended to q; the part is posed exactly along its joint at
    that value (the network's motion of it is dropped), the Jacobian matches central differences (float64), and
    joints the network does move (reach 0.5) keep the calibrated network coordinates only."""
    from kinemesh.dynamics.joints import JointDecoder

    names = ["body", "lid", "drawer"]
    assert JointDecoder(_Reduced(reach=0.5), _toy_articulation(), names, direct=True).direct == []
    dec = _Reduced(reach=0.05)
    jd = JointDecoder(dec, dec.art, names, direct=True)
    assert jd.direct == ["hinge", "slide"] and jd.latent_dim == 6 and jd.mu_cond.shape == (6,)
    q = torch.cat([dec.mu_cond.double(), torch.tensor([0.7, 0.12], dtype=torch.float64)])
    with torch.no_grad():
        exact = dec.toy.points(dec.toy.latent_for(0.7, 0.12).double())
        assert torch.allclose(jd.points(q), exact, atol=1e-6)  # the toy's latent_for inverts by atanh
        assert jd.joint_values(q).numpy() == pytest.approx([0.7, 0.12], abs=1e-9)
        q2 = q.clone()
        q2[:4] += 0.3  # the network's coordinates no longer move these joints
        assert torch.allclose(jd.points(q2), jd.points(q), atol=1e-12)
    J = torch.autograd.functional.jacobian(jd.points, q)  # (P, 3, 6)
    h = 1e-6
    for i in (4, 5):
        e = torch.zeros(6, dtype=torch.float64)
        e[i] = h
        with torch.no_grad():
            fd = (jd.points(q + e) - jd.points(q - e)) / (2 * h)
        assert torch.allclose(J[..., i], fd, atol=1e-6) and fd.abs().max() > 0.1
    with pytest.raises(ValueError, match="expected 6"):
        jd.points(q[:4])


def test_prior_states_draw_the_joints_of_their_own_over_their_range():
    """``prior_states``: joints with coordinates of their own (the network does not move them) get values drawn
    uniformly over ``OWN_PRIOR`` of their range (limits, scaled by ``std`` <= 1), so prior samples move them; the
    network's coordinates pass through unchanged; a decoder with no such joint returns z itself."""
    from kinemesh.dynamics.joints import OWN_PRIOR, JointDecoder

    names = ["body", "lid", "drawer"]
    full = JointDecoder(_Reduced(reach=0.5), _toy_articulation(), names, direct=True)
    z = torch.randn(64, 4, dtype=torch.float64)
    assert full.prior_states(z) is z
    dec = _Reduced(reach=0.05)
    jd = JointDecoder(dec, dec.art, names, direct=True)
    assert jd.direct == ["hinge", "slide"]
    q = jd.prior_states(z, seed=3)
    assert q.shape == (64, 6) and torch.equal(q[:, :4], z)
    lim = OWN_PRIOR * torch.as_tensor([j.rest_limits() for j in dec.art.joints], dtype=torch.float64)
    d = q[:, 4:]
    assert (d >= lim[:, 0] - 1e-12).all() and (d <= lim[:, 1] + 1e-12).all()
    assert ((d - lim[:, 0]) / (lim[:, 1] - lim[:, 0])).std(0).min() > 0.2  # spread over the range (uniform: 0.29)
    values = jd.joint_values(q, clip=True)
    assert torch.allclose(values, d, atol=1e-12)  # the samples move these joints by those values
    half = jd.prior_states(z, seed=3, std=0.5)[:, 4:]
    assert torch.allclose(half, 0.5 * d, atol=1e-12)
    assert torch.equal(jd.prior_states(z, seed=3), q)  # reproducible
    q2, verts = jd.prior_samples(z, seed=3)  # the samples kinemesh sample writes: those states, within the limits
    assert torch.equal(q2, q) and torch.equal(verts, jd.vertices_within_limits(q))
    with pytest.raises(ValueError, match="expected 4"):
        jd.prior_states(q)


def test_handles_of_a_joint_decoder_carry_their_vertex_exactly():
    """A dragged vertex on the rim of a turning knob: ``make_handles`` on a JointDecoder follows the posed vertex
    exactly (affine weights over the knob's points, float64), where inverse-distance weights of its nearest
    points fall short of a rim vertex (they average the displacements of points nearer the axis)."""
    from kinemesh.dynamics.joints import JointDecoder
    from kinemesh.dynamics.system import make_handles

    v, f, pid, art = _knob_cabinet()
    inst = moving_model().instance(v, f, n_points=1024, part_ids=pid, kind="articulated")
    jd = JointDecoder(_Turning(inst), art, ["body", "knob"], calibrate=False)
    rim = int(np.flatnonzero(pid == 1)[np.argmax(np.linalg.norm(v[pid == 1][:, 1:] - [0.0, 0.3], axis=1))])
    q = torch.tensor([1.0, 0.0], dtype=torch.float64)  # the knob turned by 1 rad
    with torch.no_grad():
        x, posed = jd.points(q), jd.vertices(q)[rim]
    h = make_handles(jd, [rim])
    assert torch.allclose(h.positions(x, jd.rest_points.double())[0], posed, atol=1e-9)
    assert float(torch.linalg.norm(posed - torch.as_tensor(v[rim]))) > 0.05  # it moved
    from kinemesh.geometry.transfer import knn_weights  # the transfer it replaces falls short

    i, w = knn_weights(jd.rest_points.double().numpy(), v[rim:rim + 1], k=4, point_groups=inst.point_groups,
                       vertex_groups=pid[rim:rim + 1])
    idw = (torch.as_tensor(w)[0, :, None] * (x[i[0]] - jd.rest_points.double()[i[0]])).sum(0) + torch.as_tensor(v[rim])
    assert float(torch.linalg.norm(idw - posed)) > 1e-3


def test_a_drag_on_a_flap_hinged_on_a_flap_turns_that_flap_alone(monkeypatch):
    """Two flaps in a chain on parallel hinges (a box's flap with a flap of its own): the outer flap's far edge
    dragged to where a 60 deg turn about its own hinge puts it is reached by that turn alone, the inner flap
    staying where it is, although a turn of both reaches it too (the other branch of the two-hinge chain):
    the drag solve's least-motion term (``scene.LEAST_MOTION``) keeps the parts the drag is not on at rest. The inner
    flap dragged carries the outer one along: the parts below a dragged part are not held back by that term."""
    from kinemesh.dynamics.scene import SimulationSpec, simulate_mesh
    from kinemesh.reduce import ReductionConfig, bind
    from tests.toys import box, merge_meshes, subdivide

    meshes = [subdivide(*box(lo, hi), 1) for lo, hi in (((-0.5, -0.2, -0.3), (0.5, 0.2, 0.0)),
                                                       ((0.5, -0.2, -0.02), (0.9, 0.2, 0.0)),
                                                       ((0.9, -0.2, -0.02), (1.3, 0.2, 0.0)))]
    v, f = merge_meshes(*meshes)
    pid = np.concatenate([np.full(len(m[0]), i) for i, m in enumerate(meshes)])
    names = ["body", "inner", "outer"]
    parts = [Part(n, v[pid == i], np.zeros((0, 3), np.int64)) for i, n in enumerate(names)]
    art = ArticulatedObject(parts, [
        Joint("inner_hinge", "revolute", "body", "inner", np.array([0.0, -1.0, 0.0]), np.array([0.5, 0.0, 0.0]),
              (0.0, 2.5)),
        Joint("outer_hinge", "revolute", "inner", "outer", np.array([0.0, -1.0, 0.0]), np.array([0.9, 0.0, 0.0]),
              (0.0, 2.5))], name="flaps")
    far = int(np.flatnonzero(pid == 2)[np.argmax(v[pid == 2, 0] - 1e-3 * v[pid == 2, 2])])
    T = art.part_transforms({"outer_hinge": np.pi / 3})["outer"]
    target = T[:3, :3] @ v[far] + T[:3, 3]
    b = bind(v, f, moving_model(), kind="articulated", part_ids=pid, n_points=128,
             reduction=ReductionConfig(k_q=3, basis="prior"), dtype=torch.float64)
    spec = SimulationSpec(kind="articulated", frames=4, drag_vertex=far, drag_to=tuple(target), hold=True, lead_in=2)
    last = simulate_mesh(b.decoder, v, f, spec, part_ids=pid, progress=False, articulation=art,
                         part_names=names).sequence.frames[-1].astype(np.float64)
    assert np.linalg.norm(last[far] - target) < 0.01
    assert np.abs(last[pid == 1] - v[pid == 1]).max() < 0.01  # the inner flap stays shut
    outer = last[pid == 2] - np.array([0.9, 0.0, 0.0])
    rest = v[pid == 2] - np.array([0.9, 0.0, 0.0])
    turned = np.arctan2(outer[:, 2], outer[:, 0]) - np.arctan2(rest[:, 2], rest[:, 0])
    assert np.median(turned[np.abs(rest[:, 0]) > 0.2]) == pytest.approx(np.pi / 3, abs=0.03)
    # the inner flap dragged: the outer one is carried along (it moves with its parent, so the least-motion term
    # does not hold it back) and stays flat on it
    edge = int(np.flatnonzero(pid == 1)[np.argmax(v[pid == 1, 0] - 1e-3 * v[pid == 1, 2])])
    T = art.part_transforms({"inner_hinge": np.pi / 3})["inner"]
    target = T[:3, :3] @ v[edge] + T[:3, 3]
    spec = SimulationSpec(kind="articulated", frames=4, drag_vertex=edge, drag_to=tuple(target), hold=True, lead_in=2)
    last = simulate_mesh(b.decoder, v, f, spec, part_ids=pid, progress=False, articulation=art,
                         part_names=names).sequence.frames[-1].astype(np.float64)
    assert np.linalg.norm(last[edge] - target) < 0.01
    carried = (T[:3, :3] @ v[pid == 2].T).T + T[:3, 3]  # the outer flap turned with the inner one, its hinge at 0
    assert np.abs(last[pid == 2] - carried).max() < 0.01
