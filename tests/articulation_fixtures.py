"""Shared helpers of the articulation tests."""

from __future__ import annotations

import numpy as np


def handle_samples_in_door_context(cfg, seeds) -> list[int]:
    """For a synthetic microwave's door, the number of shape-context samples of ``part_features`` (config
    ``cfg``) that fall in the door handle's bounding box, one count per seed."""
    from kinemesh.articulation.dataset import build_object
    from kinemesh.articulation.predictor import part_features

    obj = build_object("microwave", 0)
    parts = [p for p in obj.parts if len(p.vertices)]
    i = [p.name for p in parts].index("door")
    counts = []
    for seed in seeds:
        pts, _, box, (center, scale) = part_features([(p.vertices, p.faces) for p in parts], i,
                                                     np.random.default_rng(seed), cfg, "door")
        assert pts.shape == (cfg.n_part + cfg.n_shape, 4)
        h = box.to_box((obj.part("door_handle").vertices - center) * scale)
        ctx = pts[pts[:, 3] == 0, :3]
        inside = np.all((ctx >= h.min(0) - 1e-6) & (ctx <= h.max(0) + 1e-6), axis=1)
        counts.append(int(inside.sum()))
    return counts
