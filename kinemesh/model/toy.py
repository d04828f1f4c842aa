"""A tiny dataset of hinged boxes and bending bars for tests, benchmarks and smoke runs of training.

Not training data for a real model: ``kinemesh synth`` generates that.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from kinemesh.atomic import write_text
from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.data.sequence import KinematicSequence


def hinged_box(rng: np.random.Generator, subdivisions: int = 1) -> ArticulatedObject:
    """A box body with a lid on a revolute hinge along the back top edge (metres, Z up)."""
    import trimesh

    w, d, h = rng.uniform(0.3, 0.6), rng.uniform(0.2, 0.4), rng.uniform(0.15, 0.3)
    body = trimesh.creation.box(extents=(w, d, h))
    body.apply_translation((0, 0, h / 2))
    lid = trimesh.creation.box(extents=(w, d, 0.02))
    lid.apply_translation((0, 0, h + 0.014))
    for _ in range(subdivisions):
        body, lid = body.subdivide(), lid.subdivide()
    hinge = Joint("hinge", "revolute", "body", "lid", (1, 0, 0), (0, d / 2, h + 0.004), (0.0, 1.6))
    return ArticulatedObject([Part("body", body.vertices, body.faces, "body"),
                              Part("lid", lid.vertices, lid.faces, "lid")], [hinge], category="toybox",
                             name="toybox")


def bending_bar(rng: np.random.Generator, n_frames: int) -> KinematicSequence:
    """A soft bar clamped at x = 0 bending about Y by a random amount per frame."""
    import trimesh

    L = rng.uniform(0.5, 0.8)
    bar = trimesh.creation.box(extents=(L, 0.08, 0.08))
    bar.apply_translation((L / 2, 0, 0.04))
    bar = bar.subdivide().subdivide()
    rest = np.asarray(bar.vertices)
    frames = []
    for _ in range(n_frames):
        k = rng.uniform(-1.2, 1.2) / L  # curvature
        x = rest[:, 0]
        ang = k * x
        r = 1.0 / k if abs(k) > 1e-6 else 1e9
        z0 = rest[:, 2] - 0.04
        px = (r - z0) * np.sin(ang) if abs(k) > 1e-6 else x
        pz = r - (r - z0) * np.cos(ang) + 0.04 if abs(k) > 1e-6 else rest[:, 2]
        frames.append(np.stack([px, rest[:, 1], pz], 1))
    return KinematicSequence(rest, bar.faces, np.stack(frames), np.arange(n_frames) / 30.0,
                             meta={"category": "toybar", "kind": "elastic", "source": "kinemesh.model.toy"})


def write_toy_dataset(folder: str | os.PathLike, n_train: int = 6, n_val: int = 2, n_frames: int = 6,
                      seed: int = 0) -> Path:
    """Write ``folder/manifest.jsonl`` and npz sequences (hinged boxes and bending bars)."""
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n_train + n_val):
        split = "train" if i < n_train else "val"
        if i % 2 == 0:
            obj = hinged_box(rng)
            configs = [obj.sample_values(rng) for _ in range(n_frames)]
            seq = obj.to_sequence(configs, source="kinemesh.model.toy")
        else:
            seq = bending_bar(rng, n_frames)
        rel = f"{seq.kind}/{seq.category}/{i:04d}.npz"
        seq.save(folder / rel)
        lines.append(json.dumps({"path": rel, "split": split, "kind": seq.kind, "category": seq.category}))
    write_text(folder / "manifest.jsonl", "\n".join(lines) + "\n")
    return folder
