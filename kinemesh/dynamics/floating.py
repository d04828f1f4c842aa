"""Rigid-body coordinates for free objects: the floating frame of reference.

The kinematic model of a free body (elastic toys, cloth) is trained with the rigid motion removed
(``kinemesh.model.data.remove_rigid_motion``): its latent space holds deformations in the body frame only, so on
its own a poked toy cannot slide and a towel pinned at two corners cannot swing down about them. The classical
remedy of flexible multibody dynamics is a floating frame: generalized coordinates (q, theta, t) with

    x(q, theta, t) = R(theta) (x_def(q) - c) + c + t,

R(theta) = exp([theta]_x) the rotation by the axis-angle vector theta (rad), t a translation (m) and c the
rest centroid of the sampled points. The Lagrangian machinery (``kinemesh.dynamics.eom``) needs nothing else:
mass matrix, Coriolis and centrifugal terms follow from differentiating this map like any decoder.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from kinemesh.dynamics.system import as_numpy
from kinemesh.errors import ConfigError

RIGID_DIMS = 6
"""Rotation (axis-angle, 3) then translation (3), appended after the latent coordinates."""


def rotation_matrix(theta: torch.Tensor) -> torch.Tensor:
    """Rodrigues' formula: axis-angle vectors (..., 3) rad -> rotation matrices (..., 3, 3).

    Smooth at theta = 0 (series for the coefficients below 1e-3 rad), so first and second derivatives are
    exact there too (the equations of motion need both)."""
    n2 = (theta * theta).sum(-1, keepdim=True)[..., None]  # (..., 1, 1)
    small = n2 < 1e-6
    n2s = torch.where(small, torch.ones_like(n2), n2)
    n = torch.sqrt(n2s)
    a = torch.where(small, 1.0 - n2 / 6.0 + n2 * n2 / 120.0, torch.sin(n) / n)
    b = torch.where(small, 0.5 - n2 / 24.0 + n2 * n2 / 720.0, (1.0 - torch.cos(n)) / n2s)
    x, y, z = theta[..., 0], theta[..., 1], theta[..., 2]
    zero = torch.zeros_like(x)
    K = torch.stack([torch.stack([zero, -z, y], -1), torch.stack([z, zero, -x], -1),
                     torch.stack([-y, x, zero], -1)], -2)
    eye = torch.eye(3, dtype=theta.dtype, device=theta.device).expand(K.shape)
    return eye + a * K + b * (K @ K)


_LEVI = np.zeros((3, 3, 3))  # Levi-Civita symbol
for _i, _j, _k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
    _LEVI[_i, _j, _k], _LEVI[_i, _k, _j] = 1.0, -1.0
_KA = -_LEVI.transpose(2, 0, 1)  # K_a = [e_a]_x, (3, 3, 3): (K_a)_ij = -eps_ija
_KAKB = np.einsum("aij,bjk->abik", _KA, _KA)
_KAKB = _KAKB + _KAKB.transpose(1, 0, 2, 3)  # K_a K_b + K_b K_a
_SERIES = np.array([[(-1.0) ** j / math.factorial(2 * j + 1 + o) for j in range(12)] for o in (0, 1)])
_SERIES_D = (_SERIES[:, 1:] * np.arange(1, 12), _SERIES[:, 2:] * np.arange(2, 12) * np.arange(1, 11))
# rows a, a', a'', b, b', b'' of the series against s^0 .. s^11 (the derivatives' rows padded with zeros)
_SERIES_ALL = np.zeros((6, 12))
_SERIES_ALL[[0, 3]], _SERIES_ALL[[1, 4], :11], _SERIES_ALL[[2, 5], :10] = _SERIES, _SERIES_D[0], _SERIES_D[1]


def _rotation_map() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Z (117, 174), coefficient index (174,), monomial index (174,)) with [R; dR; d2R] (flattened) = Z f,
    f = c[coefficient index] * m[monomial index] for c = (1, a, b, a', b', a'', b'') (``_rodrigues_coefficients``)
    and m the monomials [1, theta, theta theta, theta^3, theta^4] of theta as full tensor products (1 + 3 + 9 + 27
    + 81). With K = sum_c theta_c K_c, K^2 = sum_cd theta_c theta_d K_c K_d and S_a = sum_c theta_c (K_a K_c + K_c
    K_a), the formulas of ``rotation_derivatives`` are polynomials of degree <= 4 in theta per coefficient:
    R = I + a K + b K^2; dR_x = a K_x + b S_x + 2 a' theta_x K + 2 b' theta_x K^2;
    d2R_xy = b (K_x K_y + K_y K_x) + a' (2 delta_xy K + 2 theta_x K_y + 2 theta_y K_x)
    + b' (2 delta_xy K^2 + 2 theta_x S_y + 2 theta_y S_x) + 4 a'' theta_x theta_y K + 4 b'' theta_x theta_y K^2."""
    groups = ((0, (0,)), (1, (0, 1)), (2, (0, 1, 2)), (3, (1, 2)), (4, (2, 3)), (5, (3,)), (6, (4,)))
    start = np.cumsum([0, 1, 3, 9, 27, 81])  # first monomial of each degree
    coef, mono, off = [], [], {}
    for c, degrees in groups:
        for d in degrees:
            off[c, d] = len(coef)
            coef += [c] * 3 ** d
            mono += range(start[d], start[d] + 3 ** d)
    Z = np.zeros((117, len(coef)))
    ZR, ZD, ZDD = Z[:9].reshape(3, 3, -1), Z[9:36].reshape(3, 3, 3, -1), Z[36:].reshape(3, 3, 3, 3, -1)
    Kc = _KA.transpose(1, 2, 0)  # [i, j, c]
    KK = np.einsum("cij,djk->ikcd", _KA, _KA).reshape(3, 3, 9)  # [i, j, (c, d)] = (K_c K_d)_ij
    KS = _KAKB.transpose(0, 2, 3, 1)  # [x, i, j, c] = (K_x K_c + K_c K_x)_ij
    ZR[:, :, off[0, 0]] = np.eye(3)
    ZR[:, :, off[1, 1]:off[1, 1] + 3] = Kc
    ZR[:, :, off[2, 2]:off[2, 2] + 9] = KK
    ZD[..., off[1, 0]] = _KA
    ZD[..., off[2, 1]:off[2, 1] + 3] = KS
    for x in range(3):
        ZD[x, ..., off[3, 2] + 3 * x:off[3, 2] + 3 * x + 3] = 2 * Kc
        ZD[x, ..., off[4, 3] + 9 * x:off[4, 3] + 9 * x + 9] = 2 * KK
        ZDD[x, x, ..., off[3, 1]:off[3, 1] + 3] += 2 * Kc
        ZDD[x, x, ..., off[4, 2]:off[4, 2] + 9] += 2 * KK
        for y in range(3):
            ZDD[x, y, ..., off[2, 0]] = _KAKB[x, y]
            ZDD[x, y, ..., off[3, 1] + x] += 2 * _KA[y]
            ZDD[x, y, ..., off[3, 1] + y] += 2 * _KA[x]
            ZDD[x, y, ..., off[4, 2] + 3 * x:off[4, 2] + 3 * x + 3] += 2 * KS[y]
            ZDD[x, y, ..., off[4, 2] + 3 * y:off[4, 2] + 3 * y + 3] += 2 * KS[x]
            ZDD[x, y, ..., off[5, 3] + 9 * x + 3 * y:off[5, 3] + 9 * x + 3 * y + 3] = 4 * Kc
            ZDD[x, y, ..., off[6, 4] + 27 * x + 9 * y:off[6, 4] + 27 * x + 9 * y + 9] = 4 * KK
    return Z, np.array(coef), np.array(mono)


_ROT_MAP, _ROT_COEF, _ROT_MONO = _rotation_map()


def _rodrigues_coefficients(s: float) -> tuple:
    """(a, a', a'', b, b', b'') of R = I + a K + b K^2 as functions of s = |theta|^2: a = sin(n)/n,
    b = (1 - cos n)/n^2, ' = d/ds. Power series below s = 1 (no cancellation near 0), closed forms above."""
    if s < 1.0:  # a = sum (-s)^j / (2j+1)!, b = sum (-s)^j / (2j+2)!, 12 terms, and their derivatives in s
        return tuple((_SERIES_ALL @ s ** np.arange(12)).tolist())
    n = math.sqrt(s)
    a, b = math.sin(n) / n, (1.0 - math.cos(n)) / s
    a1, b1 = (math.cos(n) - a) / (2 * s), (a - 2 * b) / (2 * s)
    return a, a1, (-0.5 * a - 3 * a1) / (2 * s), b, b1, (a1 - 4 * b1) / (2 * s)


def rotation_derivatives(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """R(theta) (3, 3), dR/dtheta_a (3, 3, 3) and d2R/dtheta_a dtheta_b (3, 3, 3, 3) of ``rotation_matrix`` at one
    axis-angle vector theta (3,) rad, exact (float64): with R = I + a(s) K + b(s) K^2, s = |theta|^2,
    K = sum_a theta_a K_a, dR_a = 2 theta_a (a' K + b' K^2) + a K_a + b (K_a K + K K_a), and d2R_ab by the
    product rule once more (``_rodrigues_coefficients``)."""
    return tuple(torch.from_numpy(a) for a in _rotation_derivatives(theta.detach().double().cpu().numpy()))


def _rotation_derivatives(th: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rotation_derivatives`` on a float64 numpy theta (3,), results numpy: one product with the constant map of
    ``_rotation_map`` (a few us instead of ~25 small numpy operations)."""
    a, a1, a2, b, b1, b2 = _rodrigues_coefficients(float(th @ th))
    m2 = np.multiply.outer(th, th).ravel()
    m3 = np.multiply.outer(m2, th).ravel()
    mono = np.concatenate([(1.0,), th, m2, m3, np.multiply.outer(m3, th).ravel()])
    out = _ROT_MAP @ (np.array((1.0, a, b, a1, b1, a2, b2))[_ROT_COEF] * mono[_ROT_MONO])
    return out[:9].reshape(3, 3), out[9:36].reshape(3, 3, 3), out[36:].reshape(3, 3, 3, 3)


@functools.lru_cache(maxsize=None)
def _layout(kl: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vec, row, mat) of the terms of ``FloatingDecoder.derivative_coefs`` with kl latent coordinates and r
    directions: x, the kl latent and 3 rotation rows of J, then per direction the kl latent rows of G (two terms
    each) and its 3 rotation rows (two terms each); vectors V = [phi; phi_i (kl); phi_ri (r kl); w_r (r)], matrices
    [R; dR_a (3); D1_r (r); D2_ra (3 r)] (``derivative_coefs``)."""
    k, ar, lat = kl + RIGID_DIMS, np.arange(3), np.arange(kl)
    vec, row = [np.zeros(1, int), 1 + lat, np.zeros(3, int)], [np.zeros(1, int), 1 + lat, 1 + kl + ar]
    mat = [np.zeros(1 + kl, int), 1 + ar]
    for s in range(r):
        g = 1 + k + s * k  # row of G[s, 0]
        vec += [1 + kl + s * kl + lat, 1 + lat, np.full(3, 1 + kl + r * kl + s), np.zeros(3, int)]
        row += [g + lat, g + lat, g + kl + ar, g + kl + ar]
        mat += [np.zeros(kl, int), np.full(kl, 4 + s), 1 + ar, 4 + r + 3 * s + ar]
    return np.concatenate(vec), np.concatenate(row), np.concatenate(mat)


class FloatingDecoder:
    """An InstanceDecoder with six rigid-body coordinates appended: q_full (..., k + 6) = [q, theta, t].

    Points and vertices are those of ``decoder`` at q, rotated by R(theta) about the rest centroid of the
    points and translated by t (metres). ``mu_cond`` is the wrapped decoder's prior mean followed by zeros;
    ``elastic_mask`` (k + 6,) marks the latent coordinates (True) for the elastic term, barrier and damping.
    Attributes of the wrapped decoder (faces, skin weights, knn transfer) pass through.
    """

    def __init__(self, decoder):
        mu = torch.as_tensor(decoder.mu_cond)
        if mu.ndim != 1:
            raise ConfigError(f"FloatingDecoder: mu_cond must be (k,), got {tuple(mu.shape)}")
        self.decoder = decoder
        self.k_latent = int(mu.shape[0])
        self.latent_dim = self.k_latent + RIGID_DIMS
        self.mu_cond = torch.cat([mu, torch.zeros(RIGID_DIMS, dtype=mu.dtype)])
        self.rest_points = decoder.rest_points
        self.rest_vertices = decoder.rest_vertices
        self.center = decoder.rest_points.detach().mean(0)
        self._centre64 = self.center.double().numpy()  # (``derivative_coefs``)
        self.elastic_mask = torch.arange(self.latent_dim) < self.k_latent

    def _rigid(self, q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        R = rotation_matrix(q[..., self.k_latent:self.k_latent + 3])  # (..., 3, 3)
        t = q[..., self.k_latent + 3:]
        c = self.center.to(x)
        return (x - c) @ R.transpose(-1, -2) + c + t[..., None, :]

    def points(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k + 6) -> (..., P, 3) metres."""
        return self._rigid(q, self.decoder.points(q[..., :self.k_latent]))

    def points_nograd(self, q: torch.Tensor) -> torch.Tensor:
        """``points`` for a batch q (B, k + 6) without gradients, decoding each distinct latent part once.

        The finite-difference Jacobian perturbs one coordinate per row; the 12 rows that move a rigid
        coordinate share the latent part of the unperturbed state, so the network runs on 2 k + 3 rows
        instead of 2 (k + 6) + 3."""
        with torch.no_grad():
            inner, inverse = torch.unique(q[:, :self.k_latent], dim=0, return_inverse=True)
            return self._rigid(q, self.decoder.points(inner)[inverse])

    def derivative_coefs(self, q: torch.Tensor, U: torch.Tensor | None = None) -> tuple[tuple, np.ndarray]:
        """x, J = dx/dq and G[r, i] = H[u_r, e_i] (rows u_r of U (r, k + 6), None: r = 0) at q (k + 6,), exact, in the
        term form of ``local.PolyBasis`` for a wrapped decoder with ``derivative_rows`` (``surrogate.PolySurrogate``):
        ((T (n_t, 3, 3), vec, row, V (n_v, F)), tau (n_b, 3)), row b = sum over the terms t of row b of
        T[t] (V[vec[t]] C) + tau[b] for the ``dictionary`` C, n_b = 1 + (k + 6)(1 + r). Composed through
        x = R(theta) y(q) + c + t, y = phi(q) C (the centre c taken off the constant monomial's coefficients), with
        the monomial rows V = [phi; phi_i; phi_ri; w_r] of y, J_y, H_y[u_r, e_i] (``derivative_rows``) and
        w_r = sum_i u_ri phi_i, and dR, d2R of ``rotation_derivatives``: x: (R, phi), latent i: (R, phi_i), theta_a:
        (dR_a, phi), t_a: tau = e_a; G[r, i] latent: (R, phi_ri) + (sum_a u_r,theta_a dR_a, phi_i); G[r, theta_a]:
        (dR_a, w_r) + (sum_b u_r,theta_b d2R_ab, phi); translation rows 0. float64."""
        kl, k = self.k_latent, self.k_latent + RIGID_DIMS
        q = as_numpy(q)  # numpy from here on (a few us per small op instead of torch's tens)
        U = np.zeros((0, k)) if U is None else as_numpy(U)
        Ul, Ut, r = U[:, :kl], U[:, kl:kl + 3], len(U)
        Phi = self.decoder.derivative_rows(q[:kl], Ul)  # (1 + kl + r kl, F)
        R, dR, d2R = _rotation_derivatives(q[kl:kl + 3])
        V = np.concatenate([Phi, Ul @ Phi[1:kl + 1]])  # [phi; phi_i; phi_ri; w_r]
        D1 = (Ut @ dR.reshape(3, 9)).reshape(r, 3, 3)  # sum_a u_r,theta_a dR_a
        D2 = (Ut @ d2R.transpose(1, 0, 2, 3).reshape(3, 27)).reshape(3 * r, 3, 3)  # [r, a]: sum_b u_r,theta_b d2R_ab
        vec, row, mat = _layout(kl, r)
        T = np.concatenate([R[None], dR, D1, D2])[mat]  # the distinct matrices, one per term as ``_layout``
        tau = np.zeros((1 + k + r * k, 3))
        tau[0], tau[kl + 4:kl + 7] = self._centre64 + q[kl + 3:], np.eye(3)
        return (T, vec, row, V), tau

    def dictionary(self) -> np.ndarray:
        """The wrapped surrogate's ``dictionary`` (3F, P) with the centre c taken off (``derivative_coefs``)."""
        return self.decoder.dictionary(self.center)

    def moments(self, m: torch.Tensor) -> tuple:
        """The wrapped surrogate's ``moments`` of this ``dictionary`` for point masses m (P,)."""
        return self.decoder.moments(m, self.center)

    def vertices(self, q: torch.Tensor, body_offset: torch.Tensor | None = None) -> torch.Tensor:
        """q (..., k + 6) -> (..., N, 3) metres. ``body_offset`` (N, 3) is added in the body frame (before
        the rigid motion), so a per-vertex correction turns with the object."""
        v = self.decoder.vertices(q[..., :self.k_latent])
        if body_offset is not None:
            v = v + body_offset.to(v)
        return self._rigid(q, v)

    def __getattr__(self, name):  # faces, part ids, knn transfer, ... of the wrapped decoder
        if name == "decoder":
            raise AttributeError(name)
        return getattr(self.decoder, name)


def base_anchor_points(points: "np.ndarray", mask: "np.ndarray") -> "np.ndarray":
    """Three indices (3,) of rest points (or vertices) within ``mask`` spanning the largest triangle found
    greedily: the point farthest from the masked centroid, the one farthest from it, the one farthest from
    their line."""
    import numpy as np

    idx = np.flatnonzero(mask)
    if len(idx) < 3:
        raise ConfigError(f"the base part has {len(idx)} sample points; at least 3 are needed to hold it")
    p = np.asarray(points, np.float64)[idx]
    a = int(np.argmax(np.linalg.norm(p - p.mean(0), axis=1)))
    b = int(np.argmax(np.linalg.norm(p - p[a], axis=1)))
    u = (p[b] - p[a]) / max(np.linalg.norm(p[b] - p[a]), 1e-12)
    r = p - p[a]
    c = int(np.argmax(np.linalg.norm(r - np.outer(r @ u, u), axis=1)))
    return idx[[a, b, c]]


def held_base(decoder, base=None) -> tuple["BaseFrameDecoder", int]:
    """(``decoder`` seen from its base part as a :class:`BaseFrameDecoder`, the base's group) for a decoder with
    ``point_groups`` (P,) of at least two parts (and ``vertex_groups`` (N,) when it has them): the group ``base``
    when it is one of them, else the part with the largest bounding box of its rest points."""
    import numpy as np

    groups = np.asarray(decoder.point_groups).reshape(-1)
    rp = decoder.rest_points.detach().double().cpu().numpy()
    vol = {g: float(np.prod(np.ptp(rp[groups == g], axis=0) + 1e-9)) for g in np.unique(groups)}
    base = base if base in vol else max(vol, key=vol.get)
    vg = getattr(decoder, "vertex_groups", None)  # the same part labels per vertex
    va = None if vg is None else base_anchor_points(decoder.rest_vertices.detach().double().cpu().numpy(),
                                                     np.asarray(vg).reshape(-1) == base)
    return BaseFrameDecoder(decoder, base_anchor_points(rp, groups == base), va), base


def frame3(p: torch.Tensor) -> torch.Tensor:
    """Orthonormal frames (..., 3, 3) (columns) of point triples p (..., 3, 3): Gram-Schmidt on p1 - p0, p2 - p0."""
    e1 = p[..., 1, :] - p[..., 0, :]
    e1 = e1 / torch.linalg.norm(e1, dim=-1, keepdim=True)
    w = p[..., 2, :] - p[..., 0, :]
    e2 = w - (w * e1).sum(-1, keepdim=True) * e1
    e2 = e2 / torch.linalg.norm(e2, dim=-1, keepdim=True)
    return torch.stack([e1, e2, torch.cross(e1, e2, dim=-1)], -1)


class BaseFrameDecoder:
    """An articulated decoder seen from its base part: every decoded shape is moved by the rigid motion that
    takes its base part back to rest, so the base stands still (a cabinet on the floor) and a drag can only
    open what moves relative to it. The model keeps each part rigid (component-rigid skinning), so the motion of
    the base is exact from three of its sample points (``anchors``: ``base_anchor_points``); it is smooth in q, so
    the equations of motion differentiate it like any decoder. Same coordinates and prior as the wrapped decoder.
    ``vertex_anchors``: three base vertices, so ``vertices`` needs no second decode of the points (the base's
    vertices follow the same rigid motion); None = take the motion from the points.
    """

    def __init__(self, decoder, anchors, vertex_anchors=None):
        self.decoder = decoder
        self.anchors = torch.as_tensor(anchors, dtype=torch.int64).reshape(3)
        self.vertex_anchors = None if vertex_anchors is None else \
            torch.as_tensor(vertex_anchors, dtype=torch.int64).reshape(3)
        self.mu_cond = decoder.mu_cond
        self.latent_dim = decoder.latent_dim
        self.rest_points = decoder.rest_points
        self.rest_vertices = decoder.rest_vertices
        self._rest = decoder.rest_points.detach()[self.anchors]
        if self.vertex_anchors is not None:
            self._rest_v = decoder.rest_vertices.detach()[self.vertex_anchors]

    @staticmethod
    def _to_base(rest: torch.Tensor, anchors_now: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """x moved by the rigid motion taking the anchors (..., 3, 3) now to their rest positions ``rest``."""
        R = frame3(rest).to(x) @ frame3(anchors_now).transpose(-1, -2)  # decoded base -> rest base
        return (x - anchors_now[..., :1, :]) @ R.transpose(-1, -2) + rest[0].to(x)

    def points(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., P, 3) metres, in the base part's rest frame."""
        x = self.decoder.points(q)
        return self._to_base(self._rest, x[..., self.anchors, :], x)

    def points_nograd(self, q: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            x = getattr(self.decoder, "points_nograd", self.decoder.points)(q)
            return self._to_base(self._rest, x[..., self.anchors, :], x)

    def vertices(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., N, 3) metres, in the base part's rest frame."""
        v = self.decoder.vertices(q)
        if self.vertex_anchors is not None:
            return self._to_base(self._rest_v, v[..., self.vertex_anchors, :], v)
        return self._to_base(self._rest, self.decoder.points(q)[..., self.anchors, :], v)

    def __getattr__(self, name):  # faces, part ids, knn transfer, ... of the wrapped decoder
        if name == "decoder":
            raise AttributeError(name)
        return getattr(self.decoder, name)
