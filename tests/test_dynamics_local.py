"""The ``local`` integrator (kinemesh/dynamics/local.py): the anchor's derivatives against float64 finite
differences, the quadratic model's own Jacobian, velocity product and coupling, the rollout against the
network's own implicit-midpoint rollout on the toy cabinet (tests/toys.py), and the disagreement check."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinemesh.dynamics import State, System, integrate
from kinemesh.dynamics.local import anchor
from toys import ToyCabinetDecoder


def cabinet(seed=0, **kw):
    """The toy cabinet in float64 with q = its two planted coordinates (lid angle, drawer slide through tanh)."""
    dec = ToyCabinetDecoder(latent_dim=2, n_points=128, subdivisions=0, seed=seed)
    for name in ("A", "mu_cond", "rest_points", "rest_vertices"):
        setattr(dec, name, getattr(dec, name).double())
    return dec


def cabinet_system(derivatives="fd", **kw):
    dec = cabinet()
    P = dec.rest_points.shape[0]
    opts = dict(gravity=(0, 0, -9.81), stiffness=0.5, latent_inertia=1e-3)
    opts.update(kw)
    return System(dec, torch.full((P,), 0.02, dtype=torch.float64), torch.zeros(2), derivatives=derivatives, **opts)


def _jac(f, q, eps=1e-5):
    return torch.stack([(f(q + eps * e) - f(q - eps * e)) / (2 * eps) for e in torch.eye(q.numel(), dtype=q.dtype)])


@pytest.mark.parametrize("derivatives", ["fd", "jvp"])
def test_anchor_matches_float64_finite_differences(derivatives):
    """x, J = dx/dq and G[i] = H[u, e_i] of the anchor equal central differences of the network."""
    sysm = cabinet_system(derivatives)
    f = sysm.decoder.points
    q = torch.tensor([0.4, -0.3], dtype=torch.float64)
    u = torch.tensor([0.6, 0.8], dtype=torch.float64)
    m = anchor(sysm, q, [3.0 * u])
    assert torch.allclose(m.U[0], u, atol=1e-15) and torch.allclose(m.x, f(q), atol=1e-12)
    J_ref = _jac(f, q)
    G_ref = _jac(lambda z: _jac(f, z, 1e-4).mul(u[:, None, None]).sum(0), q, 1e-4)  # d/dq_i (J u)
    tol = 1e-8 if derivatives == "jvp" else 1e-3  # fd: forward differences with h = 1e-4
    assert float(G_ref.abs().max()) > 0.1  # the map is curved
    assert torch.allclose(m.J, J_ref, atol=tol * float(J_ref.abs().max()))
    assert torch.allclose(m.G[0], G_ref, atol=10 * tol * float(G_ref.abs().max()))
    assert len(anchor(sysm, q, [torch.zeros(2), 2 * u]).U) == 1 and len(anchor(sysm, q, []).G) == 0


def test_model_is_a_consistent_quadratic_map_float64():
    """The model's J, velocity product H~[qd, qd] and coupling 2 J^T m H~[., v] are derivatives of its own
    points (float64 central differences), and it is exact to third order along u (error / 8 per halving)."""
    sysm = cabinet_system("jvp")
    f = sysm.decoder.points
    q = torch.tensor([0.2, 0.5], dtype=torch.float64)
    u = torch.tensor([1.0, -0.5], dtype=torch.float64)
    m = anchor(sysm, q, [u])
    q1, qd = q + torch.tensor([0.07, -0.11], dtype=torch.float64), torch.tensor([0.9, 0.4], dtype=torch.float64)
    kin = m.kinematics(q1, qd)
    xm = lambda z: m.kinematics(z).x  # noqa: E731
    assert torch.allclose(kin.J, _jac(xm, q1), atol=1e-9)
    assert torch.allclose(kin.xd, torch.einsum("ipc,i->pc", kin.J, qd), atol=1e-12)
    e = 1e-4
    h_ref = (xm(q1 + e * qd) - 2 * xm(q1) + xm(q1 - e * qd)) / e**2
    assert torch.allclose(kin.hqq, h_ref, atol=1e-6) and float(h_ref.abs().max()) > 1e-2

    def vel_term(v):
        k_ = m.kinematics(q1, v)
        return torch.einsum("ipc,p,pc->i", k_.J, sysm.point_mass, k_.hqq)

    C_ref = _jac(vel_term, qd).T  # C[i, j] = d term_i / d qd_j
    assert torch.allclose(torch.as_tensor(m.coupling(sysm, q1, qd)), C_ref, atol=1e-8)
    un = u / u.norm()
    errs = [float((xm(q + s * un) - f(q + s * un)).norm(dim=-1).max()) for s in (0.2, 0.1)]
    assert errs[0] / errs[1] > 6.0, errs  # third order along u
    d = torch.tensor([0.1, 0.2], dtype=torch.float64)  # off u: second-order error, but first order is exact
    assert float((xm(q + 1e-3 * d) - f(q + 1e-3 * d)).abs().max()) < 1e-6



def floating_system(**kw):
    """The toy cabinet with six rigid-body coordinates (k = 8), gravity, barrier, a pin spring, a handle force
    (0.1-0.2 s), wind and Rayleigh damping: every force the reduced local path contracts."""
    from kinemesh.dynamics.floating import FloatingDecoder
    from kinemesh.dynamics.system import PointForce, Spring, Wind, make_handles

    dec = FloatingDecoder(cabinet())
    P = dec.rest_points.shape[0]
    g = torch.Generator().manual_seed(1)
    nrm = torch.nn.functional.normalize(torch.randn(P, 3, generator=g, dtype=torch.float64), dim=-1)
    pin = make_handles(dec, [0, 5])
    opts = dict(gravity=(0.3, 0, -9.81), stiffness=0.5, latent_inertia=1e-3, barrier_stiffness=20.0,
                barrier_radius=0.2, damping_mass=0.3, elastic_mask=dec.elastic_mask,
                springs=[Spring(pin, pin.rest + 0.05, 40.0)],
                forces=[PointForce(make_handles(dec, [7]), torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64),
                                   0.1, 0.2),
                        Wind(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64), nrm,
                             torch.full((P,), 1e-3, dtype=torch.float64))])
    opts.update(kw)
    return System(dec, torch.full((P,), 0.02, dtype=torch.float64), torch.zeros(8), derivatives="jvp", **opts)


def _anchored(sysm, seed: int):
    """An anchor at a random q of ``sysm`` (one direction) and a state (q1, qd) near it with its kinematics on
    the anchor: (k, anchor, q1, qd, kin)."""
    k = sysm.dim
    gen = torch.Generator().manual_seed(seed)
    q = 0.3 * torch.randn(k, generator=gen, dtype=torch.float64)
    m = anchor(sysm, q, [torch.randn(k, generator=gen, dtype=torch.float64)])
    q1 = q + 0.1 * torch.randn(k, generator=gen, dtype=torch.float64)
    qd = torch.randn(k, generator=gen, dtype=torch.float64)
    return k, m, q1, qd, m.kinematics(q1, qd)


def _close(a, b):
    """a equals b to 1e-10 relative to b's largest entry (b not all zero)."""
    scale = float(torch.as_tensor(b).abs().max())
    assert scale > 0 and float((torch.as_tensor(a) - torch.as_tensor(b)).abs().max()) <= 1e-10 * scale


def test_reduced_local_path_equals_the_per_point_path_float64():
    """Issue 17: with the points contracted away (``Reduced``) the model's M, right-hand side, acceleration,
    velocity coupling, energies, spring stiffness and (with a floor through half the points, J formed only at
    the points in contact) contact matrices equal the per-point LocalModel path to 1e-10 relative (floating toy
    with every force), the handle force switches with its time window, the forces are -dV/dq of the reduced
    energies (float64 central differences) and M the qd-Hessian of T."""
    from kinemesh.dynamics.eom import acceleration, generalized_forces, mass_matrix
    from kinemesh.dynamics.integrators import contact_matrices, stiffness_matrix
    from kinemesh.dynamics.system import Floor

    sysm = floating_system()
    k, m, q1, qd, kin = _anchored(sysm, 3)
    z = kin.x[:, 2].sort().values
    sysm.forces.append(Floor(float(z[len(z) // 2:len(z) // 2 + 2].mean()), friction=0.5))  # between two points
    red = m.reduced(sysm)
    assert red.nb == 1 + 2 * k and m.reduced(sysm) is red

    for t in (0.0, 0.15):  # handle force off / on
        M, rhs, rk = red.terms(sysm, q1, qd, t)
        M_ref = mass_matrix(sysm, kin.J)
        rhs_ref = generalized_forces(sysm, q1, kin, t) - torch.einsum("ipc,p,pc->i", kin.J, sysm.point_mass,
                                                                      kin.hqq)
        _close(M, M_ref)
        _close(rhs, rhs_ref)
        _close(rk.x, kin.x)
        _close(rk.xd, kin.xd)
        _close(stiffness_matrix(sysm, q1, None, rk.hj), stiffness_matrix(sysm, q1, kin.J))
        for a, b in zip(contact_matrices(sysm, rk.x, rk.xd, rk.J), contact_matrices(sysm, kin.x, kin.xd, kin.J)):
            _close(a, b)
        p = sysm.latent  # Rayleigh damping on the latent coordinates only
        a_ref = torch.linalg.solve(M_ref, rhs_ref - sysm.damping_mass * (M_ref * p[:, None] * p[None, :]) @ qd)
        _close(acceleration(sysm, q1, qd, t, local=m), a_ref)
    assert float(abs(red.terms(sysm, q1, qd, 0.15)[1] - red.terms(sysm, q1, qd, 0.0)[1]).max()) > 1e-3
    Hv = (torch.from_numpy(m._coef(qd.numpy())) @ m.G.reshape(len(m.G) * k, -1)).reshape(m.J.shape)
    _close(m.coupling(sysm, q1, qd), 2.0 * torch.einsum("ipc,p,jpc->ij", kin.J, sysm.point_mass, Hv))
    from kinemesh.dynamics.eom import energies

    st = State(q1, qd)
    e_red, e_ref = m.energies(sysm, st), energies(sysm, st, kin.x, kin.xd)
    for key in e_ref:
        _close(torch.tensor(e_red[key]), torch.tensor(e_ref[key]))
    # conservative part: forces = -dV/dq of the reduced potential; M = d2T/dqd2
    cons = floating_system(forces=[], damping_mass=0.0)
    mc = anchor(cons, m.q, [m.U[0]])
    rc = mc.reduced(cons)
    assert rc.terms(cons, q1, qd, 0.0)[2].J is None  # no contact force: no per-point work
    zero = torch.zeros(k, dtype=torch.float64)
    dV = _jac(lambda z: torch.tensor(rc.energies(cons, z, zero)["potential"], dtype=torch.float64), q1, 1e-6)
    _close(rc.terms(cons, q1, zero, 0.0)[1], -dV)
    E = torch.eye(k, dtype=torch.float64)
    T = lambda v: rc.energies(cons, q1, v)["kinetic"]  # noqa: E731
    H = torch.tensor([[(T(qd + 1e-3 * (E[i] + E[j])) - T(qd + 1e-3 * (E[i] - E[j]))
                        - T(qd - 1e-3 * (E[i] - E[j])) + T(qd - 1e-3 * (E[i] + E[j]))) / 4e-6
                       for j in range(k)] for i in range(k)], dtype=torch.float64)
    assert torch.allclose(torch.as_tensor(rc.terms(cons, q1, qd, 0.0)[0]), H, rtol=1e-7, atol=1e-9)


def test_reduced_local_path_with_a_stretching_energy_float64():
    """The cloth's stretching energy (``system.Stretch``) on the reduced local path: its forces, energy and
    stiffness matrix equal the per-point path to 1e-10 relative, and its forces are -dV/dq of the reduced energies
    (float64 central differences)."""
    from kinemesh.dynamics.eom import energies, generalized_forces
    from kinemesh.dynamics.integrators import stiffness_matrix
    from kinemesh.dynamics.system import Stretch, stretch_graph

    rp = floating_system().decoder.rest_points
    i, j = (torch.as_tensor(e) for e in stretch_graph(rp.numpy(), 6))
    st = Stretch(i, j, 0.9 * torch.linalg.norm(rp[i] - rp[j], dim=-1), 5.0)  # stretched at rest
    sysm = floating_system(forces=[], damping_mass=0.0, stretch=st)
    k, m, q1, qd, kin = _anchored(sysm, 5)
    red = m.reduced(sysm)
    M, rhs, rk = red.terms(sysm, q1, qd, 0.0)

    _close(rhs, generalized_forces(sysm, q1, kin, 0.0) - torch.einsum("ipc,p,pc->i", kin.J, sysm.point_mass,
                                                                         kin.hqq))
    _close(stiffness_matrix(sysm, q1, rk.J, rk.hj, x=rk.x), stiffness_matrix(sysm, q1, kin.J, x=kin.x))
    _close(red.energies(sysm, q1, qd)["potential"], energies(sysm, State(q1, qd), kin.x, kin.xd)["potential"])
    assert float(st.energy(kin.x)) > 1e-3
    zero = torch.zeros(k, dtype=torch.float64)
    dV = _jac(lambda z: torch.tensor(red.energies(sysm, z, zero)["potential"], dtype=torch.float64), q1, 1e-6)
    _close(red.terms(sysm, q1, zero, 0.0)[1], -dV)


@pytest.mark.parametrize("stiffness", [2.0, 0.0])
def test_local_rollout_agrees_with_network_rollout_on_toy_cabinet(stiffness):
    """The lid falls under gravity into a barrier while the drawer slides (tanh-curved joints, nonlinear mass
    matrix): over 45 frames the local-model rollout stays within 1.5 % of the motion of the network's converged
    implicit-midpoint rollout (32 substeps per frame; measured 0.81 % and 0.84 %, while the default 2-substep
    network rollout is off by 2.1 % and 4.6 %), with every accepted anchor within the disagreement tolerance.
    The toy's tanh joints saturate within one prior std, so its trust box is 0.1 (the default is for the
    trained decoder)."""
    kw = dict(stiffness=stiffness, damping_mass=0.2, barrier_stiffness=20.0, barrier_radius=1.0)
    s0 = State(torch.tensor([0.1, -0.2]), torch.tensor([0.6, 0.5]))
    ref = integrate(cabinet_system(**kw), s0, 46, fps=30.0, substeps=32, integrator="midpoint")
    sysm = cabinet_system(**kw)
    loc = integrate(sysm, s0, 46, fps=30.0, integrator="local", radius=0.1, agree_tol=0.01)
    with torch.no_grad():
        xr, xl = sysm.decoder.points(torch.as_tensor(ref.q)), sysm.decoder.points(torch.as_tensor(loc.q))
    motion = float((xr - xr[0]).norm(dim=-1).max())
    dev = float((xl - xr).norm(dim=-1).max())
    assert motion > 0.9  # the lid really swings (metres; the cabinet is 1.1 m wide)
    assert dev < 0.015 * motion, (dev, motion)
    assert loc.anchors >= 45 and 0 < loc.disagreement <= 0.01 and loc.exact_frames == 0
    assert abs(loc.total[-1] - ref.total[-1]) < 0.02 * ref.total[0]


def test_slow_frames_share_one_anchor(monkeypatch):
    """A frame that moves less than the trust box lets its segment span up to LOCAL_FRAMES frames, and the
    following frames inside it run on the same model: without gravity (the lid swings and the drawer slides
    slowly) 20 anchors instead of 46 for 45 frames (LOCAL_FRAMES 4 vs 1), and both stay within 0.5 % of the
    motion from the network's converged rollout (measured 0.13 % / 0.16 %)."""
    from kinemesh.dynamics import integrators

    kw = dict(stiffness=2.0, damping_mass=0.2, barrier_stiffness=20.0, barrier_radius=1.0, gravity=(0, 0, 0))
    s0 = State(torch.tensor([0.1, -0.2]), torch.tensor([0.6, 0.5]))
    ref = integrate(cabinet_system(**kw), s0, 46, fps=30.0, substeps=32, integrator="midpoint")
    f = cabinet_system(**kw).decoder.points
    xr = f(torch.as_tensor(ref.q))
    motion = float((xr - xr[0]).norm(dim=-1).max())
    anchors = {}
    for frames in (1, 4):
        monkeypatch.setattr(integrators, "LOCAL_FRAMES", frames)
        out = integrate(cabinet_system(**kw), s0, 46, fps=30.0, integrator="local", radius=0.1)
        assert float((f(torch.as_tensor(out.q)) - xr).norm(dim=-1).max()) < 0.005 * motion
        anchors[frames] = out.anchors
    assert anchors[1] >= 45 and anchors[4] <= 24, anchors


def test_local_is_second_order_in_the_segment_length():
    """Anchored at each segment's predicted midpoint the scheme converges to the network's solution at second
    order: deviation from the converged midpoint rollout shrinks >= 3x when the trust box halves from 0.05 to
    0.025 (4x at second order, 2x at first; gravity, damping and barrier on)."""
    kw = dict(stiffness=2.0, damping_mass=0.2, barrier_stiffness=20.0, barrier_radius=1.0)
    s0 = State(torch.tensor([0.1, -0.2]), torch.tensor([0.6, 0.5]))
    ref = integrate(cabinet_system(**kw), s0, 16, fps=30.0, substeps=128, integrator="midpoint")
    devs = []
    for radius in (0.05, 0.025):
        out = integrate(cabinet_system(**kw), s0, 16, fps=30.0, substeps=32, integrator="local", radius=radius,
                        agree_tol=1.0)
        devs.append(float(np.abs(out.q - ref.q).max()))
    assert devs[0] / devs[1] > 3.0, devs


def test_local_conserves_energy_without_damping():
    """On each model the substeps are an exact Lagrangian system and the models agree where they meet: total
    energy drifts < 1 % over 60 frames (measured 0.72 %, the network's own midpoint steps 0.22 %)."""
    sysm = cabinet_system(stiffness=2.0)
    out = integrate(sysm, State(torch.tensor([0.3, -0.4]), torch.tensor([1.0, 1.5])), 61, fps=30.0,
                    substeps=4, integrator="local", radius=0.1)
    assert out.energy_drift < 0.01, out.energy_drift
    assert np.ptp(out.kinetic) > 0.1 * np.max(out.kinetic)


class JumpDecoder:
    """A smooth 1-D map whose points jump by 0.3 m where q crosses 0.5 (like a flipped blend of a network)."""

    def __init__(self):
        self.mu_cond = torch.zeros(1, dtype=torch.float64)
        self.rest_points = torch.rand(20, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        self.rest_vertices = self.rest_points

    def points(self, q):
        d = q[..., :1, None] * torch.tensor([1.0, 0.0, 0.0], dtype=q.dtype) + 0.3 * (q[..., :1, None] > 0.5)
        return self.rest_points + d

    def vertices(self, q):
        return self.points(q)


def test_disagreement_redoes_the_frame_then_falls_back_to_the_network():
    """Crossing the jump the model cannot agree with the network at any step: the frame is redone in smaller
    pieces, then with the network's own steps; the accepted anchors all agree."""
    dec = JumpDecoder()
    sysm = System(dec, torch.full((20,), 0.05, dtype=torch.float64), torch.zeros(1), latent_inertia=1e-3,
                  derivatives="fd")
    out = integrate(sysm, State(torch.tensor([0.0]), torch.tensor([1.0])), 31, fps=30.0, integrator="local",
                    energy_check=False)
    assert out.exact_frames >= 1 and out.disagreement <= 0.01
    assert any("network's own steps" in w for w in out.warnings)
    assert out.q[-1, 0] > 0.5  # it went on past the jump


def test_failed_local_solve_falls_back_to_the_network(monkeypatch):
    """A local frame whose implicit solve fails (StepRejected, e.g. a stiff stop switching inside the Newton
    iteration) is redone in smaller pieces, then with the network's own steps, instead of halving the step until
    the rollout is declared diverged (a folding fan's guard diverged at 512 substeps per frame); the result is
    the network's midpoint rollout (with the finer steps of the retries: equal to the default one up to its
    discretisation error)."""
    from kinemesh.dynamics import integrators

    def failing(*a, **k):
        raise integrators.StepRejected("implicit solve not contracting")

    monkeypatch.setattr(integrators, "local_frame", failing)
    sysm = cabinet_system()
    s0 = State(torch.tensor([0.3, 0.1], dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    out = integrate(sysm, s0, 6, fps=30.0, integrator="local")
    ref = integrate(sysm, s0, 6, fps=30.0, integrator="midpoint")
    assert out.exact_frames == 5 and any("local step failed" in w for w in out.warnings)
    assert np.abs(out.q - ref.q).max() < 1e-3 and np.abs(out.q[-1] - out.q[0]).max() > 0.1


def test_latent_terms_forces_and_stiffness_are_derivatives_of_the_potential_float64():
    """``eom.LatentTerms`` (numpy, the substeps' elastic term and barrier): forces = -dV/dq and the stiffness the
    diagonal of d2V/dq2 (float64 central differences), with coordinates inside and beyond the barrier."""
    from kinemesh.dynamics.eom import latent_terms

    lat = latent_terms(floating_system(damping_stiffness=0.1))  # barrier radius 0.2 on the 2 latent coordinates
    q = np.array([0.5, -0.35, 0.1, 0.05, 0.3, -0.2, 0.1, 0.4])
    E, h = np.eye(len(q)), 1e-6
    dV = np.array([(lat.potential(q + h * e) - lat.potential(q - h * e)) / (2 * h) for e in E])
    assert np.allclose(lat.forces(q), -dV, rtol=1e-7, atol=1e-9) and np.abs(lat.forces(q)[:2]).min() > 0.1
    dF = np.stack([(lat.forces(q + h * e) - lat.forces(q - h * e)) / (2 * h) for e in E])
    assert np.allclose(lat.stiffness(q), -np.diag(dF), rtol=1e-6, atol=1e-8) and np.allclose(dF, np.diag(np.diag(dF)))
    D = lat.damping_matrix(np.full((8, 8), 2.0))  # Rayleigh damping on the 2 latent coordinates only
    assert np.allclose(D[:2, :2], 0.3 * 2.0 + np.diag([0.05, 0.05])) and not D[2:].any() and not D[:, 2:].any()


def test_kinematics_without_velocity_is_kept_for_the_same_state():
    """``eom.kinematics(system, q)`` (set-up asks for the rest state's several times) returns its last result for the
    same q, and decodes again for another q or method."""
    from kinemesh.dynamics.eom import kinematics

    sysm = cabinet_system("fd")
    q = torch.tensor([0.3, -0.2], dtype=torch.float64)
    a = kinematics(sysm, q)
    assert kinematics(sysm, q.clone()) is a and kinematics(sysm, q + 1e-3) is not a
    b = kinematics(sysm, q)
    sysm.derivatives = "jvp"
    c = kinematics(sysm, q)
    assert c is not b and torch.allclose(c.J, b.J, atol=1e-6) and kinematics(sysm, q, torch.ones(2)).hqq is not None
