"""Contact sheet of every synthetic category and kind (rest and moved), so a person can check the objects."""

from __future__ import annotations

import logging

import numpy as np

from kinemesh.errors import KinemeshError

log = logging.getLogger(__name__)


def preview_meshes(kinds=("articulated", "elastic", "cloth"), seed: int = 0) -> list[tuple]:
    """(vertices, faces, part_ids, title) tiles: each category at rest and moved."""
    from kinemesh.synth.dataset import all_categories, item_rng

    tiles = []
    if "articulated" in kinds:
        from kinemesh.synth.assemblies import random_assembly
        from kinemesh.synth.categories import build

        for cat in all_categories("articulated"):
            rng = item_rng(seed, "articulated", cat, 0)
            obj = random_assembly(rng) if cat == "assembly" else build(cat, rng)
            v, f, pid = obj.merged(None)
            vals = {}
            for j in obj.movable_joints:
                lo, hi = j.limits if j.limits is not None else (-np.pi, np.pi)
                vals[j.name] = lo + 0.75 * (hi - lo) if j.limits is not None else 1.2
            v2, _, _ = obj.merged(vals)
            tiles += [(v, f, pid, f"{cat} rest"), (v2, f, pid, f"{cat} moved")]
    if "elastic" in kinds:
        from kinemesh.synth.elastic import ACTIONS, elastic_sequence

        for cat in all_categories("elastic"):
            first = ACTIONS[cat][-1] if cat in ("beam", "stem") else ACTIONS[cat][0]
            for act in [first] + [a for a in ACTIONS[cat] if a != first]:  # a run can be dropped (too little change)
                try:
                    seq = elastic_sequence(cat, item_rng(seed, "elastic", cat, 0), action=act, n_frames=12)
                    break
                except KinemeshError as exc:
                    log.warning("preview %s/%s: %s", cat, act, exc)
            else:
                continue
            k = _most_deformed(seq)
            tiles += [
                (seq.rest_vertices, seq.faces, None, f"{cat} rest"),
                (seq.frames[k], seq.faces, None, f"{cat} {act} t={seq.times[k]:.2f}s"),
            ]
    if "cloth" in kinds:
        from kinemesh.synth.cloth import cloth_sequence

        for cat in all_categories("cloth"):
            rng = item_rng(seed, "cloth", cat, 0)
            seq = cloth_sequence(cat, rng, n_frames=12)
            tiles += [
                (seq.rest_vertices, seq.faces, None, f"{cat} rest"),
                (seq.frames[-1], seq.faces, None, f"{cat} t={seq.times[-1]:.2f}s"),
            ]
    return tiles


def _most_deformed(seq) -> int:
    """Frame index whose shape (after removing the mean translation) differs most from rest."""
    d = seq.frames - seq.frames.mean(1, keepdims=True) - (seq.rest_vertices - seq.rest_vertices.mean(0))
    return int(np.argmax(np.linalg.norm(d, axis=-1).max(-1)))
