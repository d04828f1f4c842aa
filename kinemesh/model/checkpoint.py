"""Checkpoints: a folder with ``config.json`` and ``model.safetensors`` (never pickle).

A calibrated checkpoint adds ``prior_calibration.safetensors`` (``kinemesh.model.calibration``). Training
checkpoints add ``optimizer.safetensors`` (AdamW moments) and ``train_state.json`` (step, RNG
seeds, learning-rate schedule position) so a run resumes exactly where it stopped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from kinemesh.atomic import atomic_path, write_text
from kinemesh.errors import ConfigError, InputFileError
from kinemesh.model.config import Config

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "assets" / "checkpoints" / "default"
CALIBRATION_FILE = "prior_calibration.safetensors"


def save_weights(net: torch.nn.Module, config: Config, folder: str | os.PathLike, extra: dict | None = None) -> Path:
    """Write ``config.json`` and ``model.safetensors`` (float32) into ``folder`` atomically (file by file)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in net.state_dict().items()}
    with atomic_path(folder / "model.safetensors") as tmp:
        save_file(state, str(tmp), metadata={"format": "kinemesh-model-1"})
    d = config.to_dict()
    if extra:
        d["info"] = extra
    write_text(folder / "config.json", json.dumps(d, indent=2) + "\n")
    return folder


def read_config(folder: str | os.PathLike) -> tuple[Config, dict]:
    """Read ``folder/config.json`` -> (Config, info dict). Raises InputFileError."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise InputFileError(path, "missing: a checkpoint folder needs config.json and model.safetensors")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputFileError(path, f"not valid JSON ({exc})") from exc
    if not isinstance(d, dict):
        raise InputFileError(path, "must hold a JSON object")
    try:
        return Config.from_dict(d, where=str(path)), d.get("info", {})
    except ConfigError as exc:  # a bad field of the file, not of the command line
        raise InputFileError(path, str(exc).removeprefix(f"{path}: ")) from None
    except TypeError as exc:  # e.g. "model": 3
        raise InputFileError(path, f"malformed config ({exc})") from None


def load_weights(net: torch.nn.Module, folder: str | os.PathLike) -> None:
    """Load ``folder/model.safetensors`` into ``net`` (strict). Raises InputFileError."""
    from safetensors.torch import load_file

    path = Path(folder) / "model.safetensors"
    if not path.is_file():
        raise InputFileError(path, "missing: a checkpoint folder needs config.json and model.safetensors")
    try:
        state = load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types
        raise InputFileError(path, f"cannot read safetensors ({exc})") from exc
    bad = next((k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()), None)
    if bad is not None:
        raise InputFileError(path, f"weight '{bad}' contains NaN or inf (a diverged training run?)")
    ours = net.state_dict()
    wrong = next((k for k, v in state.items() if k in ours and tuple(v.shape) != tuple(ours[k].shape)), None)
    if wrong is not None:
        raise InputFileError(path, f"does not match config.json: weight '{wrong}' has shape "
                                   f"{tuple(state[wrong].shape)}, the config gives {tuple(ours[wrong].shape)}")
    missing, unexpected = net.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputFileError(path, f"does not match config.json (missing {sorted(missing)[:3]}, "
                                   f"unexpected {sorted(unexpected)[:3]})")


def sqrt_factor(cov: np.ndarray, floor: float = 1e-3) -> np.ndarray:
    """Symmetric square root L (D, D) float64 of a covariance (D, D), eigenvalues floored at ``floor``."""
    cov = 0.5 * (np.asarray(cov, dtype=np.float64) + np.asarray(cov, dtype=np.float64).T)
    w, V = np.linalg.eigh(cov)
    return (V * np.sqrt(np.clip(w, floor, None))) @ V.T


def save_calibration(folder: str | os.PathLike, covs: dict, meta: dict) -> Path:
    """Write ``folder/prior_calibration.safetensors`` atomically: one (D, D) float32 covariance per kind."""
    from safetensors.torch import save_file

    path = Path(folder) / CALIBRATION_FILE
    state = {k: torch.as_tensor(np.asarray(v), dtype=torch.float32).contiguous() for k, v in covs.items()}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata={"format": "kinemesh-prior-calibration-1", "meta": json.dumps(meta)})
    return path


def load_calibration(folder: str | os.PathLike, latent_dim: int) -> dict | None:
    """Prior factors {kind: L (D, D) float64 numpy} from ``folder``, or None when the file is absent.

    Raises InputFileError for an unreadable file or matrices that are not (D, D), finite and symmetric.
    """
    from safetensors import safe_open

    path = Path(folder) / CALIBRATION_FILE
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as f:
            covs = {k: f.get_tensor(k).double().numpy() for k in f.keys()}
    except Exception as exc:  # safetensors raises its own error types
        raise InputFileError(path, f"cannot read safetensors ({exc})") from exc
    if "all" not in covs:
        raise InputFileError(path, "has no pooled 'all' covariance")
    factors = {}
    for k, c in covs.items():
        if c.shape != (latent_dim, latent_dim) or not np.isfinite(c).all() or not np.allclose(c, c.T, atol=1e-4):
            raise InputFileError(path, f"covariance {k!r} is not a finite symmetric ({latent_dim}, {latent_dim}) "
                                       f"matrix (shape {c.shape})")
        factors[k] = sqrt_factor(c)
    return factors
