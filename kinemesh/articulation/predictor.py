"""GEOPARD-like articulation predictor: a small point transformer over part points, whole-shape points and
box features -> motion type, axis (classification over the part's box axes + residual), origin (classification
over the 3 x 3 grid of candidate axis lines + residual), opening sign and limits.

GEOPARD (talk, "Network Architecture" / "Training" slides): pretrain on candidate motions that pass the
simulator filter (no detachment, no self-collision), then fine-tune on annotated articulations; the ablation
without pretraining is reported (10.67 vs 9.18 deg axis error). We follow that recipe: the pretraining head
predicts, for every one of the 60 box candidates (:mod:`kinemesh.articulation.candidates`), whether it is
physically valid (multi-label BCE); fine-tuning trains the articulation heads on synthetic ground truth.

Inputs (all in the part's box frame, object-normalized units: the object's bounding box has longest side 1):
``points`` (P, 4) = xyz + flag (1 on the part, 0 on the rest of the shape) and ``box`` (B,) box features.
The network is perceiver-style: K learnable tokens cross-attend to the points, then self-attend.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from kinemesh.articulation.candidates import (
    GRID, N_CANDIDATES, PartBox, candidate_index, part_box, perpendicular_axes,
)
from kinemesh.errors import InputFileError

TYPES = ("fixed", "revolute", "prismatic")
DEFAULT_WEIGHTS = Path(__file__).resolve().parents[1] / "assets" / "articulation"
BOX_FEATURES = 21
REMOVED_OPTIONS = {"shape_floor": 0.0}  # config.json keys of removed options -> the value that behaves as today


@dataclass
class PredictorConfig:
    """Network and input sizes."""

    n_part: int = 128  # surface samples on the part
    n_shape: int = 192  # surface samples on the rest of the object
    width: int = 64  # token width
    tokens: int = 16  # learnable latent tokens
    layers: int = 2  # self-attention layers over the tokens
    heads: int = 4  # attention heads
    fourier: int = 6  # Fourier frequencies of the point embedding
    shape_uniform: float = 0.5  # fraction of the shape samples spread equally over the other parts (the rest
    # by surface area). By area alone a door's handle gets ~1 of 192 samples, so the cue that decides the
    # hinge side (the handle sits at the free edge) is invisible; 0 = by area only (weights before 9bf9913).
    extra: dict = field(default_factory=dict)  # training provenance (written to config.json)


# ---------------------------------------------------------------------------------------------- features
def part_features(parts: list[tuple[np.ndarray, np.ndarray]], index: int, rng: np.random.Generator,
                  config: PredictorConfig, name: str = "part") -> tuple[np.ndarray, np.ndarray, PartBox, tuple]:
    """Network inputs of part ``index`` among ``parts`` [(vertices (n,3) m, faces (m,3))].

    Returns ``points`` (n_part + n_shape, 4) float32, ``box_feat`` (BOX_FEATURES,) float32, the part's box
    in normalized units and the normalization ``(center, scale)``.
    """
    from kinemesh.geometry.normalize import normalization
    from kinemesh.geometry.sampling import face_areas, sample_surface

    center, scale = normalization(np.concatenate([v for v, _ in parts if len(v)]))
    norm = [((v - center) * scale, f) for v, f in parts]
    v, f = norm[index]
    box = part_box(v, name)
    pp, _, _ = sample_surface(v, f, config.n_part, seed=rng)
    others = [(vv, ff) for i, (vv, ff) in enumerate(norm) if i != index and len(ff)]
    if others:
        areas = np.array([float(face_areas(vv, ff).sum()) for vv, ff in others])
        counts = context_counts(areas, config, rng)
        sp = np.concatenate([sample_surface(vv, ff, int(c), seed=rng)[0] for (vv, ff), c in zip(others, counts)
                             if c > 0])
    else:
        sp = np.zeros((config.n_shape, 3))
    pts = np.concatenate([box.to_box(pp), box.to_box(sp)])
    flag = np.concatenate([np.ones(len(pp)), np.zeros(len(sp))])
    points = np.concatenate([pts, flag[:, None]], axis=1).astype(np.float32)
    all_v = np.concatenate([vv for vv, _ in norm])
    obj_lo, obj_hi = all_v.min(0), all_v.max(0)
    box_feat = np.concatenate([
        box.extents, box.center, box.axes.reshape(-1), obj_hi - obj_lo, [float(np.prod(box.extents)) ** (1 / 3)],
        [box.center[2] - obj_lo[2], len(parts) / 10.0],
    ]).astype(np.float32)
    assert box_feat.shape == (BOX_FEATURES,)
    return points, box_feat, box, (center, scale)


def context_counts(areas, config: PredictorConfig, rng: np.random.Generator) -> np.ndarray:
    """Number of shape-context samples on each other part (sums to ``config.n_shape``), from their surface
    ``areas`` (m,): a multinomial draw with shares ``(1 - u) * area share + u / m``, ``u = config.shape_uniform``
    (equal shares when every area is 0)."""
    a = np.asarray(areas, float)
    u = config.shape_uniform
    w = (1.0 - u) * a / a.sum() + u / len(a) if a.sum() > 0 else np.full(len(a), 1.0 / len(a))
    return rng.multinomial(int(config.n_shape), w)


def joint_targets(box: PartBox, type_: str, axis, origin, limits, scale: float, center) -> dict:
    """Training targets of a ground-truth joint in the box (normalized) frame: type index, axis class,
    sign, axis residual (3,), origin grid class, origin residual (2,) in half-extent units, limits (2,)."""
    t = {"fixed": 0, "revolute": 1, "continuous": 1, "prismatic": 2}[type_]
    out = {"type": t, "axis_cls": 0, "sign": 0, "axis_res": np.zeros(3, np.float32), "origin_cls": 4,
           "origin_res": np.zeros(2, np.float32), "limits": np.zeros(2, np.float32), "movable": float(t > 0)}
    if t == 0:
        return out
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    cos = box.axes @ a
    k = int(np.argmax(np.abs(cos)))
    sign = 1 if cos[k] >= 0 else -1
    a_box = box.axes @ (a * sign)  # axis in box coordinates, close to e_k
    out.update(axis_cls=k, sign=0 if sign > 0 else 1, axis_res=(a_box - np.eye(3)[k]).astype(np.float32))
    if limits is None:
        lim = (-math.pi, math.pi)
    else:
        lim = (float(limits[0]), float(limits[1]))
    if sign < 0:
        lim = (-lim[1], -lim[0])
    if t == 2:
        lim = (lim[0] * scale, lim[1] * scale)
    out["limits"] = np.clip(np.asarray(lim, np.float32), -2 * math.pi, 2 * math.pi)
    if t == 1:
        o = (np.asarray(origin, float) - center) * scale
        # the point of the axis line closest to the box centre, in box-relative units
        o = o + ((box.center - o) @ a) * a
        rel = box.to_box(o[None])[0] / (0.5 * box.extents)
        i, j = perpendicular_axes(k)
        gi = int(np.argmin([abs(rel[i] - g) for g in GRID]))
        gj = int(np.argmin([abs(rel[j] - g) for g in GRID]))
        out["origin_cls"] = gi * 3 + gj
        out["origin_res"] = np.clip(np.array([rel[i] - GRID[gi], rel[j] - GRID[gj]], np.float32), -2, 2)
    return out


def validity_targets(cands) -> np.ndarray:
    """(60,) float32 0/1 validity labels of a part's candidates (pretraining target)."""
    y = np.zeros(N_CANDIDATES, np.float32)
    for c in cands:
        y[c.index] = float(bool(c.valid))
    return y


# ---------------------------------------------------------------------------------------------- network
class Block(nn.Module):
    def __init__(self, width: int, heads: int, cross: bool):
        super().__init__()
        self.cross = cross
        self.n1 = nn.LayerNorm(width)
        self.nkv = nn.LayerNorm(width) if cross else None
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.n2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x, kv=None):
        q = self.n1(x)
        kv = self.nkv(kv) if self.cross else q
        x = x + self.attn(q, kv, kv, need_weights=False)[0]
        return x + self.mlp(self.n2(x))


class ArticulationNet(nn.Module):
    """Points (B, P, 4) + box features (B, BOX_FEATURES) -> dict of head outputs."""

    def __init__(self, config: PredictorConfig):
        super().__init__()
        c = self.config = config
        self.register_buffer("freqs", (2.0 ** torch.arange(c.fourier)) * math.pi, persistent=False)
        self.embed = nn.Linear(3 + 6 * c.fourier + 1, c.width)
        self.latents = nn.Parameter(torch.randn(c.tokens, c.width) * 0.02)
        self.cross = Block(c.width, c.heads, cross=True)
        self.blocks = nn.ModuleList([Block(c.width, c.heads, cross=False) for _ in range(c.layers)])
        self.box = nn.Sequential(nn.Linear(BOX_FEATURES, c.width), nn.GELU(), nn.Linear(c.width, c.width))
        self.trunk = nn.Sequential(nn.Linear(3 * c.width, 2 * c.width), nn.GELU(), nn.Linear(2 * c.width, 2 * c.width),
                                   nn.GELU())
        h = 2 * c.width
        self.valid_head = nn.Linear(h, N_CANDIDATES)  # pretraining (GEOPARD self-supervision)
        self.type_head = nn.Linear(h, 3)
        self.axis_head = nn.Linear(h, 3 + 9 + 6)  # axis class, per-class residual (3x3), per-class sign (3x2)
        self.origin_head = nn.Linear(h, 3 * 9 + 3 * 9 * 2)  # per axis class: grid logits, per-cell residual
        self.limit_head = nn.Linear(h, 2 * 3)  # (lo, hi) per type

    def forward(self, points: torch.Tensor, box: torch.Tensor) -> dict:
        xyz, flag = points[..., :3], points[..., 3:]
        ang = xyz[..., None] * self.freqs  # (B, P, 3, F)
        emb = torch.cat([xyz, torch.sin(ang).flatten(-2), torch.cos(ang).flatten(-2), flag], -1)
        x = self.embed(emb)
        lat = self.latents.expand(points.shape[0], -1, -1)
        lat = self.cross(lat, x)
        for b in self.blocks:
            lat = b(lat)
        part_pool = (x * flag).sum(1) / flag.sum(1).clamp(min=1.0)
        h = self.trunk(torch.cat([lat.mean(1), part_pool, self.box(box)], -1))
        ax = self.axis_head(h)
        og = self.origin_head(h)
        B = h.shape[0]
        return {
            "valid": self.valid_head(h),
            "type": self.type_head(h),
            "axis_cls": ax[:, :3],
            "axis_res": 0.3 * torch.tanh(ax[:, 3:12].view(B, 3, 3)),
            "sign": ax[:, 12:].view(B, 3, 2),
            "origin_cls": og[:, :27].view(B, 3, 9),
            "origin_res": 1.5 * torch.tanh(og[:, 27:].view(B, 3, 9, 2)),
            "limits": self.limit_head(h).view(B, 3, 2),
        }


# ---------------------------------------------------------------------------------------------- losses
def pretrain_loss(out: dict, valid: torch.Tensor) -> torch.Tensor:
    return nn.functional.binary_cross_entropy_with_logits(out["valid"], valid)


def finetune_loss(out: dict, tg: dict, type_weight: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """Cross-entropy on type (classes weighted by ``type_weight``) / axis class / sign / origin cell, L1 on
    residuals and limits (movable only)."""
    F = nn.functional
    mov = tg["movable"]
    rev = (tg["type"] == 1).float()
    B = mov.shape[0]
    ar = torch.arange(B, device=mov.device)
    k = tg["axis_cls"]
    l_type = F.cross_entropy(out["type"], tg["type"], weight=type_weight)
    denom = mov.sum().clamp(min=1.0)
    l_axis = (F.cross_entropy(out["axis_cls"], k, reduction="none") * mov).sum() / denom
    l_res = ((out["axis_res"][ar, k] - tg["axis_res"]).abs().sum(-1) * mov).sum() / denom
    l_sign = (F.cross_entropy(out["sign"][ar, k], tg["sign"], reduction="none") * mov).sum() / denom
    rden = rev.sum().clamp(min=1.0)
    oc = tg["origin_cls"]
    l_ocls = (F.cross_entropy(out["origin_cls"][ar, k], oc, reduction="none") * rev).sum() / rden
    l_ores = ((out["origin_res"][ar, k, oc] - tg["origin_res"]).abs().sum(-1) * rev).sum() / rden
    l_lim = ((out["limits"][ar, tg["type"]] - tg["limits"]).abs().sum(-1) * mov).sum() / denom
    total = l_type + l_axis + 3.0 * l_res + 0.5 * l_sign + l_ocls + l_ores + 0.2 * l_lim
    parts = {"type": l_type, "axis": l_axis, "res": l_res, "origin": l_ocls, "ores": l_ores, "sign": l_sign,
             "limits": l_lim}
    return total, {k: v.detach() for k, v in parts.items()}  # tensors: no device sync per training step


NETWORK_FIELDS = ("width", "tokens", "layers", "heads", "fourier")
"""The :class:`PredictorConfig` fields an ensemble's members may differ in (``member_sizes`` in config.json); the
inputs (``n_part``, ``n_shape``, ``shape_uniform``) are the ensemble's, shared by every member."""


class PredictorEnsemble(nn.Module):
    """Several :class:`ArticulationNet` members trained from different seeds (and recipes, and network sizes:
    :data:`NETWORK_FIELDS`); the outputs (logits, residuals, limits) are averaged, which steadies the axis-class
    and type decisions on shapes unlike the training data. Same call signature as a single network; ``config``
    is the first member's (the inputs every member reads)."""

    def __init__(self, members: list[ArticulationNet]):
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members = nn.ModuleList(members)
        self.config = members[0].config

    def forward(self, points: torch.Tensor, box: torch.Tensor) -> dict:
        outs = [m(points, box) for m in self.members]
        return {k: torch.stack([o[k] for o in outs]).mean(0) for k in outs[0]}


def save_predictor(net: ArticulationNet | PredictorEnsemble, folder: str | os.PathLike,
                   info: dict | None = None, dtype: torch.dtype = torch.float32) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (tensors stored as ``dtype``: float32, or float16 for half
    the size; loading casts them to the network's float32) atomically into ``folder``. An ensemble is one file
    with the members' tensors under ``members.<i>.`` and ``"members": n`` in the config."""
    from safetensors.torch import save_file

    from kinemesh.atomic import atomic_path, write_text

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().to(dtype).contiguous() for k, v in net.state_dict().items()}
    with atomic_path(folder / "model.safetensors") as tmp:
        save_file(state, str(tmp), metadata={"format": "kinemesh-articulation-1"})
    cfg = asdict(net.config)
    if info:
        cfg["extra"] = info
    if isinstance(net, PredictorEnsemble):
        cfg["members"] = len(net.members)
        sizes = [{f: getattr(m.config, f) for f in NETWORK_FIELDS} for m in net.members]
        if any(sz != sizes[0] for sz in sizes):  # members of several sizes: each one's own
            cfg["member_sizes"] = sizes
    write_text(folder / "config.json", json.dumps(cfg, indent=2) + "\n")
    return folder


def load_predictor(folder: str | os.PathLike | None = None, device: str = "cpu") -> ArticulationNet | PredictorEnsemble:
    """Load a predictor folder (default: the shipped ``kinemesh/assets/articulation``); a config with
    ``"members": n`` gives a :class:`PredictorEnsemble`. Raises InputFileError."""
    from safetensors.torch import load_file

    folder = Path(folder) if folder is not None else DEFAULT_WEIGHTS
    cfg_path, w_path = folder / "config.json", folder / "model.safetensors"
    for p in (cfg_path, w_path):
        if not p.is_file():
            raise InputFileError(p, "missing; articulation weights need config.json and model.safetensors "
                                    "(train them with scripts/train_articulation.sh)")
    try:
        d = json.loads(cfg_path.read_text())
        n_members = int(d.pop("members", 0))
        sizes = d.pop("member_sizes", None) or [{}] * n_members
        for k, v in REMOVED_OPTIONS.items():  # measured, not shipped, removed: only their "off" value loads
            if k in d and d.pop(k) != v:
                raise ValueError(f"{k} = {v!r} is the only value this version supports (option removed)")
        cfg = PredictorConfig(**d)
        if len(sizes) != n_members or any(set(sz) - set(NETWORK_FIELDS) for sz in sizes):
            raise ValueError(f"member_sizes must give {n_members} members' {', '.join(NETWORK_FIELDS)}")
        configs = [replace(cfg, **sz) for sz in sizes]
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputFileError(cfg_path, f"invalid predictor config: {exc}") from None
    net = PredictorEnsemble([ArticulationNet(c) for c in configs]) if n_members else ArticulationNet(cfg)
    try:
        net.load_state_dict(load_file(str(w_path)), strict=True)
    except (RuntimeError, OSError) as exc:
        raise InputFileError(w_path, f"weights do not match the config: {str(exc).splitlines()[0]}") from None
    return net.to(device).eval()


def merge_predictors(folders: list[str | os.PathLike]) -> PredictorEnsemble:
    """One ensemble of every member of the predictors in ``folders``: their inputs must agree (the fields not
    in :data:`NETWORK_FIELDS`), their network sizes and training provenance may differ. Raises InputFileError
    naming the first folder that does not fit."""
    members, first = [], None
    for folder in folders:
        net = load_predictor(folder)
        inputs = {k: v for k, v in asdict(net.config).items() if k != "extra" and k not in NETWORK_FIELDS}
        if first is None:
            first = inputs
        elif inputs != first:
            diff = sorted(k for k in inputs if inputs[k] != first[k])
            raise InputFileError(Path(folder), f"network inputs differ from {folders[0]} ({', '.join(diff)})")
        members += list(net.members) if isinstance(net, PredictorEnsemble) else [net]
    return PredictorEnsemble(members)


# ---------------------------------------------------------------------------------------------- decode
@dataclass
class RawPrediction:
    """Decoded network output for one part, in metres / world frame."""

    type: str
    type_probs: np.ndarray
    axis: np.ndarray
    origin: np.ndarray
    limits: tuple[float, float]
    confidence: float
    box_axis: int
    sign: int


def decode(out: dict, b: int, box: PartBox, center, scale: float, force_type: str | None = None) -> RawPrediction:
    """Turn row ``b`` of the network outputs into a world-frame joint (axis, origin in metres).
    ``force_type`` (e.g. from a text prompt) overrides the type head."""
    probs = torch.softmax(out["type"][b], -1).detach().cpu().numpy()
    t = int(np.argmax(probs)) if force_type is None else TYPES.index(force_type)
    kp = torch.softmax(out["axis_cls"][b], -1).detach().cpu().numpy()
    k = int(np.argmax(kp))
    sgn = 1 if int(torch.argmax(out["sign"][b, k])) == 0 else -1
    a_box = np.eye(3)[k] + out["axis_res"][b, k].detach().cpu().numpy()
    a_box /= np.linalg.norm(a_box)
    axis = sgn * (a_box @ box.axes)
    oc = int(torch.argmax(out["origin_cls"][b, k]))
    i, j = perpendicular_axes(k)
    res = out["origin_res"][b, k, oc].detach().cpu().numpy()
    rel = np.zeros(3)
    rel[i] = GRID[oc // 3] + res[0]
    rel[j] = GRID[oc % 3] + res[1]
    o_norm = box.relative_point(rel)
    lim = out["limits"][b, max(t, 1)].detach().cpu().numpy().astype(float)
    origin = o_norm / scale + center
    if t == 2:
        lim = lim / scale
        origin = box.center / scale + center
    lo, hi = sorted((float(lim[0]), float(lim[1])))
    if sgn < 0:  # limits are learned along the canonical (+box axis) direction
        lo, hi = -hi, -lo
    conf = float(probs[t] * (kp[k] if t > 0 else 1.0))
    return RawPrediction(TYPES[t], probs, axis, origin, (lo, hi), conf, k, sgn)


def alternatives(out: dict, b: int, box: PartBox, center, scale: float, type_: str, cells: int = 1) -> list[tuple]:
    """Axis classes x signs x origin cells of row ``b`` for motion type ``type_`` as (probability, axis (3,),
    origin (3,) m, limits (lo, hi) rad or m along that axis), most probable first. Each class uses its own
    residuals; revolute alternatives take the class's ``cells`` most probable origin cells (probability
    P(class) x P(sign) x P(cell)), prismatic ones the box centre."""
    kp = torch.softmax(out["axis_cls"][b], -1).detach().cpu().numpy()
    lim = out["limits"][b, TYPES.index(type_)].detach().cpu().numpy().astype(float)
    if type_ == "prismatic":
        lim = lim / scale
    lo, hi = sorted((float(lim[0]), float(lim[1])))
    res = []
    for k in range(3):
        sp = torch.softmax(out["sign"][b, k], -1).detach().cpu().numpy()
        a_box = np.eye(3)[k] + out["axis_res"][b, k].detach().cpu().numpy()
        a = (a_box / np.linalg.norm(a_box)) @ box.axes
        cp = torch.softmax(out["origin_cls"][b, k], -1).detach().cpu().numpy()
        i, j = perpendicular_axes(k)
        origins = []
        for oc in (np.argsort(-cp)[:max(1, cells)] if type_ != "prismatic" else [int(np.argmax(cp))]):
            r = out["origin_res"][b, k, oc].detach().cpu().numpy()
            rel = np.zeros(3)
            rel[i], rel[j] = GRID[oc // 3] + r[0], GRID[oc % 3] + r[1]
            if type_ == "prismatic":
                origins.append((1.0, box.center / scale + center))
            else:
                origins.append((float(cp[oc]), box.relative_point(rel) / scale + center))
        for si, sgn in enumerate((1, -1)):
            for pc, o in origins:
                res.append((float(kp[k] * sp[si] * pc), sgn * a, o, (lo, hi) if sgn > 0 else (-hi, -lo)))
    return sorted(res, key=lambda x: -x[0])


__all__ = ["ArticulationNet", "PredictorConfig", "PredictorEnsemble", "TYPES", "part_features", "joint_targets", "validity_targets",
           "load_predictor", "save_predictor", "decode", "candidate_index"]
