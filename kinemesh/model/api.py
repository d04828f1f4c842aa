"""The user-facing kinematic model: ``load_model()``, ``model.instance(...)``, ``model.prior``, ``model.decode``.

A ``KinematicModel`` wraps the trained conditional VAE. Bound to one rest mesh it becomes a
``NeuralInstanceDecoder`` (the ``InstanceDecoder`` contract of ``kinemesh.model.interface``): z (..., D) ->
deformed surface points / vertices in metres in the mesh's own frame, differentiable in z in reverse and
forward mode.
"""

from __future__ import annotations

import contextlib
import copy
import os
import weakref
from pathlib import Path

import numpy as np
import torch

from kinemesh.errors import ConfigError, InputFileError
from kinemesh.geometry import dualquat
from kinemesh.geometry.kind import connected_components, resolve_kind
from kinemesh.geometry.normalize import normalization
from kinemesh.geometry.sampling import points_from_barycentric, sample_surface
from kinemesh.geometry.transfer import knn_weights, to_vertices
from kinemesh.model.checkpoint import (DEFAULT_CHECKPOINT, load_calibration, load_weights, read_config,
                                       save_calibration, save_weights)
from kinemesh.model.config import Config, preset
from kinemesh.model.network import KinematicVAE, skin_points


def mesh_arrays(mesh) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (n,3) float64, faces (m,3) int64) from a trimesh, a (vertices, faces) pair or a path."""
    if isinstance(mesh, (str, os.PathLike)):
        import trimesh

        path = Path(mesh)
        if not path.is_file():
            raise InputFileError(path, "mesh file not found")
        try:
            mesh = trimesh.load(str(path), force="mesh", process=False)
        except Exception as exc:
            raise InputFileError(path, f"cannot read mesh ({exc})") from exc
    if hasattr(mesh, "vertices") and hasattr(mesh, "faces"):
        return np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces, dtype=np.int64)
    vertices, faces = mesh
    return np.asarray(vertices, dtype=np.float64), np.asarray(faces, dtype=np.int64)

_FLOAT32 = weakref.WeakKeyDictionary()
"""network module -> (fingerprint of its parameters, float32 copy) of ``float32_copy``."""


def float32_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A float32 copy of ``module`` (eval mode), kept per module until one of its parameters is replaced or updated
    in place (fingerprint: storage and version counter of every parameter)."""
    key = tuple((p.data_ptr(), p._version, p.dtype) for p in module.parameters())
    hit = _FLOAT32.get(module)
    if hit is None or hit[0] != key:
        hit = (key, copy.deepcopy(module).float().eval())
        _FLOAT32[module] = hit
    return hit[1]


PART_POINTS = 16
"""Sample points every part of a mesh bound with part ids receives at least (``sample_surface``'s
``min_per_group``; fewer when n_points / parts is smaller)."""


class NeuralInstanceDecoder:
    """The learned kinematic state space of one mesh (implements ``InstanceDecoder``).

    Attributes
    ----------
    latent_dim : int D.
    mu_cond : (D,) prior mean of this instance.
    prior_factor : (D, D) L of the calibrated prior N(mu_cond, L L^T) (``kinemesh.model.calibration``),
        or None for an uncalibrated checkpoint (prior N(mu_cond, I)).
    prior_kind : the calibration kind used (articulated / elastic / cloth / all), None if uncalibrated.
    rest_points : (P, 3) sampled surface points of the rest mesh, metres.
    rest_vertices : (N, 3) rest mesh vertices, metres.
    faces : (M, 3) int64 numpy faces.
    face_ids, bary : (P,), (P, 3) where each sampled point lies on the rest mesh.
    center, scale : the normalisation (normalised = (x - center) * scale).
    vertex_chunk : vertices decoded per block by ``vertices`` (bounds the memory of large meshes).
    """

    vertex_chunk = 65536

    def __init__(self, net: KinematicVAE, vertices: np.ndarray, faces: np.ndarray, n_points: int = 2048,
                 seed: int = 0, k: int = 8, part_ids: np.ndarray | None = None,
                 prior_factor: np.ndarray | None = None, prior_kind: str | None = None, rigid_parts: bool = True):
        if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) < 3:
            raise ConfigError(f"instance(): vertices must be (n, 3) with n >= 3, got {vertices.shape}")
        if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) == 0:
            raise ConfigError(f"instance(): faces must be (m, 3) with m >= 1, got {faces.shape}")
        if not np.isfinite(vertices).all():
            raise ConfigError("instance(): vertices contain NaN or inf")
        if faces.min() < 0 or faces.max() >= len(vertices):
            raise ConfigError("instance(): faces index vertices out of range")
        self.net = net
        self.cfg = net.cfg
        p = next(net.parameters())
        self.dtype, self.device = p.dtype, p.device
        self.faces = faces
        self.center, self.scale = normalization(vertices)
        groups = part_ids if part_ids is not None else connected_components(len(vertices), faces)
        groups = np.asarray(groups).reshape(-1)
        # with part ids, every part gets PART_POINTS of the samples (the rest by area): a wheel or a knob of
        # 0.5 % of the area would otherwise carry 2-3 of 512 points, too few to follow its joint (issue 16)
        pts, face_ids, bary = sample_surface(vertices, faces, n_points, seed=seed,
                                             face_groups=None if part_ids is None else groups[faces[:, 0]],
                                             min_per_group=PART_POINTS)
        self.face_ids, self.bary = np.asarray(face_ids), np.asarray(bary)
        t = lambda a: torch.as_tensor(np.asarray(a), dtype=self.dtype, device=self.device)  # noqa: E731
        self.rest_points = t(pts)
        self.rest_vertices = t(vertices)
        D = self.cfg.latent_dim
        if prior_factor is not None and np.shape(prior_factor) != (D, D):
            raise ConfigError(f"instance(): prior_factor must be ({D}, {D}), got {np.shape(prior_factor)}")
        self.prior_factor = None if prior_factor is None else t(prior_factor)
        self.prior_kind = prior_kind if prior_factor is not None else None
        self._qn = t((np.asarray(pts) - self.center) * self.scale)  # normalised query points (P, 3)
        self._vn = t((vertices - self.center) * self.scale)  # normalised vertices (N, 3)

        # vertices follow the k nearest sampled points of the same connected component (or part)
        point_groups = groups[faces[self.face_ids, 0]]
        missing = ~np.isin(groups, point_groups)
        if missing.any():  # components too small to receive a sample follow their nearest point
            from scipy.spatial import cKDTree

            groups = groups.copy()
            groups[missing] = point_groups[cKDTree(pts).query(vertices[missing])[1]]
        self.vertex_groups, self.point_groups = groups, point_groups
        self.knn_idx, self.knn_w = knn_weights(pts, vertices, k=k, point_groups=point_groups,
                                                   vertex_groups=groups)

        # the conditioning (prior encoder, skinning weights) of a float64 network runs on its float32 copy
        # (``float32_copy``: the network was trained in float32; 2.5x faster on the CPU), results in float64
        lowp = self.dtype == torch.float64
        prior = float32_copy(net.prior) if lowp else net.prior
        skin = float32_copy(net.decoder) if lowp else net.decoder
        with torch.no_grad():
            qn = self._qn.float() if lowp else self._qn
            mu, h = prior(qn[None])
            self.mu_cond = mu[0].to(self.dtype)
            self._h = h.to(self.dtype)
            if self.cfg.head == "dq_skinning":
                # parts move rigidly (one blend per part) only when ``rigid_parts``: a soft toy or a cloth made of
                # several components deforms as one body (its components still carry their own vertices)
                labels = torch.as_tensor(np.unique(point_groups, return_inverse=True)[1].reshape(1, -1)
                                         if rigid_parts else np.zeros((1, len(point_groups)), np.int64),
                                         device=self.device)
                w = skin.skin_weights(qn[None], h, labels).to(self.dtype)  # (1, P, K)
                self._weights = w
                self._pivots = net.decoder.pivots(self._qn[None], w).to(self.dtype)  # (1, K, 3)
                wv = torch.cat([to_vertices(w[0], self.knn_idx[s], self.knn_w[s]) for s in self._chunks()])
                self._vertex_weights = (wv / wv.sum(-1, keepdim=True))[None]  # (1, N, K)
                # per-instance quantities of every evaluation, computed once: the largest-weight token of each
                # point / vertex (hemisphere pivot of the blend) and the z-independent token input
                self._pivot = w[0].argmax(-1)
                self._vertex_pivot = self._vertex_weights[0].argmax(-1)
            self._cond = net.decoder.token_condition(self._h).to(self.dtype)

    @property
    def latent_dim(self) -> int:
        return self.cfg.latent_dim

    @property
    def skin_weights(self) -> torch.Tensor | None:
        """(P, K) skinning weights of the sampled points (dq_skinning head), else None."""
        return self._weights[0] if self.cfg.head == "dq_skinning" else None

    def prior_sample(self, n: int, seed: int | None = 0, std: float = 1.0) -> torch.Tensor:
        """n samples (n, D) of the instance prior N(mu_cond, std^2 L L^T) (L = ``prior_factor``)."""
        g = torch.Generator().manual_seed(int(seed)) if seed is not None else None
        eps = torch.randn(n, self.latent_dim, generator=g, dtype=torch.float64)
        eps = eps.to(self.dtype).to(self.device)
        return self.mu_cond[None] + std * (eps if self.prior_factor is None else eps @ self.prior_factor.T)

    def encode(self, deformed_vertices) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior q(z | phi) of a known deformation of this mesh (same topology, metres).

        deformed_vertices (N, 3) -> (mean (D,), log-variance (D,)). The sampled points follow their
        barycentric coordinates on the deformed mesh (known correspondences).
        """
        dv = np.asarray(deformed_vertices, dtype=np.float64)
        if dv.shape != tuple(self.rest_vertices.shape):
            raise ConfigError(f"encode(): deformed vertices {dv.shape} do not match the rest mesh "
                              f"{tuple(self.rest_vertices.shape)}")
        return self.encode_points(points_from_barycentric(dv, self.faces, self.face_ids, self.bary))

    def encode_points(self, deformed_points) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior q(z | phi) from the deformed positions (P, 3), metres, of this instance's sample points
        (``rest_points``, same order) -> (mean (D,), log-variance (D,))."""
        pts = np.asarray(deformed_points, dtype=np.float64)
        if pts.shape != tuple(self.rest_points.shape):
            raise ConfigError(f"encode_points(): points {pts.shape} do not match the sample points "
                              f"{tuple(self.rest_points.shape)}")
        delta = torch.as_tensor((pts - self.rest_points.cpu().double().numpy()) * self.scale, dtype=self.dtype,
                                device=self.device)
        with torch.no_grad():
            weights = self._weights if self.cfg.head == "dq_skinning" else None
            mean, logvar = self.net.posterior(self._qn[None], delta[None], weights)
        return mean[0].to(self.dtype), logvar[0].to(self.dtype)

    def _to_metres(self, x: torch.Tensor) -> torch.Tensor:
        return x / self.scale + torch.as_tensor(self.center, dtype=x.dtype, device=x.device)

    def _flat(self, z: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        z = torch.as_tensor(z, device=self.device)
        if z.shape[-1] != self.latent_dim:
            raise ConfigError(f"z has last dimension {z.shape[-1]}, expected latent_dim {self.latent_dim}")
        return z.reshape(-1, self.latent_dim).to(self.dtype), z.shape[:-1]

    def _chunks(self) -> list[slice]:
        """Slices of ``vertex_chunk`` vertices covering the mesh."""
        n, c = len(self.knn_idx), max(1, int(self.vertex_chunk))
        return [slice(i, min(i + c, n)) for i in range(0, n, c)]

    def _token_dq(self, zf: torch.Tensor) -> torch.Tensor:
        cache = getattr(self, "_dq_cache", None)
        if cache is None or torch.is_grad_enabled():
            return self._token_dq_net(zf)
        tag = b"s" if self._single_now() else b"d"  # single- and double-precision results kept apart
        keys = [tag + r.tobytes() for r in zf.detach().cpu().numpy()]
        miss = [i for i, key in enumerate(keys) if key not in cache]
        if miss:
            cache.update(zip([keys[i] for i in miss], self._token_dq_net(zf[miss])))
        return torch.stack([cache[key] for key in keys])

    def _single_now(self) -> bool:
        single = getattr(self, "_single", None)
        return single is not None and (single[4] or not torch.is_grad_enabled())

    def _token_dq_net(self, zf: torch.Tensor) -> torch.Tensor:
        # without gradients in inference mode: no autograd bookkeeping per op (~0.2 ms of the ~1.2 ms of one state,
        # the same results); the transforms only enter new tensors (skinning, the token cache), never in place
        with torch.inference_mode(not torch.is_grad_enabled()):
            return self._token_dq_pass(zf)

    def _token_dq_pass(self, zf: torch.Tensor) -> torch.Tensor:
        B = zf.shape[0]
        if self._single_now():  # ``single_precision``: the transformer in float32, its transforms back in dtype
            dec, h, cond, pivots, _ = self._single
            z32 = zf.float()
            tokens = dec.latent_tokens(z32, h.expand(B, -1, -1), cond)
            return dec.token_transforms(tokens, pivots.expand(B, -1, -1), z32).to(self.dtype)
        dec = self.net.decoder
        tokens = dec.latent_tokens(zf, self._h.expand(B, -1, -1), self._cond)
        return dec.token_transforms(tokens, self._pivots.expand(B, -1, -1), zf).to(self.dtype)

    @contextlib.contextmanager
    def single_precision(self, gradients: bool = False):
        """Within this context, decodes without gradients run the transformer on a float32 copy of the network
        (``float32_copy``; ~2.6x faster per state than float64 on the CPU, token transforms within ~1e-7 of
        float64's) and skin the points in this decoder's dtype as before; decodes with gradients are unchanged
        unless ``gradients`` (then they differentiate through the float32 copy: the active subspace's Monte Carlo
        estimate). For the many states the ``distilled`` integrator decodes to fit and check its surrogate, whose
        tolerances are ~1e-3 of the size, not for finite differences. dq_skinning head only (others: no
        effect)."""
        prev = getattr(self, "_single", None)
        if self.cfg.head == "dq_skinning" and self.dtype != torch.float32 and prev is None:
            self._single = (float32_copy(self.net.decoder), self._h.float(), self._cond.float(),
                            self._pivots.float(), bool(gradients))
        try:
            yield self
        finally:
            self._single = prev

    @contextlib.contextmanager
    def token_cache(self):
        """Within this context the token transforms of decodes without gradients are kept per latent state, so a
        state decoded again (a frame the ``distilled`` integrator checked against the network, decoded again for
        the output vertices) skips the network. Only for a fixed network: it is not told of weight updates."""
        self._dq_cache = {}
        try:
            yield self
        finally:
            self._dq_cache = None

    def _point_out(self, zf: torch.Tensor) -> torch.Tensor:
        B = zf.shape[0]
        dec = self.net.decoder
        tokens = dec.latent_tokens(zf, self._h.expand(B, -1, -1), self._cond)
        feats = dec.query_features(self._qn.expand(B, -1, -1), tokens)
        return dec.point_transforms(feats, self._qn.expand(B, -1, -1)).to(self.dtype)

    def points(self, z: torch.Tensor) -> torch.Tensor:
        """Deformed sample points: z (..., D) -> (..., P, 3) metres."""
        zf, batch = self._flat(z)
        if self.cfg.head == "dq_skinning":
            xn = skin_points(self._token_dq(zf), self._weights, self._qn, self._pivot)
        elif self.cfg.head == "per_point_dq":
            xn = dualquat.apply(self._point_out(zf), self._qn)
        else:
            xn = self._qn + self._point_out(zf)
        return self._to_metres(xn).reshape(*batch, -1, 3)

    def vertices(self, z: torch.Tensor) -> torch.Tensor:
        """Deformed mesh vertices: z (..., D) -> (..., N, 3) metres.

        Vertices take the k-nearest-point average (same connected component) of the points' skinning
        weights / dual quaternions / displacements, so a rigid part's vertices move rigidly. They are decoded
        in blocks of ``vertex_chunk`` (the network runs once; only the per-vertex blend is blocked), so the
        intermediates stay bounded for million-vertex meshes.
        """
        zf, batch = self._flat(z)
        if self.cfg.head == "dq_skinning":
            dq = self._token_dq(zf)
            out = [skin_points(dq, self._vertex_weights[:, s], self._vn[s], self._vertex_pivot[s])
                   for s in self._chunks()]
        elif self.cfg.head == "per_point_dq":
            dq = self._point_out(zf)
            dq = dq * torch.where(dq[..., :1] < 0, -1.0, 1.0).to(dq.dtype)  # one hemisphere before averaging
            out = [dualquat.apply(dualquat.normalize(to_vertices(dq, self.knn_idx[s], self.knn_w[s])), self._vn[s])
                   for s in self._chunks()]
        else:
            d = self._point_out(zf)
            out = [self._vn[s] + to_vertices(d, self.knn_idx[s], self.knn_w[s]) for s in self._chunks()]
        return self._to_metres(torch.cat(out, -2)).reshape(*batch, -1, 3)


class KinematicModel:
    """A trained (or freshly initialised) conditional VAE with its configuration."""

    def __init__(self, net: KinematicVAE, config: Config, info: dict | None = None,
                 prior_factors: dict | None = None):
        self.net = net.eval()
        self.config = config
        self.info = dict(info or {})
        self.prior_factors = prior_factors
        """{kind: L (D, D)} of the calibrated prior (``kinemesh.model.calibration``), None = N(mu_cond, I)."""

    @property
    def latent_dim(self) -> int:
        return self.config.model.latent_dim

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device

    def to(self, device=None, dtype=None) -> "KinematicModel":
        """Move/cast the network (e.g. ``dtype=torch.float64`` for finite-difference checks)."""
        self.net.to(device=device, dtype=dtype)
        return self

    def instance(self, vertices, faces, n_points: int = 2048, seed: int = 0, k: int = 8,
                 part_ids=None, kind: str | None = "auto", rigid_parts: bool | None = None) -> NeuralInstanceDecoder:
        """Bind the model to a rest mesh: vertices (n, 3) metres, faces (m, 3) -> ``InstanceDecoder``.

        ``n_points`` surface samples (seeded by ``seed``; with ``part_ids``, at least ``PART_POINTS`` on every
        part, the rest by area) carry the deformation; each vertex averages its
        ``k`` nearest samples on the same connected component (or the same part when ``part_ids`` (n,) is
        given). ``kind`` picks the calibrated prior (articulated / elastic / cloth; "auto" guesses it from the
        mesh, None = the uncalibrated N(mu_cond, I)); a checkpoint without calibration always uses the
        uncalibrated prior. ``rigid_parts``: every part (connected component) moves rigidly; None = unless
        ``kind`` is elastic or cloth. Raises ConfigError on malformed arrays or an unknown kind.
        """
        vertices = np.asarray(vertices, dtype=np.float64)
        faces = np.asarray(faces, dtype=np.int64)
        factor, used = None, None
        if kind is not None and self.prior_factors:
            if kind != "all":
                kind = resolve_kind(kind, vertices, faces, part_ids) if len(faces) else "all"
            used = kind if kind in self.prior_factors else "all"
            factor = self.prior_factors[used]
        if rigid_parts is None:
            rigid_parts = kind not in ("elastic", "cloth")
        return NeuralInstanceDecoder(self.net, vertices, faces, n_points=n_points, seed=seed, k=k,
                                     part_ids=part_ids, prior_factor=factor, prior_kind=used, rigid_parts=rigid_parts)

    def prior(self, mesh, n_points: int = 2048, seed: int = 0) -> torch.distributions.Distribution:
        """The (calibrated) instance prior N(mu_cond, L L^T) of ``mesh`` (trimesh, (vertices, faces) or path)
        over z (D,)."""
        inst = self.instance(*mesh_arrays(mesh), n_points=n_points, seed=seed)
        L = inst.prior_factor
        if L is None:
            return torch.distributions.Independent(
                torch.distributions.Normal(inst.mu_cond, torch.ones_like(inst.mu_cond)), 1)
        return torch.distributions.MultivariateNormal(inst.mu_cond, covariance_matrix=L @ L.T)

    def decode(self, z: torch.Tensor, mesh, n_points: int = 2048, seed: int = 0) -> torch.Tensor:
        """Deformed vertices (..., N, 3) metres of ``mesh`` at latent states z (..., D)."""
        inst = self.instance(*mesh_arrays(mesh), n_points=n_points, seed=seed)
        return inst.vertices(z)

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (+ ``prior_calibration.safetensors`` if calibrated)."""
        out = save_weights(self.net, self.config, folder, extra=self.info)
        if self.prior_factors:
            save_calibration(folder, {k: L @ L.T for k, L in self.prior_factors.items()},
                             {"source": "KinematicModel.save"})
        return out

    @classmethod
    def load(cls, folder: str | os.PathLike, device: str = "cpu") -> "KinematicModel":
        """Read a checkpoint folder. Raises InputFileError / ConfigError."""
        config, info = read_config(folder)
        net = KinematicVAE(config.model)
        load_weights(net, folder)
        return cls(net.to(device), config, info, load_calibration(folder, config.model.latent_dim))


def untrained_model(preset_name: str = "cpu-small", seed: int = 0, device: str = "cpu") -> KinematicModel:
    """A freshly initialised model whose decoder already responds to z (random small head weights).

    Only for development and tests of downstream code; its deformations are arbitrary.
    """
    config = preset(preset_name)
    g = torch.random.fork_rng()
    with g:
        torch.manual_seed(seed)
        net = KinematicVAE(config.model)
        head = net.decoder.token_head if config.model.head == "dq_skinning" else net.decoder.point_head[-1]
        torch.nn.init.normal_(head.weight, std=0.02)
    return KinematicModel(net.to(device), config, {"trained": False})


def single_precision(decoder, gradients: bool = False):
    """The network's ``single_precision`` context (its transformer in float32; ``gradients``: also for passes
    that differentiate) of ``decoder`` or the decoder it wraps (wrappers forward the attribute), else a null
    context."""
    ctx = getattr(decoder, "single_precision", None)
    return contextlib.nullcontext() if ctx is None else ctx(gradients=gradients)


def load_model(checkpoint_dir: str | os.PathLike | None = None, device: str = "cpu") -> KinematicModel:
    """Load a kinematic model; ``None`` = the default checkpoint shipped in ``kinemesh/assets``.

    Raises InputFileError for a missing or unreadable checkpoint folder (the default one included: never a
    silent untrained model), ConfigError for a bad device.
    """
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ConfigError(f"device must be cpu or cuda, got {device!r}")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device cuda requested but torch.cuda.is_available() is False")
    if checkpoint_dir is None and not (DEFAULT_CHECKPOINT / "model.safetensors").is_file():
        raise InputFileError(DEFAULT_CHECKPOINT, "the default checkpoint is missing (not trained yet?); train "
                             "one with `kinemesh train` or pass --checkpoint DIR")
    folder = Path(DEFAULT_CHECKPOINT if checkpoint_dir is None else checkpoint_dir)
    if not folder.is_dir():
        raise InputFileError(folder, "checkpoint folder not found")
    return KinematicModel.load(folder, device=device)
