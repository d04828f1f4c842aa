"""A local Taylor model of the decoder, refreshed per segment of motion: the integrator ``local`` (issue 17).

Every equation-of-motion evaluation of the exact integrator decodes 2 k + 3 latent states through the network.
Instead, at an anchor q_a the network is evaluated once with its Jacobian J_a and the second derivatives along
r orthonormal directions U = (u_1 .. u_r) (the velocity qd and the part of the acceleration across it), and the
substeps are integrated on the quadratic model

    x(q) ~ x_a + J_a d + 1/2 H~[d, d],   d = q - q_a,   P = U^T U,
    H~[a, b] = H[P a, b] + H[a, P b] - H[P a, P b],

the Hessian H = d2x/dq2 restricted to the pairs that involve span(U) (exact there; r k mixed derivatives
H[u_r, e_i]). Along the motion (d in span(U)) the model is exact to second order, so the velocity-product term
H~[qd, qd] is exact at the anchor and the model's Jacobian follows the motion to first order; across it J is
held at J_a. The model is an exact quadratic map, so masses, forces, the velocity product and the energies follow
from it with a few small dense ops (no network; ``Reduced`` contracts the points away once per anchor), and the
substeps are a Lagrangian system of their own (NeuROK Sec. 5.2, Eq. 3, on the model). The rollout re-anchors
per segment of predicted motion within a trust box around q_a (``integrators.local_frame``); each new anchor
decodes the network at the state the model reached and checks their disagreement there
(``LocalModel.disagreement``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import jvp

from kinemesh.dynamics.eom import Kinematics, LatentTerms, decoder_dtype, latent_terms
from kinemesh.dynamics.system import System, as_numpy


class DenseBasis:
    """The basis rows B = [x_a; J_a; G] (n_b, P, 3) of a :class:`LocalModel` held as points (the network's anchors).
    :class:`PolyBasis` has the same methods. Their products over the points run in torch, on the simulation's
    one thread (``scene.torch_threads``): numpy's BLAS threads them, which on the shared 2-core machine with other
    jobs running made the beam's rollout 12x slower (6 s against 0.45 s)."""

    def __init__(self, rows: torch.Tensor):
        self.rows, self.n_rows, self.n_points = rows, rows.shape[0], rows.shape[1]
        self._flat = rows.reshape(rows.shape[0], -1)  # (n_b, 3P)

    def moments(self, m: torch.Tensor, g: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(B W B^T (n_b, n_b), B W g (n_b,)) for point masses m (P,) kg, W = diag(m) per coordinate, gravity g (3,)."""
        BW = self._flat * m.repeat_interleave(3)
        gram = (BW @ self._flat.T).numpy()
        return 0.5 * (gram + gram.T), (BW @ g.repeat(len(m))).numpy()

    def apply(self, f: torch.Tensor) -> np.ndarray:
        """B f (n_b,) for point forces f (P, 3)."""
        return (self._flat @ f.reshape(-1)).numpy()

    def combine(self, a: np.ndarray, idx=slice(None)) -> np.ndarray:
        """a B as points (..., P, 3) float64 numpy for coefficients a (..., n_b); at points ``idx`` only (indices of
        one dimension or a (P,) mask): (..., n, 3)."""
        sub = self.rows[:, idx]
        return (torch.from_numpy(a) @ sub.reshape(len(sub), -1)).reshape(*a.shape[:-1], *sub.shape[1:]).numpy()

    def minus(self, a: np.ndarray, other, b: np.ndarray) -> np.ndarray:
        """a B - b B' (..., P, 3) for the rows B' of ``other`` (a DenseBasis or PolyBasis) and coefficients b."""
        return self.combine(a) - other.combine(b)


MINUS_BLOCK = 512
"""Points per numpy product of ``PolyBasis.minus``: (6 x 3F) x (3F x 512) for F = 45 stays below the ~0.5M
multiply-adds above which OpenBLAS threads a product (2 x 65536 x 4), whose threads on the shared cores cost more
than they save (``DenseBasis``); on one thread numpy's product is ~2.5x faster than torch's here (40 against 110 us
for the bench beam's 1024 points)."""


class PolyBasis:
    """The basis rows B = [x_a; J_a; G] of an anchor on a polynomial surrogate in coefficient form (``distilled``,
    issue 17), as terms: row b is sum over the terms t with row[t] = b of T[t] (V[vec[t]] C) + tau[b], i.e.
    B[b, p] = sum_t T[t] y_t(p) + tau[b] with y_t(p)_j = sum_f V[vec[t], f] C[(j, f), p], for C (3F, P) the
    surrogate's dictionary (``PolySurrogate.dictionary``: its coefficients, under a floating frame with the centre
    off the constant one), T (n_t, 3, 3) matrices (I, or R(theta) and its derivatives under a floating frame) and
    V (n_v, F) monomial rows (``derivative_coefs``). With the mass moments S_jj'[f, f'] = sum_p m_p C[(j, f), p]
    C[(j', f'), p], mu and m_tot (``PolySurrogate.moments``, once per surrogate and masses),

        Q[a, j, j', b] = V_a S_jj' V_b^T,   (B W B^T)_tt' = sum_{i, j, j'} T[t]_ij T[t']_ij' Q[vec t, j, j', vec t'],

    summed over the terms of each row, plus u tau^T + tau u^T + m_tot tau tau^T with u_t = T[t] (mu V_vec[t]), and
    B W g = u g + m_tot tau g: O(n_v (9 F^2 + 9 F n_v) + n_t^2) per anchor instead of O(n_b (3F)^2) for the rows
    as (3F)-vectors or O(n_b^2 P) as points. Points are formed only where asked (``combine``). ``source``: the
    decoder whose ``dictionary()`` and ``moments(m)`` the terms refer to. Products over the points in torch
    (:class:`DenseBasis`), the small ones in numpy."""

    def __init__(self, terms: tuple, tau: np.ndarray, source):
        self.T, self.vec, row, self.V = terms  # (n_t, 3, 3), (n_t,), (n_t,), (n_v, F)
        self.tau, self.source, self.n_rows = tau, source, len(tau)
        self._E = np.zeros((self.n_rows, len(row)))  # (n_b, n_t): term t belongs to row[t]
        self._E[row, np.arange(len(row))] = 1.0
        self._C = source.dictionary()  # (3F, P): C[(j, f), p]
        self._rows, self.n_points = None, self._C.shape[1]

    @property
    def rows(self) -> torch.Tensor:
        """B as points (n_b, P, 3), formed on first use."""
        if self._rows is None:
            self._rows = torch.from_numpy(self.combine(np.eye(self.n_rows)))
        return self._rows

    def moments(self, m: torch.Tensor, g: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(B W B^T (n_b, n_b), B W g (n_b,)) for point masses m (P,) kg and gravity g (3,) (class docstring). numpy:
        each product is below ~0.5M multiply-adds, which OpenBLAS keeps on one thread."""
        S, mu, total = self.source.moments(m)  # (F, 9F), (3, F)
        T, V, vec, tau, E = self.T, self.V, self.vec, self.tau, self._E
        nv, nt, F = len(V), len(T), V.shape[1]
        Q = ((V @ S).reshape(9 * nv, F) @ V.T).reshape(nv, 3, 3 * nv)  # [a, j, (j', b)]
        # [t', t, (i, j')] = sum_j T[t]_ij Q[vec t, j, j', vec t'], then summed with T[t']_ij' over (i, j')
        P = (T @ Q[vec]).reshape(nt, 9, nv).transpose(2, 0, 1)[vec]
        gram = E @ (P @ T.reshape(nt, 9, 1))[..., 0].T @ E.T
        u = E @ (T @ (V @ mu.T)[vec][..., None])[..., 0]  # (n_b, 3)
        gram += u @ tau.T + tau @ u.T + total * tau @ tau.T
        g = as_numpy(g)
        return 0.5 * (gram + gram.T), u @ g + total * (tau @ g)

    def _coefs(self, a: np.ndarray) -> np.ndarray:
        """aK (m, 3 3F) [., (i, j, f)] of coefficients a (m, n_b): sum_t (a E)_t T[t]_ij V[vec t, f]."""
        aE = a @ self._E  # (m, n_t)
        W = (aE[:, :, None] * self.T.reshape(-1, 9)).transpose(0, 2, 1) @ self.V[self.vec]  # (m, 9, F): [(i, j), f]
        return W.reshape(len(a), -1)

    def apply(self, f: torch.Tensor) -> np.ndarray:
        """B f (n_b,) for point forces f (P, 3)."""
        Cf = (self._C @ f).numpy().reshape(3, -1, 3)  # [j, f, i] = sum_p C[(j, f), p] f_p,i
        W = np.einsum("af,jfi->aij", self.V, Cf)  # (n_v, 3, 3)
        return self._E @ (self.T * W[self.vec]).sum((1, 2)) + self.tau @ as_numpy(f).sum(0)

    def combine(self, a: np.ndarray, idx=slice(None)) -> np.ndarray:
        """a B as points (..., P, 3) float64 numpy for coefficients a (..., n_b); at points ``idx`` only (indices of
        one dimension or a (P,) mask): (..., n, 3). (a K) C: O(9 F (n_t + P)) per row of a."""
        aK = torch.from_numpy(self._coefs(a.reshape(-1, self.n_rows)).reshape(*a.shape[:-1], -1))
        return self._points(aK, torch.from_numpy(a @ self.tau), self._C[:, idx])

    def minus(self, a: np.ndarray, other, b: np.ndarray) -> np.ndarray:
        """a B - b B' (m, P, 3) for the rows B' of ``other`` and coefficients a, b (m, n_b) (m = 2: the disagreement
        check): one product with the dictionary when ``other`` is a PolyBasis of the same one (the anchors of a
        ``distilled`` block), in numpy, ``MINUS_BLOCK`` points at a time."""
        if not (isinstance(other, PolyBasis) and other._C is self._C):
            return self.combine(a) - other.combine(b)
        W, C = (self._coefs(a) - other._coefs(b)).reshape(3 * len(a), -1), self._C.numpy()
        X = np.empty((len(W), self.n_points))
        for s in range(0, self.n_points, MINUS_BLOCK):
            X[:, s:s + MINUS_BLOCK] = W @ C[:, s:s + MINUS_BLOCK]
        return X.reshape(len(a), 3, -1).transpose(0, 2, 1) + (a @ self.tau - b @ other.tau)[:, None]

    @staticmethod
    def _points(aK: torch.Tensor, atau: torch.Tensor, C: torch.Tensor) -> np.ndarray:
        """Points (..., n, 3) of the coefficients aK (..., 3 3F) and offsets atau (..., 3) on dictionary columns C."""
        X = aK.reshape(-1, len(C)) @ C  # (... 3, n)
        return (X.reshape(*aK.shape[:-1], 3, -1).transpose(-1, -2) + atau[..., None, :]).numpy()


@functools.lru_cache(maxsize=None)
def _jacobian_head(k: int) -> np.ndarray:
    """[0 | I] (k, 1 + k), the first 1 + k columns of ``LocalModel.jacobian_coef`` (read-only, shared)."""
    head = np.concatenate([np.zeros((k, 1)), np.eye(k)], 1)
    head.flags.writeable = False
    return head


@dataclass
class LocalModel:
    """Quadratic model of the decoded points about q (module docstring). float64.

    Attributes
    ----------
    q : (k,) anchor state.
    U : (r, k) orthonormal directions of the second-order term (r = 0: first-order model, J constant).
    basis : the rows B = [x_a; J_a; G] (n_b = 1 + k + r k) as a :class:`DenseBasis` or :class:`PolyBasis`; as points
        x (P, 3) network points at q (metres), J (k, P, 3) with J[i] = dx/dq_i and G (r, k, P, 3) with
        G[r, i] = H[u_r, e_i] (properties).
    t_end : seconds, end of the time segment the model was anchored for (``integrators.local_frame``).
    """

    q: torch.Tensor
    U: torch.Tensor
    basis: DenseBasis | PolyBasis
    t_end: float = float("-inf")

    def __post_init__(self):
        k = self.q.shape[0]
        self._red = None  # (system, Reduced) of the last ``reduced`` call
        self._qa = self.q.numpy()
        # both coefficient maps as one product each (``_coef``, ``hessian_coef``), Pm = I - U^T U:
        # C[j, r, i] = sum_l v_l L[l, j, r, i], L = U[r, l] delta_ij + U[r, j] Pm[i, l] (linear in v);
        # c[r, i] = sum_{j, l} v_j v_l Q[j, l, r, i], Q = U[r, j] (I + Pm)[i, l] (= 2 delta_il - P_il);
        # outer products by broadcasting (an ``einsum`` without a sum costs ~10 us of set-up each)
        Ut, eye = self.U.numpy().T, np.eye(k)  # U^T [l, r]
        Pm = eye - Ut @ Ut.T
        lin = Ut[:, None, :, None] * eye[None, :, None, :] + Ut[None, :, :, None] * Pm.T[:, None, None, :]
        self._lin = lin.reshape(k, -1)
        self._quad = (Ut[:, None, :, None] * (eye + Pm).T[None, :, None, :]).reshape(k, -1)

    @property
    def x(self) -> torch.Tensor:
        return self.basis.rows[0]

    @property
    def J(self) -> torch.Tensor:
        return self.basis.rows[1:self.q.shape[0] + 1]

    @property
    def G(self) -> torch.Tensor:
        k = self.q.shape[0]
        return self.basis.rows[k + 1:].reshape(len(self.U), k, *self.basis.rows.shape[1:])

    def reduced(self, system: System) -> Reduced:
        """The model's :class:`Reduced` tensors for ``system`` (built once per system)."""
        if self._red is None or self._red[0] is not system:
            self._red = (system, Reduced.build(self, system))
        return self._red[1]

    def _coef(self, v: np.ndarray) -> np.ndarray:
        """C (k, r k) with H~[e_j, v] = sum_{r, i} C[j, (r, i)] G[r, i]: C[j, r, i] = s_r delta_ij + U[r, j] e_i,
        s = U v, e = v - U^T s (module docstring with P = U^T U)."""
        return (v @ self._lin).reshape(v.shape[0], -1)

    def hessian_coef(self, v: np.ndarray) -> np.ndarray:
        """(r k,) coefficients of H~[v, v] = sum_{r, i} c[(r, i)] G[r, i]: c = s_r (2 v - U^T s)_i, s = U v
        (``_coef`` with e = v - U^T s: H~[v, v] = sum_j v_j H~[e_j, v])."""
        return v @ (v @ self._quad).reshape(v.shape[0], -1)

    def position_coef(self, q) -> np.ndarray:
        """a_x (n_b,) with x(q) = a_x B = x_a + J_a d + H~[d, d] / 2, d = q - q_a (q: a tensor or numpy (k,))."""
        d = as_numpy(q) - self._qa
        return np.concatenate([np.ones(1), d, 0.5 * self.hessian_coef(d)])

    def jacobian_coef(self, q) -> np.ndarray:
        """A_J (k, n_b) = [0 | I | C(q - q_a)] with J(q) = A_J B = J_a + H~[d, .]."""
        k = len(self._qa)
        return np.concatenate([_jacobian_head(k), ((as_numpy(q) - self._qa) @ self._lin).reshape(k, -1)], 1)

    def velocity_coef(self, qd) -> np.ndarray:
        """a_h (n_b,) with H~[qd, qd] = a_h B."""
        qd = as_numpy(qd)
        return np.concatenate([np.zeros(1 + len(qd)), self.hessian_coef(qd)])

    def kinematics(self, q: torch.Tensor, qd: torch.Tensor | None = None) -> Kinematics:
        """Model points x (P, 3), Jacobian J (k, P, 3) = J_a + H~[d, .], and (with ``qd``) xd = J qd and
        H~[qd, qd] (P, 3) at q (k,): coefficient vectors combined with the basis (no per-point loops)."""
        A, rows = self.jacobian_coef(q), self.basis.rows
        out = Kinematics(x=torch.from_numpy(self.basis.combine(self.position_coef(q))),
                         J=(torch.from_numpy(A) @ rows.reshape(len(rows), -1)).reshape(len(A), *rows.shape[1:]))
        if qd is not None:
            qd = as_numpy(qd)
            xd = self.basis.combine(np.stack([qd @ A, self.velocity_coef(qd)]))
            out.xd, out.hqq = torch.from_numpy(xd[0]), torch.from_numpy(xd[1])
        return out

    def coupling(self, system: System, q, v) -> np.ndarray:
        """C = d/dqd [J^T diag(m) H~[qd, qd]] = 2 J^T diag(m) H~[., v] (k, k) float64 numpy of the model at (q, v)."""
        red = self.reduced(system)  # 2 A_J(q) Gram A_H(v)^T, A_H(v) = [0 | 0 | C(v)] (``Reduced``)
        Cv = self._coef(as_numpy(v))
        return 2.0 * self.jacobian_coef(q) @ red.gram[:, red.nb - Cv.shape[1]:] @ Cv.T

    def energies(self, system: System, state) -> dict[str, float]:
        """``eom.energies`` of the model at ``state`` (``Reduced.energies``)."""
        return self.reduced(system).energies(system, state.q, state.qd)

    def disagreement(self, other: LocalModel, qd: torch.Tensor, dt: float, size: float) -> float:
        """Model vs network at the anchor q_b of ``other`` (whose x, J are the network's) and velocity qd (k,):
        max_p max(|x_model - x_network|, dt |xd_model - xd_network|) / size, the position error there and the
        one its point-velocity error adds over dt seconds, as a fraction of the object size."""
        qd = as_numpy(qd)
        own = np.zeros((2, other.basis.n_rows))  # other's a_x and a_xd at its own anchor: [1 | 0] and [0 | qd | 0]
        own[0, 0], own[1, 1:len(qd) + 1] = 1.0, qd
        mine = np.stack([self.position_coef(other.q), qd @ self.jacobian_coef(other.q)])
        d = self.basis.minus(mine, other.basis, own)
        d2 = (d * d).sum(-1)
        return float(np.sqrt(max(d2[0].max(), dt * dt * d2[1].max()))) / size


def exact_derivatives(decoder) -> bool:
    """Whether ``decoder`` (or the one a FloatingDecoder wraps) gives its derivatives exactly in coefficient form
    (``surrogate.PolySurrogate``), so an anchor costs no decode (``anchor``)."""
    from kinemesh.dynamics.floating import FloatingDecoder

    return getattr(type(decoder.decoder if isinstance(decoder, FloatingDecoder) else decoder), "exact_derivatives",
                   False)


def anchor(system: System, q: torch.Tensor, directions=(), tol: float = 1e-3) -> LocalModel:
    """The LocalModel of ``system.decoder`` at q (k,), second order along ``directions`` (vectors (k,),
    orthonormalised in order; one that is zero or within ``tol`` of the span of the previous ones is dropped).

    ``system.derivatives == "fd"``: one batched decode of the (r + 1)(k + 1) states q, q + h e_i, q + h u_r and
    q + h u_r + h e_i (forward differences, h = ``system.fd_step``; a FloatingDecoder decodes its shared latent
    parts once); ``"jvp"``: forward-mode J (k tangents at once) and a JVP of a JVP for each H[u_r, e_i]. A
    decoder with ``exact_derivatives`` (``surrogate.PolySurrogate``), also inside a FloatingDecoder, gives them exactly
    in coefficient form (a :class:`PolyBasis`: ``PolySurrogate.derivative_coefs``,
    ``FloatingDecoder.derivative_coefs``).
    """
    dt = decoder_dtype(system)
    f = system.decoder.points
    k = int(q.shape[0])
    U = np.zeros((0, k))  # (numpy: a few us per small op instead of torch's tens; once per frame)
    for v in directions:
        v = as_numpy(v)
        w = v - U.T @ (U @ v)
        n = math.sqrt(float(w @ w))
        if n > 0 and n > tol * math.sqrt(float(v @ v)):
            U = np.concatenate([U, (w / n)[None]])
    U = torch.from_numpy(U)
    dec = system.decoder
    if exact_derivatives(dec):
        terms, tau = dec.derivative_coefs(q.detach().double(), U)  # ``distilled``: exact, also through a floating frame
        return LocalModel(q.double().clone(), U, PolyBasis(terms, tau, dec))
    qq = q.detach().to(dt)
    E = torch.eye(k, dtype=dt)
    with torch.no_grad():
        if system.derivatives == "fd":
            h = float(system.fd_step)
            base = torch.cat([qq[None], qq + h * E])  # (k + 1, k)
            X = getattr(system.decoder, "points_nograd", f)(
                torch.cat([base] + [base + h * u.to(dt) for u in U])).double().reshape(len(U) + 1, k + 1, -1, 3)
            J = (X[0, 1:] - X[0, :1]) / h
            G = (X[1:, 1:] - X[1:, :1] - X[:1, 1:] + X[:1, :1]) / (h * h)  # (r, k, P, 3)
            return LocalModel(q.double().clone(), U, DenseBasis(torch.cat([X[0, :1], J, G.reshape(-1, *J.shape[1:])])))
        Q = qq.expand(k, k).contiguous()
        x, J = jvp(f, (Q,), (E,))
        G = [jvp(lambda z, t=u.to(dt).expand(k, k).contiguous(): jvp(f, (z,), (t,))[1], (Q,), (E,))[1].double()
             for u in U]
        G = torch.stack(G) if G else torch.zeros(0, k, *x.shape[1:], dtype=torch.float64)
        return LocalModel(q.double().clone(), U, DenseBasis(torch.cat([x[:1].double(), J.double(),
                                                                       G.reshape(-1, *J.shape[1:])])))


@dataclass
class Reduced:
    """The quadratic model of a :class:`LocalModel` with the points contracted away (issue 17): a substep
    without contact forces then costs O(n_b^2 k) with n_b = 1 + k + r k, independent of the point count, in a few
    float64 numpy operations (q, qd: tensors or numpy (k,); results numpy).

    Every model quantity is a combination of the n_b basis rows B = [x_a; J_a; G] (n_b, 3P): x = a_x B,
    J = A_J B, H~[qd, qd] = a_h B (``LocalModel.position_coef``, ``jacobian_coef``, ``velocity_coef``), so with
    W = diag(m) per coordinate M = A_J (B W B^T) A_J^T + m_reg I, the gravity force J^T W g = A_J (B W g), the
    velocity product J^T W H~[qd, qd] = A_J Gram a_h, T = 1/2 a_xd Gram a_xd (a_xd = qd A_J) and
    V_g = -a_x (B W g) + const (NeuROK Sec. 5.2, Eq. 3, on the model). Constant point-force fields (wind, handle
    forces) are contracted the same way; springs keep their handles' basis rows only (h points). Contact forces
    (floor, part contacts, joint stops) and the cloth's stretching energy need the points: x = a_x B and
    xd = a_xd B, their force f enters as A_J (B f), and the implicit solve's contact and stretching matrices get J
    only at the points they index (:class:`ModelJacobian`).

    Attributes
    ----------
    model : the LocalModel (its ``basis`` is B).
    nb : n_b.
    gram : (n_b, n_b) B W B^T, kg m^2 per unit q^2.
    grav : (n_b,) B W g, N m.
    fields : per system force, (n_b,) B f of its constant point forces, or None for a contact force.
    handles : per spring, ((n_b, h, 3) basis rows at its handles, (h, 3) handle position at a_x = 0), metres.
    v_rest : sum_p m_p g . x_rest_p, J (the gravity energy of the rest shape).
    latent : the system's ``eom.LatentTerms``.
    """

    model: LocalModel
    nb: int
    gram: np.ndarray
    grav: np.ndarray
    fields: list
    handles: list
    v_rest: float
    latent: LatentTerms

    @classmethod
    def build(cls, model: LocalModel, system: System) -> Reduced:
        """Contract ``model``'s basis with the masses, gravity, constant forces and spring handles of ``system``."""
        from kinemesh.dynamics.eom import decoded_rest_points

        basis, m, g = model.basis, system.point_mass, system.gravity
        P = int(m.shape[0])
        fields = []
        for f in system.forces:
            if hasattr(f, "contact_forces"):
                fields.append(None)
                continue
            fields.append(basis.apply(f.point_forces() if hasattr(f, "point_forces") else f.handles.spread(f.force, P)))
        rp = system.decoder.rest_points.detach().double()
        handles = []
        for s in system.springs:
            w = s.handles.w.to(torch.float64)[..., None]  # (h, n, 1)
            Bh = basis.combine(np.eye(basis.n_rows), s.handles.idx.reshape(-1)).reshape(-1, *s.handles.idx.shape, 3)
            handles.append(((w.numpy() * Bh).sum(-2), (s.handles.rest - (w * rp[s.handles.idx]).sum(-2)).numpy()))
        gram, grav = basis.moments(m, g)
        rest = decoded_rest_points(system)
        v_rest = getattr(system, "_v_rest", None)  # sum_p m_p g . x_rest_p, kept while m, g, x_rest are the same
        if v_rest is None or v_rest[0] is not m or v_rest[1] is not g or v_rest[2] is not rest:
            v_rest = system._v_rest = (m, g, rest, float((m[:, None] * rest * g).sum()))
        return cls(model, len(gram), gram, grav, fields, handles, v_rest[3], latent_terms(system))

    def terms(self, system: System, q, qd, t: float) -> tuple[np.ndarray, np.ndarray, Kinematics]:
        """(M (k, k), rhs (k,), Kinematics) at (q, qd, t): M = J^T W J + m_reg I and rhs = -dV/dq + J^T f_ext
        - J^T W H~[qd, qd] (``eom.acceleration`` before damping), both of the model; the Kinematics holds
        ``hj``, the handle Jacobians (k, h, 3) of the system's springs, and only with contact forces or a
        stretching energy the points x, velocities xd (P, 3) tensors and J as a :class:`ModelJacobian` (else
        None)."""
        q, qd, md = as_numpy(q), as_numpy(qd), self.model
        A = md.jacobian_coef(q)
        AG = A @ self.gram
        M = AG @ A.T  # symmetric (Gram is)
        M.flat[::M.shape[0] + 1] += self.latent.m_reg
        a_h = md.hessian_coef(qd)  # H~[qd, qd] = a_h G
        f = self.grav
        kin = Kinematics(x=None, J=None, hj=[])

        def at_points():  # x, xd and J at the points, for the contact forces and the stretching energy
            if kin.x is None:
                x = torch.from_numpy(md.basis.combine(np.stack([md.position_coef(q), qd @ A])))
                kin.x, kin.xd = x[0], x[1]
                kin.J = ModelJacobian(A, md.basis)

        for force, bf in zip(system.forces, self.fields):
            if bf is None:  # a contact force: at the points
                at_points()
                f = f + md.basis.apply(force.contact_forces(kin.x, kin.xd, system.point_mass))
            elif hasattr(force, "point_forces") or force.t_start <= t < force.t_end:
                f = f + bf
        if system.stretch is not None:
            at_points()
            f = f - md.basis.apply(system.stretch.gradient(kin.x))
        rhs = A @ f - AG[:, self.nb - a_h.shape[0]:] @ a_h + self.latent.forces(q)
        if system.springs:
            a_x = md.position_coef(q)
            for s, (Bh, c) in zip(system.springs, self.handles):
                Jh = np.einsum("ib,bhc->ihc", A, Bh)
                r = c + np.einsum("b,bhc->hc", a_x, Bh) - as_numpy(s.target)
                rhs = rhs - s.stiffness * np.einsum("ihc,hc->i", Jh, r)
                kin.hj.append(Jh)
        return M, rhs, kin

    def energies(self, system: System, q, qd) -> dict[str, float]:
        """{'kinetic', 'potential', 'total'} of the model at (q, qd), joules (``eom.energies`` on the model)."""
        q, qd = as_numpy(q), as_numpy(qd)
        a_xd = qd @ self.model.jacobian_coef(q)
        a_x = self.model.position_coef(q)
        T = 0.5 * float(a_xd @ self.gram @ a_xd) + 0.5 * self.latent.m_reg * float(qd @ qd)
        V = -float(a_x @ self.grav) + self.v_rest + self.latent.potential(q)
        for s, (Bh, c) in zip(system.springs, self.handles):
            r = c + np.einsum("b,bhc->hc", a_x, Bh) - as_numpy(s.target)
            V += 0.5 * s.stiffness * float((r * r).sum())
        if system.stretch is not None:
            V += float(system.stretch.energy(torch.from_numpy(self.model.basis.combine(a_x))))
        return {"kinetic": T, "potential": V, "total": T + V}


class ModelJacobian:
    """The Jacobian J = A_J B (k, P, 3) of a :class:`Reduced` model, formed only where it is indexed: J[:, idx]
    and J[:, idx, c] (idx: point indices or a (P,) mask) cost O(k n_b |idx|) instead of O(k n_b P).
    ``shape`` is (k, P, 3)."""

    def __init__(self, A: np.ndarray, basis: DenseBasis | PolyBasis):
        self.A, self.basis = A, basis
        self.shape = (A.shape[0], basis.n_points, 3)

    def __getitem__(self, key):
        if not (isinstance(key, tuple) and len(key) >= 2 and key[0] == slice(None)):
            raise IndexError("ModelJacobian supports J[:, points] and J[:, points, coords] only")
        J = torch.from_numpy(self.basis.combine(self.A, key[1]))  # (k, n, 3)
        return J[(slice(None), slice(None)) + tuple(key[2:])]
