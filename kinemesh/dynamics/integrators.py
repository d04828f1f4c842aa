"""Time integration: ``step(system, state, dt) -> state`` and a guarded fixed-substep rollout.

``midpoint`` (default): the implicit midpoint rule on (q, qd),
    q1 = q0 + h (qd0 + qd1) / 2,   qd1 = qd0 + h qdd((q0 + q1) / 2, (qd0 + qd1) / 2, t + h / 2),
solved by a simplified Newton iteration (see ``step_midpoint``). It is symmetric (time-reversible) and A-stable, so without damping and
forces the energy of the latent Lagrangian system oscillates without secular drift (tested: < 1 % over 1000
steps). An implicit solve that does not converge means the step is too large for the system's stiffness; the
step then raises ``StepRejected`` and the rollout halves the step.
``rk4``: the classical explicit Runge-Kutta method (4 evaluations per step, small energy drift, conditionally
stable).
``local``: the implicit midpoint rule on a local quadratic model of the decoder (``kinemesh.dynamics.local``),
anchored per segment of motion within a trust box of ``radius`` (at most ``LOCAL_FRAMES`` frames, at least
one per frame whose motion exceeds the box); each new anchor decodes the network once ((r + 1)(k + 1) states)
and checks that the model agrees with it there.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.linalg.lapack import dgesv

from kinemesh.dynamics.eom import acceleration, acceleration_terms, latent_terms
from kinemesh.dynamics.eom import energies as point_energies
from kinemesh.dynamics.local import anchor, exact_derivatives
from kinemesh.dynamics.system import State, System, as_numpy, object_size
from kinemesh.errors import ConfigError, SimulationDivergedError

log = logging.getLogger(__name__)

INTEGRATORS = ("midpoint", "rk4", "local", "distilled")

LOCAL_RADIUS = 0.5
"""Trust box of the ``local`` integrator: re-anchor when a coordinate moved this far (prior std) from q_a."""
LOCAL_TOL = 0.01
"""``local``: largest accepted model-vs-network disagreement at a new anchor, fraction of the object size
(``LocalModel.disagreement``: the position error and the one the velocity error adds over a frame)."""
LOCAL_DIRECTIONS = 2
"""``local``: second-order directions of each anchor, the velocity (1) and the acceleration (2); each costs
k + 1 decoded states on top of the k + 1 of x and J."""
LOCAL_FRAMES = 4
"""``local``: the most frames one anchor's model may span when a frame moves less than the trust box."""
LOCAL_RETRIES = 3
"""``local``: a frame whose model disagrees is redone with half the trust box and twice the substeps this many
times, then with the network's own implicit-midpoint steps."""


class StepRejected(Exception):
    """A step failed (no convergence, non-finite or runaway state); retry with a smaller step."""


class ModelDisagrees(StepRejected):
    """The local model and the network disagree at a new anchor by more than the tolerance (or, without
    external forces, the energy grew within the frame): redo the frame in smaller pieces."""


def energies(system: System, state: State) -> dict[str, float]:
    """``eom.energies`` at ``state``; on a decoder with exact derivatives (``distilled``'s surrogate,
    ``local.exact_derivatives``) the same energies of a first-order anchor at q (``local.Reduced.energies``:
    T = 1/2 a_xd Gram a_xd + 1/2 m_reg |qd|^2 with xd = J qd exact, V from the contracted gravity; no decoded
    states, no central difference)."""
    if exact_derivatives(system.decoder):
        return anchor(system, state.q.double(), []).energies(system, state)
    return point_energies(system, state)


def _finite(*ts) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in ts)


def stiffness_matrix(system: System, q, J: torch.Tensor | None, hj: list | None = None,
                     lat=None, x: torch.Tensor | None = None) -> np.ndarray:
    """Gauss-Newton approximation of d2V/dq2 (k, k) float64 numpy at q (k,): latent spring + barrier
    (``eom.LatentTerms.stiffness``; ``lat``: the system's, None = made here) + J_h^T k_s J_h of the springs (gravity
    and curvature terms left out), the handle Jacobians from J (k, P, 3) or given as ``hj`` (per spring (k, h, 3)),
    + the stretching energy's ``Stretch.stiffness_matrix`` at the points x (P, 3) (needs J). Used only to
    precondition the implicit solve."""
    lat = latent_terms(system) if lat is None else lat
    q = as_numpy(q)
    K = np.diag(lat.stiffness(q))
    for i, s in enumerate(system.springs):
        Jh = s.handles.jacobian(J) if hj is None else hj[i]
        Jh = np.asarray(Jh).reshape(len(q), -1)
        K += s.stiffness * Jh @ Jh.T
    if system.stretch is not None:
        K += system.stretch.stiffness_matrix(x, J).numpy()
    return K


def contact_matrices(system: System, x: torch.Tensor, xd: torch.Tensor | None,
                     J: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gauss-Newton stiffness and damping (k, k) of the contact forces (``Floor.gauss_newton``,
    ``PartContacts.gauss_newton``) at points x (P, 3), velocities xd. Used only to precondition the implicit
    solve (contact is stiff)."""
    k = J.shape[0]
    K = torch.zeros(k, k, dtype=torch.float64)
    C = torch.zeros(k, k, dtype=torch.float64)
    for force in system.forces:
        if hasattr(force, "gauss_newton"):  # Floor, PartContacts
            K_f, C_f = force.gauss_newton(x, xd, J, system.point_mass)
            K, C = K + K_f, C + C_f
    return K, C


def velocity_coupling(system: System, q: torch.Tensor, v: torch.Tensor, h: float = 1e-4,
                      kin=None) -> torch.Tensor:
    """C = d/dqd [J^T diag(m) H[qd, qd]] = 2 J^T diag(m) H[., qd] (k, k) at (q, v), by central differences of J
    along v (one batched decode of 4k states). Only used to precondition the implicit solve.

    ``kin``: the finite-difference Kinematics at the same (q, v) (``kin.fd``); then the mixed second
    differences H[e_i, v/|v|] = (x(q + h e_i + h u) - x(q + h e_i) - x(q + h u) + x(q)) / h^2 reuse its decoded
    states and only the k states q + h e_i + h u are new (first-order accurate, enough for a preconditioner)."""
    k = q.shape[0]
    vn = float(torch.linalg.norm(v))
    if vn == 0:
        return torch.zeros(k, k, dtype=torch.float64)
    from kinemesh.dynamics.eom import decoder_dtype

    dt = decoder_dtype(system)
    decode = getattr(system.decoder, "points_nograd", system.decoder.points)
    if kin is not None and kin.fd is not None:
        xe, xu, hk = kin.fd  # x(q + h e_i) (k, P, 3), x(q + h u) (P, 3)
        E = torch.eye(k, dtype=dt) * hk
        with torch.no_grad():
            xeu = decode(q.detach().to(dt) + (v / vn * hk).detach().to(dt) + E).double()
        Hv = (xeu - xe - xu + kin.x) * (vn / (hk * hk))  # (k, P, 3): H[e_i, v]
        return 2.0 * torch.einsum("ipc,p,jpc->ij", kin.J, system.point_mass, Hv)
    qq, u = q.detach().to(dt), (v / vn * h).detach().to(dt)
    E = torch.eye(k, dtype=dt) * h
    with torch.no_grad():
        X = decode(torch.cat([qq + u + E, qq + u - E, qq - u + E, qq - u - E])).double()
    Jp = (X[:k] - X[k:2 * k]) / (2 * h)
    Jm = (X[2 * k:3 * k] - X[3 * k:]) / (2 * h)
    Hv = (Jp - Jm) * (vn / (2 * h))  # (k, P, 3): H[e_i, v]
    J = 0.5 * (Jp + Jm)
    return 2.0 * torch.einsum("ipc,p,jpc->ij", J, system.point_mass, Hv)


def step_midpoint(system: System, state: State, dt: float, tol: float = 1e-6, max_iter: int = 12,
                  local=None) -> State:
    """One implicit-midpoint step, solved for qd1 by a simplified Newton iteration.

    Residual R(qd1) = qd1 - qd0 - dt qdd(q_m, qd_m) with q_m = q0 + dt (qd0 + qd1) / 4, qd_m = (qd0 + qd1) / 2;
    its Jacobian is approximated by A = I + dt^2/4 M^-1 K + dt/2 M^-1 (alpha M + beta k I + C) (K from
    :func:`stiffness_matrix`, C from :func:`velocity_coupling`, evaluated once per step), so stiff springs
    (pins, elastic term, barrier) and fast motion converge in a few iterations at steps far beyond the
    fixed-point limit. ``tol`` is on q and dt * qd, in q units (prior std): the iteration stops at an update below
    it or, from the second update on, when the error its contraction rate predicts is (usually one evaluation
    fewer). With ``local`` (a LocalModel)
    every evaluation is on that model (no network). On a decoder with exact derivatives (``distilled``'s
    surrogate, ``local.exact_derivatives``) every evaluation is on an exact anchor there instead (``local.anchor``
    at q_m along qd_m: x, J and H[qd_m, qd_m] exact, no differences). The iteration runs on float64 numpy (k,)
    vectors (``eom.acceleration_terms``).
    """
    exact = local is None and exact_derivatives(system.decoder)

    def model(q, v):  # the model of an evaluation at (q, v): ``local``, an exact anchor there, or the network (None)
        return anchor(system, torch.from_numpy(q), [torch.from_numpy(v)]) if exact else local

    q0, v0, t0 = state.q.numpy(), state.qd.numpy(), state.t
    a = None if state.qdd is None else state.qdd.numpy()
    if a is None or not np.isfinite(a).all():
        a = acceleration_terms(system, q0, v0, t0, model(q0, v0))[0]
    lat = latent_terms(system) if local is None else local.reduced(system).latent
    v1 = v0 + dt * a
    C = None
    prev = math.inf
    delta = math.inf
    scale = tol * (1.0 + float(np.abs(q0).max()))
    for it in range(max_iter):
        qm, vm = q0 + 0.25 * dt * (v0 + v1), 0.5 * (v0 + v1)
        at = model(qm, vm)
        am, kin, M = acceleration_terms(system, qm, vm, t0 + 0.5 * dt, at)
        R = v1 - v0 - dt * am
        K = stiffness_matrix(system, qm, kin.J, kin.hj, lat, kin.x)
        if C is None:
            C = velocity_coupling(system, torch.from_numpy(qm), torch.from_numpy(vm), kin=kin).numpy() \
                if at is None else at.coupling(system, qm, vm)
        A = M + 0.25 * dt * dt * K + 0.5 * dt * (lat.damping_matrix(M) + C)
        if kin.J is not None:  # (None: a local model's evaluation without contact forces)
            K_c, C_c = contact_matrices(system, kin.x, kin.xd, kin.J)
            A = A + 0.25 * dt * dt * K_c.numpy() + 0.5 * dt * C_c.numpy()
        dv, info = dgesv(A, M @ R)[2:]  # (LAPACK directly: numpy's solve costs ~4x more on a 14 x 14 matrix)
        if info:  # a singular iteration matrix: a failed step
            raise StepRejected("singular implicit-solve matrix")
        dv = -dv
        if not np.isfinite(dv).all():
            raise StepRejected("non-finite state")
        v1 = v1 + dv
        delta = float(dt * np.abs(dv).max())
        if delta <= scale:
            break
        # the iteration contracts linearly at the rate theta = delta / prev, so the error left after this update is
        # about theta / (1 - theta) delta: stop once that is within the tolerance (Hairer & Wanner, Solving ODEs
        # II, Sec. IV.8, Eq. 8.10-8.11), one evaluation fewer than waiting for an update below it
        theta = delta / prev  # 0 after the first update (prev = inf): no estimate yet
        if 0.0 < theta < 0.5 and theta / (1.0 - theta) * delta <= scale:
            break
        if it >= 2 and delta > 0.9 * prev and delta > 1e3 * tol:
            raise StepRejected(f"implicit solve not contracting (change {delta:.3g} after {it + 1} iterations)")
        prev = delta
    else:  # converging but slowly (or stalled at round-off): accept only if close, else shrink the step
        if not delta <= 1e3 * scale:
            raise StepRejected(f"implicit solve did not converge in {max_iter} iterations")
    q1 = q0 + 0.5 * dt * (v0 + v1)
    if not (np.isfinite(q1).all() and np.isfinite(v1).all()):
        raise StepRejected("non-finite state")
    return State(torch.from_numpy(q1), torch.from_numpy(v1), t0 + dt, torch.from_numpy(am))


def step_rk4(system: System, state: State, dt: float) -> State:
    """One classical Runge-Kutta step."""
    q, v, t = state.q, state.qd, state.t
    a1 = acceleration(system, q, v, t)
    q2, v2 = q + 0.5 * dt * v, v + 0.5 * dt * a1
    a2 = acceleration(system, q2, v2, t + 0.5 * dt)
    q3, v3 = q + 0.5 * dt * v2, v + 0.5 * dt * a2
    a3 = acceleration(system, q3, v3, t + 0.5 * dt)
    q4, v4 = q + dt * v3, v + dt * a3
    a4 = acceleration(system, q4, v4, t + dt)
    qn = q + dt / 6.0 * (v + 2 * v2 + 2 * v3 + v4)
    vn = v + dt / 6.0 * (a1 + 2 * a2 + 2 * a3 + a4)
    if not _finite(qn, vn):
        raise StepRejected("non-finite state")
    return State(qn, vn, t + dt, a4)


def step(system: System, state: State, dt: float, integrator: str = "midpoint", local=None) -> State:
    """Advance ``state`` by ``dt`` seconds. Raises StepRejected when the step fails (see module docstring).
    ``local``: the model of the previous ``local`` step (checked against the network at the new anchor; None
    = no check)."""
    if integrator == "midpoint":
        return step_midpoint(system, state, dt)
    if integrator == "local":
        return local_frame(system, state, local, dt, 1, math.inf, math.inf, 1.0, math.inf)[0]
    if integrator == "rk4":
        return step_rk4(system, state, dt)
    if integrator == "distilled":
        raise ConfigError("the distilled integrator runs whole rollouts (integrate), not single steps")
    raise ConfigError(f"integrator {integrator!r}: choose one of {INTEGRATORS}")


@dataclass
class Rollout:
    """A simulated trajectory, one entry per output frame.

    Attributes
    ----------
    q, qd : (T, k) float64 numpy, generalized coordinates and velocities.
    times : (T,) float64 seconds.
    kinetic, potential, total : (T,) float64 joules.
    substeps : (T,) int, substeps used to reach each frame (0 for the first).
    warnings : messages of step reductions.
    anchors : network anchors of the ``local`` integrator (0 for the others).
    disagreement : ``local``: the largest model-vs-network disagreement at an accepted anchor, fraction of the
        object size (max over points; 0 for the others).
    exact_frames : ``local``: frames integrated with the network's own steps after the model kept disagreeing.
    surrogate_fits : ``distilled``: polynomial surrogates fit (``kinemesh.dynamics.surrogate``; 0 for the others).
    fallback_frames : ``distilled``: frames redone with the network's anchors after the surrogate disagreed.
    """

    q: np.ndarray
    qd: np.ndarray
    times: np.ndarray
    kinetic: np.ndarray
    potential: np.ndarray
    total: np.ndarray
    substeps: np.ndarray
    warnings: list = field(default_factory=list)
    anchors: int = 0
    disagreement: float = 0.0
    exact_frames: int = 0
    surrogate_fits: int = 0
    fallback_frames: int = 0

    @property
    def energy_drift(self) -> float:
        """max |E(t) - E(0)| / max(|E(0)|, max T) over the rollout (relative total-energy drift)."""
        scale = max(abs(self.total[0]), float(np.max(np.abs(self.kinetic))), 1e-300)
        return float(np.max(np.abs(self.total - self.total[0])) / scale)


def _runaway(system: System, state: State, limit: float) -> bool:
    lat = latent_terms(system)  # (cached: the prior mean and mask as numpy)
    return float(np.abs((as_numpy(state.q) - lat.mu) * lat.prior).max()) > limit


def default_substeps(integrator: str) -> int:
    """Substeps per frame when none are asked for: ``surrogate.DISTILLED_SUBSTEPS`` (1) for ``distilled``, else 2."""
    if integrator == "distilled":
        from kinemesh.dynamics.surrogate import DISTILLED_SUBSTEPS

        return DISTILLED_SUBSTEPS
    return 2


def integrate(system: System, state0: State, n_frames: int, fps: float = 30.0, substeps: int | None = None,
             integrator: str = "midpoint", max_halvings: int = 6, runaway_std: float | None = None,
             energy_check: bool = True, progress: bool = False, max_dq: float = 0.25,
             max_substeps: int = 512, radius: float | None = None, agree_tol: float | None = None,
             span: int | None = None) -> Rollout:
    """Roll out ``n_frames`` frames (the first is ``state0``) at ``fps`` with ``substeps`` steps per frame (None:
    ``default_substeps(integrator)``).

    Stability guard: when a step is rejected (implicit solve not converging, non-finite or runaway state, or -
    for a system without external forces, where damping can only remove energy - total energy growing by more
    than 5 % of its scale within a frame),
    the frame is recomputed with twice as many substeps and a warning is logged; the smaller step is kept for
    the following frames. After ``max_halvings`` reductions (or beyond ``max_substeps`` per frame) a
    SimulationDivergedError is raised, so no NaN or
    exploded frame is ever returned.

    Latent CFL condition: each frame uses enough substeps that no coordinate moves more than ``max_dq``
    prior standard deviations per step (the decoder is strongly nonlinear over a few std). A state beyond
    ``runaway_std`` (default barrier radius + 9) std counts as diverged.

    ``local`` integrator: ``radius`` is the trust box (q units, default ``LOCAL_RADIUS``) and ``agree_tol`` the
    accepted disagreement (fraction of the object size, default ``LOCAL_TOL``) of the local model (module
    docstring); a larger disagreement redoes the frame (``LOCAL_RETRIES``); ``span`` the most frames one anchor
    may span (default ``LOCAL_FRAMES``). ``distilled``: :func:`integrate_distilled`.

    Raises
    ------
    ConfigError for bad counts/rates, SimulationDivergedError as described.
    """
    if runaway_std is None:
        runaway_std = system.barrier_radius + 9.0
    substeps = default_substeps(integrator) if substeps is None else substeps
    if integrator == "distilled":  # the local integrator on a surrogate, checked against the network per block
        return integrate_distilled(system, state0, n_frames, fps, progress=progress, substeps=substeps,
                                   max_halvings=max_halvings, runaway_std=runaway_std, energy_check=energy_check,
                                   max_dq=max_dq, max_substeps=max_substeps, radius=radius, agree_tol=agree_tol)
    radius = LOCAL_RADIUS if radius is None else float(radius)
    agree_tol = LOCAL_TOL if agree_tol is None else float(agree_tol)
    span = LOCAL_FRAMES if span is None else int(span)
    if n_frames < 1:
        raise ConfigError(f"frames must be >= 1, got {n_frames}")
    if not (fps > 0 and math.isfinite(fps)):
        raise ConfigError(f"fps must be > 0, got {fps}")
    if substeps < 1:
        raise ConfigError(f"substeps must be >= 1, got {substeps}")
    if integrator not in INTEGRATORS:
        raise ConfigError(f"integrator {integrator!r}: choose one of {INTEGRATORS}")
    state = State(state0.q.clone(), state0.qd.clone(), state0.t, None)
    if not _finite(state.q, state.qd):
        raise SimulationDivergedError("initial state is not finite")
    frame_dt = 1.0 / fps
    local = integrator == "local"
    size = object_size(system.decoder)
    cur = None  # local: the model of the last segment
    if local and exact_derivatives(system.decoder):  # (``distilled``'s blocks) one exact anchor gives both the
        first = anchor(system, state.q, [state.qd])  # first acceleration (``local_frame``) and the energies there
        state = State(state.q, state.qd, state.t, acceleration(system, state.q, state.qd, state.t, local=first))
        e0 = first.energies(system, state)
    else:
        e0 = energies(system, state)
    qs, vs, ts = [state.q.numpy().copy()], [state.qd.numpy().copy()], [state.t]
    ek, ep, et, sub = [e0["kinetic"]], [e0["potential"]], [e0["total"]], [0]
    # energy scale: the largest kinetic / potential energy seen so far (or 1 % of m g L as a floor)
    escale = max(abs(e0["total"]), abs(e0["kinetic"]), abs(e0["potential"]),
                 system.total_mass * float(torch.linalg.norm(system.gravity)) * 1e-2 * size, 1e-12)
    warnings: list[str] = []
    n_guard, halvings = int(substeps), 0  # substeps set by the stability guard (only grows)
    bar = None
    if progress:
        from kinemesh.progress import tqdm

        bar = tqdm(total=n_frames - 1, desc="simulate", unit="frame")
    e_prev, n_anchors, worst, n_exact = e0, 0, 0.0, 0
    for i in range(1, n_frames):
        speed = float(state.qd.abs().max())
        n_sub = n_cfl = max(n_guard, min(int(math.ceil(speed * frame_dt / max_dq)), max_substeps))
        tries = 0  # local: frames redone because the model disagreed with the network
        while True:
            try:
                exact = local and tries > LOCAL_RETRIES
                if local and not exact:
                    try:
                        s, model, n_used, n_new, err_max = local_frame(system, state, cur, frame_dt, n_sub,
                                                                       radius * 0.5 ** tries, agree_tol, size,
                                                                       runaway_std, reuse=tries == 0, span=span)
                    except ModelDisagrees:
                        raise
                    except StepRejected as exc:  # the model's solve failed: smaller pieces, then the network's steps
                        raise ModelDisagrees(f"local step failed ({exc})") from None
                    e = model.energies(system, s)
                else:
                    if exact:  # the network's own steps need only the exact integrator's substeps, not the
                        n_sub = max(n_cfl, n_guard)  # local retries' doubled ones
                    s, model, n_used, n_new, err_max = state, None, n_sub, 0, 0.0
                    h = frame_dt / n_sub
                    for j in range(n_sub):
                        s = step(system, s, h, "midpoint" if exact else integrator)
                        if _runaway(system, s, runaway_std):
                            raise StepRejected(f"state ran beyond {runaway_std:g} prior standard deviations")
                    e = energies(system, s)
                if not all(math.isfinite(v) for v in e.values()):
                    raise StepRejected("non-finite energy")
                # a frame of network steps after local ones compares with the network's energy at its start
                e0_f = energies(system, state) if exact and cur is not None else e_prev
                if energy_check and not system.forces and e["total"] - e0_f["total"] > 0.05 * escale:
                    raise (ModelDisagrees if local and not exact else StepRejected)(
                        f"energy grew by {e['total'] - e0_f['total']:.3g} J in one frame")
                break
            except ModelDisagrees as exc:
                # this frame only: half the trust box and twice the substeps, after LOCAL_RETRIES tries the
                # network's own steps (a decoder discontinuity, e.g. a flipped blend, never agrees)
                # (no trust box, as ``distilled`` runs it: no smaller pieces, the exact steps at once)
                tries = tries + 1 if math.isfinite(radius) else LOCAL_RETRIES + 1
                n_sub = min(2 * n_sub, max_substeps)
                msg = f"t={state.t:.3f} s: {exc}; " + ("frame redone with the network's own steps"
                                                      if tries > LOCAL_RETRIES else "frame redone in smaller pieces")
                log.info(msg)
                warnings.append(msg)
            except StepRejected as exc:
                halvings += 1
                if halvings > max_halvings or 2 * n_sub > max_substeps:
                    if bar is not None:
                        bar.close()
                    raise SimulationDivergedError(
                        f"simulation unstable at t={state.t:.3f} s even with {n_sub} substeps per frame ({exc}); "
                        "lower the stiffness or force, or raise --substeps") from None
                n_sub *= 2
                n_guard = n_sub
                msg = (f"t={state.t:.3f} s: step rejected ({exc}); reducing the step to "
                       f"{frame_dt / n_sub * 1e3:.3g} ms ({n_sub} substeps per frame)")
                log.warning(msg)
                warnings.append(msg)
        state, e_prev, cur = s, e, model
        n_anchors, worst, n_exact = n_anchors + n_new, max(worst, err_max), n_exact + exact
        escale = max(escale, abs(e["kinetic"]), abs(e["potential"]))
        qs.append(s.q.numpy().copy())
        vs.append(s.qd.numpy().copy())
        ts.append(s.t)
        ek.append(e["kinetic"])
        ep.append(e["potential"])
        et.append(e["total"])
        sub.append(n_used)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return Rollout(np.stack(qs), np.stack(vs), np.asarray(ts), np.asarray(ek), np.asarray(ep), np.asarray(et),
                   np.asarray(sub), warnings, n_anchors, worst, n_exact)


def local_frame(system: System, state: State, model, frame_dt: float, n_sub: int, radius: float, agree_tol: float,
                size: float, runaway_std: float, reuse: bool = False, span: int = LOCAL_FRAMES) -> tuple:
    """One frame of the ``local`` integrator: (state, last LocalModel, substeps, anchors, largest disagreement).

    The frame is cut into segments of predicted motion |qd tau + qdd tau^2 / 2| <= ``radius`` (q units), each
    integrated with ``n_sub`` / segments (at least one) implicit-midpoint substeps on a LocalModel anchored at the
    segment's predicted midpoint q + qd tau / 2 + qdd tau^2 / 8, second order along the velocity there and the
    acceleration. About the midpoint the model's error in the Hessian is odd in time and cancels over the
    segment, so the scheme stays second order (anchored at the segment start it is first order: the Coriolis
    term then lags by a Hessian change O(tau)). When a whole frame moves less than ``radius``, the segment spans
    as many frames (at most ``span``) as stay within it, and with ``reuse`` a following frame inside that
    segment (``model.t_end``) runs on the same model without a new anchor. Each new anchor is checked against
    the previous model (``model``, None = no check). Raises ModelDisagrees when they disagree beyond
    ``agree_tol`` or the state leaves the box of ``radius`` around the anchor, StepRejected as ``step_midpoint``.
    An infinite ``radius`` makes the frame one segment (``distilled``: the substeps where the exact integrator
    takes them).
    """
    s, n_new, err_max = state, 0, 0.0
    if s.qdd is None or not _finite(s.qdd):  # the acceleration on a first-order model at q
        s = State(s.q, s.qd, s.t, acceleration(system, s.q, s.qd, s.t, local=anchor(system, s.q, [s.qd])))
        n_new += 1

    def reach(tau):
        return float((s.qd.abs() * tau + 0.5 * s.qdd.abs() * tau ** 2).max())

    if reuse and model is not None and model.t_end >= s.t + frame_dt * (1.0 - 1e-9):
        n_seg, m, tau, seg = 1, n_sub, frame_dt, 0.0  # this frame lies in the model's segment: no new anchor
    else:
        n_seg = max(1, int(math.ceil(reach(frame_dt) / radius))) if math.isfinite(radius) else 1
        m = max(1, int(math.ceil(n_sub / n_seg)))
        tau = seg = frame_dt / n_seg
        while n_seg == 1 and seg < span * frame_dt * (1.0 - 1e-9) and reach(seg + frame_dt) <= radius:
            seg += frame_dt  # a segment of several frames
    for _ in range(n_seg):
        if seg:  # (float64 numpy: a few us per small op instead of torch's tens, once per frame)
            qn, vn, an = as_numpy(s.q), as_numpy(s.qd), as_numpy(s.qdd)
            v = vn + 0.5 * seg * an
            new = anchor(system, torch.from_numpy(qn + 0.5 * seg * vn + seg * seg / 8.0 * an),
                         [v, an][:LOCAL_DIRECTIONS])
            new.t_end = s.t + seg
            n_new += 1
            if model is not None:
                err = model.disagreement(new, v, frame_dt, size)
                if not err <= agree_tol:
                    raise ModelDisagrees(f"local model and network disagree by {err:.3g} of the size")
                err_max = max(err_max, err)
            model = new
        for _ in range(m):
            s = step_midpoint(system, s, tau / m, local=model)
            if _runaway(system, s, runaway_std):
                raise StepRejected(f"state ran beyond {runaway_std:g} prior standard deviations")
            if math.isfinite(radius) and float(np.abs(as_numpy(s.q) - model._qa).max()) > radius:
                raise ModelDisagrees(f"the state left the trust box of {radius:.3g} around the anchor")
    return s, model, n_seg * m, n_new, err_max


def integrate_distilled(system, state0, n_frames: int, fps: float = 30.0, block: int | None = None,
                        tol: float | None = None, progress: bool = False, group: int | None = None, **kw):
    """``integrate(..., integrator="local")`` on a PolySurrogate of ``system``'s decoder
    (``kinemesh.dynamics.surrogate``), one anchor per frame (no trust box: anchors are cheap), in blocks of
    ``block`` frames (``DISTILLED_BLOCK``). The network is decoded at the frames of up to ``group`` blocks at once
    (``DISTILLED_GROUP``), each block judged as if checked alone: the frames
    before the first one off by more than ``tol`` of the size (``DISTILLED_TOL``) or outside the surrogate's ball
    are kept and the surrogate is refit at the last kept state (also when the state has moved more than half the
    radius from the centre); a block whose first frame disagrees right after a refit is redone with the network's
    anchors (``local``). ``kw`` goes to ``integrate`` (the surrogate's rollouts with ``agree_tol``
    ``DISTILLED_AGREE`` unless given).

    Returns its Rollout with ``anchors`` the network anchors of redone blocks, ``disagreement`` the largest
    checked surrogate-vs-network distance of a kept frame, ``surrogate_fits`` and ``fallback_frames``. Raises as
    ``integrate``."""
    from kinemesh.dynamics.surrogate import DISTILLED_AGREE, DISTILLED_BLOCK, DISTILLED_GROUP, DISTILLED_TOL, \
        disagreements, fit, latent_decoder, with_surrogate

    block = DISTILLED_BLOCK if block is None else int(block)
    group = DISTILLED_GROUP if group is None else int(group)
    tol = DISTILLED_TOL if tol is None else float(tol)
    kw["radius"] = math.inf if kw.get("radius") is None else kw["radius"]
    kw.setdefault("span", 1)
    kw_s = dict(kw, agree_tol=DISTILLED_AGREE if kw.get("agree_tol") is None else kw["agree_tol"])  # on the surrogate
    net = latent_decoder(system.decoder)
    kl = int(net.mu_cond.shape[-1])
    names = ("q", "qd", "times", "kinetic", "potential", "total", "substeps")
    parts, warnings = [], []
    state, done, sur, fresh = state0, 1, None, False
    fits, worst, fallback, n_net, n_exact = 0, 0.0, 0, 0, 0
    bar = None
    if progress:
        from kinemesh.progress import tqdm

        bar = tqdm(total=n_frames - 1, desc="simulate", unit="frame")

    def far(st):  # moved more than half the radius from the surrogate's centre: refit there
        return float(torch.linalg.norm(st.q[:kl] - sur.center)) > 0.5 * sur.radius

    while done < n_frames:
        if sur is None or not fresh and far(state):
            sur, fresh, fits = fit(net, state.q[:kl], seed=fits), True, fits + 1
            sys_s = with_surrogate(system, sur)
        # up to ``group`` blocks on this surrogate, checked in one network call; a block after the first that
        # raises is left to the next pass, where it raises as it would after its predecessors' checks
        # (the start states are kept: ``integrate`` caches its first acceleration on them as one pass per block does)
        rolls, starts, left = [], [state], n_frames - done
        while left > 0 and len(rolls) < group and not (rolls and far(starts[-1])):
            try:
                rolls.append(integrate(sys_s, starts[-1], min(block, left) + 1, fps=fps, integrator="local", **kw_s))
            except Exception:
                if not rolls:
                    raise
                starts[-1] = State(starts[-1].q, starts[-1].qd, starts[-1].t)  # without what the failed pass cached
                break
            last = rolls[-1]
            left -= len(last.q) - 1
            starts.append(State(torch.as_tensor(last.q[-1]), torch.as_tensor(last.qd[-1]), float(last.times[-1])))
        Q = torch.as_tensor(np.concatenate([r.q[1:, :kl] for r in rolls]))
        errs_all = disagreements(sur, Q)
        errs_all[(Q - sur.center).norm(dim=-1) > sur.radius] = math.inf  # outside the fitted ball: refit
        for j, (roll, errs) in enumerate(zip(rolls, errs_all.split([len(r.q) - 1 for r in rolls]))):
            # each block as if checked alone: the later blocks of the group are dropped once one disagrees
            nb = len(errs)
            keep = int(torch.nonzero(~(errs <= tol)).min()) if not bool((errs <= tol).all()) else nb
            if keep == 0 and fresh:  # a fresh fit already fails at the next frame: the network's anchors
                msg = f"t={state.t:.3f} s: surrogate and network disagree by {float(errs[0]):.3g} of the size; " \
                      f"{nb} frames with the network's anchors"
                log.info(msg)
                roll = integrate(system, state, nb + 1, fps=fps, integrator="local", **kw)
                keep, fallback, n_net = nb, fallback + nb, n_net + roll.anchors
                warnings.append(msg)
                redone = True  # the group's later blocks started from the surrogate's end state: dropped
            else:
                redone = False
                worst = max([worst] + errs[:keep].tolist())
            warnings += roll.warnings
            n_exact += roll.exact_frames
            if keep:
                parts.append([getattr(roll, n)[1:keep + 1] for n in names])
                state = starts[j + 1] if keep == nb and not redone else \
                    State(torch.as_tensor(roll.q[keep]), torch.as_tensor(roll.qd[keep]), float(roll.times[keep]))
                done += keep
                if bar is not None:
                    bar.update(keep)
            fresh = False
            if keep < nb:  # refit where the disagreement began
                sur = None
            if keep < nb or redone:
                break
    if bar is not None:
        bar.close()
    e = energies(system, state0)
    first = [state0.q.numpy()[None], state0.qd.numpy()[None], [state0.t], [e["kinetic"]], [e["potential"]],
             [e["total"]], [0]]
    cols = [np.concatenate([first[i]] + [p[i] for p in parts]) for i in range(len(names))]
    return Rollout(*cols, warnings, n_net, worst, n_exact, fits, fallback)
