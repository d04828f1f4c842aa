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
from kinemesh.errors import InputFileError
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
    return Config.from_dict(d, where=str(path)), d.get("info", {})


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
    missing, unexpected = net.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputFileError(path, f"does not match config.json (missing {sorted(missing)[:3]}, "
                                   f"unexpected {sorted(unexpected)[:3]})")
