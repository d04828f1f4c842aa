"""Training and evaluation samples for the articulation predictor, generated from the synthetic factory.

Splits (fixed, so training and ``kinemesh eval articulation`` never overlap):
- categories in ``HOLDOUT_CATEGORIES`` are never trained on (held-out categories);
- instances are seeded: training uses seeds < ``TEST_SEED_BASE``, held-out instances use seeds from it on;
- random assemblies (``kinemesh.synth.assemblies.random_assembly``) are used for training only.
"""

from __future__ import annotations

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint, Part

HOLDOUT_CATEGORIES = ("refrigerator", "trash_can", "pliers")
TEST_SEED_BASE = 100_000
PRETRAIN_SEED_BASE = 50_000


def build_object(kind: str, seed: int) -> ArticulatedObject:
    """A synthetic object: a category name from ``CATEGORIES`` or ``"assembly"``, seeded."""
    rng = np.random.default_rng(seed)
    if kind == "assembly":
        from kinemesh.synth.assemblies import random_assembly

        obj = random_assembly(rng)
    else:
        from kinemesh.synth.categories import CATEGORIES

        obj = CATEGORIES[kind](rng)
    obj.meta["seed"] = seed
    return obj


def rotate_object(obj: ArticulatedObject, yaw: float) -> ArticulatedObject:
    """The object rotated by ``yaw`` rad about +Z (parts, joint axes and origins)."""
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    parts = [Part(p.name, p.vertices @ R.T, p.faces, p.label) for p in obj.parts]
    joints = [Joint(j.name, j.type, j.parent, j.child, R @ j.axis if j.type != "fixed" else j.axis,
                    R @ j.origin, j.limits) for j in obj.joints]
    return ArticulatedObject(parts, joints, obj.category, obj.name, dict(obj.meta))


def strip_joints(obj: ArticulatedObject, root: str | None = None) -> ArticulatedObject:
    """The same parts with the articulation hidden: every part welded (fixed joint) to ``root`` (default
    the object's root). This is what the predictor sees: a segmented static shape."""
    root = root or obj.root
    joints = [Joint(f"static_{p.name}", "fixed", root, p.name, (0, 0, 1), (0, 0, 0))
              for p in obj.parts if p.name != root]
    meta = dict(obj.meta)
    meta["joints_hidden"] = True
    return ArticulatedObject([Part(p.name, p.vertices, p.faces, p.label) for p in obj.parts], joints,
                             obj.category, obj.name, meta)


def gt_joint_of(obj: ArticulatedObject) -> dict[str, Joint]:
    """Child part name -> its ground-truth joint."""
    return {j.child: j for j in obj.joints}


def part_samples(obj: ArticulatedObject, rng: np.random.Generator, config, with_validity: bool = False,
                 validity_config=None) -> list[dict]:
    """Network samples (inputs + targets) for every non-root part with geometry of ``obj``."""
    from kinemesh.articulation.predictor import joint_targets, part_features, validity_targets

    geo = [(p.vertices, p.faces) for p in obj.parts]
    names = [p.name for p in obj.parts]
    joints = gt_joint_of(obj)
    labels = None
    if with_validity:
        from kinemesh.articulation.candidates import label_valid_candidates
        from kinemesh.geometry.normalize import normalization

        # labels on the normalized object so the boxes match the network's box frame
        center, scale = normalization(np.concatenate([v for v, _ in geo if len(v)]))
        norm = ArticulatedObject([Part(p.name, (p.vertices - center) * scale, p.faces, p.label) for p in obj.parts],
                                 [Joint(j.name, j.type, j.parent, j.child, j.axis, (j.origin - center) * scale,
                                        j.limits) for j in obj.joints], obj.category, obj.name)
        labels = label_valid_candidates(norm, config=validity_config)
    out = []
    for i, p in enumerate(obj.parts):
        if p.name == obj.root or len(p.faces) == 0 or p.name not in joints:
            continue
        try:
            pts, bf, box, (center, scale) = part_features(geo, i, rng, config, p.name)
        except Exception:
            continue
        j = joints[p.name]
        tg = joint_targets(box, j.type, j.axis, j.origin, j.limits, scale, center)
        s = {"points": pts, "box": bf, "name": names[i], **tg}
        if labels is not None:
            s["valid"] = validity_targets(labels[p.name]) if p.name in labels else np.zeros(60, np.float32)
        out.append(s)
    return out
