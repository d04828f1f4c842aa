"""Boundary conditions (NeuROK Sec. 5.3): initial state from positions/velocities of selected vertices.

(q0, qd0) minimise ||x_sel - F(q0)_sel||^2 + ||xd_sel - J_sel qd0||^2; the two terms decouple: q0 by a
damped Gauss-Newton (Levenberg-Marquardt) solve from a few starts, then qd0 by linear least squares at q0.
A small Tikhonov term towards the rest state (positions) / zero (velocities) picks the least-motion answer
when the selection does not determine every coordinate. Pokes (impulses) map to velocities through the
generalized impulse: qd0 += M(q0)^-1 J_sel^T p.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from kinemesh.dynamics.eom import Kinematics, decoder_dtype, kinematics, mass_matrix, spd_solve
from kinemesh.dynamics.system import Handles, System, object_size
from kinemesh.errors import ConfigError

log = logging.getLogger(__name__)
BARRIER_WEIGHT = 100.0
"""Weight of the squared excess beyond the barrier radius (std) in ``solve_positions``, per size^2: 0.1 std
beyond it costs as much as missing the target by the object's size (plausible states first)."""
PROX_STAGES = 12
"""Re-centred Tikhonov stages after the least-motion solve of ``solve_positions`` (at most)."""
PROX_GAIN = 0.01
"""A stage that closes less than this fraction of the remaining handle distance ends the stages."""


@dataclass
class InitialState:
    """Result of a boundary-condition solve: q0, qd0 (k,) float64 tensors and the RMS residuals of the
    selected vertices' positions (m) and velocities (m/s)."""

    q0: torch.Tensor
    qd0: torch.Tensor
    position_rms: float = 0.0
    velocity_rms: float = 0.0


def solve_positions(system: System, handles: Handles, targets, q_init=None, n_starts: int = 3,
                    iters: int = 40, reg: float = 1e-4, seed: int = 0,
                    least_motion: float = 0.0, polish: bool = False,
                    broyden: bool = False) -> tuple[torch.Tensor, float]:
    """q (k,) whose handles best reach ``targets`` (h, 3) metres, and the RMS residual (m).

    Levenberg-Marquardt on r(q) = x_h(q) - targets plus sqrt(reg) * size * (q - q_rest) and the soft barrier
    (plausible states only). ``least_motion`` > 0 adds sqrt(least_motion * m_p / M) (x_p(q) - x_p(q_rest)) for
    every point p of the parts the handles are not on (the decoder's ``point_groups``; nothing without parts) nor
    carried by them (``carried_groups`` of a decoder that moves parts along joints: a dragged door's handle):
    of the states that reach the target, the one moving the rest of the object least (a dragged door opens,
    its neighbour stays). Starts: ``q_init`` (default q_rest) and ``n_starts - 1`` prior samples. ``polish``
    (drags): then up to ``PROX_STAGES`` solves with the Tikhonov term centred on the previous answer instead
    of q_rest, which close the gap that term leaves (comment in the code); not for fits of a whole shape (the
    rest state), where it would move weakly determined coordinates to fit small residuals.

    ``broyden``: the residual Jacobian is decoded (``kinematics``, 2 k + 1 states by central differences) at each
    start only and then follows the accepted steps by Broyden's update J += ((r_new - r - J s) s^T) / (s^T s)
    (Broyden 1965; Nocedal & Wright, Numerical Optimization, 2nd ed., Eq. 11.27), so a trial step decodes one
    state instead of 2 k + 1 (the rest state: 38 instead of 85 network rows on the bench beam, with the
    Jacobian decoded again at the answer by whoever needs it).
    """
    targets = torch.as_tensor(np.asarray(targets, dtype=np.float64)).reshape(-1, 3)
    if targets.shape[0] != len(handles):
        raise ConfigError(f"{targets.shape[0]} targets for {len(handles)} selected vertices")
    if not torch.isfinite(targets).all():
        raise ConfigError("target positions must be finite")
    rp = system.decoder.rest_points.detach().double()
    size = object_size(system.decoder)
    lam_reg = reg * size * size
    k = system.dim
    mu = system.prior_mean
    gen = torch.Generator().manual_seed(seed)
    starts = [system.q_rest.clone() if q_init is None else torch.as_tensor(q_init, dtype=torch.float64).clone()]
    for _ in range(max(0, n_starts - 1)):
        starts.append(mu + torch.randn(k, generator=gen, dtype=torch.float64))
    r_b = system.barrier_radius
    w_b = BARRIER_WEIGHT * size * size

    groups = getattr(system.decoder, "point_groups", None)
    if least_motion > 0 and groups is not None:
        groups = torch.as_tensor(np.asarray(groups).reshape(-1))
        dragged = groups[handles.idx.reshape(-1)]
        carried = getattr(system.decoder, "carried_groups", None)  # (parts along joints: and the parts below them)
        if carried is not None:
            dragged = torch.as_tensor(carried(dragged.numpy()), dtype=groups.dtype)
        other = ~torch.isin(groups, dragged)  # points of the parts neither dragged nor carried by them
        least_motion = least_motion if bool(other.any()) else 0.0
    else:
        least_motion = 0.0
    if least_motion > 0:
        x_rest = kinematics(system, system.q_rest).x.detach()
        w_m = torch.sqrt(least_motion * other * system.point_mass / system.point_mass.sum())[:, None]  # (P, 1)

    def cost_terms(q, kin):
        r = (handles.positions(kin.x, rp) - targets).reshape(-1)
        Jh = handles.jacobian(kin.J).reshape(k, -1).T  # (3h, k)
        if least_motion > 0:
            r = torch.cat([r, (w_m * (kin.x - x_rest)).reshape(-1)])
            Jh = torch.cat([Jh, (w_m[None] * kin.J).reshape(k, -1).T])
        excess = ((q - mu).abs() - r_b).clamp_min(0.0) * system.prior  # (the network's coordinates)
        return r, Jh, excess

    def residual(q, x):  # cost_terms without the Jacobian: (r, excess) from the points x only
        r = (handles.positions(x, rp) - targets).reshape(-1)
        if least_motion > 0:
            r = torch.cat([r, (w_m * (x - x_rest)).reshape(-1)])
        return r, ((q - mu).abs() - r_b).clamp_min(0.0) * system.prior

    def cost(q, kin, centre):
        r, excess = residual(q, kin.x)
        return float(r @ r + lam_reg * ((q - centre) ** 2).sum() + w_b * (excess ** 2).sum())

    decode = getattr(system.decoder, "points_nograd", system.decoder.points)

    def points_only(q):  # the trial state's points (a Kinematics without J), one decoded state
        with torch.no_grad():
            return Kinematics(x=decode(q.to(decoder_dtype(system))[None])[0].double(), J=None)

    def descend(q, centre):  # damped Gauss-Newton on ``cost`` from q; (q, kin, cost)
        kin = kinematics(system, q)
        c = cost(q, kin, centre)
        damping = 1e-3
        for _ in range(iters):
            if kin.J is not None:  # a decoded Jacobian (the start; every state without ``broyden``)
                r, Jh, excess = cost_terms(q, kin)
            else:
                r, excess = residual(q, kin.x)
            wb = w_b * (excess > 0).double()
            A = Jh.T @ Jh + lam_reg * torch.eye(k, dtype=torch.float64) + torch.diag(wb)
            g = Jh.T @ r + lam_reg * (q - centre) + wb * excess * torch.sign(q - mu)
            improved = False
            for _ in range(8):
                dq = -spd_solve(A + damping * (torch.diag(torch.diag(A)) + 1e-12 * torch.eye(k, dtype=A.dtype)), g)
                qn = q + dq
                kn = points_only(qn) if broyden else kinematics(system, qn)
                cn = cost(qn, kn, centre)
                if np.isfinite(cn) and cn < c:
                    if broyden:  # secant update of the residual Jacobian along the accepted step
                        rn = residual(qn, kn.x)[0]
                        Jh = Jh + torch.outer(rn - r - Jh @ dq, dq) / float(dq @ dq)
                    q, kin, improved = qn, kn, True
                    damping = max(damping / 3.0, 1e-9)
                    rel = (c - cn) / max(c, 1e-300)
                    c = cn
                    break
                damping *= 4.0
            if not improved or rel < 1e-7:
                break
        return q, kin, c

    def miss(kin):  # RMS distance of the handles from their targets, m
        r = handles.positions(kin.x, rp) - targets
        return float(torch.sqrt((r * r).sum(-1).mean()))

    best_q, best_kin, best_c = None, None, np.inf
    for q in starts:
        q, kin, c = descend(q, system.q_rest)
        if c < best_c:
            best_q, best_kin, best_c = q, kin, c
    # iterated Tikhonov (proximal point): the term towards q_rest picked the least-motion answer but also held
    # every coordinate back from the target in proportion to how little it moves the handles (a cart's wheel
    # turned 0.6 of a 60 deg drag); re-centred on the last answer it only damps each further step, so the handles
    # close the remaining gap while coordinates that do not move them stay where they are
    q, kin, err = best_q, best_kin, miss(best_kin)
    for _ in range(PROX_STAGES if polish else 0):
        if err <= 1e-6 * size:
            break
        qn, kn, _ = descend(q, q)
        en = miss(kn)
        if not en < err:
            break
        q, kin, done, err = qn, kn, en > (1.0 - PROX_GAIN) * err, en
        if done:
            break
    return q, err


def solve_velocities(system: System, handles: Handles, q0: torch.Tensor, velocities,
                     reg: float = 1e-8) -> tuple[torch.Tensor, float]:
    """qd0 (k,) least-squares matching handle velocities ``velocities`` (h, 3) m/s at q0, and the RMS
    residual (m/s)."""
    v = torch.as_tensor(np.asarray(velocities, dtype=np.float64)).reshape(-1, 3)
    if v.shape[0] != len(handles):
        raise ConfigError(f"{v.shape[0]} velocities for {len(handles)} selected vertices")
    if not torch.isfinite(v).all():
        raise ConfigError("velocities must be finite")
    kin = kinematics(system, q0)
    k = system.dim
    Jh = handles.jacobian(kin.J).reshape(k, -1).T  # (3h, k)
    A = Jh.T @ Jh
    lam = reg * (float(torch.trace(A)) / k + 1e-300)
    qd = spd_solve(A + lam * torch.eye(k, dtype=A.dtype), Jh.T @ v.reshape(-1))
    res = (Jh @ qd - v.reshape(-1)).reshape(-1, 3)
    return qd, float(torch.sqrt((res * res).sum(-1).mean()))


def solve_initial_state(system: System, handles: Handles, positions=None, velocities=None, **kw) -> InitialState:
    """(q0, qd0) from positions (h, 3) m and/or velocities (h, 3) m/s of the handle vertices.

    Missing positions keep q0 = q_rest; missing velocities give qd0 = 0. Extra keywords go to
    :func:`solve_positions`.
    """
    if positions is not None:
        q0, prms = solve_positions(system, handles, positions, **kw)
    else:
        q0, prms = system.q_rest.clone(), 0.0
    if velocities is not None:
        qd0, vrms = solve_velocities(system, handles, q0, velocities)
    else:
        qd0, vrms = torch.zeros_like(q0), 0.0
    return InitialState(q0, qd0, prms, vrms)


def impulse_velocity(system: System, handles: Handles, q: torch.Tensor, impulse) -> torch.Tensor:
    """Generalized velocity change (k,) of impulses ``impulse`` (h, 3) N s on the handles: M^-1 J_h^T p."""
    p = torch.as_tensor(np.asarray(impulse, dtype=np.float64)).reshape(-1, 3)
    if p.shape[0] == 1 and len(handles) > 1:
        p = p.expand(len(handles), 3) / len(handles)
    if p.shape[0] != len(handles):
        raise ConfigError(f"{p.shape[0]} impulses for {len(handles)} selected vertices")
    if not torch.isfinite(p).all():
        raise ConfigError("impulse must be finite")
    kin = kinematics(system, q)
    M = mass_matrix(system, kin.J)
    return spd_solve(M, torch.einsum("ihc,hc->i", handles.jacobian(kin.J), p))
