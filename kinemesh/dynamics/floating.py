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

import torch

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
