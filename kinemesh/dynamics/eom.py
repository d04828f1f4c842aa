"""Equations of motion of a latent system (NeuROK Sec. 5.2, Eq. 3, written without Christoffel symbols).

With x(q) the decoded points and J = dx/dq, d'Alembert's principle projected onto the tangent space gives

    M(q) qdd = -J^T diag(m) (d2x/dq2)[qd, qd] - dV/dq + J^T f_ext - (alpha M(q) + beta k I) qd,
    M(q) = J^T diag(m) J + m_reg I,

which equals Eq. 3 (M = G, C = Christoffel terms) but needs only one Jacobian (k forward-mode JVPs, batched)
and one second directional derivative (a JVP of a JVP) per evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg.lapack import dpotrf, dpotrs
from torch.func import jvp

from kinemesh.dynamics.system import State, System, as_numpy, dtype_of


@dataclass
class Kinematics:
    """Decoded quantities at (q, qd): points x (P, 3), J (k, P, 3) with J[i] = dx/dq_i, point velocities
    xd = J qd (P, 3) and the velocity-product acceleration H[qd, qd] (P, 3) (None unless requested). float64.
    ``fd`` = (x(q + h e_i) (k, P, 3), x(q + h qd/|qd|) (P, 3), h) when the finite-difference path decoded them
    (reused by the implicit solve's velocity coupling), else None. On a ``local`` model (``local.Reduced.terms``)
    ``hj`` holds the springs' handle Jacobians (k, h, 3), x and xd are None without contact forces and J is
    None or a ``local.ModelJacobian``."""

    x: torch.Tensor | None
    J: torch.Tensor | None
    xd: torch.Tensor | None = None
    hqq: torch.Tensor | None = None
    fd: tuple | None = None
    hj: list | None = None


def decoder_dtype(system: System) -> torch.dtype:
    """The floating dtype the system's decoder computes in (``system.dtype_of``)."""
    return dtype_of(system.decoder)


def kinematics(system: System, q: torch.Tensor, qd: torch.Tensor | None = None) -> Kinematics:
    """Points, Jacobian and (if ``qd`` is given) the second directional derivative H[qd, qd] at q.

    q, qd : (k,) float. The decoder runs in its own dtype; the results are float64.
    ``system.derivatives`` picks the method:
    ``"jvp"`` (exact) - J from one batched forward-mode pass (row i carries the tangent e_i) and H[qd, qd]
    from a JVP of a JVP; ``"fd"`` - one batched plain forward of 2k + 3 states (central differences with
    step ``system.fd_step`` in q units), several times faster on transformer decoders where PyTorch's
    forward-mode AD (and nested forward mode even more) is slow; use it with a float64 decoder.
    Without ``qd`` the last result is kept on ``system`` and returned again for the same q, decoder and method
    (set-up asks for the rest state's Jacobian four times); treat it as read-only.
    """
    if qd is None:
        key = (as_numpy(q).tobytes(), system.decoder, system.derivatives, system.fd_step)
        last = getattr(system, "_kin_last", None)
        if last is not None and last[0][0] == key[0] and all(a is b or a == b for a, b in zip(last[0][1:], key[1:])):
            return last[1]
        system._kin_last = (key, _kinematics(system, q, None))
        return system._kin_last[1]
    return _kinematics(system, q, qd)


def _kinematics(system: System, q: torch.Tensor, qd: torch.Tensor | None) -> Kinematics:
    """``kinematics`` without its cache."""
    dt = decoder_dtype(system)
    f = system.decoder.points
    k = int(q.shape[0])
    qq = q.detach().to(dt)
    with torch.no_grad():
        if system.derivatives == "fd":
            h = float(system.fd_step)
            E = torch.eye(k, dtype=dt) * h
            rows = [qq[None], qq + E, qq - E]
            vn = None
            if qd is not None:
                v = qd.detach().to(dt)
                vn = float(torch.linalg.norm(v))
                if vn > 0:
                    u = v / vn * h
                    rows += [(qq + u)[None], (qq - u)[None]]
            X = getattr(system.decoder, "points_nograd", f)(torch.cat(rows)).double()
            x = X[0]
            J = (X[1:k + 1] - X[k + 1:2 * k + 1]) / (2 * h)
            out = Kinematics(x=x, J=J)
            if qd is not None:
                out.xd = torch.einsum("ipc,i->pc", J, qd.double())
                if vn:
                    out.hqq = (X[2 * k + 1] - 2 * x + X[2 * k + 2]) * (vn * vn / (h * h))
                    out.fd = (X[1:k + 1], X[2 * k + 1], h)
                else:
                    out.hqq = torch.zeros_like(x)
            return out
        # one batched forward-mode pass: row i of the batch carries the tangent e_i -> column i of J
        Q = qq.expand(k, k).contiguous()
        E = torch.eye(k, dtype=dt)
        xb, Jb = jvp(f, (Q,), (E,))
        out = Kinematics(x=xb[0].double(), J=Jb.double())
        if qd is not None:
            v = qd.detach().to(dt)

            def first(z):
                return jvp(f, (z,), (v,))[1]

            xd, hqq = jvp(first, (qq,), (v,))  # J qd and d2x/dq2 [qd, qd]
            out.xd, out.hqq = xd.double(), hqq.double()
    return out


def mass_matrix(system: System, J: torch.Tensor) -> torch.Tensor:
    """M = J^T diag(m) J + m_reg I, (k, k) float64 from J (k, P, 3)."""
    M = torch.einsum("ipc,p,jpc->ij", J, system.point_mass, J)
    if system.latent_inertia:
        M = M + system.latent_inertia * torch.eye(J.shape[0], dtype=M.dtype)
    return 0.5 * (M + M.T)


def decoded_rest_points(system: System) -> torch.Tensor:
    """The points decoded at the rest state q_rest (P, 3) metres, float64, cached on ``system``: the reference
    of the gravity potential."""
    cache = getattr(system, "_rest_x", None)
    if cache is None:
        dt = decoder_dtype(system)
        with torch.no_grad():
            cache = system.decoder.points(system.q_rest.to(dt)).double()
        system._rest_x = cache
    return cache


def potential_energy(system: System, q: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
    """V(q) in joules (gravity relative to the rest state + elastic + barrier + springs + stretching). x: (P, 3)
    points."""
    if x is None:
        dt = decoder_dtype(system)
        with torch.no_grad():
            x = system.decoder.points(q.to(dt)).double()
    q = q.double()
    V = -(system.point_mass[:, None] * (x - decoded_rest_points(system)) * system.gravity).sum()
    V = V + latent_potential(system, q)
    rp = system.decoder.rest_points.detach().double()
    for s in system.springs:
        r = s.handles.positions(x, rp) - s.target
        V = V + 0.5 * s.stiffness * (r * r).sum()
    if system.stretch is not None:
        V = V + system.stretch.energy(x)
    return V


@dataclass
class LatentTerms:
    """The terms of a system that act on q alone, as float64 numpy (k,) vectors (``latent_terms``): latent elastic
    term, soft barrier and Rayleigh damping (``system`` module docstring). Per call on the network's path, once per
    model on a ``local`` one (``local.Reduced``), where they are a few numpy operations of a substep.

    Attributes: k_el = k P, q_rest, mu (the barrier's centre), prior (1 where the barrier acts), kb = k_b,
    radius = r, latent = diag(P), alpha, k_d = beta k P, m_reg."""

    k_el: np.ndarray
    q_rest: np.ndarray
    mu: np.ndarray
    prior: np.ndarray
    kb: float
    radius: float
    latent: np.ndarray
    alpha: float
    k_d: np.ndarray
    m_reg: float

    def _excess(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(d = q - mu, relu(|d| - r) on the barrier's coordinates)."""
        d = q - self.mu
        return d, np.maximum(np.abs(d) - self.radius, 0.0) * self.prior

    def potential(self, q: np.ndarray) -> float:
        """1/2 k |P (q - q_rest)|^2 + k_b / 3 sum relu(|q - mu| - r)^3 (C2-smooth barrier, so the integrators keep
        their order when the state enters it), joules."""
        dq = q - self.q_rest
        e = 0.5 * float(self.k_el @ (dq * dq))
        return e + self.kb / 3.0 * float((self._excess(q)[1] ** 3).sum()) if self.kb else e

    def forces(self, q: np.ndarray) -> np.ndarray:
        """-d/dq of ``potential`` (k,)."""
        f = -self.k_el * (q - self.q_rest)
        if self.kb:
            d, ex = self._excess(q)
            f = f - self.kb * ex * ex * np.sign(d)
        return f

    def stiffness(self, q: np.ndarray) -> np.ndarray:
        """The diagonal (k,) of d2 ``potential`` / dq2."""
        return self.k_el + 2.0 * self.kb * self._excess(q)[1] if self.kb else self.k_el

    def damping_matrix(self, M: np.ndarray) -> np.ndarray:
        """alpha P M P + diag(beta k P) (k, k): the Rayleigh damping force is -(this) qd (on deformation, not on the
        rigid-body motion of a free body)."""
        return self.alpha * (M * self._pp) + self._kd if self.alpha else self._kd

    def __post_init__(self):
        self._pp, self._kd = np.outer(self.latent, self.latent), np.diag(self.k_d)


def latent_terms(system: System) -> LatentTerms:
    """The :class:`LatentTerms` of ``system`` as it is now: cached on ``system`` while the attributes they are made
    of stay the same objects and values (set-up reassigns the stiffness and barrier; every ``local`` anchor asks)."""
    key = (system.q_rest, getattr(system.decoder, "mu_cond", None), system.stiffness, system.damping_stiffness,
           system.damping_mass, system.barrier_stiffness, system.barrier_radius, system.latent_inertia)
    cached = getattr(system, "_latent_terms", None)
    if cached is not None and all(a is b if isinstance(a, torch.Tensor) or a is None else type(a) is type(b) and a == b
                                  for a, b in zip(cached[0], key)) \
            and torch.equal(cached[1], system.elastic_mask) and torch.equal(cached[2], system.prior_mask):
        return cached[3]
    out = _latent_terms(system)  # (the masks compared by value: set-up edits prior_mask in place)
    system._latent_terms = (key, system.elastic_mask.clone(), system.prior_mask.clone(), out)
    return out


def _latent_terms(system: System) -> LatentTerms:
    lat = system.latent.numpy()
    k_d = system.damping_stiffness * system.stiffness * lat
    return LatentTerms(system.stiffness * lat, as_numpy(system.q_rest), as_numpy(system.prior_mean),
                       as_numpy(system.prior), float(system.barrier_stiffness), float(system.barrier_radius), lat,
                       float(system.damping_mass), k_d, float(system.latent_inertia))


def latent_potential(system: System, q: torch.Tensor) -> torch.Tensor:
    """The potential energy terms of q alone (J): latent elastic term + soft barrier (``LatentTerms.potential``)."""
    return torch.tensor(latent_terms(system).potential(as_numpy(q)), dtype=torch.float64)


def latent_forces(system: System, q: torch.Tensor) -> torch.Tensor:
    """-d/dq of ``latent_potential`` (k,)."""
    return torch.from_numpy(latent_terms(system).forces(as_numpy(q)))


def kinetic_energy(system: System, qd: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
    """T = 1/2 qd^T M(q) qd, joules."""
    return 0.5 * qd @ mass_matrix(system, J) @ qd


def generalized_forces(system: System, q: torch.Tensor, kin: Kinematics, t: float) -> torch.Tensor:
    """-dV/dq + J^T f_ext (k,) newton-metres per unit q (no damping, no velocity-product term). Floor contact
    uses the point velocities ``kin.xd`` (zero when absent); the stretching energy enters as its point forces
    -dV/dx, projected with J^T as the other point forces."""
    J = kin.J
    m = system.point_mass
    f = m[:, None] * system.gravity[None, :]  # gravity on every point (P, 3)
    rp = system.decoder.rest_points.detach().double()
    for force in system.forces:
        if hasattr(force, "contact_forces"):
            f = f + force.contact_forces(kin.x, kin.xd, m)
        elif hasattr(force, "point_forces"):
            f = f + force.point_forces()
        elif force.t_start <= t < force.t_end:
            f = f + force.handles.spread(force.force, system.n_points)
    if system.stretch is not None:
        f = f - system.stretch.gradient(kin.x)
    Q = torch.einsum("ipc,pc->i", J, f)
    for s in system.springs:
        r = s.handles.positions(kin.x, rp) - s.target  # (h, 3)
        Q = Q - s.stiffness * torch.einsum("ihc,hc->i", s.handles.jacobian(J), r)
    return Q + latent_forces(system, q)


def acceleration(system: System, q: torch.Tensor, qd: torch.Tensor, t: float = 0.0,
                 return_kinematics: bool = False, local=None):
    """qdd (k,) float64 from the equations of motion at (q, qd, t) (module docstring); with ``local`` (a
    :class:`kinemesh.dynamics.local.LocalModel`) on that model instead of the network, with per-point work
    only for contact forces (``local.Reduced``). ``return_kinematics``: (qdd, Kinematics, M)
    (``acceleration_terms``)."""
    qdd, kin, M = acceleration_terms(system, as_numpy(q), as_numpy(qd), t, local)
    return (torch.from_numpy(qdd), kin, torch.from_numpy(M)) if return_kinematics else torch.from_numpy(qdd)


def acceleration_terms(system: System, q: np.ndarray, qd: np.ndarray, t: float = 0.0, local=None) -> tuple:
    """(qdd (k,), Kinematics, M (k, k)) at (q, qd, t) given as float64 numpy (k,): ``acceleration`` without the
    conversions, for the implicit solve (numpy, so a substep on a ``local`` model is a few small operations)."""
    if local is not None:
        red = local.reduced(system)
        M, rhs, kin = red.terms(system, q, qd, t)
        lat = red.latent
    else:
        qt, vt = torch.from_numpy(q), torch.from_numpy(qd)
        kin = kinematics(system, qt, vt)
        rhs = generalized_forces(system, qt, kin, t) - torch.einsum("ipc,p,pc->i", kin.J, system.point_mass, kin.hqq)
        M, rhs, lat = mass_matrix(system, kin.J).numpy(), rhs.numpy(), latent_terms(system)
    return spd_solve(M, rhs - lat.damping_matrix(M) @ qd), kin, M


def spd_solve(M, rhs):
    """Solve M x = rhs for a symmetric positive (semi-)definite M (k, k): Cholesky, least squares if it fails. numpy
    or torch (the result is of the kind of ``rhs``); a non-finite M gives NaN."""
    if isinstance(rhs, torch.Tensor):
        return torch.from_numpy(spd_solve(as_numpy(M), as_numpy(rhs))).to(rhs)
    if not np.isfinite(M).all():
        return np.full(rhs.shape, np.nan)
    L, info = dpotrf(M, lower=1, clean=0)
    if info == 0:
        return dpotrs(L, rhs, lower=1)[0]
    return np.linalg.lstsq(M, rhs, rcond=None)[0]


def point_velocities(system: System, q: torch.Tensor, qd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Points x (P, 3) and their velocities xd = J qd (P, 3) at (q, qd), float64: one directional derivative
    (central difference along qd, 3 decoded states, or one JVP) instead of the whole Jacobian."""
    dt = decoder_dtype(system)
    f = system.decoder.points
    qq, v = q.detach().to(dt), qd.detach().to(dt)
    with torch.no_grad():
        if system.derivatives == "jvp":
            x, xd = jvp(f, (qq,), (v,))
            return x.double(), xd.double()
        vn = float(torch.linalg.norm(v))
        if vn == 0:
            x = f(qq).double()
            return x, torch.zeros_like(x)
        h = float(system.fd_step)
        u = v / vn * h
        X = getattr(system.decoder, "points_nograd", f)(torch.stack([qq, qq + u, qq - u])).double()
        return X[0], (X[1] - X[2]) * (vn / (2 * h))


def energies(system: System, state: State, x: torch.Tensor | None = None,
             xd: torch.Tensor | None = None) -> dict[str, float]:
    """{'kinetic', 'potential', 'total'} in joules at ``state``; T = 1/2 sum_p m_p |xd_p|^2 + 1/2 m_reg |qd|^2
    (= 1/2 qd^T M qd) from the point velocities (decoded here unless the points x and velocities xd (P, 3)
    are given)."""
    if x is None or xd is None:
        x, xd = point_velocities(system, state.q.double(), state.qd.double())
    T = 0.5 * float((system.point_mass[:, None] * xd * xd).sum()) + 0.5 * system.latent_inertia * float(
        (state.qd.double() ** 2).sum())
    V = float(potential_energy(system, state.q, x))
    return {"kinetic": T, "potential": V, "total": T + V}
