"""Rigid-body coordinates (floating frame) and floor contact: rotation map, Euler-Lagrange with the elastic
mask, momentum conservation, resting on and sliding along a floor, CLI options."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dynamics_reference import euler_lagrange_qdd
from kinemesh.dynamics import State, System, acceleration, integrate
from kinemesh.dynamics.eom import kinematics
from kinemesh.dynamics.floating import RIGID_DIMS, FloatingDecoder, rotation_derivatives, rotation_matrix
from kinemesh.dynamics.system import Floor
from kinemesh.errors import ConfigError


class BlockDecoder:
    """Points in a 0.2 x 0.1 x 0.1 m block standing on z = 0; two smooth latent modes (a bend and a squash)."""

    def __init__(self, P=120, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.rest_points = (torch.rand(P, 3, generator=g, dtype=torch.float64) - 0.5) * torch.tensor(
            [0.2, 0.1, 0.1], dtype=torch.float64) + torch.tensor([0.0, 0.0, 0.05], dtype=torch.float64)
        self.rest_points[: P // 4, 2] = 0.0  # a quarter of the points on the bottom face (the contact patch)
        self.rest_vertices = self.rest_points.clone()
        self.latent_dim = 2
        self.mu_cond = torch.zeros(2, dtype=torch.float64)
        self.knn_idx = np.arange(P)[:, None]
        self.knn_w = np.ones((P, 1))

    def points(self, q):
        x = self.rest_points
        bend = torch.stack([torch.zeros_like(x[:, 0]), torch.zeros_like(x[:, 0]), x[:, 0] ** 2], -1)
        squash = torch.stack([0.1 * x[:, 0], 0.1 * x[:, 1], -0.2 * (x[:, 2] - 0.05)], -1)
        d = q[..., :1, None] * bend * 0.5 + torch.sin(q[..., 1:2, None]) * squash * 0.2
        return x + d

    def vertices(self, q):
        return self.points(q)


def floating_system(P=120, **kw):
    dec = FloatingDecoder(BlockDecoder(P))
    P = dec.rest_points.shape[0]
    return System(dec, torch.full((P,), 1.0 / P, dtype=torch.float64), torch.zeros(dec.latent_dim),
                  elastic_mask=dec.elastic_mask, **kw)


def test_rotation_matrix_is_rodrigues_and_smooth_at_zero():
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(0)
    for theta in [*rng.normal(size=(5, 3)), np.array([3e-4, -2e-4, 1e-4]), np.array([2e-3, 0, 0])]:
        R = rotation_matrix(torch.as_tensor(theta))
        assert np.allclose(R.numpy(), Rotation.from_rotvec(theta).as_matrix(), atol=1e-12)
    # exact second derivative through theta = 0 (the series branch): R(e v) = I + e K + e^2/2 K^2 + O(e^3)
    v = torch.tensor([0.3, -0.5, 0.8], dtype=torch.float64)
    e = 1e-4
    d2 = (rotation_matrix(e * v) - 2 * torch.eye(3, dtype=torch.float64) + rotation_matrix(-e * v)) / e**2
    K = rotation_matrix(torch.zeros(3, dtype=torch.float64))  # identity
    Kv = torch.tensor([[0, -0.8, -0.5], [0.8, 0, -0.3], [0.5, 0.3, 0]], dtype=torch.float64)
    assert torch.allclose(K, torch.eye(3, dtype=torch.float64))
    assert torch.allclose(d2, Kv @ Kv, atol=1e-6)


def test_rotation_derivatives_match_float64_finite_differences():
    """R, dR/dtheta and d2R/dtheta2 of ``rotation_derivatives`` against ``rotation_matrix`` and central differences,
    on both branches of the coefficients (series below |theta|^2 = 1, closed form above) and at theta = 0."""
    E, h = torch.eye(3, dtype=torch.float64), 1e-5
    for theta in ([0.0, 0.0, 0.0], [2e-4, -1e-4, 3e-5], [0.5, -0.6, 0.62], [0.5, -0.6, 0.64], [1.2, 0.4, -0.9]):
        th = torch.tensor(theta, dtype=torch.float64)
        R, dR, d2R = rotation_derivatives(th)
        assert torch.allclose(R, rotation_matrix(th), atol=1e-15)
        dR_fd = torch.stack([(rotation_matrix(th + h * e) - rotation_matrix(th - h * e)) / (2 * h) for e in E])
        d2R_fd = torch.stack([(rotation_derivatives(th + h * e)[1] - rotation_derivatives(th - h * e)[1]) / (2 * h)
                              for e in E]).transpose(0, 1)  # [a, b] = d/dtheta_b dR_a
        assert torch.allclose(dR, dR_fd, atol=1e-9) and torch.allclose(d2R, d2R_fd, atol=1e-9)
        assert torch.allclose(d2R, d2R.transpose(0, 1), atol=1e-15) and float(d2R.abs().max()) > 0.1


def test_floating_decoder_moves_rigidly():
    dec = FloatingDecoder(BlockDecoder())
    assert dec.latent_dim == 2 + RIGID_DIMS and dec.elastic_mask.tolist() == [True] * 2 + [False] * 6
    q = torch.zeros(8, dtype=torch.float64)
    q[2:5] = torch.tensor([0.0, 0.0, np.pi / 2])
    q[5:] = torch.tensor([1.0, 2.0, 3.0])
    x = dec.points(q)
    c = dec.center
    x0 = dec.decoder.rest_points
    expect = (x0 - c) @ rotation_matrix(q[2:5]).T + c + q[5:]
    assert torch.allclose(x, expect) and dec.knn_idx is dec.decoder.knn_idx
    off = torch.full((x0.shape[0], 3), 0.01, dtype=torch.float64)
    v = dec.vertices(q, body_offset=off)
    assert torch.allclose(v - x, off @ rotation_matrix(q[2:5]).T)  # the offset turns with the body


def test_euler_lagrange_with_rigid_coordinates_and_elastic_mask():
    """qdd equals the autograd Euler-Lagrange solution with the elastic term, barrier and Rayleigh damping
    acting on the latent coordinates only (float64)."""
    sysm = floating_system(P=12, gravity=(0, 0, -9.81), stiffness=3.0, damping_mass=0.4, barrier_stiffness=50.0,
                           barrier_radius=0.2, derivatives="jvp")
    dec = sysm.decoder
    q = torch.tensor([0.3, -0.1, 0.2, -0.4, 0.5, 0.3, -0.6, 0.1], dtype=torch.float64)
    qd = torch.tensor([0.2, 0.6, -0.3, 0.2, 0.4, -0.1, 0.3, 0.5], dtype=torch.float64)
    qdd = acceleration(sysm, q, qd)
    p = dec.elastic_mask.double()

    def potential(qq, x):
        excess = ((qq.abs() - 0.2).clamp_min(0) * p)
        return (-(sysm.point_mass[:, None] * x * sysm.gravity).sum() + 0.5 * 3.0 * ((qq * p) ** 2).sum()
                + 50.0 / 3 * (excess ** 3).sum())

    qdd_ref = euler_lagrange_qdd(dec.points, sysm.point_mass, potential, q, qd,
                                 lambda M: -0.4 * (M * p[:, None] * p[None, :]) @ qd)
    assert torch.allclose(qdd, qdd_ref, rtol=1e-7, atol=1e-9)


def test_free_body_keeps_its_momentum():
    """No gravity or floor: elastic forces and Rayleigh damping act on the deformation only, so the linear
    momentum of the points stays what the initial velocity gave (Noether: V does not depend on t)."""
    sysm = floating_system(stiffness=5.0, damping_mass=2.0)
    qd0 = torch.zeros(8, dtype=torch.float64)
    qd0[0], qd0[1], qd0[2], qd0[5] = 1.0, -0.5, 0.3, 0.2  # deforming, spinning and moving
    roll = integrate(sysm, State(torch.zeros(8), qd0), 31, fps=30.0)

    def momentum(q, qd):
        return (sysm.point_mass[:, None] * kinematics(sysm, torch.as_tensor(q), torch.as_tensor(qd)).xd).sum(0)

    p0 = momentum(roll.q[0], roll.qd[0])
    p1 = momentum(roll.q[-1], roll.qd[-1])
    assert float(p0.norm()) > 0.1
    assert torch.allclose(p0, p1, atol=1e-6)
    assert roll.total[-1] < roll.total[0]  # while damping takes energy out of the deformation


def test_block_comes_to_rest_on_the_floor_and_friction_stops_a_slide():
    floor = Floor(0.0, friction=0.5, depth=5e-4)
    sysm = floating_system(gravity=(0, 0, -9.81), stiffness=200.0, damping_mass=5.0)
    sysm.forces.append(floor)
    q0 = torch.zeros(8, dtype=torch.float64)
    q0[7] = 0.05  # 5 cm above the floor
    roll = integrate(sysm, State(q0, torch.zeros(8)), 31, fps=30.0)
    x = sysm.decoder.points(torch.as_tensor(roll.q[-1]))
    # resting on it: the bottom quarter of the mass carries the whole weight, so it sits 4 x depth deep
    bottom = x[: x.shape[0] // 4, 2]
    assert 0.75 * 4 * floor.depth < -float(bottom.mean()) < 1.25 * 4 * floor.depth
    assert float(np.abs(roll.qd[-1][5:]).max()) < 0.05
    # sliding at 1 m/s stops after about v^2 / (2 mu g) = 0.102 m
    q1 = torch.as_tensor(roll.q[-1]).clone()
    qd1 = torch.zeros(8, dtype=torch.float64)
    qd1[5] = 1.0
    slide = integrate(sysm, State(q1, qd1), 16, fps=30.0)
    travelled = float(slide.q[-1][5] - q1[5])
    assert abs(slide.qd[-1][5]) < 0.05
    assert 0.8 * 0.102 < travelled < 1.25 * 0.102, travelled


def test_scene_options(tmp_path):
    import trimesh

    from kinemesh.dynamics.scene import SimulationSpec, build_system

    box = trimesh.creation.box((0.2, 0.1, 0.1))
    box.apply_translation((0, 0, 0.05))
    dec = BlockDecoder()
    dec.rest_vertices = torch.as_tensor(box.vertices)
    dec.knn_idx = np.zeros((len(box.vertices), 1), dtype=np.int64)
    dec.knn_w = np.ones((len(box.vertices), 1))
    system, info = build_system(dec, box.vertices, box.faces, SimulationSpec(kind="elastic", floor="auto",
                                                                             young=1e5, density=1000.0))
    assert info["rigid_body"] and info["floor"] == pytest.approx(0.0) and info["k_q"] == 2
    assert info["stiffness_hz"] == pytest.approx(np.sqrt(1e5 / 1000.0) / (2 * 0.2))
    assert any(isinstance(f, Floor) for f in system.forces)
    _, info = build_system(dec, box.vertices, box.faces, SimulationSpec(kind="articulated"))
    assert not info["rigid_body"] and info["k_q"] == 2
    for bad in (SimulationSpec(kind="elastic", floor="below"), SimulationSpec(kind="elastic", young=-1.0),
                SimulationSpec(kind="elastic", friction=-0.1)):
        with pytest.raises(ConfigError):
            build_system(dec, box.vertices, box.faces, bad)


class LidDecoder:
    """A 1 m plate (part 0) and a lid resting on it (part 1) hinged along y at x = 0: q opens the lid (rad);
    q < 0 would turn it down into the plate."""

    def __init__(self):
        import trimesh

        base = trimesh.creation.box((1.0, 1.0, 0.1))
        base.apply_translation((0.5, 0.5, -0.05))
        lid = trimesh.creation.box((1.0, 1.0, 0.02))
        lid.apply_translation((0.5, 0.5, 0.01))
        mesh = trimesh.util.concatenate([base, lid])
        self.vertices, self.faces = np.asarray(mesh.vertices), np.asarray(mesh.faces)
        pts, fid = trimesh.sample.sample_surface_even(mesh, 600, seed=0)
        self.face_ids = np.asarray(fid)
        self.point_groups = (self.face_ids >= len(base.faces)).astype(np.int64)
        self.rest_points = torch.as_tensor(pts, dtype=torch.float64)
        self.rest_vertices = torch.as_tensor(self.vertices)
        self.latent_dim = 1
        self.mu_cond = torch.zeros(1, dtype=torch.float64)
        self.knn_idx = np.zeros((len(self.vertices), 1), dtype=np.int64)
        self.knn_w = np.ones((len(self.vertices), 1))
        self._lid = torch.as_tensor(self.point_groups == 1)

    def points(self, q):
        a = q[..., :1, None]  # (..., 1, 1)
        x = self.rest_points
        c, s = torch.cos(a), torch.sin(a)
        rx = c * x[:, 0:1] - s * x[:, 2:3]  # rotation about +y by -a lifts the far edge for a > 0
        rz = s * x[:, 0:1] + c * x[:, 2:3]
        turned = torch.cat([rx, x[:, 1:2].expand_as(rx), rz], -1)
        return torch.where(self._lid[:, None], turned, x.expand_as(turned))

    def vertices(self, q):
        return self.points(q)


@pytest.mark.parametrize("stops", [True, False])
def test_part_stops_hold_a_closing_lid_on_its_seat(stops):
    from kinemesh.dynamics.system import part_contacts

    dec = LidDecoder()
    P = dec.rest_points.shape[0]
    sysm = System(dec, torch.full((P,), 1.0 / P, dtype=torch.float64), torch.zeros(1), gravity=(0, 0, -9.81),
                  damping_mass=0.5)
    if stops:
        contacts = part_contacts(dec, dec.faces, dec.vertices)
        assert contacts is not None and len(contacts.i) > 20
        sysm.forces.append(contacts)
    roll = integrate(sysm, State(torch.tensor([0.6]), torch.zeros(1)), 46, fps=30.0)
    q = np.asarray(roll.q)[:, 0]
    if stops:  # slams shut from 0.6 rad, is stopped within a few degrees and stays on its seat
        assert q.min() > -0.06 and abs(q[-1]) < 0.01
    else:  # the same lid without stops swings down through the plate
        assert q.min() < -0.3


def test_deduplicated_batch_decode_matches_points():
    dec = FloatingDecoder(BlockDecoder(40))
    q = torch.randn(3, 8, dtype=torch.float64)
    E = torch.eye(8, dtype=torch.float64)
    rows = torch.cat([q, q + 1e-3 * E[2], q - 1e-3 * E[5], q + 1e-3 * E[0]])  # rigid, rigid, latent offsets
    assert torch.allclose(dec.points_nograd(rows), dec.points(rows), atol=1e-12)
