"""Active-subspace reduction of a kinematic latent space (NeuROK Sec. 4.3).

The latent z (D,) of an instance decoder is compressed to reduced coordinates q (k,) with
``z = mu_cond + W q``, where the columns of W (D, k) are the top eigenvectors of an outer-product matrix C
estimated by Monte Carlo over the instance prior. With a calibrated prior N(mu_cond, L L^T)
(``kinemesh.model.calibration``; L = I for an uncalibrated checkpoint) everything happens in the whitened
coordinates u (z = mu_cond + L u, u ~ N(0, I)): C is the matrix of derivatives with respect to u and
``z = mu_cond + L W q``:

``"gradient"`` (the paper's choice, Sec. 4.3)
    C = E_z[grad G grad G^T] with the scalar G(z) = ||delta_pred(z)||_2, the 2-norm of the predicted
    deformation over all sampled points. Each sample contributes a rank-1 term, and directions that change
    the *shape* of delta without changing its norm (e.g. two parts that trade motion) are under-weighted.
``"jacobian"`` (vector-valued active subspace, default)
    C = E_z[J^T J] / P with J = d points / dz (3P, D), estimated without forming J by random probes:
    E_v[(J^T v)(J^T v)^T] = J^T J for v ~ N(0, I). A direction gets a large eigenvalue exactly when it moves
    the points, which is what inverse kinematics and the kinetic energy T = 1/2 m |J qdot|^2 care about.

Both cost one backward pass per probe. Because W is orthonormal and u ~ N(0, I), q = W^T u is distributed
N(0, I_k) under the prior, so "3 standard deviations" means |q_i| <= 3 in both spaces.

``fit_probes`` (motion probes, the default of ``kinemesh.reduce.bind``)
    The prior of an instance spreads most of its variance over motions no real object makes (parts sliding off,
    handles leaving their doors), so its leading directions can miss the motion that matters: on the demo
    cabinet the 8 prior directions hold 93 % of the trace of C but none opens a door (the door's posterior,
    projected onto them, turns the door by -5 deg instead of 57 deg). ``fit_probes`` takes the directions from
    the encoder instead: the posterior means of a few plausible poses of the mesh (``kinemesh.geometry.probes``),
    whitened, are decomposed by SVD; the k leading right singular vectors are W, and each coordinate is scaled
    so the probes have unit RMS along it. The origin is the posterior of the rest pose. q then reaches exactly the
    motions the probes name, in units of their spread (the barrier at 2-3 std lies a little beyond the probes).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from kinemesh.errors import ConfigError, InputFileError
from kinemesh.model.api import single_precision

log = logging.getLogger(__name__)

METHODS = ("jacobian", "gradient")

PASS_SAMPLES = 64
"""The most prior samples ``outer_product_matrix`` decodes in one pass (forward and backward), in whole blocks of
its ``batch`` draws: fewer passes spare the network's per-call overhead (the bench beam's 32 samples: one pass
instead of two, bind ~4 ms faster) and C stays the same."""


@dataclass
class Subspace:
    """A reduced coordinate system of one instance: ``z = mu_cond + L W q``.

    Attributes
    ----------
    W : (D, k) float32 tensor, orthonormal columns (top eigenvectors of C, descending eigenvalue), in the
        whitened coordinates u of the prior.
    mu_cond : (D,) float32 tensor, the instance prior mean.
    prior_factor : (D, D) float32 tensor L of the prior N(mu_cond, L L^T), or None for L = I.
    eigenvalues : (D,) float64 numpy array, the full spectrum of C, descending.
    method : "jacobian" or "gradient", how C was estimated.
    n_samples : int, the number of prior samples used.
    """

    W: torch.Tensor
    mu_cond: torch.Tensor
    eigenvalues: np.ndarray
    method: str = "jacobian"
    n_samples: int = 0
    prior_factor: torch.Tensor | None = None
    scale: torch.Tensor | None = None
    """(k,) float32 length of each reduced coordinate in u (``fit_probes``: the RMS of the probes along it, so
    the probes have unit spread in q), or None for 1."""

    @property
    def basis(self) -> torch.Tensor:
        """(D, k) float32 L W diag(scale): the latent direction of each reduced coordinate."""
        W = self.W.float() if self.scale is None else self.W.float() * self.scale.float()
        return W if self.prior_factor is None else self.prior_factor.float() @ W

    @property
    def k(self) -> int:
        return int(self.W.shape[1])

    @property
    def latent_dim(self) -> int:
        return int(self.W.shape[0])

    @property
    def explained(self) -> float:
        """Fraction of the trace of C captured by the kept k directions."""
        total = float(np.sum(np.clip(self.eigenvalues, 0, None)))
        return float(np.sum(np.clip(self.eigenvalues[: self.k], 0, None)) / total) if total > 0 else 1.0

    def z(self, q: torch.Tensor) -> torch.Tensor:
        """Latent of reduced coordinates. q: (..., k) -> (..., D)."""
        return self.mu_cond.to(q) + q @ self.basis.to(q).T

    def q(self, z: torch.Tensor) -> torch.Tensor:
        """Projection of a latent onto the subspace (orthogonal in the whitened coordinates u).
        z: (..., D) -> (..., k)."""
        dz = z - self.mu_cond.to(z)
        if self.prior_factor is not None:
            dz = torch.linalg.solve(self.prior_factor.to(z), dz.reshape(-1, dz.shape[-1]).T).T.reshape(dz.shape)
        q = dz @ self.W.to(z)
        return q if self.scale is None else q / self.scale.to(z)

    # ------------------------------------------------------------------ io
    def save(self, folder: str | Path) -> Path:
        """Write ``folder/subspace.safetensors`` (W, mu_cond, eigenvalues) and ``folder/subspace.json``."""
        from safetensors.torch import save_file

        from kinemesh.atomic import atomic_path, write_text

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {
            "W": self.W.detach().float().contiguous().cpu(),
            "mu_cond": self.mu_cond.detach().float().contiguous().cpu(),
            "eigenvalues": torch.as_tensor(np.asarray(self.eigenvalues, dtype=np.float64)).contiguous(),
        }
        if self.prior_factor is not None:
            tensors["prior_factor"] = self.prior_factor.detach().float().contiguous().cpu()
        if self.scale is not None:
            tensors["scale"] = self.scale.detach().float().contiguous().cpu()
        with atomic_path(folder / "subspace.safetensors") as tmp:
            save_file(tensors, str(tmp))
        info = {
            "format": "kinemesh.subspace/1",
            "k": self.k,
            "latent_dim": self.latent_dim,
            "method": self.method,
            "n_samples": self.n_samples,
            "explained": self.explained,
        }
        write_text(folder / "subspace.json", json.dumps(info, indent=2) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "Subspace":
        """Read a subspace written by :meth:`save`. Raises InputFileError when missing or inconsistent."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        folder = Path(folder)
        st, js = folder / "subspace.safetensors", folder / "subspace.json"
        for p in (st, js):
            if not p.is_file():
                raise InputFileError(p, "missing (expected a subspace folder written by Subspace.save)")
        try:
            info = json.loads(js.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputFileError(js, f"not valid JSON ({exc.msg})") from None
        try:
            t = load_file(str(st))
        except (SafetensorError, OSError) as exc:
            raise InputFileError(st, f"not a readable safetensors file ({exc})") from None
        for key in ("W", "mu_cond", "eigenvalues"):
            if key not in t:
                raise InputFileError(st, f"missing tensor '{key}'")
        W, mu = t["W"].float(), t["mu_cond"].float()
        if W.ndim != 2 or mu.shape != (W.shape[0],) or not torch.isfinite(W).all():
            raise InputFileError(st, f"W {tuple(W.shape)} and mu_cond {tuple(mu.shape)} are inconsistent")
        L = t.get("prior_factor")
        if L is not None and (L.shape != (W.shape[0], W.shape[0]) or not torch.isfinite(L).all()):
            raise InputFileError(st, f"prior_factor {tuple(L.shape)} does not match W {tuple(W.shape)}")
        sc = t.get("scale")
        if sc is not None and (sc.shape != (W.shape[1],) or not (torch.isfinite(sc).all() and (sc > 0).all())):
            raise InputFileError(st, f"scale {tuple(sc.shape)} does not match W {tuple(W.shape)} or is not positive")
        return cls(W, mu, t["eigenvalues"].double().numpy(), str(info.get("method", "jacobian")),
                   int(info.get("n_samples", 0)), None if L is None else L.float(), None if sc is None else sc.float())


def _deformation_norm(points: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
    """G(z) = ||delta_pred||_2 over all sampled points; (..., P, 3) -> (...,). Smoothed at 0 so the gradient
    exists at the rest pose."""
    d = (points - rest).flatten(-2)
    return torch.sqrt((d * d).sum(-1) + 1e-12)


def outer_product_matrix(
    decoder,
    n_samples: int = 256,
    method: str = "jacobian",
    n_probes: int = 4,
    batch: int = 16,
    seed: int = 0,
    prior_scale: float = 1.0,
    progress: bool = False,
) -> torch.Tensor:
    """Monte Carlo estimate of C (D, D) float64 for ``decoder`` (an InstanceDecoder).

    Parameters
    ----------
    n_samples : number of prior samples z = mu_cond + L u, u ~ N(0, prior_scale^2 I), L the decoder's
        ``prior_factor`` (identity when it has none); C is taken with respect to u.
    method : "jacobian" (C = E[J^T J] / P, ``n_probes`` random probes per sample) or "gradient"
        (C = E[grad G grad G^T], G = ||delta_pred||_2, the paper's Sec. 4.3).
    batch : samples per block of draws (u, then the probes); a pass decodes whole blocks, at most
        ``PASS_SAMPLES`` samples (C does not depend on it). The decoder must treat batch entries independently.
    """
    if method not in METHODS:
        raise ConfigError(f"active subspace method {method!r}: expected one of {METHODS}")
    if n_samples < 1 or batch < 1 or n_probes < 1:
        raise ConfigError("active subspace: n_samples, batch and n_probes must be >= 1")
    mu = decoder.mu_cond.detach()
    D = int(mu.shape[-1])
    L = getattr(decoder, "prior_factor", None)
    L = None if L is None else torch.as_tensor(L).detach().to(mu.device, mu.dtype)
    rest = decoder.rest_points.detach()
    P = int(rest.shape[0])
    gen = torch.Generator().manual_seed(seed)
    C = torch.zeros(D, D, dtype=torch.float64)
    done = 0
    bar = None
    if progress:
        from kinemesh.progress import tqdm

        bar = tqdm(total=n_samples, desc="active subspace", unit="z")
    # the network's passes in float32 where the decoder offers it (``single_precision``): a Monte Carlo estimate
    # of a few dozen samples does not need float64's digits (bench beam: bind 2.5x cheaper per pass)
    with single_precision(decoder, gradients=True):
        while done < n_samples:
            # blocks of ``batch`` samples, each drawn in turn (its u, then its probes; on the CPU generator: the same
            # samples on every device), decoded together in passes of whole blocks (``PASS_SAMPLES``)
            blocks = []
            while done < n_samples and (not blocks or len(blocks) * batch + batch <= PASS_SAMPLES):
                b = min(batch, n_samples - done)
                eps = torch.randn(b, D, generator=gen, dtype=mu.dtype)
                blocks.append((eps, [torch.randn((b, P, 3), generator=gen, dtype=rest.dtype)
                                     for _ in range(n_probes if method == "jacobian" else 0)]))
                done += b
            sizes = [len(eps) for eps, _ in blocks]
            u = (prior_scale * torch.cat([eps for eps, _ in blocks]).to(mu.device)).requires_grad_(True)
            z = mu + (u if L is None else u @ L.T)
            pts = decoder.points(z)  # (b, P, 3)
            if method == "gradient":
                G = _deformation_norm(pts, rest)
                (g,) = torch.autograd.grad(G.sum(), u)
                for gb in g.double().cpu().split(sizes):
                    C += gb.T @ gb
            else:
                gs = []
                for i in range(n_probes):
                    v = torch.cat([probes[i] for _, probes in blocks]).to(pts)
                    (g,) = torch.autograd.grad(pts, u, grad_outputs=v, retain_graph=i < n_probes - 1)
                    gs.append(g.double().cpu().split(sizes))
                for j in range(len(blocks)):  # summed in the order of one pass per block
                    for i in range(n_probes):
                        C += (gs[i][j].T @ gs[i][j]) / (n_probes * P)
            if bar is not None:
                bar.update(sum(sizes))
    if bar is not None:
        bar.close()
    C = C / n_samples
    return 0.5 * (C + C.T)


def fit(
    decoder,
    k_q: int | None = None,
    explained: float = 0.99,
    n_samples: int = 256,
    method: str = "jacobian",
    n_probes: int = 4,
    batch: int = 16,
    seed: int = 0,
    max_k: int | None = None,
    progress: bool = False,
    min_k: int = 1,
) -> Subspace:
    """Active subspace of one instance: the top eigenvectors of C (see module docstring).

    Parameters
    ----------
    decoder : InstanceDecoder.
    k_q : fixed number of reduced coordinates; None chooses the smallest k whose eigenvalues hold
        ``explained`` of the trace of C (at least ``min_k``, at most ``max_k``).
    explained : fraction in (0, 1] used when ``k_q`` is None.
    n_samples, method, n_probes, batch, seed : see :func:`outer_product_matrix`.

    Raises
    ------
    ConfigError
        for k_q outside [1, D] or explained outside (0, 1].
    """
    D = int(decoder.mu_cond.shape[-1])
    if k_q is not None and not 1 <= int(k_q) <= D:
        raise ConfigError(f"k_q={k_q}: must be between 1 and the latent dimension {D}")
    if k_q is None and not 0.0 < explained <= 1.0:
        raise ConfigError(f"explained={explained}: must be in (0, 1]")
    C = outer_product_matrix(decoder, n_samples, method, n_probes, batch, seed, progress=progress)
    evals, evecs = torch.linalg.eigh(C)  # ascending
    evals, evecs = evals.flip(0), evecs.flip(1)
    ev = evals.clamp_min(0).numpy()
    if k_q is None:
        total = ev.sum()
        if total <= 0 or not math.isfinite(total):
            k = 1
        else:
            k = int(np.searchsorted(np.cumsum(ev) / total, explained - 1e-12) + 1)
        k = min(max(k, int(min_k)), D if max_k is None else max_k)
    else:
        k = int(k_q)
    W = evecs[:, :k].float().contiguous()
    # deterministic sign: largest-magnitude entry of every column positive
    idx = W.abs().argmax(0)
    W = W * torch.where(W[idx, torch.arange(k)] < 0, -1.0, 1.0)
    L = getattr(decoder, "prior_factor", None)
    sub = Subspace(W, decoder.mu_cond.detach().float().cpu().clone(), evals.numpy(), method, n_samples,
                   None if L is None else torch.as_tensor(L).detach().float().cpu().clone())  # kept on the CPU
    log.debug("active subspace (%s): k=%d of D=%d, explained %.4f", method, k, D, sub.explained)
    return sub


def fit_probes(decoder, probes, k_q: int | None = 8, explained: float = 0.99, max_k: int | None = None,
               progress: bool = False, prior_dims: int = 0, n_samples: int = 32, n_probes: int = 4,
               seed: int = 0, min_k: int = 1) -> Subspace:
    """Subspace spanned by the posterior means of ``probes`` (n, N, 3) metres, poses of ``decoder``'s rest mesh
    (an InstanceDecoder with ``encode``); see the module docstring. ``k_q`` (None: the smallest k holding
    ``explained`` of the probes' squared norm, at least ``min_k``, at most ``max_k``) is capped at the number of probes.
    ``prior_dims`` of the k coordinates are instead the leading active-subspace directions of the prior
    (``outer_product_matrix`` with ``n_samples``, ``n_probes``, ``seed``) orthogonal to the probe directions, in
    prior standard deviations: motions the probes do not name (a soft beam's local bulge under a poke).

    Raises ConfigError for no probes, probes of the wrong shape, or k_q outside [1, D]."""
    probes = np.asarray(probes, dtype=np.float64)
    n_v = tuple(decoder.rest_vertices.shape)
    if probes.ndim != 3 or probes.shape[1:] != n_v or len(probes) == 0:
        raise ConfigError(f"motion probes must be (n >= 1, {n_v[0]}, 3), got {probes.shape}")
    D = int(decoder.mu_cond.shape[-1])
    if k_q is not None and not 1 <= int(k_q) <= D:
        raise ConfigError(f"k_q={k_q}: must be between 1 and the latent dimension {D}")
    it = range(len(probes) + 1)
    if progress:
        from kinemesh.progress import tqdm

        it = tqdm(it, desc="motion probes", unit="pose")
    zs = []
    for i in it:  # posterior means (Sec. 4.1's encoder): the rest pose first, then every probe
        zs.append(decoder.encode(decoder.rest_vertices.detach().cpu().double().numpy() if i == 0
                                 else probes[i - 1])[0].detach().double().cpu())
    origin, Z = zs[0], torch.stack(zs[1:]) - zs[0]
    L = getattr(decoder, "prior_factor", None)
    U = Z if L is None else torch.linalg.solve(torch.as_tensor(L).double().cpu(), Z.T).T  # whitened (n, D)
    _, S, Vt = torch.linalg.svd(U, full_matrices=False)
    ev = (S * S / len(U)).numpy()
    if k_q is None:
        total = ev.sum()
        k = int(np.searchsorted(np.cumsum(ev) / total, explained - 1e-12) + 1) if total > 0 else 1
        k = min(max(k, int(min_k)), D if max_k is None else max_k)
    else:
        k = int(k_q)
    k_total = k
    prior_dims = max(0, min(int(prior_dims), k_total - 1))
    k = max(1, min(k_total - prior_dims, len(S)))
    W = Vt[:k].T.contiguous()
    idx = W.abs().argmax(0)  # deterministic sign: largest-magnitude entry of every column positive
    W = W * torch.where(W[idx, torch.arange(k)] < 0, -1.0, 1.0)
    scale = torch.sqrt(((U @ W) ** 2).mean(0)).clamp_min(1e-6)
    eigenvalues = np.concatenate([ev, np.zeros(max(0, D - len(ev)))])
    if prior_dims:  # the prior's active subspace (Sec. 4.3) in the complement of the probe directions
        C = outer_product_matrix(decoder, n_samples, "jacobian", n_probes, seed=seed)
        Pc = torch.eye(D, dtype=torch.float64) - W @ W.T
        evals, evecs = torch.linalg.eigh(Pc @ C @ Pc)
        extra = evecs.flip(1)[:, :prior_dims]
        extra = extra * torch.where(extra[extra.abs().argmax(0), torch.arange(prior_dims)] < 0, -1.0, 1.0)
        W = torch.cat([W, extra], 1)
        scale = torch.cat([scale, torch.ones(prior_dims, dtype=scale.dtype)])
    return Subspace(W.float().cpu(), origin.float().cpu(), eigenvalues, "probes", len(probes),
                    None if L is None else torch.as_tensor(L).detach().float().cpu().clone(), scale.float())


class AppendedSubspace:
    """``subspace`` with ``m`` coordinates of their own appended to both sides: q = [q_reduced, d] (k + m) and
    z = [subspace.z(q_reduced), d] (D + m), the latent of a decoder that appends them (a
    :class:`kinemesh.dynamics.joints.JointDecoder`'s joints of their own), so those pass through unreduced.
    ``q`` of a latent without them (D, the encoder's) gives d = 0. Spectrum, ``W`` and ``save`` are the subspace's."""

    def __init__(self, subspace: Subspace, m: int):
        self.subspace, self.m = subspace, int(m)

    @property
    def k(self) -> int:
        return self.subspace.k + self.m

    @property
    def latent_dim(self) -> int:
        return self.subspace.latent_dim + self.m

    def z(self, q: torch.Tensor) -> torch.Tensor:
        k = self.subspace.k
        return torch.cat([self.subspace.z(q[..., :k]), q[..., k:]], -1)

    def q(self, z: torch.Tensor) -> torch.Tensor:
        D = self.subspace.latent_dim
        d = z[..., D:] if z.shape[-1] > D else z.new_zeros(*z.shape[:-1], self.m)
        return torch.cat([self.subspace.q(z[..., :D]), d], -1)

    def __getattr__(self, name):  # W, eigenvalues, explained, save, ... of the reduced part
        if name == "subspace":
            raise AttributeError(name)
        return getattr(self.subspace, name)


class ReducedDecoder:
    """An InstanceDecoder in reduced coordinates: q (..., k) -> points/vertices of ``decoder`` at z(q).

    ``mu_cond`` is zeros(k) and the prior in q is N(0, I_k), so dynamics and IK use it like any decoder.
    """

    def __init__(self, decoder, subspace: Subspace):
        D = int(decoder.mu_cond.shape[-1])
        if subspace.latent_dim != D:
            raise ConfigError(f"subspace has latent dimension {subspace.latent_dim}, decoder has {D}")
        self.decoder = decoder
        self.subspace = subspace
        self.latent_dim = subspace.k
        self.mu_cond = torch.zeros(subspace.k, dtype=decoder.mu_cond.dtype)
        self.rest_points = decoder.rest_points
        self.rest_vertices = decoder.rest_vertices

    def z(self, q: torch.Tensor) -> torch.Tensor:
        return self.subspace.z(q)

    def points(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., P, 3) metres."""
        return self.decoder.points(self.subspace.z(q))

    def vertices(self, q: torch.Tensor) -> torch.Tensor:
        """q (..., k) -> (..., N, 3) metres."""
        return self.decoder.vertices(self.subspace.z(q))

    def __getattr__(self, name):  # faces, part ids, ... of the wrapped decoder
        if name in ("decoder", "subspace"):
            raise AttributeError(name)
        return getattr(self.decoder, name)
