"""A per-instance polynomial surrogate of the decoder, distilled from decoded states: the integrator
``distilled`` (issue 17).

The ``local`` integrator decodes the network (3 (k + 1) states) at every anchor, which is most of its time on a
soft beam. Within a ball of radius rho (prior std) around a centre c the decoder is close to a low-degree
polynomial (measured on the bench beam: degree 2 in a ball of 1 std errs by 0.06 % of the size on held-out
decoded states while the points move 9 %), so before integrating, one batched network call decodes n states of
the ball (the 2 k states c +- rho e_i and uniform samples) and a least-squares fit gives

    x(q) ~ sum_f phi_f((q - c) / rho) C_f,    phi_f(d) = prod_i d_i^{E_fi},  |E_f| <= degree,

C (F, P, 3). The rollout then runs the ``local`` integrator on the surrogate with one anchor per frame and no
trust box (an anchor is a polynomial evaluation with exact derivatives, not the transformer; the frame's substeps
fall where the exact integrator takes them, and a frame whose model disagrees is redone with the exact
implicit-midpoint steps on the surrogate), in blocks of ``DISTILLED_BLOCK`` frames; the network is decoded at the
frames of ``DISTILLED_GROUP`` blocks in one call and compared with the surrogate there (max point distance,
fraction of the size), each block judged as if checked alone. Frames from the first one beyond ``DISTILLED_TOL`` or outside the ball are dropped and the surrogate is refit
at the last kept state (also when the state moved more than half the radius from the centre); a fresh fit that
fails at once has its block redone with the network's anchors (``local``). The check bounds the points, not
their derivatives: on a strongly curved map (the toy cabinet's tanh joints, degree 2 in a ball of 0.3) the rollout
can drift from the network's while every checked frame agrees, so keep the ball where the fit is good.

The surrogate replaces the network's latent map only: on a ``FloatingDecoder`` (free bodies) the rigid-body
coordinates stay exact (``with_surrogate``).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging

import numpy as np
import torch

from kinemesh.dynamics.system import as_numpy, dtype_of, object_size
from kinemesh.errors import ConfigError
from kinemesh.model.api import single_precision

log = logging.getLogger(__name__)

DISTILLED_DEGREE = 2
"""Total degree of the surrogate polynomial."""
DISTILLED_RADIUS = 1.0
"""Radius (prior std, 2-norm over the latent coordinates) of the ball the surrogate is fit in."""
DISTILLED_SAMPLES = 1.5
"""Decoded states per polynomial coefficient of the fit (the 2 k axis states included). 1.5 (was 2.0; k = 8: 68
instead of 90 states): validation beams 0.0226 -> 0.0225 (bench/RESULTS_dynamics.md)."""
DISTILLED_SUBSTEPS = 1
"""Implicit-midpoint substeps per frame of ``distilled`` when none are asked for (the others take 2; the latent CFL
bound and the stability guard add more where needed). 1 (was 2): validation beams 0.0225 -> 0.0222
(bench/RESULTS_dynamics.md)."""
DISTILLED_BLOCK = 8
"""Frames integrated on the surrogate between two checks against the network."""
DISTILLED_GROUP = 4
"""Blocks integrated before one network call checks them all (fewer, larger calls; the same states as one check
per block: the blocks after one that disagrees are dropped)."""
DISTILLED_AGREE = 0.02
"""``distilled``: largest accepted disagreement (fraction of the object size) between a frame's model and the next
frame's anchor on the surrogate, above which the frame is redone with exact steps on the surrogate (``local``'s
``agree_tol``, whose default ``LOCAL_TOL`` is 0.01). The check evaluates the previous model one frame from where it
was anchored (the frame's midpoint), while a frame uses its model at most half a frame from its anchor; the model
is exact to second order, so its error there is about 1/8 of the checked one: 0.02 keeps it near 0.0025, half of
``DISTILLED_TOL``. 0.02 (was 0.01): bench beam 5 -> 2 exact frames, validation beams 0.0222 as before (#101
0.0496 -> 0.0491, #102 0.0136 -> 0.0138; bench/RESULTS_dynamics.md)."""
DISTILLED_TOL = 0.005
"""Largest accepted surrogate-vs-network point distance at a checked frame, fraction of the object size."""


def exponents(k: int, degree: int) -> torch.Tensor:
    """(F, k) int64 exponents of every monomial of total degree <= ``degree`` in k variables (constant first)."""
    rows = [[0] * k]
    for p in range(1, degree + 1):
        for c in itertools.combinations_with_replacement(range(k), p):
            e = [0] * k
            for i in c:
                e[i] += 1
            rows.append(e)
    return torch.tensor(rows, dtype=torch.int64)


class PolySurrogate:
    """x(q) = phi((q - c) / rho) C, a polynomial stand-in for ``decoder.points`` (module docstring). float64.

    Attributes
    ----------
    decoder : the decoder it was fit to (its other attributes pass through; ``vertices`` is the network's).
    center : (k,) c. radius : rho (prior std).
    exps : (F, k) monomial exponents. coef : (F, 3P) C, metres.
    fit_error : largest held-out error at fit time, fraction of the object size.
    """

    exact_derivatives = True  # ``local.anchor`` reads x, J, G from ``derivative_coefs`` instead of differences

    def __init__(self, decoder, center: torch.Tensor, radius: float, exps: torch.Tensor, coef: torch.Tensor,
                 fit_error: float = 0.0):
        self.decoder, self.center, self.radius = decoder, center.double(), float(radius)
        self.exps, self.coef, self.fit_error = exps, coef.double(), float(fit_error)
        self.mu_cond = decoder.mu_cond
        self.rest_points = decoder.rest_points
        self.rest_vertices = decoder.rest_vertices
        self._ef = exps.double()
        self._ef_np, self._center_np = self._ef.numpy(), self.center.numpy()
        # derivative maps: d phi_f / d d_j = E_fj phi_(E_f - e_j) and d2 phi_f / d d_j d d_l
        # = E_fj (E_fl - delta_jl) phi_(E_f - e_j - e_l), both monomials of the (downward closed) list
        k, rows = exps.shape[1], {tuple(e): i for i, e in enumerate(exps.tolist())}
        eye = torch.eye(k, dtype=torch.int64)
        low1, low2 = exps[None] - eye[:, None], exps[None, None] - eye[:, None, None] - eye[None, :, None]
        self._c1 = (exps.T * (low1 >= 0).all(-1)).double().numpy()  # (k, F)
        self._c2 = (exps.T[:, None] * (exps.T[None] - eye[:, :, None]) * (low2 >= 0).all(-1)).double().numpy()
        self._i1 = np.array([[rows.get(tuple(e), 0) for e in r] for r in low1.tolist()])  # (k, F)
        self._i2 = np.array([[[rows.get(tuple(e), 0) for e in r] for r in rr] for rr in low2.tolist()])  # (k, k, F)
        self._dict = None  # (coef, shift, dictionary, (masses, moments)) of ``dictionary`` / ``moments``

    def features(self, q: torch.Tensor) -> torch.Tensor:
        """phi (..., F) at q (..., k)."""
        d = (q.double() - self.center) / self.radius
        return (d[..., None, :] ** self._ef).prod(-1)

    def points(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., P, 3) metres, float64."""
        return (self.features(q) @ self.coef).reshape(*q.shape[:-1], -1, 3)

    points_nograd = points

    def derivative_rows(self, q, U=None) -> np.ndarray:
        """(1 + k + r k, F) float64 numpy monomial rows of x, J and G at q (k,): x = R[0] C, J[i] = R[1 + i] C and
        G[r, i] = R[1 + k + r k + i] C = H[u_r, e_i] for the rows u_r of U (r, k) (None: r = 0), H = d2x/dq2."""
        q = as_numpy(q)  # (numpy: the anchors of a rollout call this per frame)
        k, phi = q.shape[-1], np.prod(((q - self._center_np) / self.radius) ** self._ef_np, axis=-1)
        rows = [phi[None], self._c1 * phi[self._i1] / self.radius]  # x, J
        if U is not None and len(U):  # G[r, i] = sum_j u_rj d2x / dq_j dq_i
            D2 = (self._c2 * phi[self._i2]).reshape(k, -1) / self.radius ** 2  # (k, k F)
            rows.append((as_numpy(U) @ D2).reshape(len(U) * k, -1))
        return np.concatenate(rows)

    def derivative_coefs(self, q: torch.Tensor, U: torch.Tensor | None = None) -> tuple[tuple, np.ndarray]:
        """x, J = dx/dq and G[r, i] = H[u_r, e_i] at q (k,) (``derivative_rows``), exact, in the term form of
        ``local.PolyBasis``: ((T (n_b, 3, 3), vec, row, V (n_b, F)), tau (n_b, 3)), one term per row b with T = I,
        V[b] = R[b] (row b = R[b] C for the ``dictionary`` C, n_b = 1 + k + r k), tau = 0."""
        R = self.derivative_rows(q, U)
        idx = np.arange(len(R))
        return (np.broadcast_to(np.eye(3), (len(R), 3, 3)), idx, idx, R), np.zeros((len(R), 3))

    def dictionary(self, shift=None) -> torch.Tensor:
        """C[(j, f), p] (3F, P) float64: the coefficients per coordinate j and monomial f, ``shift`` (3,) metres
        subtracted from the constant monomial's (a floating frame's centre; None = 0). Cached."""
        key = None if shift is None else tuple(as_numpy(shift).tolist())
        if self._dict is None or self._dict[0] is not self.coef or self._dict[1] != key:
            C = self.coef.reshape(len(self.exps), -1, 3).clone()
            if shift is not None:
                C[0] -= torch.as_tensor(shift, dtype=torch.float64)
            self._dict = (self.coef, key, C.permute(2, 0, 1).reshape(-1, C.shape[1]).contiguous(), None)
        return self._dict[2]

    def moments(self, m: torch.Tensor, shift=None) -> tuple[np.ndarray, np.ndarray, float]:
        """(S (F, 9F), mu (3, F) float64 numpy, sum_p m_p): the mass moments
        S[f, (j, j', f')] = sum_p m_p C[(j, f), p] C[(j', f'), p] and mu[j, f] = sum_p m_p C[(j, f), p] of the
        ``dictionary`` C for point masses m (P,) kg, laid out for ``local.PolyBasis.moments``. Cached per dictionary
        and masses."""
        C = self.dictionary(shift)
        cached = self._dict[3]
        if cached is None or not (cached[0] is m or torch.equal(cached[0], m)):
            F = len(self.exps)
            S = ((C * m) @ C.T).reshape(3, F, 3, F).permute(1, 0, 2, 3).reshape(F, 9 * F).contiguous()
            cached = (m, S.numpy(), (C @ m).reshape(3, F).numpy(), float(m.sum()))
            self._dict = self._dict[:3] + (cached,)
        return cached[1:]

    def __getattr__(self, name):  # faces, skin weights, vertices, ... of the decoder it stands for
        if name == "decoder":
            raise AttributeError(name)
        return getattr(self.decoder, name)


def _decode(decoder, Q: torch.Tensor) -> torch.Tensor:
    """Network points (n, P, 3) float64 of states Q (n, k), one batched call without gradients, the transformer in
    float32 (``single_precision``: the fit and the checks judge errors of ~1e-3 of the size; float32 adds ~1e-7)."""
    with torch.no_grad(), single_precision(decoder):
        return getattr(decoder, "points_nograd", decoder.points)(Q.to(dtype_of(decoder))).double()


def fit(decoder, center: torch.Tensor, radius: float | None = None, degree: int | None = None,
        samples: float | None = None, held_out: int = 8, seed: int = 0) -> PolySurrogate:
    """A PolySurrogate of ``decoder.points`` in the ball of ``radius`` around ``center`` (k,): least squares on
    round(``samples`` F) decoded states (the 2 k states c +- rho e_i, the rest uniform in the ball) and its
    error on ``held_out`` more (``fit_error``, max over points and states, fraction of the object size).

    None = ``DISTILLED_RADIUS`` / ``DISTILLED_DEGREE`` / ``DISTILLED_SAMPLES``. Raises ConfigError for degree < 1,
    radius <= 0 or samples < 1."""
    radius = DISTILLED_RADIUS if radius is None else float(radius)
    degree = DISTILLED_DEGREE if degree is None else int(degree)
    samples = DISTILLED_SAMPLES if samples is None else float(samples)
    if degree < 1 or not radius > 0 or not samples >= 1:
        raise ConfigError(f"surrogate: need degree >= 1, radius > 0 and samples >= 1 per coefficient, got "
                          f"{degree}, {radius}, {samples}")
    center = center.detach().double()
    k = int(center.shape[0])
    exps = exponents(k, degree)
    n = max(int(round(samples * len(exps))), 2 * k)
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(n - 2 * k + held_out, k, generator=g, dtype=torch.float64)
    r = torch.rand(len(u), 1, generator=g, dtype=torch.float64) ** (1.0 / k)  # uniform in the ball
    eye = torch.eye(k, dtype=torch.float64)
    D = torch.cat([eye, -eye, u / u.norm(dim=1, keepdim=True) * r]) * radius
    X = _decode(decoder, center + D)
    sur = PolySurrogate(decoder, center, radius, exps, torch.zeros(len(exps), X[0].numel(), dtype=torch.float64))
    fit_rows = slice(0, n)
    # least squares by the thin QR A = Q R of the features: C = (R^-1 Q^T) X, the solution of LAPACK's gels
    # (``torch.linalg.lstsq``) to rounding; one product over the 3P right-hand sides instead of gels' Householder
    # updates and triangular solve per column (bench beam: 3.4 -> 0.6 ms)
    Qf, Rf = torch.linalg.qr(sur.features(center + D[fit_rows]))
    sur.coef = torch.linalg.solve_triangular(Rf, Qf.T, upper=True) @ X[fit_rows].reshape(n, -1)
    if held_out:
        sur.fit_error = disagreement(sur, center + D[n:], X[n:])
    return sur


def disagreements(sur: PolySurrogate, Q: torch.Tensor, X: torch.Tensor | None = None) -> torch.Tensor:
    """(n,) max over the points of |x_surrogate - x_network| / object size at each state of Q (n, k) (X: the
    network's points (n, P, 3) there, decoded when None)."""
    X = _decode(sur.decoder, Q) if X is None else X
    return (sur.points(Q) - X).norm(dim=-1).amax(-1) / object_size(sur.decoder)


def disagreement(sur: PolySurrogate, Q: torch.Tensor, X: torch.Tensor | None = None) -> float:
    """The largest of ``disagreements``."""
    return float(disagreements(sur, Q, X).max())


def latent_decoder(decoder):
    """The network map a surrogate replaces: the wrapped decoder of a ``FloatingDecoder`` (the rigid motion stays
    exact), else ``decoder`` itself."""
    from kinemesh.dynamics.floating import FloatingDecoder

    return decoder.decoder if isinstance(decoder, FloatingDecoder) else decoder


def with_surrogate(system, sur: PolySurrogate):
    """A copy of ``system`` (same masses, forces, springs) whose decoder's latent map is ``sur``."""
    from kinemesh.dynamics.floating import FloatingDecoder

    dec = FloatingDecoder(sur) if isinstance(system.decoder, FloatingDecoder) else sur
    return dataclasses.replace(system, decoder=dec)
