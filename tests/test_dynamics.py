"""Latent Lagrangian dynamics: EOM vs the Lagrangian (float64 finite differences), energy conservation,
boundary-condition solves, forces, pins and the stability guard, on small toy decoders built here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dynamics_reference import euler_lagrange_qdd
from kinemesh.dynamics import (Handles, PointForce, Spring, State, System, Wind, acceleration, energies,
                               impulse_velocity, kinematics, make_handles, integrate, solve_initial_state, step)
from kinemesh.dynamics.eom import mass_matrix, potential_energy
from kinemesh.errors import ConfigError, SimulationDivergedError


class ToyDecoder:
    """A smooth nonlinear q (k,) -> points (P, 3) map with a state-dependent mass matrix; vertices = points."""

    def __init__(self, k=3, P=40, seed=0, dtype=torch.float64, nonlinearity=0.4):
        g = torch.Generator().manual_seed(seed)
        self.latent_dim = k
        self.mu_cond = torch.zeros(k, dtype=dtype)
        self.rest_points = torch.rand(P, 3, generator=g, dtype=dtype)
        self.rest_vertices = self.rest_points.clone()
        self.A = 0.1 * torch.randn(k, P * 3, generator=g, dtype=dtype)
        self.B = torch.randn(k, P * 3, generator=g, dtype=dtype)
        self.c = nonlinearity * 0.1
        self.knn_idx = np.arange(P)[:, None]
        self.knn_w = np.ones((P, 1))

    def points(self, q):
        q = q.to(self.A.dtype)
        d = q @ self.A + self.c * torch.sin(q @ self.B)
        return self.rest_points + d.reshape(*q.shape[:-1], -1, 3)

    def vertices(self, q):
        return self.points(q)


def toy_system(k=3, P=40, gravity=True, stiffness=2.0, derivatives="fd", **kw):
    dec = ToyDecoder(k, P)
    return System(dec, torch.full((P,), 0.05, dtype=torch.float64), torch.zeros(k),
                  gravity=(0, 0, -9.81) if gravity else (0, 0, 0), stiffness=stiffness,
                  derivatives=derivatives, **kw)


def _fd_points(dec, q, eps=1e-5):
    """Central-difference Jacobian (k, P, 3)."""
    cols = []
    for i in range(q.numel()):
        e = torch.zeros_like(q)
        e[i] = eps
        cols.append((dec.points(q + e) - dec.points(q - e)) / (2 * eps))
    return torch.stack(cols)


def test_finite_differences_of_a_float32_decoder_use_a_step_its_rounding_allows():
    """A float32 network's rounding (6e-8 relative) over the float64 step 1e-4 leaves noise of order 1 in the
    second derivatives; the float32 step (``FD_STEP``) keeps J and H[qd, qd] within 1e-3 / 3e-2 of the exact ones
    (of the same float32 parameters, evaluated in float64)."""
    from kinemesh.dynamics.system import FD_STEP

    dec32 = ToyDecoder(dtype=torch.float32, nonlinearity=1.0)
    dec64 = ToyDecoder(dtype=torch.float32, nonlinearity=1.0)
    dec64.rest_points, dec64.A, dec64.B = (t.double() for t in (dec64.rest_points, dec64.A, dec64.B))
    m = torch.full((40,), 0.05, dtype=torch.float64)
    q = torch.tensor([0.3, -0.7, 1.1], dtype=torch.float64)
    qd = torch.tensor([0.5, 0.2, -0.9], dtype=torch.float64)
    exact = kinematics(System(dec64, m, torch.zeros(3), derivatives="jvp"), q, qd)

    def error(system):
        kin = kinematics(system, q, qd)
        return (float((kin.J - exact.J).abs().max() / exact.J.abs().max()),
                float((kin.hqq - exact.hqq).abs().max() / exact.hqq.abs().max()))

    system = System(dec32, m, torch.zeros(3), derivatives="fd")
    assert system.fd_step == FD_STEP[torch.float32] > 1e-3
    e_J, e_H = error(system)
    assert e_J < 1e-3 and e_H < 3e-2
    assert error(System(dec32, m, torch.zeros(3), derivatives="fd", fd_step=1e-4))[1] > 0.1  # the float64 step


def test_jacobian_and_second_derivative_match_finite_differences():
    sysm = toy_system(derivatives="jvp")
    q = torch.tensor([0.3, -0.7, 1.1], dtype=torch.float64)
    qd = torch.tensor([0.5, 0.2, -0.9], dtype=torch.float64)
    kin = kinematics(sysm, q, qd)
    J_fd = _fd_points(sysm.decoder, q)
    assert torch.allclose(kin.J, J_fd, atol=1e-8)
    eps = 1e-4
    f = sysm.decoder.points
    h_fd = (f(q + eps * qd) - 2 * f(q) + f(q - eps * qd)) / eps**2
    assert torch.allclose(kin.hqq, h_fd, atol=1e-6)
    assert float(kin.hqq.abs().max()) > 1e-3  # the map is genuinely nonlinear
    # the fast batched finite-difference path agrees with the exact forward-mode path
    sysm.derivatives = "fd"
    fast = kinematics(sysm, q, qd)
    assert torch.allclose(fast.J, kin.J, atol=1e-7) and torch.allclose(fast.hqq, kin.hqq, atol=1e-5)
    sysm.derivatives = "jvp"
    a_exact = acceleration(sysm, q, qd)
    sysm.derivatives = "fd"
    assert torch.allclose(acceleration(sysm, q, qd), a_exact, rtol=1e-5, atol=1e-7)


def _lagrangian(sysm, q, qd):
    """L = T - V with T from finite-difference Jacobians (no autograd anywhere)."""
    J = _fd_points(sysm.decoder, q, 1e-6)
    xd = torch.einsum("ipc,i->pc", J, qd)
    T = 0.5 * (sysm.point_mass[:, None] * xd * xd).sum()
    return T - potential_energy(sysm, q)


def test_equations_of_motion_satisfy_euler_lagrange_by_finite_differences():
    """d/dt dL/dqd - dL/dq = Q_damping along the EOM trajectory, all terms by float64 central differences."""
    sysm = toy_system(damping_mass=0.0, barrier_stiffness=5.0, barrier_radius=0.5, derivatives="jvp")
    q = torch.tensor([0.3, -0.7, 0.2], dtype=torch.float64)  # q_1 beyond the barrier radius
    qd = torch.tensor([0.5, 0.2, -0.9], dtype=torch.float64)
    qdd = acceleration(sysm, q, qd)
    k = q.numel()
    eps = 1e-4

    def dL_dqd(qq, vv):
        out = torch.zeros(k, dtype=torch.float64)
        for i in range(k):
            e = torch.zeros(k, dtype=torch.float64)
            e[i] = 1e-4
            out[i] = (_lagrangian(sysm, qq, vv + e) - _lagrangian(sysm, qq, vv - e)) / 2e-4
        return out

    # d/dt of the momentum along q(t) = q + t qd + t^2/2 qdd, qd(t) = qd + t qdd
    p_plus = dL_dqd(q + eps * qd + 0.5 * eps**2 * qdd, qd + eps * qdd)
    p_minus = dL_dqd(q - eps * qd + 0.5 * eps**2 * qdd, qd - eps * qdd)
    dp_dt = (p_plus - p_minus) / (2 * eps)
    dL_dq = torch.zeros(k, dtype=torch.float64)
    for i in range(k):
        e = torch.zeros(k, dtype=torch.float64)
        e[i] = 1e-5
        dL_dq[i] = (_lagrangian(sysm, q + e, qd) - _lagrangian(sysm, q - e, qd)) / 2e-5
    residual = dp_dt - dL_dq
    scale = float(dL_dq.abs().max())
    assert float(residual.abs().max()) < 1e-4 * scale, (residual, dL_dq)


def test_equations_of_motion_match_autograd_euler_lagrange_with_forces_and_damping():
    sysm = toy_system(damping_mass=0.7, derivatives="jvp")
    dec = sysm.decoder
    h = make_handles(dec, [3, 7])
    sysm.forces.append(PointForce(h, torch.tensor([[1.0, 0, 0], [0, 2.0, -1.0]], dtype=torch.float64)))
    sysm.springs.append(Spring(make_handles(dec, [11]), dec.rest_points[[11]] + 0.1, 30.0))
    q = torch.tensor([0.2, 0.4, -0.3], dtype=torch.float64)
    qd = torch.tensor([-0.3, 0.8, 0.1], dtype=torch.float64)
    qdd = acceleration(sysm, q, qd)

    def potential(qq, x):
        xs = x[11] - sysm.springs[0].target[0]
        return (-(sysm.point_mass[:, None] * x * sysm.gravity).sum() + 0.5 * sysm.stiffness * (qq * qq).sum()
                + 0.5 * 30.0 * (xs * xs).sum())

    J = torch.autograd.functional.jacobian(dec.points, q)  # (P, 3, k)
    f = torch.zeros(40, 3, dtype=torch.float64)
    f[3] += torch.tensor([1.0, 0, 0], dtype=torch.float64)
    f[7] += torch.tensor([0, 2.0, -1.0], dtype=torch.float64)
    qdd_ref = euler_lagrange_qdd(dec.points, sysm.point_mass, potential, q, qd,
                                 lambda M: torch.einsum("pci,pc->i", J, f) - 0.7 * M @ qd)
    assert torch.allclose(qdd, qdd_ref, rtol=1e-8, atol=1e-10)


def _stretch(points, scale=1.0):
    """A ``Stretch`` on the 4-nearest-neighbour graph of ``points`` (P, 3), rest lengths ``scale`` x theirs."""
    from kinemesh.dynamics.system import Stretch, stretch_graph

    i, j = (torch.as_tensor(e) for e in stretch_graph(points.numpy(), 4))
    return Stretch(i, j, scale * torch.linalg.norm(points[i] - points[j], dim=-1), 3.0)


def test_stretch_energy_gradient_and_hessian_match_float64_finite_differences():
    """The cloth's stretching energy V = sum_e k / 2 (l_e - L_e)^2 / L_e: dV/dx and, with every edge stretched, the
    Hessian (``Stretch.stiffness_matrix`` with J = I) equal central differences; compressed edges keep the matrix
    positive semi-definite; in q the forces of ``generalized_forces`` are -dV/dq through a nonlinear decoder and the
    implicit solve's ``stiffness_matrix`` is d2V/dq2 through a linear one (float64)."""
    from kinemesh.dynamics.eom import generalized_forces, kinematics
    from kinemesh.dynamics.integrators import stiffness_matrix
    from kinemesh.dynamics.system import stretch_graph

    g = torch.Generator().manual_seed(4)
    rest = torch.rand(12, 3, generator=g, dtype=torch.float64)
    st = _stretch(rest)
    i, j = stretch_graph(rest.numpy(), 4)
    assert (i < j).all() and len(set(zip(i, j))) == len(i) and len(i) >= 24
    assert float(st.energy(rest)) == 0 and float(st.gradient(rest).abs().max()) == 0
    x = 1.3 * rest + 0.01 * torch.randn(12, 3, generator=g, dtype=torch.float64)  # every edge stretched
    assert bool((torch.linalg.norm(x[st.i] - x[st.j], dim=-1) > st.length).all())
    eps, E = 1e-6, torch.eye(36, dtype=torch.float64).reshape(36, 12, 3)
    grad_fd = torch.stack([(st.energy(x + eps * e) - st.energy(x - eps * e)) / (2 * eps) for e in E]).reshape(12, 3)
    assert torch.allclose(st.gradient(x), grad_fd, rtol=1e-7, atol=1e-9)
    H_fd = torch.stack([((st.gradient(x + eps * e) - st.gradient(x - eps * e)) / (2 * eps)).reshape(-1) for e in E])
    H = st.stiffness_matrix(x, E)
    assert float(H_fd.abs().max()) > 1 and torch.allclose(H, H_fd, rtol=1e-6, atol=1e-6)
    assert float(torch.linalg.eigvalsh(st.stiffness_matrix(0.7 * rest, E)).min()) > -1e-10  # compressed
    # in q, through a nonlinear decoder: generalized forces = -dV/dq
    sysm = toy_system(gravity=False, stiffness=0.0, derivatives="jvp")
    sysm.stretch = _stretch(sysm.decoder.rest_points, 0.9)
    q = torch.tensor([0.3, -0.2, 0.4], dtype=torch.float64)
    dV = torch.stack([(potential_energy(sysm, q + 1e-6 * e) - potential_energy(sysm, q - 1e-6 * e)) / 2e-6
                      for e in torch.eye(3, dtype=torch.float64)])
    Q = generalized_forces(sysm, q, kinematics(sysm, q), 0.0)
    assert float(dV.abs().max()) > 1e-2 and torch.allclose(Q, -dV, rtol=1e-6, atol=1e-9)
    # through a linear decoder whose first coordinate scales the sheet (every edge stretched at q_0 = 0.5)
    lin = toy_system(gravity=False, stiffness=0.0, derivatives="jvp")
    lin.decoder.c = 0.0
    lin.decoder.A[0] = 0.5 * lin.decoder.rest_points.reshape(-1)
    lin.decoder.A[1:] *= 0.1
    lin.stretch = _stretch(lin.decoder.rest_points)
    q = torch.tensor([0.5, 0.05, -0.05], dtype=torch.float64)
    kin = kinematics(lin, q)
    K_fd = torch.stack([-(generalized_forces(lin, q + 1e-6 * e, kinematics(lin, q + 1e-6 * e), 0.0)
                          - generalized_forces(lin, q - 1e-6 * e, kinematics(lin, q - 1e-6 * e), 0.0)) / 2e-6
                        for e in torch.eye(3, dtype=torch.float64)])
    K = torch.from_numpy(stiffness_matrix(lin, q, kin.J, x=kin.x))
    assert torch.allclose(K, K_fd, rtol=1e-6, atol=1e-8 * float(K_fd.abs().max()))


@pytest.mark.parametrize("integrator,frames", [("midpoint", 201), ("rk4", 41)])
def test_energy_conserved_without_damping_over_1000_steps(integrator, frames):
    """The default integrator: relative drift of total energy < 1 % over 1000 steps (RK4: 200 steps)."""
    sysm = toy_system(stiffness=3.0)
    k = sysm.dim
    s0 = State(torch.tensor([0.8, -0.4, 0.5]), torch.tensor([0.5, 1.0, -0.7]))
    out = integrate(sysm, s0, n_frames=frames, fps=20.0, substeps=5, integrator=integrator)  # 5 steps/frame
    tol = 0.01
    assert out.q.shape == (frames, k)
    assert out.substeps[-1] == 5 and not out.warnings
    assert out.energy_drift < tol, out.energy_drift
    assert np.ptp(out.kinetic) > 0.1 * np.max(out.kinetic)  # it really moved and exchanged energy
    # with damping the energy decays
    sysm.damping_mass = 2.0
    damped = integrate(sysm, s0, n_frames=41, fps=20.0, substeps=5, integrator=integrator)
    assert damped.total[-1] < 0.5 * damped.total[0]
    assert np.all(np.diff(damped.total) < 1e-9)


def test_step_is_functional_and_time_reversible():
    sysm = toy_system()
    s0 = State(torch.tensor([0.3, 0.1, -0.2], dtype=torch.float64), torch.tensor([0.4, -0.2, 0.3], dtype=torch.float64))
    s1 = step(sysm, s0, 0.01)
    assert torch.equal(s0.q, torch.tensor([0.3, 0.1, -0.2], dtype=torch.float64))  # input untouched
    back = step(sysm, State(s1.q, -s1.qd), 0.01)
    assert torch.allclose(back.q, s0.q, atol=1e-8) and torch.allclose(-back.qd, s0.qd, atol=1e-7)


def test_midpoint_newton_stops_within_its_tolerance_of_the_converged_step_float64():
    """The implicit solve stops once the error its contraction rate predicts is within ``tol`` (Hairer & Wanner
    IV.8): the accepted step lies within ``tol`` of the midpoint equations solved to round-off by a plain
    fixed-point iteration qd1 <- qd0 + dt qdd(q0 + dt (qd0 + qd1) / 4, (qd0 + qd1) / 2)."""
    from kinemesh.dynamics.integrators import step_midpoint

    sysm = toy_system(stiffness=20.0)
    for v in ([0.4, -0.2, 0.3], [3.0, -2.0, 1.5]):
        q0, v0 = torch.tensor([0.3, 0.1, -0.2], dtype=torch.float64), torch.tensor(v, dtype=torch.float64)
        for dt in (0.01, 1 / 30):
            tol = 1e-6
            s1 = step_midpoint(sysm, State(q0, v0), dt, tol=tol)
            v1 = v0.clone()
            for _ in range(300):
                v1 = v0 + dt * acceleration(sysm, q0 + 0.25 * dt * (v0 + v1), 0.5 * (v0 + v1), 0.5 * dt)
            q1 = q0 + 0.5 * dt * (v0 + v1)
            scale = tol * (1.0 + float(q0.abs().max()))
            assert float((s1.q - q1).abs().max()) <= scale
            assert float(dt * (s1.qd - v1).abs().max()) <= scale


def test_boundary_conditions_recover_planted_state():
    sysm = toy_system()
    dec = sysm.decoder
    q0 = torch.tensor([0.6, -0.3, 0.9], dtype=torch.float64)
    qd0 = torch.tensor([-0.4, 0.7, 0.2], dtype=torch.float64)
    ids = np.arange(0, 40, 3)
    h = make_handles(dec, ids)
    kin = kinematics(sysm, q0, qd0)
    init = solve_initial_state(sysm, h, positions=kin.x[ids], velocities=kin.xd[ids], reg=1e-10)
    assert torch.allclose(init.q0, q0, atol=1e-5), init.q0
    assert torch.allclose(init.qd0, qd0, atol=1e-5), init.qd0
    assert init.position_rms < 1e-6 and init.velocity_rms < 1e-6


def test_position_solve_with_broyden_jacobian_updates_reaches_the_same_state_float64():
    """``solve_positions(broyden=True)`` (the rest-state solve): the residual Jacobian decoded once at the start and
    then updated by Broyden's secant formula recovers a planted state like the solve that decodes it at every
    trial, decoding one state per trial instead of 2 k + 1."""
    from kinemesh.dynamics.boundary import solve_positions

    sysm = toy_system()
    q0 = torch.tensor([0.6, -0.3, 0.9], dtype=torch.float64)
    h = make_handles(sysm.decoder, np.arange(0, 40, 3))
    target = h.positions(kinematics(sysm, q0).x, sysm.decoder.rest_points)
    calls = []
    points = sysm.decoder.points
    sysm.decoder.points = lambda q: calls.append(len(q)) or points(q)
    q_b, err_b = solve_positions(sysm, h, target, n_starts=1, iters=40, reg=1e-10, broyden=True)
    rows_b, calls[:] = sum(calls), []
    q_n, err_n = solve_positions(sysm, h, target, n_starts=1, iters=40, reg=1e-10)
    rows_n = sum(calls)
    assert torch.allclose(q_b, q0, atol=1e-5) and err_b < 1e-6, (q_b, err_b)
    assert torch.allclose(q_b, q_n, atol=1e-5)
    assert rows_b < rows_n / 2, (rows_b, rows_n)


def test_impulse_gives_momentum_and_handle_errors():
    sysm = toy_system(gravity=False)
    h = make_handles(sysm.decoder, [5])
    dv = impulse_velocity(sysm, h, sysm.q_rest, [[0.0, 0.0, 0.02]])
    kin = kinematics(sysm, sysm.q_rest)
    # generalized momentum M dv equals J_h^T p
    M = mass_matrix(sysm, kin.J)
    assert torch.allclose(M @ dv, h.jacobian(kin.J)[:, 0, 2] * 0.02, atol=1e-12)
    with pytest.raises(ConfigError, match="out of range"):
        make_handles(sysm.decoder, [40])
    with pytest.raises(ConfigError, match="out of range"):
        make_handles(sysm.decoder, [-1])


def test_pins_hold_and_wind_pushes():
    dec = ToyDecoder(3, 40)
    m = torch.full((40,), 0.05, dtype=torch.float64)
    pinned = make_handles(dec, np.arange(10))
    normals = torch.nn.functional.normalize(torch.randn(40, 3, dtype=torch.float64), dim=1)
    wind = Wind(torch.tensor([0.0, 8.0, 0.0], dtype=torch.float64), normals,
                torch.full((40,), 0.01, dtype=torch.float64), two_sided=True)
    free = System(dec, m, torch.zeros(3), forces=[wind], damping_mass=1.0)
    held = System(dec, m, torch.zeros(3), forces=[wind], damping_mass=1.0,
                  springs=[Spring(pinned, dec.rest_points[:10].clone(), 100.0)])
    s0 = State(torch.zeros(3), torch.zeros(3))
    a = integrate(free, s0, 6, fps=10)
    b = integrate(held, s0, 6, fps=10)

    def pin_err(q):
        x = dec.points(torch.as_tensor(q[-1]))
        return float((x[:10] - dec.rest_points[:10]).norm(dim=1).mean())

    def mean_y(q):
        return float(dec.points(torch.as_tensor(q[-1]))[:, 1].mean() - dec.rest_points[:, 1].mean())

    assert mean_y(a.q) > 1e-3  # wind along +y moves the points along +y
    assert pin_err(b.q) < 0.5 * pin_err(a.q)


def test_barrier_keeps_state_plausible():
    sysm = toy_system(gravity=False, stiffness=0.0, barrier_stiffness=100.0)
    s0 = State(torch.zeros(3), torch.tensor([6.0, 0.0, 0.0]))
    out = integrate(sysm, s0, 31, fps=30, substeps=6)
    assert np.abs(out.q).max() < 4.5  # would reach ~12 std without the barrier
    assert out.energy_drift < 0.01


def test_stability_guard_reduces_step_or_raises():
    stiff = toy_system(stiffness=5e4)
    s0 = State(torch.tensor([0.5, 0.0, 0.0]), torch.zeros(3))
    # the implicit midpoint rule (Newton-preconditioned) is A-stable: a stiff spring needs no smaller step
    mid = integrate(stiff, s0, 4, fps=30, substeps=1)
    assert not mid.warnings and np.isfinite(mid.q).all() and np.abs(mid.q).max() < 0.51
    # explicit RK4 is not: the guard halves the step (with a warning) instead of exploding
    out = integrate(stiff, s0, 4, fps=30, substeps=1, integrator="rk4")
    assert out.warnings and out.substeps[-1] > 1
    assert np.isfinite(out.q).all() and np.abs(out.q).max() < 0.6
    with pytest.raises(SimulationDivergedError):
        integrate(toy_system(stiffness=1e9), s0, 3, fps=30, substeps=1, max_halvings=2, integrator="rk4")


def test_decode_vertices_in_bounded_chunks_equals_one_pass():
    """Output frames are filled chunk by chunk into one float32 array; capping the vertices per chunk (so a
    1M-vertex mesh decodes one frame at a time) changes nothing."""
    from kinemesh.dynamics.scene import decode_vertices

    dec = ToyDecoder(k=3, P=40)
    q = np.random.default_rng(0).normal(size=(7, 3))
    offset = np.random.default_rng(1).normal(size=(40, 3)) * 1e-3
    whole = decode_vertices(dec, q, chunk=8, rest_offset=offset)
    capped = decode_vertices(dec, q, chunk=8, rest_offset=offset, max_vertices=40)  # one frame per chunk
    ref = (dec.vertices(torch.as_tensor(q)).numpy() + offset).astype(np.float32)
    assert whole.dtype == np.float32 and whole.shape == (7, 40, 3)
    np.testing.assert_array_equal(capped, whole)
    np.testing.assert_allclose(whole, ref, atol=1e-6)


@pytest.mark.parametrize("derivatives", ["fd", "jvp"])
def test_energies_from_point_velocities_equal_mass_matrix_form_float64(derivatives):
    """T from one directional derivative (1/2 sum m |xd|^2 + 1/2 m_reg |qd|^2) equals 1/2 qd^T M(q) qd."""
    from kinemesh.dynamics.eom import kinetic_energy

    sys_ = toy_system(k=4, derivatives=derivatives, latent_inertia=0.01)
    q = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=torch.float64)
    qd = torch.tensor([1.0, 0.5, -0.7, 2.0], dtype=torch.float64)
    e = energies(sys_, State(q, qd))
    T = float(kinetic_energy(sys_, qd, _fd_points(sys_.decoder, q)))
    assert e["kinetic"] == pytest.approx(T, rel=1e-8)
    assert e["potential"] == pytest.approx(float(potential_energy(sys_, q)), rel=1e-10)
    assert energies(sys_, State(q, torch.zeros(4)))["kinetic"] == 0.0


def test_velocity_coupling_reusing_the_acceleration_states_matches_central_differences():
    """The implicit solve's coupling C = 2 J^T m H[., v] from the acceleration's decoded states plus k new ones
    (first-order mixed differences) agrees with the 4k-state central differences."""
    from kinemesh.dynamics.integrators import velocity_coupling

    sys_ = toy_system(k=4)
    sys_.decoder.c = 0.5  # strongly curved map
    q = torch.tensor([0.3, -0.2, 0.5, 0.1], dtype=torch.float64)
    v = torch.tensor([1.0, 0.5, -0.7, 2.0], dtype=torch.float64)
    _, kin, _ = acceleration(sys_, q, v, return_kinematics=True)
    assert kin.fd is not None
    C_ref = velocity_coupling(sys_, q, v)
    C = velocity_coupling(sys_, q, v, kin=kin)
    assert float(C_ref.abs().max()) > 1e-3  # the toy map is curved: C is not trivially zero
    assert torch.allclose(C, C_ref, rtol=1e-3, atol=1e-3 * float(C_ref.abs().max()))
