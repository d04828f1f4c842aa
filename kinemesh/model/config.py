"""Configuration of the kinematic model and its training, with named presets.

The dataclass defaults are the shipped model (``cpu-small``). Presets: ``tiny`` (tests), ``cpu-small`` (the
default; about 1-2 M parameters, trains on 2 CPU cores) and ``paper`` (paper-sized, for GPUs; NeuROK Sec. 4.1
uses a transformer conditional VAE of this kind).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

from kinemesh.errors import ConfigError

HEADS = ("dq_skinning", "displacement", "per_point_dq")
MAX_PARAMETERS = 10**9
"""Bound of a model's estimated parameter count (4 GB of float32 weights): a config.json or --set asking for
more is refused before anything is allocated."""


def _check_fields(obj, section: str, minimum: dict[str, float]) -> None:
    """Every field has its default's type (bool, int, float: finite, str) and ``field >= minimum[field]``.
    Raises ConfigError naming ``section.field``."""
    import math

    for f in dataclasses.fields(obj):
        v, default = getattr(obj, f.name), f.default
        kind = type(default) if default is not dataclasses.MISSING else None
        ok = {bool: lambda: isinstance(v, bool),
              int: lambda: isinstance(v, int) and not isinstance(v, bool),
              float: lambda: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
              str: lambda: isinstance(v, str)}.get(kind, lambda: True)()
        if not ok:
            want = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}[kind]
            raise ConfigError(f"{section}.{f.name} must be {want}, got {v!r}")
        if f.name in minimum and v < minimum[f.name]:
            raise ConfigError(f"{section}.{f.name} must be >= {minimum[f.name]}, got {v!r}")


@dataclass
class ModelConfig:
    """Architecture of the conditional VAE (prior encoder, posterior encoder, decoder)."""

    width: int = 128
    """Feature width of every transformer layer."""
    heads: int = 4
    """Attention heads per attention layer (``width`` must be divisible by it)."""
    n_tokens: int = 16
    """K, the number of learnable tokens of the prior encoder and of the latent (posterior uses 2K)."""
    token_dim: int = 8
    """F_token, latent dimensions per token; the latent dimension is D = n_tokens * token_dim."""
    n_freqs: int = 8
    """Fourier frequencies per input coordinate of the 3DShape2VecSet position embedding (2^i * pi)."""
    enc_self_layers: int = 2
    """Self-attention blocks after the cross-attention of each encoder (prior and posterior)."""
    dec_self_layers: int = 2
    """Self-attention blocks over the latent tokens in the decoder."""
    dec_cross_layers: int = 1
    """Cross-attention blocks in which the query points attend to the tokens in the decoder."""
    mlp_ratio: int = 2
    """Hidden width of each block's MLP as a multiple of ``width``."""
    head: str = "dq_skinning"
    """Deformation head: ``dq_skinning`` (each token predicts a rigid transform as a unit dual quaternion,
    points blend them with learned soft weights; rigid by construction), ``per_point_dq`` (a unit dual
    quaternion per point, NeuROK footnote 3) or ``displacement`` (plain per-point displacement; ablation)."""
    anchor_prior: bool = True
    """dq_skinning: add -|x - a_k|^2 / w^2 (learnable anchors a_k and width w) to the skinning logits, so
    tokens start with distinct spatial regions (faster learning than near-uniform initial weights)."""
    skin_temperature: float = 1.0
    """Divides the skinning-weight logits; lower gives sharper part assignments."""
    component_rigid: bool = True
    """dq_skinning: on objects with several connected components (separate parts), every point takes its
    component's mean skinning logits, so each component moves rigidly by construction; single-component
    meshes keep per-point weights (elastic, cloth)."""
    posterior_procrustes: bool = True
    """dq_skinning: the posterior tokens also read the weighted Procrustes motion (rotation, translation,
    residual) of each token's skinning region, the quantities the decoder outputs per token."""

    def __post_init__(self) -> None:
        _check_fields(self, "model", {k: 1 for k in ("width", "heads", "n_tokens", "token_dim", "n_freqs",
                                                     "mlp_ratio", "dec_cross_layers")}
                      | {"enc_self_layers": 0, "dec_self_layers": 0, "skin_temperature": 1e-6})
        if self.n_freqs > 32:  # 2^i pi of float32 coordinates is noise beyond this
            raise ConfigError(f"model.n_freqs must be <= 32, got {self.n_freqs}")
        # transformer blocks: attention 4 w^2 + MLP 2 r w^2 each; two encoders (cross + self) and the decoder
        blocks = 2 * (1 + self.enc_self_layers) + self.dec_self_layers + self.dec_cross_layers
        params = blocks * (4 + 2 * self.mlp_ratio) * self.width**2 + 2 * self.n_tokens * self.token_dim * self.width
        if params > MAX_PARAMETERS:
            raise ConfigError(f"model asks for about {params:.2g} parameters (width {self.width}, {blocks} blocks); "
                              f"the bound is {MAX_PARAMETERS:.0e}")
        if self.head not in HEADS:
            raise ConfigError(f"model.head: unknown head {self.head!r}, expected one of {HEADS}")
        if self.head != "dq_skinning":  # the options that read skinning weights do not apply
            self.component_rigid = self.posterior_procrustes = False
        if self.width % self.heads:
            raise ConfigError(f"model.width {self.width} is not divisible by model.heads {self.heads}")

    def use_head(self, head: str) -> None:
        """Switch the deformation head; the options that read skinning weights (``component_rigid``,
        ``posterior_procrustes``) are turned off for the heads that have none."""
        self.head = head
        self.__post_init__()

    @property
    def latent_dim(self) -> int:
        """D = K * F_token."""
        return self.n_tokens * self.token_dim


@dataclass
class TrainConfig:
    """Optimisation, data sampling and augmentation of ``kinemesh train``."""

    batch_size: int = 16
    """Pairs per optimisation step (per process under DDP)."""
    n_points: int = 256
    """Surface points sampled per training pair (inference uses more, e.g. 2048)."""
    lr: float = 1e-3
    """AdamW learning rate (peak, after warm-up; cosine decay to 10 % over the run's steps or minutes)."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    warmup_steps: int = 200
    """Linear learning-rate warm-up steps; collapse checks start after ``2 * warmup_steps``."""
    grad_clip: float = 1.0
    """Gradient-norm clip."""
    kl_weight: float = 0.01
    """lambda of Eq. 1 (NeuROK Sec. 4.2): loss = recon_weight * recon + lambda * KL."""
    recon_weight: float = 1000.0
    """Scale of the reconstruction term, the mean over points of |delta - delta_pred|^2 in normalised units.
    Eq. 1 sums over the whole deformation vector; a mean keeps the loss independent of ``n_points``, and this
    factor restores the balance against the KL (about a sum over 1000 points; 100 learned clearly slower)."""
    prior_weight: float = 100.0
    """Weight of the plausibility of prior samples (``network.plausibility``: touching parts stay in contact,
    single-component surfaces keep their local distances), evaluated on one sample of N(mu_cond, I) per pair.
    0 disables it (Eq. 1 as in the paper)."""
    free_bits: float = 0.05
    """KL floor per latent dimension in nats (batch-averaged KL of a dimension below it costs nothing);
    stops posterior collapse."""
    collapse_kl: float = 0.05
    """After warm-up, a total raw KL (nats per sample) below this for ``collapse_patience`` checks means the
    posterior collapsed onto the prior: training stops with an error."""
    collapse_patience: int = 5
    """Consecutive collapsed log intervals before failing."""
    rotate_z: bool = True
    """Augmentation: random rotation about the up (Z) axis."""
    scale_range: tuple[float, float] = (0.85, 1.15)
    """Augmentation: random uniform scale after normalisation (1, 1 disables)."""
    resample_points: bool = True
    """Augmentation: fresh surface samples for every pair (off: one fixed sample set per instance)."""
    val_every: int = 500
    """Steps between validation passes on the held-out split."""
    val_batches: int = 8
    """Batches per validation pass."""
    ckpt_every: int = 500
    """Steps between checkpoints."""
    log_every: int = 25
    """Steps between CSV/TensorBoard log rows."""
    bf16: bool = False
    """bfloat16 autocast for the transformer (the dual-quaternion head always runs in float32)."""
    max_cached_instances: int = 100000
    """Instances kept in memory by the data loader."""
    frozen: tuple[str, ...] = ()
    """Networks kept as they are (``--init``'s weights), any of ``prior``, ``posterior``, ``decoder``: a
    fine-tune of the posterior alone leaves the state space (prior and decoder) and so the dynamics and the
    prior samples unchanged. With the decoder frozen the prior plausibility term (it trains only the decoder)
    is skipped."""

    def __post_init__(self) -> None:
        _check_fields(self, "train", {"batch_size": 1, "n_points": 8, "lr": 1e-12, "grad_clip": 1e-12,
                                      "recon_weight": 1e-12, "collapse_patience": 1, "val_every": 1,
                                      "val_batches": 1, "ckpt_every": 1, "log_every": 1, "max_cached_instances": 1}
                      | {k: 0 for k in ("weight_decay", "warmup_steps", "kl_weight", "prior_weight", "free_bits",
                                        "collapse_kl")})
        try:
            lo, hi = (float(s) for s in self.scale_range)
        except (TypeError, ValueError):
            raise ConfigError(f"train.scale_range must be two numbers, got {self.scale_range!r}") from None
        if not 0 < lo <= hi < float("inf"):
            raise ConfigError(f"train.scale_range must be 0 < lo <= hi, got {self.scale_range!r}")
        self.scale_range = (lo, hi)
        frozen = self.frozen
        if isinstance(frozen, str):  # a comma list: --freeze, --set train.frozen=prior,decoder
            frozen = [n.strip() for n in frozen.split(",") if n.strip()]
        frozen = tuple(frozen) if isinstance(frozen, (list, tuple)) else (frozen,)
        bad = [m for m in frozen if m not in NETWORKS]
        if bad or len(set(frozen)) == len(NETWORKS):
            raise ConfigError(f"train.frozen must name some of {', '.join(NETWORKS)} (not all), got {self.frozen!r}")
        self.frozen = frozen


@dataclass
class Config:
    """Model plus training configuration, stored as ``config.json`` in every checkpoint."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The network architecture."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """How it was (or will be) trained."""
    preset: str = "custom"
    """Name of the preset this came from."""

    def to_dict(self) -> dict[str, Any]:
        return {"preset": self.preset, "model": asdict(self.model), "train": asdict(self.train),
                "format": "kinemesh-model-1"}

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "config") -> "Config":
        """Read a stored configuration; fields it lacks take the value its model was trained with (``LEGACY``),
        not today's default. Raises ConfigError for unknown fields."""
        def build(kls, values):
            names = {f.name for f in dataclasses.fields(kls)}
            unknown = set(values) - names
            if unknown:
                raise ConfigError(f"{where}: unknown {kls.__name__} field(s) {sorted(unknown)}")
            return kls(**{**LEGACY[kls.__name__], **values})

        return cls(model=build(ModelConfig, d.get("model", {})), train=build(TrainConfig, d.get("train", {})),
                   preset=str(d.get("preset", "custom")))


def preset(name: str) -> Config:
    """A named configuration: ``tiny``, ``cpu-small`` (default) or ``paper``. Raises ConfigError."""
    if name == "tiny":
        return Config(
            ModelConfig(width=32, heads=2, n_tokens=4, token_dim=8, n_freqs=4, enc_self_layers=1,
                        dec_self_layers=1, dec_cross_layers=1, mlp_ratio=2),
            TrainConfig(batch_size=4, n_points=64, lr=2e-3, warmup_steps=5, val_every=10, val_batches=1,
                        ckpt_every=10, log_every=2, prior_weight=0.0),
            preset="tiny",
        )
    if name == "cpu-small":
        return Config(preset="cpu-small")  # the defaults (the shipped checkpoint)
    if name == "paper":
        # A paper-sized perceiver VAE (3DShape2VecSet-like widths), for GPUs.
        return Config(
            ModelConfig(width=512, heads=8, n_tokens=64, token_dim=16, n_freqs=8, enc_self_layers=6,
                        dec_self_layers=6, dec_cross_layers=2, mlp_ratio=4),
            TrainConfig(batch_size=64, n_points=2048, lr=1e-4, warmup_steps=2000, val_every=2000,
                        ckpt_every=2000, log_every=100, bf16=True),
            preset="paper",
        )
    raise ConfigError(f"unknown preset {name!r}, expected one of {PRESETS}")


PRESETS = ("tiny", "cpu-small", "paper")
NETWORKS = ("prior", "posterior", "decoder")
"""The three networks of ``KinematicVAE`` (NeuROK Sec. 4), as ``train.frozen`` names them."""

LEGACY = {"ModelConfig": {"component_rigid": False, "posterior_procrustes": False},
          "TrainConfig": {"prior_weight": 0.0}}
"""Defaults of the fields added after the first checkpoints, as those checkpoints were trained: a config.json
without them loads the network it was saved from."""
