"""A linear-subspace (PCA) decoder: the classical modal-reduction baseline of latent dynamics.

``x(q) = x_mean + sum_i q_i U_i`` with U the top principal directions of shapes sampled from an instance
decoder's prior, scaled so q ~ N(0, I) under the prior (the same soft barrier then applies). Its Jacobian is
constant, so the mass matrix is constant and the equations of motion are linear apart from the forces: what
the learned nonlinear decoder adds is exactly the difference.
"""

from __future__ import annotations

import torch

from kinemesh.errors import ConfigError


class LinearDecoder:
    """PCA decoder with the InstanceDecoder interface (points and vertices), float64.

    Parameters
    ----------
    decoder : the InstanceDecoder whose prior is sampled.
    k : number of principal directions.
    n_samples : prior samples.
    seed : sampling seed.
    """

    def __init__(self, decoder, k: int, n_samples: int = 128, seed: int = 0, batch: int = 16):
        D = int(decoder.mu_cond.shape[-1])
        if not 1 <= k <= n_samples - 1:
            raise ConfigError(f"PCA baseline: k={k} must be between 1 and n_samples-1={n_samples - 1}")
        g = torch.Generator().manual_seed(seed)
        dt = decoder.mu_cond.dtype
        pts, verts = [], []
        with torch.no_grad():
            for i in range(0, n_samples, batch):
                b = min(batch, n_samples - i)
                z = decoder.mu_cond[None] + torch.randn(b, D, generator=g, dtype=torch.float64).to(dt)
                pts.append(decoder.points(z).double())
                verts.append(decoder.vertices(z).double())
        X = torch.cat(pts).flatten(1)  # (S, 3P)
        Y = torch.cat(verts).flatten(1)  # (S, 3N)
        self.x_mean, self.v_mean = X.mean(0), Y.mean(0)
        Xc, Yc = X - self.x_mean, Y - self.v_mean
        U, S, Vh = torch.linalg.svd(Xc, full_matrices=False)
        coef = U[:, :k] * S[:k]  # (S, k) PCA coefficients
        std = coef.std(0).clamp_min(1e-12)
        self.basis = (Vh[:k] * std[:, None])  # (k, 3P): q = coef / std ~ N(0, 1)
        q = coef / std
        self.vbasis = torch.linalg.lstsq(q, Yc).solution  # (k, 3N) vertex modes consistent with the points
        self.latent_dim = k
        self.mu_cond = torch.zeros(k, dtype=torch.float64)
        self.rest_points = decoder.rest_points.detach().double()
        self.rest_vertices = decoder.rest_vertices.detach().double()
        self.explained = float((S[:k] ** 2).sum() / (S ** 2).sum().clamp_min(1e-300))
        for name in ("knn_idx", "knn_w", "point_groups", "vertex_groups", "faces", "face_ids"):
            if hasattr(decoder, name):
                setattr(self, name, getattr(decoder, name))

    def points(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., P, 3) metres."""
        q = torch.as_tensor(q, dtype=torch.float64)
        return (self.x_mean + q @ self.basis).reshape(*q.shape[:-1], -1, 3)

    def vertices(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., N, 3) metres."""
        q = torch.as_tensor(q, dtype=torch.float64)
        return (self.v_mean + q @ self.vbasis).reshape(*q.shape[:-1], -1, 3)
