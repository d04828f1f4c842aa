"""Inverse kinematics: find the latent (reduced q, or raw z) whose decoded shape matches a target
(NeuROK Sec. 6.1).

The objective, in the rest mesh's normalized units (bbox longest side 1, so weights do not depend on size):

    E(q) = data(q) + prior_weight * sum_i relu(|q_i - mu_i| - barrier_std)^2 + rigidity_weight * R(q)

data = vertex L2 (correspondences known) or squared Chamfer between decoded sample points and target
samples (both directions, or target -> prediction only for partial targets); the prior barrier keeps the
state where the prior N(mu, I) has mass (joint limits then come from the decoder, docs/architecture.md); R is the
mean squared change of k-nearest-neighbour distances of the decoded points (discourages bending rigid
parts). Optimisation: screen ``n_candidates`` prior samples (plus the prior mean), refine the best
``n_starts`` together with Adam, then polish the best one with L-BFGS; a reduced fit (q) is finally polished in
the full latent z the same way (``refine_z_steps``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from kinemesh.errors import ConfigError
from kinemesh.geometry.normalize import normalization
from kinemesh.ik.target import Target


@dataclass
class IKConfig:
    """Options of :func:`solve`."""

    loss: str = "auto"
    """"chamfer", "vertex" (needs correspondences) or "auto" (vertex when the target has them)."""
    one_sided: bool | None = None
    """Chamfer from target to prediction only; None = the target's ``partial`` flag."""
    n_candidates: int = 32
    """Prior samples (incl. the prior mean) screened by their initial loss."""
    n_starts: int = 4
    """Best candidates refined in parallel with Adam."""
    adam_steps: int = 30
    """Adam iterations (all starts at once)."""
    adam_lr: float = 0.1
    """Adam learning rate (latent units; prior std is 1), cosine-decayed to 10%."""
    lbfgs_steps: int = 15
    """L-BFGS iterations on the best start (0 disables)."""
    prior_weight: float = 0.01
    """Weight of the soft barrier sum_i relu(|q_i - mu_i| - barrier_std)^2 (data terms are in squared
    normalized units, ~1e-3 for a visibly wrong pose)."""
    barrier_std: float = 3.0
    """Where the soft barrier starts, in prior standard deviations."""
    rigidity_weight: float = 0.0
    """Weight of the k-NN distance-preservation term on decoded points (0 = off). Pairs are restricted to
    the same connected component / part when the decoder exposes ``point_groups`` (P,)."""
    rigidity_k: int = 6
    """Neighbours per point for the rigidity term."""
    posterior_init: int = 3
    """Amortised starts from the model's posterior encoder (0 = off): decode, match every decoded point to
    its nearest target point, encode that deformation, repeat this many times (an ICP whose update is the
    encoder); each iterate joins the screened candidates. Used when the decoder has ``encode_points``."""
    candidate_std: float = 1.0
    """Standard deviation of the screened prior samples (1 = the prior)."""
    fit_similarity: bool = False
    """Also optimise a global scale and translation of the prediction (targets of unknown scale)."""
    n_loss_points: int = 1024
    """Decoded sample points used in the Chamfer term (a fixed random subset when the decoder has more);
    the k-d tree Chamfer dominates the cost, the decoder's cost hardly depends on P."""
    batch: int = 16
    """Latents decoded per forward pass when screening candidates."""
    seed: int = 0
    """Seed of the candidate samples."""
    refine_z_steps: int = 40
    """Full-latent polish after a reduced fit (0 = off): when the decoder is a reduced one (q), the best q is
    mapped to z and refined in the full latent space with Adam (``refine_z_lr``) and L-BFGS, same objective
    with the barrier on z. The reduced space does the global search (few coordinates, prior-shaped), the
    polish recovers what the subspace truncated. Skipped with ``fit_similarity``."""
    refine_z_lr: float = 0.02
    """Adam learning rate of the polish (z units, prior std 1)."""


@dataclass
class IKResult:
    """The fit. Positions are in the rest mesh's frame unless named ``*_target_frame``.

    latent : (k,) the optimised decoder coordinates (q for a reduced decoder, z otherwise).
    z : (D,) the full latent (equal to ``latent`` without reduction).
    vertices : (N, 3) fitted mesh vertices, metres, rest frame.
    vertices_target_frame : (N, 3) the same in the target's frame (after normalization is undone).
    points : (P, 3) fitted sample points, rest frame.
    loss : final objective value; errors : dict of fit errors in normalized units (``chamfer_l1``:
        point-to-point symmetric or one-sided Chamfer of samples; ``vertex_error`` when correspondences).
    seconds : wall time.
    """

    latent: np.ndarray
    z: np.ndarray
    vertices: np.ndarray
    vertices_target_frame: np.ndarray
    points: np.ndarray
    loss: float
    errors: dict = field(default_factory=dict)
    seconds: float = 0.0
    similarity: tuple[float, np.ndarray] = (1.0, np.zeros(3))
    polished: bool = False
    """True when the shape comes from the full-latent polish of a reduced fit (``z`` is then off the
    subspace; ``latent`` is the reduced fit's q)."""


def chamfer(pred: torch.Tensor, target: torch.Tensor, one_sided: bool = False, squared: bool = True,
            target_tree=None) -> torch.Tensor:
    """Chamfer distance (the dense definition below), with nearest neighbours from k-d trees
    (found without gradient; the gradient of a min is the gradient at the argmin). ~10x faster on CPU.

    Symmetric: 0.5 * (mean_p min_t d(p,t) + mean_t min_p d(p,t)); one-sided: mean_t min_p d(p,t), with
    d = |p - t|^2 (``squared``) or |p - t|. pred (B, P, 3), target (M, 3) -> (B,). ``target_tree``: a cKDTree
    of ``target`` to reuse.
    """
    from scipy.spatial import cKDTree

    tn = target.detach().cpu().numpy()
    tree = target_tree if target_tree is not None else cKDTree(tn)
    pn = pred.detach().cpu().numpy()
    out = []
    for b in range(pred.shape[0]):
        _, j = cKDTree(pn[b]).query(tn)
        d = (target - pred[b][torch.as_tensor(j)]).pow(2).sum(-1)
        t2p = (d if squared else (d + 1e-20).sqrt()).mean()
        if one_sided:
            out.append(t2p)
            continue
        _, i = tree.query(pn[b])
        d = (pred[b] - target[torch.as_tensor(i)]).pow(2).sum(-1)
        p2t = (d if squared else (d + 1e-20).sqrt()).mean()
        out.append(0.5 * (p2t + t2p))
    return torch.stack(out)


def chamfer_sq(pred: torch.Tensor, target: torch.Tensor, one_sided: bool = False, target_tree=None):
    """Squared-distance Chamfer (the IK data term), see :func:`chamfer`."""
    return chamfer(pred, target, one_sided, True, target_tree)


def chamfer_l1(pred: torch.Tensor, target: torch.Tensor, one_sided: bool = False, target_tree=None):
    """Euclidean-distance Chamfer (the reported fit error of samples), see :func:`chamfer`."""
    return chamfer(pred, target, one_sided, False, target_tree)


def knn_pairs(points: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(i, j) index pairs (P*k,) of each point's k nearest neighbours."""
    from scipy.spatial import cKDTree

    p = points.detach().cpu().numpy()
    k = min(k, len(p) - 1)
    _, idx = cKDTree(p).query(p, k + 1)
    i = np.repeat(np.arange(len(p)), k)
    return torch.as_tensor(i), torch.as_tensor(idx[:, 1:].reshape(-1))


class Objective:
    """E(latent, similarity) for a batch of starts, in normalized units."""

    def __init__(self, decoder, target: Target, cfg: IKConfig, regularizer):
        self.decoder, self.target, self.cfg, self.regularizer = decoder, target, cfg, regularizer
        rest_v = decoder.rest_vertices.detach().cpu().numpy()
        c, s = normalization(rest_v)
        self.s = float(s)
        self.mu = decoder.mu_cond.detach().float()
        loss = cfg.loss
        if loss == "auto":
            loss = "vertex" if target.vertices is not None else "chamfer"
        if loss not in ("chamfer", "vertex"):
            raise ConfigError(f"IK loss {cfg.loss!r}: expected chamfer, vertex or auto")
        if loss == "vertex" and target.vertices is None:
            raise ConfigError("IK loss 'vertex' needs a target with vertex correspondences")
        self.loss = loss
        self.one_sided = target.partial if cfg.one_sided is None else cfg.one_sided
        self.tp = target.points.float() * self.s
        from scipy.spatial import cKDTree

        self.tree = cKDTree(self.tp.numpy())
        self.tv = None if target.vertices is None else target.vertices.float() * self.s
        self.subset = None
        P = int(decoder.rest_points.shape[0])
        if self.loss == "chamfer" and P > cfg.n_loss_points:
            g = torch.Generator().manual_seed(cfg.seed + 1)
            self.subset = torch.randperm(P, generator=g)[: cfg.n_loss_points].sort().values
        self.pairs = None
        if cfg.rigidity_weight > 0:
            rp = decoder.rest_points.detach().float()
            groups = getattr(decoder, "point_groups", None)
            if self.subset is not None:
                rp = rp[self.subset]
                groups = None if groups is None else np.asarray(groups)[self.subset.numpy()]
            i, j = knn_pairs(rp, cfg.rigidity_k)
            if groups is not None:  # only pairs on the same connected component / part may not stretch
                groups = torch.as_tensor(np.asarray(groups))
                keep = groups[i] == groups[j]
                i, j = i[keep], j[keep]
            self.pairs = (i, j)
            self.rest_len = (rp[i] - rp[j]).norm(dim=-1) * self.s

    def shapes(self, lat: torch.Tensor, sim: torch.Tensor | None):
        """Decoded points (B, P', 3) (vertices for the vertex loss), normalized, similarity applied."""
        if self.loss == "vertex":
            x = self.decoder.vertices(lat)
        else:
            x = self.decoder.points(lat)
            if self.subset is not None:
                x = x[:, self.subset]
        x = x * self.s
        if sim is not None:
            x = x * torch.exp(sim[:, :1, None]) + sim[:, None, 1:4]
        return x

    def similarity_init(self, lat: torch.Tensor) -> torch.Tensor:
        """Per-latent (log scale, translation) (B, 4) putting the decoded bbox onto the target's bbox
        (identity for partial targets, whose bbox says little)."""
        sim = torch.zeros(len(lat), 4)
        if self.one_sided:
            return sim
        x = self.decoder.points(lat) * self.s
        lo_p, hi_p = x.min(1).values, x.max(1).values
        lo_t, hi_t = self.tp.min(0).values, self.tp.max(0).values
        sc = (hi_t - lo_t).max() / (hi_p - lo_p).max(-1).values.clamp_min(1e-9)
        sim[:, 0] = torch.log(sc)
        sim[:, 1:] = (lo_t + hi_t) / 2 - (lo_p + hi_p) / 2 * sc[:, None]
        return sim

    def __call__(self, lat: torch.Tensor, sim: torch.Tensor | None) -> torch.Tensor:
        x = self.shapes(lat, sim)
        if self.loss == "vertex":
            data = (x - self.tv).pow(2).sum(-1).mean(-1)
        else:
            data = chamfer_sq(x, self.tp, self.one_sided, self.tree)
        e = data
        if self.cfg.prior_weight > 0:
            dev = (lat - self.mu).abs() - self.cfg.barrier_std
            e = e + self.cfg.prior_weight * torch.relu(dev).pow(2).sum(-1)
        if self.pairs is not None:
            if self.loss == "chamfer":
                pts = x
            else:
                pts = self.decoder.points(lat) * self.s
                pts = pts if self.subset is None else pts[:, self.subset]
            i, j = self.pairs
            ln = (pts[:, i] - pts[:, j]).norm(dim=-1)
            e = e + self.cfg.rigidity_weight * (ln - self.rest_len).pow(2).mean(-1)
        if self.regularizer is not None:
            e = e + self.regularizer(lat)
        return e


def posterior_starts(decoder, target: Target, iters: int = 3) -> torch.Tensor | None:
    """Latents (iters, k) of ``decoder`` from the posterior encoder, without correspondences.

    ``decoder`` is a bound model instance (``encode_points``) or a ReducedDecoder around one (the latents are
    then projected onto its subspace). Each iteration decodes the current latent, pairs every decoded sample
    point with its nearest target point and encodes that deformation (NeuROK's E_vae used as a one-shot
    registration step). None when the decoder has no encoder (baselines).
    """
    from scipy.spatial import cKDTree

    inst = getattr(decoder, "decoder", decoder)
    if not hasattr(inst, "encode_points"):
        return None
    sub = getattr(decoder, "subspace", None)
    tp = target.points.detach().cpu().double().numpy()
    tree = cKDTree(tp)
    pts = inst.rest_points.detach().cpu().double().numpy()  # the first match is from the rest state
    out = []
    with torch.no_grad():
        for i in range(int(iters)):
            if i:  # (a decoder with coordinates of its own beyond the encoder's latent has them at 0)
                pad = int(getattr(inst, "latent_dim", z.shape[-1])) - z.shape[-1]
                zz = torch.cat([z, z.new_zeros(pad)]) if pad > 0 else z
                pts = inst.points(zz[None])[0].detach().cpu().double().numpy()
            z, _ = inst.encode_points(tp[tree.query(pts)[1]])
            out.append(sub.q(z[None].to(sub.W.dtype))[0] if sub is not None else z)
    return torch.stack(out).float()


def solve(
    decoder,
    target: Target,
    config: IKConfig | None = None,
    regularizer: Callable[[torch.Tensor], torch.Tensor] | None = None,
    init: torch.Tensor | None = None,
) -> IKResult:
    """Fit ``decoder``'s latent to ``target`` (see module docstring).

    Parameters
    ----------
    decoder : InstanceDecoder (e.g. a ReducedDecoder for q, the raw decoder for z).
    target : :class:`kinemesh.ik.target.Target` in the rest frame.
    regularizer : optional extra term latent (B, k) -> (B,) added to the objective (used by baselines).
    init : optional (n, k) starting latents screened together with the prior samples.
    """
    from dataclasses import replace

    t_start = time.perf_counter()
    cfg = config or IKConfig()
    if cfg.refine_z_steps < 0:
        raise ConfigError("IK: refine_z_steps must be >= 0")
    res = _solve(decoder, target, cfg, regularizer, init)
    reduced = getattr(decoder, "subspace", None) is not None and getattr(decoder, "decoder", None) is not None
    if cfg.refine_z_steps <= 0 or cfg.fit_similarity or regularizer is not None or not reduced:
        return res
    # polish in z from the reduced solution (the prior mean joins the screen; the better one is refined)
    zcfg = replace(cfg, n_candidates=1, n_starts=1, posterior_init=0, adam_steps=cfg.refine_z_steps,
                   adam_lr=cfg.refine_z_lr, refine_z_steps=0)
    res_z = _solve(decoder.decoder, target, zcfg, None, torch.as_tensor(res.z, dtype=torch.float32)[None])
    if not res_z.loss < res.loss:  # same data term; the barrier acts on q there, on z here
        res.seconds = time.perf_counter() - t_start
        return res
    res_z.latent = res.latent  # q of the reduced fit; z (and the shape) are the polished ones
    res_z.polished = True
    res_z.seconds = time.perf_counter() - t_start
    return res_z


def _solve(decoder, target: Target, cfg: IKConfig, regularizer, init) -> IKResult:
    """One fit of ``decoder``'s own latent (see :func:`solve`)."""
    if cfg.n_starts < 1 or cfg.n_candidates < 1 or cfg.adam_steps < 0 or cfg.lbfgs_steps < 0:
        raise ConfigError("IK: n_starts and n_candidates must be >= 1, step counts >= 0")
    t0 = time.perf_counter()
    obj = Objective(decoder, target, cfg, regularizer)
    mu = obj.mu
    k = int(mu.shape[-1])
    gen = torch.Generator().manual_seed(cfg.seed)
    cands = [mu[None]]
    if cfg.n_candidates > 1:
        cands.append(mu + cfg.candidate_std * torch.randn(cfg.n_candidates - 1, k, generator=gen))
    if init is not None:
        cands.append(torch.as_tensor(init, dtype=torch.float32).reshape(-1, k))
    if cfg.posterior_init > 0 and not cfg.fit_similarity:
        post = posterior_starts(decoder, target, cfg.posterior_init)
        if post is not None:
            cands.append(post.to(cands[0].dtype))
    cands = torch.cat(cands)
    use_sim = cfg.fit_similarity
    sims, scores = [], []
    with torch.no_grad():
        for i in range(0, len(cands), cfg.batch):
            c = cands[i: i + cfg.batch]
            sm = obj.similarity_init(c) if use_sim else None
            scores.append(obj(c, sm))
            sims.append(sm)
    scores = torch.nan_to_num(torch.cat(scores), nan=math.inf)
    order = torch.argsort(scores)[: cfg.n_starts]
    lat = cands[order].clone().requires_grad_(True)
    sim = torch.cat(sims)[order].clone().requires_grad_(True) if use_sim else None
    params = [lat] + ([sim] if use_sim else [])
    if cfg.adam_steps > 0:
        opt = torch.optim.Adam(params, lr=cfg.adam_lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.adam_steps, eta_min=0.1 * cfg.adam_lr)
        for _ in range(cfg.adam_steps):
            opt.zero_grad()
            e = obj(lat, sim)
            e.sum().backward()
            opt.step()
            sched.step()
    with torch.no_grad():
        e = torch.nan_to_num(obj(lat, sim), nan=math.inf)
    best = int(torch.argmin(e))
    lat1 = lat[best: best + 1].detach().clone().requires_grad_(True)
    sim1 = sim[best: best + 1].detach().clone().requires_grad_(True) if use_sim else None
    final = float(e[best])
    if cfg.lbfgs_steps > 0:
        p1 = [lat1] + ([sim1] if use_sim else [])
        backup = [p.detach().clone() for p in p1]
        opt = torch.optim.LBFGS(p1, lr=1.0, max_iter=cfg.lbfgs_steps, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            val = obj(lat1, sim1).sum()
            val.backward()
            return val

        try:
            opt.step(closure)
        except RuntimeError:  # pragma: no cover - numerical failure inside the line search
            pass
        with torch.no_grad():
            e1 = float(obj(lat1, sim1).sum())
        if not math.isfinite(e1) or e1 > final:
            with torch.no_grad():
                for p, b in zip(p1, backup):
                    p.copy_(b)
        else:
            final = e1
    with torch.no_grad():
        lat_f = lat1.detach()
        verts = decoder.vertices(lat_f)[0]
        pts = decoder.points(lat_f)[0]
        if use_sim:
            sc = torch.exp(sim1[0, 0]).item()
            tr = (sim1[0, 1:4] / obj.s).numpy()
            verts_fit, pts_fit = verts * sc + torch.as_tensor(tr), pts * sc + torch.as_tensor(tr)
        else:
            sc, tr = 1.0, np.zeros(3)
            verts_fit, pts_fit = verts, pts
        errors = {
            "loss": final,
            "chamfer_l1": float(chamfer_l1(pts_fit[None] * obj.s, obj.tp, obj.one_sided)[0]),
        }
        if target.vertices is not None:
            errors["vertex_error"] = float((verts_fit - target.vertices).norm(dim=-1).mean() * obj.s)
    z = decoder.z(lat_f)[0] if hasattr(decoder, "z") and callable(getattr(decoder, "z")) else lat_f[0]
    vf = verts_fit.numpy().astype(np.float64)
    return IKResult(
        latent=lat_f[0].numpy(),
        z=z.detach().numpy(),
        vertices=vf,
        vertices_target_frame=target.to_target_frame(vf),
        points=pts_fit.numpy(),
        loss=final,
        errors=errors,
        seconds=time.perf_counter() - t0,
        similarity=(sc, tr),
    )
