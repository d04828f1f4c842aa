"""Shared fixtures: CPU only, deterministic, tiny data built here."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

REAL_OBJECTS = Path(__file__).resolve().parents[1].parent / "shared" / "real_objects"


@pytest.fixture(autouse=True)
def _deterministic():
    import torch

    torch.manual_seed(0)
    np.random.seed(0)
    torch.set_num_threads(1)
    yield


@pytest.fixture
def real_objects_dir() -> Path:
    """The shared real PartNet-Mobility objects; tests using it skip when the folder is absent."""
    if not REAL_OBJECTS.is_dir():
        pytest.skip(f"{REAL_OBJECTS} not present")
    return REAL_OBJECTS


@pytest.fixture
def box_mesh():
    """A watertight 1 x 0.5 x 0.25 m box, centred at the origin."""
    import trimesh

    return trimesh.creation.box(extents=(1.0, 0.5, 0.25))


@pytest.fixture
def tiny_sequence():
    """A 4-frame KinematicSequence of a box whose top vertices slide along +x."""
    import trimesh

    from kinemesh.data.sequence import KinematicSequence

    box = trimesh.creation.box(extents=(1.0, 0.5, 0.25))
    rest = np.asarray(box.vertices, dtype=np.float32)
    top = rest[:, 2] > 0
    frames = np.stack([rest + np.where(top[:, None], [0.1 * t, 0.0, 0.0], 0.0) for t in range(4)])
    return KinematicSequence(
        rest_vertices=rest,
        faces=np.asarray(box.faces),
        frames=frames,
        times=np.arange(4) / 30.0,
        meta={"category": "box", "kind": "elastic", "source": "test"},
    )
