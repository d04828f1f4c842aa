"""Checkpoints: a folder with ``config.json`` and ``model.safetensors`` (never pickle).

Training checkpoints add ``optimizer.safetensors`` (AdamW moments) and ``train_state.json`` (step, RNG
seeds, learning-rate schedule position) so a run resumes exactly where it stopped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from kinemesh.atomic import atomic_path, write_text
from kinemesh.errors import ConfigError, InputFileError
from kinemesh.model.config import Config

DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "assets" / "checkpoints" / "default"


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
