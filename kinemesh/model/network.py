"""The conditional VAE of NeuROK Sec. 4.1: prior encoder, posterior encoder and deformation decoder.

Everything works in normalised coordinates (rest bounding box centred at 0, longest side 1).
Attention is plain matmul + softmax (not ``F.scaled_dot_product_attention``: its CPU kernel has no
forward-mode AD, and dynamics needs ``torch.func.jvp`` through the decoder).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from kinemesh.geometry import dualquat
from kinemesh.model.config import ModelConfig


def _up(x: torch.Tensor) -> torch.Tensor:
    """Half precision -> float32; float32/float64 unchanged (the geometric heads never run in bf16)."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


class FourierEmbedding(nn.Module):
    """3DShape2VecSet position embedding: [x, sin(2^i pi x), cos(2^i pi x)] -> linear. (..., C) -> (..., W)."""

    def __init__(self, in_dim: int, n_freqs: int, width: int):
        super().__init__()
        self.register_buffer("freqs", (2.0 ** torch.arange(n_freqs)) * math.pi, persistent=False)
        self.proj = nn.Linear(in_dim * (2 * n_freqs + 1), width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = (x[..., None] * self.freqs.to(x.dtype)).flatten(-2)
        return self.proj(torch.cat([x, xf.sin(), xf.cos()], -1))


class Attention(nn.Module):
    """Multi-head attention with explicit matmuls (forward-AD friendly)."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        # x: (B, Q, W), ctx: (B, C, W)
        B, Q, W = x.shape
        h, dh = self.heads, W // self.heads
        q = self.q(x).view(B, Q, h, dh).transpose(1, 2)
        k, v = self.kv(ctx).view(B, ctx.shape[1], 2, h, dh).permute(2, 0, 3, 1, 4)
        att = torch.softmax((q @ k.transpose(-1, -2)) * (dh ** -0.5), dim=-1)
        return self.out((att @ v).transpose(1, 2).reshape(B, Q, W))


class Block(nn.Module):
    """Pre-norm transformer block: attention (self, or cross to a context) then MLP."""

    def __init__(self, width: int, heads: int, mlp_ratio: int, cross: bool):
        super().__init__()
        self.cross = cross
        self.norm_x = nn.LayerNorm(width)
        self.norm_ctx = nn.LayerNorm(width) if cross else None
        self.attn = Attention(width, heads)
        self.norm_mlp = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp_ratio * width), nn.GELU(),
                                 nn.Linear(mlp_ratio * width, width))

    def forward(self, x: torch.Tensor, ctx: torch.Tensor | None = None) -> torch.Tensor:
        xn = self.norm_x(x)
        x = x + self.attn(xn, self.norm_ctx(ctx) if self.cross else xn)
        return x + self.mlp(self.norm_mlp(x))


class Perceiver(nn.Module):
    """Learnable tokens cross-attend to point features, then self-attention blocks. -> (B, T, W)."""

    def __init__(self, n_tokens: int, width: int, heads: int, mlp_ratio: int, self_layers: int):
        super().__init__()
        self.tokens = nn.Parameter(torch.randn(n_tokens, width) * 0.02)
        self.cross = Block(width, heads, mlp_ratio, cross=True)
        self.blocks = nn.ModuleList(Block(width, heads, mlp_ratio, cross=False) for _ in range(self_layers))
        self.norm = nn.LayerNorm(width)

    def forward(self, feats: torch.Tensor, token_offset: torch.Tensor | None = None) -> torch.Tensor:
        """feats (B, P, W); ``token_offset`` (B, T, W) is added to the learnable tokens before they attend."""
        x = self.tokens.expand(feats.shape[0], -1, -1).to(feats.dtype)
        if token_offset is not None:
            x = x + token_offset.to(feats.dtype)
        x = self.cross(x, feats)
        for b in self.blocks:
            x = b(x)
        return self.norm(x)


class PriorEncoder(nn.Module):
    """E_cond(M0): rest points (B, P, 3) -> (mu_cond (B, D), token features h (B, K, W))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = FourierEmbedding(3, cfg.n_freqs, cfg.width)
        self.perceiver = Perceiver(cfg.n_tokens, cfg.width, cfg.heads, cfg.mlp_ratio, cfg.enc_self_layers)
        self.to_mu = nn.Linear(cfg.width, cfg.token_dim)

    def forward(self, points: torch.Tensor):
        h = self.perceiver(self.embed(points))
        return self.to_mu(h).flatten(1), h


class PosteriorEncoder(nn.Module):
    """E_vae(phi, M0): points (B,P,3) + deformation (B,P,3), 2K tokens -> (mean (B, D), log-variance (B, D))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = FourierEmbedding(6, cfg.n_freqs, cfg.width)
        self.perceiver = Perceiver(2 * cfg.n_tokens, cfg.width, cfg.heads, cfg.mlp_ratio, cfg.enc_self_layers)
        self.to_mean = nn.Linear(cfg.width, cfg.token_dim)
        self.to_logvar = nn.Linear(cfg.width, cfg.token_dim)
        if cfg.posterior_procrustes:
            self.motion_proj = nn.Sequential(nn.Linear(REGION_FEATURES, cfg.width), nn.GELU(),
                                             nn.Linear(cfg.width, cfg.width))
            # direct path: the first 7 latent dimensions of token k start as its region's rigid motion
            nn.init.zeros_(self.to_mean.weight)
            nn.init.zeros_(self.to_mean.bias)
            self.motion_skip = nn.Linear(REGION_FEATURES, cfg.token_dim, bias=False)
            with torch.no_grad():
                init = torch.zeros(cfg.token_dim, REGION_FEATURES)
                n = min(7, cfg.token_dim)
                init[:n, :n] = torch.eye(n) * MOTION_LATENT_GAIN
                self.motion_skip.weight.copy_(init)

    def forward(self, points: torch.Tensor, delta: torch.Tensor, weights: torch.Tensor | None = None):
        """``weights`` (B, P, K): the decoder's skinning weights of the points (``posterior_procrustes``)."""
        K = self.cfg.n_tokens
        offset, skip = None, 0.0
        if self.cfg.posterior_procrustes:
            if weights is None:
                raise ValueError("posterior_procrustes needs the decoder's skinning weights")
            feats = region_motion(_up(points), _up(delta), _up(weights).detach())  # (B, K, 9)
            m = self.motion_proj(feats.to(points.dtype))  # (B, K, W)
            offset = torch.cat([m, m], 1)  # token k (mean) and token K + k (log-variance) see region k
            skip = self.motion_skip(feats).flatten(1)
        h = self.perceiver(self.embed(torch.cat([points, delta], -1)), offset)
        return self.to_mean(h[:, :K]).flatten(1) + skip, self.to_logvar(h[:, K:]).flatten(1)


class Decoder(nn.Module):
    """D(z, M0): latent tokens (conditioned on the shape tokens of E_cond) -> deformed query points.

    Heads (``cfg.head``):
    - ``dq_skinning``: token k predicts a rigid transform T_k (unit dual quaternion, a rotation about the
      soft centroid of its region plus a translation); query point p gets skinning weights
      softmax(logits_p / temperature) over tokens from its position and the shape tokens only (independent of
      z), and moves by DQ blending of the T_k (rigid by construction where weights are one-hot; smooth
      weights give elastic/cloth motion, as in Simplicits).
    - ``per_point_dq``: query points cross-attend to the latent tokens; an MLP gives one unit dual quaternion
      per point (NeuROK Sec. 4.1, footnote 3).
    - ``displacement``: as above but the MLP gives a displacement (ablation).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        W = cfg.width
        self.z_proj = nn.Linear(cfg.token_dim, W)
        self.cond_proj = nn.Linear(W, W)
        self.token_pos = nn.Parameter(torch.randn(cfg.n_tokens, W) * 0.02)
        self.blocks = nn.ModuleList(Block(W, cfg.heads, cfg.mlp_ratio, cross=False)
                                    for _ in range(cfg.dec_self_layers))
        self.norm = nn.LayerNorm(W)
        self.query_embed = FourierEmbedding(3, cfg.n_freqs, W)
        self.query_blocks = nn.ModuleList(Block(W, cfg.heads, cfg.mlp_ratio, cross=True)
                                          for _ in range(cfg.dec_cross_layers))
        self.query_norm = nn.LayerNorm(W)
        if cfg.head == "dq_skinning":
            self.token_head = nn.Linear(W, 7)  # quaternion offset (4) + translation (3)
            self.skin_head = nn.Linear(W, cfg.n_tokens)
            self.group_proj = nn.Linear(W, W)  # features pooled over the point's connected component
            # Spatial prior of the skinning weights (Simplicits-like handles): token k starts owning the region
            # around anchor a_k, which breaks the symmetry between tokens from the first step.
            if cfg.posterior_procrustes:
                # direct path z_k -> (quaternion offset, translation) of token k, the inverse of the
                # posterior's motion_skip at initialisation, so reconstruction works from the first steps
                self.z_skip = nn.Linear(cfg.token_dim, 7, bias=False)
                with torch.no_grad():
                    init = torch.zeros(7, cfg.token_dim)
                    n = min(7, cfg.token_dim)
                    init[:n, :n] = torch.eye(n) / MOTION_LATENT_GAIN
                    self.z_skip.weight.copy_(init)
            self.anchors = nn.Parameter(torch.rand(cfg.n_tokens, 3) - 0.5)
            self.anchor_log_width = nn.Parameter(torch.tensor(math.log(0.25)))
        else:
            self.point_head = nn.Sequential(nn.Linear(W, W), nn.GELU(),
                                            nn.Linear(W, 3 if cfg.head == "displacement" else 7))
        last = self.token_head if cfg.head == "dq_skinning" else self.point_head[-1]
        nn.init.zeros_(last.weight)  # identity deformation at initialisation
        nn.init.zeros_(last.bias)

    # ------------------------------------------------------------------ pieces
    def latent_tokens(self, z: torch.Tensor, h_cond: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        """z (B, D), h_cond (B, K, W) -> decoded token features (B, K, W).

        ``cond`` (1 or B, K, W): ``token_condition(h_cond)`` computed once per instance (skips two layers)."""
        B = z.shape[0]
        if cond is None:
            cond = self.token_condition(h_cond)
        x = self.z_proj(z.reshape(B, self.cfg.n_tokens, self.cfg.token_dim)) + cond
        for b in self.blocks:
            x = b(x)
        return self.norm(x)

    def token_condition(self, h_cond: torch.Tensor) -> torch.Tensor:
        """The z-independent part of the token input: cond_proj(h_cond) + token_pos, (B, K, W)."""
        x = self.cond_proj(h_cond)
        return x + self.token_pos.to(x.dtype)

    def query_features(self, query: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """query (B, P, 3) attends to ctx (B, K, W) -> (B, P, W)."""
        x = self.query_embed(query)
        for b in self.query_blocks:
            x = b(x, ctx)
        return self.query_norm(x)

    def skin_weights(self, query: torch.Tensor, h_cond: torch.Tensor,
                     groups: torch.Tensor | None = None) -> torch.Tensor:
        """Skinning weights (B, P, K), rows sum to 1. Depend on the shape only, not on z.

        ``groups`` (B, P) int: connected-component label of each point (0..C-1). The mean feature of the
        point's component is added before the head, so separate parts (separate components) tend to get
        uniform weights, i.e. move rigidly.
        """
        feats = self.query_features(query, h_cond)
        onehot = None
        if groups is not None:
            onehot = torch.nn.functional.one_hot(groups, int(groups.max()) + 1).to(feats.dtype)  # (B, P, C)
            pooled = (onehot.transpose(1, 2) @ feats) / onehot.sum(1)[..., None].clamp_min(1.0)
            feats = feats + self.group_proj(onehot @ pooled)
        logits = _up(self.skin_head(feats))
        if self.cfg.anchor_prior:
            d2 = ((_up(query)[..., None, :] - self.anchors.to(logits.dtype)) ** 2).sum(-1)  # (B, P, K)
            logits = logits - d2 * torch.exp(-2.0 * self.anchor_log_width).to(logits.dtype)
        if self.cfg.component_rigid and onehot is not None:
            # Objects made of several connected components (separate parts): every point of a component
            # takes the component's mean logits, so each part moves rigidly by construction (docs/architecture.md,
            # "restrict the average to points on the same connected component"); pooling logits rather than
            # weights keeps a part's assignment as sharp as its points'. Single-component objects (soft
            # bodies, cloth, scans) keep per-point weights and deform smoothly.
            oh = onehot.to(logits.dtype)
            comp = (oh.transpose(1, 2) @ logits) / oh.sum(1)[..., None].clamp_min(1.0)  # (B, C, K)
            multi = (oh.sum(1) > 0).sum(-1) > 1  # (B,) more than one component present
            logits = torch.where(multi[:, None, None], oh @ comp, logits)
        return torch.softmax(logits / self.cfg.skin_temperature, dim=-1)

    @staticmethod
    def pivots(query: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Soft centroid of each token's region: (B, K, 3)."""
        w = weights / (weights.sum(1, keepdim=True) + 1e-6)
        return w.transpose(1, 2) @ _up(query).to(w.dtype)

    @staticmethod
    def _rigid_dq(raw: torch.Tensor, pivot: torch.Tensor) -> torch.Tensor:
        """raw (..., 7) and pivot (..., 3) -> unit DQ of x -> R (x - pivot) + pivot + t."""
        raw = _up(raw)
        identity = raw.new_tensor([1.0, 0.0, 0.0, 0.0])
        q = identity + raw[..., :4]
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-12)
        rot = dualquat.from_rt(q, torch.zeros_like(pivot))
        t = pivot - dualquat.apply(rot, pivot) + raw[..., 4:]
        return dualquat.from_rt(q, t)

    def token_transforms(self, tokens: torch.Tensor, pivots: torch.Tensor,
                         z: torch.Tensor | None = None) -> torch.Tensor:
        """Per-token rigid transforms as unit dual quaternions (B, K, 8) (``dq_skinning`` head).

        ``z`` (B, D): the latent, read directly by the ``z_skip`` path when the model has one."""
        raw = _up(self.token_head(tokens))
        if z is not None and hasattr(self, "z_skip"):
            raw = raw + self.z_skip(_up(z).reshape(z.shape[0], self.cfg.n_tokens, self.cfg.token_dim))
        return self._rigid_dq(raw, pivots)

    def point_transforms(self, feats: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """Per-point output of the point heads: DQ (B,P,8) for per_point_dq, displacement (B,P,3) otherwise."""
        raw = _up(self.point_head(feats))
        if self.cfg.head == "displacement":
            return raw
        return self._rigid_dq(raw, _up(query))

    # ------------------------------------------------------------------ full decode
    def forward(self, z: torch.Tensor, query: torch.Tensor, h_cond: torch.Tensor,
                weights: torch.Tensor | None = None, groups: torch.Tensor | None = None) -> torch.Tensor:
        """z (B, D), query (B, P, 3), h_cond (B, K, W) -> deformed query points (B, P, 3) float32.

        ``weights`` (B, P, K): precomputed skinning weights (dq_skinning head only); ``groups`` (B, P) int
        connected-component labels of the query points (see ``skin_weights``).
        """
        tokens = self.latent_tokens(z, h_cond)
        q32 = _up(query)
        if self.cfg.head == "dq_skinning":
            if weights is None:
                weights = self.skin_weights(query, h_cond, groups)
            with torch.autocast(q32.device.type, enabled=False):
                dq = self.token_transforms(_up(tokens), self.pivots(q32, weights), z)
                point_dq = skin_blend(dq, weights)
                return dualquat.apply(point_dq, q32)
        feats = self.query_features(query, tokens)
        with torch.autocast(q32.device.type, enabled=False):
            out = self.point_transforms(_up(feats), q32)
            if self.cfg.head == "displacement":
                return q32 + out
            return dualquat.apply(out, q32)


def _hemisphere(dq: torch.Tensor, weights: torch.Tensor, pivot: torch.Tensor | None = None) -> torch.Tensor:
    """The weights of ``_blend_raw`` with the hemisphere signs folded in: ``weights`` itself when all K real parts
    lie in one hemisphere (the usual case), else (B, P, K) s_pk w_pk."""
    B = dq.shape[0]
    with torch.no_grad():
        dots = dq[..., :4] @ dq[..., :4].transpose(1, 2)  # (B, K, K) real-part dot products
        same = bool((dots >= 0).all())
    if same:
        return weights
    w = weights.expand(B, -1, -1)
    with torch.no_grad():
        piv = w.argmax(-1) if pivot is None else pivot.expand(B, -1)  # (B, P)
        sign = torch.where(torch.gather(dots, 1, piv[..., None].expand(-1, -1, dq.shape[1])) < 0, -1.0, 1.0)
    return w * sign.to(w.dtype)


def _blend_raw(dq: torch.Tensor, weights: torch.Tensor, pivot: torch.Tensor | None = None) -> torch.Tensor:
    """Unnormalised blend sum_k s_pk w_pk dq_k (B, P, 8) with the hemisphere signs s of ``skin_blend``.

    ``pivot`` (P,) int: the largest-weight token of every point (argmax of ``weights``, shape-only, so it can
    be cached at bind time). When all K real parts lie in one hemisphere (the usual case) no sign is flipped
    and the blend is a single broadcast matmul."""
    return _hemisphere(dq, weights, pivot) @ dq


def skin_blend(dq: torch.Tensor, weights: torch.Tensor, pivot: torch.Tensor | None = None) -> torch.Tensor:
    """Dual-quaternion blending of K shared transforms for many points, as one matmul.

    dq (B, K, 8) token transforms, weights (B or 1, P, K) -> unit DQs (B, P, 8). Equals
    ``kinemesh.geometry.dualquat.blend(dq[:, None], weights)``: each transform is sign-flipped to the
    hemisphere of the point's largest-weight transform (the flips are piecewise constant in z, so they carry
    no derivative), then weights @ dq, then normalisation. Avoids the (B, P, K, 8) intermediate.
    ``pivot`` (P,): cached argmax of ``weights`` (see ``_blend_raw``).
    """
    return dualquat.normalize(_blend_raw(dq, weights, pivot))


def _blend_planes(dq: torch.Tensor, weights: torch.Tensor, pivot: torch.Tensor | None = None) -> torch.Tensor:
    """``_blend_raw`` as 8 component planes (8, B, P): plane c is component c of every blended DQ. With weights
    shared by the batch (1, P, K) and one hemisphere (the usual case) it is a single (8 B, K) x (K, P) matmul whose
    result is already in this layout (no broadcast of the weights over the batch, contiguous planes)."""
    B, K = dq.shape[0], dq.shape[1]
    w = _hemisphere(dq, weights, pivot)
    if w.shape[0] == 1:
        return (dq.permute(2, 0, 1).reshape(8 * B, K) @ w[0].T).reshape(8, B, -1)
    return (dq.transpose(1, 2) @ w.transpose(1, 2)).transpose(0, 1)  # (B, 8, P) -> (8, B, P)


def skin_points(dq: torch.Tensor, weights: torch.Tensor, points: torch.Tensor,
                pivot: torch.Tensor | None = None) -> torch.Tensor:
    """Points (P, 3) moved by the blended transforms: (B, P, 3), equal to
    ``dq_apply(skin_blend(dq, weights), points)`` in fewer operations.

    With the unnormalised blend b = (r, d) = (w, v, dw, dv) (Kavan et al. 2008, DLB),
    x = (r p r* + 2 vec(d r*)) / |r|^2 with r p r* = (w^2 - |v|^2) p + 2 (v.p) v + 2 w v x p and
    vec(d r*) = w dv - dw v + v x dv: the normalisation is one division (the part of d along r only changes the
    scalar part of d r*). Evaluated per coordinate on contiguous (B, P) planes (``_blend_planes``), about 40
    elementwise passes over B P numbers instead of ~15 over (B, P, 3) strided slices and two ``torch.cross``."""
    w, x, y, z, dw, dx, dy, dz = _blend_planes(dq, weights, pivot)
    p = points.T if points.dim() == 2 else points.movedim(-1, 0)  # (3, P) or (3, B, P)
    px, py, pz = p[0], p[1], p[2]
    ww, vv = w * w, x * x + y * y + z * z
    s, inv = ww - vv, 1.0 / (ww + vv)
    e = x * px + y * py + z * pz - dw  # v.p - dw: 2 (v.p) v - 2 dw v = 2 e v
    out = []
    for vc, pc, a, b, pa, pb, da, db, dc in ((x, px, y, z, pz, py, dz, dy, dx), (y, py, z, x, px, pz, dx, dz, dy),
                                             (z, pz, x, y, py, px, dy, dx, dz)):
        # component c of (v x p) = a pa - b pb, of (v x dv) = a da - b db (a, b the other two of v, cyclic)
        t = vc * e + w * (a * pa - b * pb + dc) + (a * da - b * db)
        out.append((2.0 * t + s * pc) * inv)
    return torch.stack(out, -1)


class KinematicVAE(nn.Module):
    """The three networks of NeuROK Sec. 4 trained jointly with Eq. 1."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.prior = PriorEncoder(cfg)
        self.posterior = PosteriorEncoder(cfg)
        self.decoder = Decoder(cfg)

    @property
    def latent_dim(self) -> int:
        return self.cfg.latent_dim

    def forward(self, points: torch.Tensor, delta: torch.Tensor, sample: bool = True,
                groups: torch.Tensor | None = None, prior_reg: bool = False) -> dict:
        """Training pass. points (B,P,3) on M0, delta (B,P,3) their deformation, normalised coordinates,
        groups (B,P) int connected-component labels of the points (optional).

        Returns ``pred_delta`` (B,P,3), ``mu_q``/``logvar_q``/``mu_p`` (B,D).
        """
        mu_p, h_cond = self.prior(points)
        weights = None
        if self.cfg.head == "dq_skinning" and self.cfg.posterior_procrustes:
            weights = self.decoder.skin_weights(points, h_cond, groups)
        mu_q, logvar_q = self.posterior(points, delta, weights)
        mu_q, logvar_q = _up(mu_q), _up(logvar_q).clamp(-12.0, 6.0)
        z = mu_q + torch.randn_like(mu_q) * torch.exp(0.5 * logvar_q) if sample else mu_q
        pred = self.decoder(z, points, h_cond, weights=weights, groups=groups)
        out = {"pred_delta": pred - _up(points), "mu_q": mu_q, "logvar_q": logvar_q, "mu_p": _up(mu_p)}
        if prior_reg:
            # decode one sample of the prior N(mu_cond, I) per pair and score its plausibility (see
            # ``plausibility``); the prior mean itself is detached so only the decoder learns from it
            zp = _up(mu_p).detach() + torch.randn_like(mu_q)
            xp = self.decoder(zp, points, h_cond, weights=weights, groups=groups)
            out["attach"], out["stretch"] = plausibility(_up(points), xp, groups)
        return out


def plausibility(points: torch.Tensor, moved: torch.Tensor, groups: torch.Tensor | None,
                 touch: float = 0.03, k: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """How implausible a decoded state is: (detachment, stretch), each a mean of squares (normalised units).

    points (B, P, 3) at M0, moved (B, P, 3) decoded, groups (B, P) connected components.
    - detachment (objects with several components): a component that touches another at rest (closest
      point of another component within ``touch``) must still touch one: the squared increase of its smallest
      gap to any other component. Hinges and slides keep a contact; a part flying off does not.
    - stretch (single-component objects): squared relative change of the distances to the k nearest points
      (surface area and edge lengths of soft bodies and cloth change by about 1 % in the data).
    The prior of Eq. 1 has no such term; it keeps samples of N(mu_cond, I) plausible where the posterior
    never reaches (the reconstruction term alone leaves the decoder free there).
    """
    B, P, _ = points.shape
    d0 = torch.cdist(points, points)  # (B, P, P)
    d1 = torch.cdist(moved, moved)
    zero = points.new_zeros(())
    if groups is None:
        groups = torch.zeros(B, P, dtype=torch.long, device=points.device)
    other = groups[:, :, None] != groups[:, None, :]  # (B, P, P)
    multi = other.flatten(1).any(-1)  # (B,)
    attach, stretch = zero, zero
    if multi.any():
        big = torch.finfo(points.dtype).max / 4
        gap0 = torch.where(other, d0, big).amin(-1)  # (B, P) rest distance to the nearest other component
        gap1 = torch.where(other, d1, big).amin(-1)
        C = int(groups.max()) + 1
        oh = torch.nn.functional.one_hot(groups, C).bool()  # (B, P, C)
        g0 = torch.where(oh, gap0[..., None], big).amin(1)  # (B, C) smallest gap of each component
        g1 = torch.where(oh, gap1[..., None], big).amin(1)
        valid = (g0 < touch) & multi[:, None]
        if valid.any():
            attach = (torch.relu(g1 - g0)[valid] ** 2).mean()
    single = ~multi
    if single.any():
        d0s, d1s = d0[single], d1[single]
        knn = d0s.topk(k + 1, dim=-1, largest=False).indices[..., 1:]  # (b, P, k), skip self
        r0 = torch.gather(d0s, -1, knn)
        r1 = torch.gather(d1s, -1, knn)
        # relative change, with the denominator floored at 1 % of the (normalised) object size so that
        # near-coincident samples cannot dominate
        stretch = (((r1 - r0) / r0.clamp_min(0.01)) ** 2).mean()
    return attach, stretch


REGION_FEATURES = 9
MOTION_LATENT_GAIN = 4.0
"""Latent units per unit of quaternion offset / normalised translation on the direct posterior/decoder paths:
a 0.25-unit motion (about 30 degrees, or a quarter of the object) is one prior standard deviation."""


def region_motion(points: torch.Tensor, delta: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Rigid motion of each token's skinning region: (B, P, 3), (B, P, 3), (B, P, K) -> (B, K, 9).

    Weighted Procrustes (Kabsch) per token k with weights w_pk: the rotation as a unit quaternion minus the
    identity (4, sign fixed to w >= 0), the translation of the region's centroid (3), the mean residual of
    the rigid fit (1, how non-rigid the region moves) and the region's share of the points (1). These are the
    quantities the ``dq_skinning`` decoder produces per token, so the posterior reads them directly instead of
    having to learn Procrustes analysis from raw points (it learned it slowly: NeuROK posterior prototypes
    explained a third of the motion after 40 CPU minutes). Computed without gradient.
    """
    from kinemesh.geometry.dualquat import quat_from_matrix

    with torch.no_grad():
        w = weights.double()
        x, y = points.double(), (points + delta).double()
        mass = w.sum(1)  # (B, K)
        wn = w / mass[:, None, :].clamp_min(1e-9)
        cx = wn.transpose(1, 2) @ x  # (B, K, 3)
        cy = wn.transpose(1, 2) @ y
        xc = x[:, :, None, :] - cx[:, None]  # (B, P, K, 3)
        yc = y[:, :, None, :] - cy[:, None]
        H = torch.einsum("bpk,bpki,bpkj->bkij", wn, yc, xc)  # sum w (y - cy)(x - cx)^T
        U, _, Vh = torch.linalg.svd(H + 1e-12 * torch.eye(3, dtype=H.dtype))
        d = torch.sign(torch.det(U @ Vh))
        D = torch.diag_embed(torch.stack([torch.ones_like(d), torch.ones_like(d), d], -1))
        R = U @ D @ Vh  # rotation taking x - cx onto y - cy
        q = quat_from_matrix(R)
        q = q * torch.where(q[..., :1] < 0, -1.0, 1.0)
        resid = torch.einsum("bpk,bpk->bk", wn, ((yc - torch.einsum("bkij,bpkj->bpki", R, xc)) ** 2).sum(-1))
        ident = q.new_tensor([1.0, 0.0, 0.0, 0.0])
        share = mass / mass.sum(-1, keepdim=True).clamp_min(1e-9)
        feats = torch.cat([q - ident, cy - cx, resid.clamp_min(0).sqrt()[..., None], share[..., None]], -1)
    return feats.to(points.dtype)


def kl_per_dim(mu_q: torch.Tensor, logvar_q: torch.Tensor, mu_p: torch.Tensor) -> torch.Tensor:
    """KL(N(mu_q, exp(logvar_q)) || N(mu_p, I)) per latent dimension: (B, D) nats."""
    return 0.5 * ((mu_q - mu_p) ** 2 + logvar_q.exp() - 1.0 - logvar_q)


def vae_loss(out: dict, delta: torch.Tensor, kl_weight: float, free_bits: float, recon_weight: float = 1.0,
             prior_weight: float = 0.0) -> dict:
    """Eq. 1: recon_weight * ||delta - delta_pred||^2 (sum over xyz, mean over points and batch) + lambda * KL.

    KL uses free bits: each latent dimension's batch-mean KL is floored at ``free_bits`` nats, so encoding up
    to that much information costs nothing (prevents posterior collapse). Returns a dict of scalars.
    """
    recon = ((out["pred_delta"] - delta.float()) ** 2).sum(-1).mean()
    kl = kl_per_dim(out["mu_q"], out["logvar_q"], out["mu_p"])
    kl_dim = kl.mean(0)
    kl_fb = torch.clamp(kl_dim, min=free_bits).sum()
    loss = recon_weight * recon + kl_weight * kl_fb
    prior_reg = out["attach"] + out["stretch"] if "attach" in out else recon.new_zeros(())
    if prior_weight:
        loss = loss + prior_weight * prior_reg
    return {
        "prior_reg": prior_reg.detach(),
        "loss": loss,
        "recon": recon.detach(),
        "kl": kl_dim.sum().detach(),
        "post_std": torch.exp(0.5 * out["logvar_q"]).mean().detach(),
        "active_dims": (kl_dim > 0.01).sum().detach().float(),
    }
