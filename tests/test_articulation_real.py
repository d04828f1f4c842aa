"""Articulation training on real shapes: the real-object dataset path (URDF folders, split, cache), yaw
augmentation keeping labels exact, and the shipped weights on a tiny object."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from kinemesh.data.articulated import ArticulatedObject, Joint, Part


def _part(name, lo, hi, label="") -> Part:
    m = trimesh.creation.box(extents=np.subtract(hi, lo))
    m.apply_translation(0.5 * np.add(lo, hi))
    return Part(name, np.asarray(m.vertices, float), np.asarray(m.faces), label)


def _bottle_cabinet() -> ArticulatedObject:
    """A body with a door (revolute), a button (prismatic) and a screw cap (prismatic + continuous through a
    geometry-less helper link), facing -X like PartNet-Mobility assets."""
    parts = [_part("body", [-0.2, -0.3, 0], [0.2, 0.3, 0.5], "body"),
             _part("door", [-0.22, -0.3, 0.0], [-0.2, 0.3, 0.4], "door"),
             _part("button", [-0.215, -0.05, 0.43], [-0.2, 0.05, 0.47], "button"),
             Part("cap_helper", np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)),
             _part("cap", [-0.05, -0.05, 0.5], [0.05, 0.05, 0.56], "cap")]
    joints = [Joint("j_door", "revolute", "body", "door", (0, 0, 1), (-0.21, 0.3, 0), (0.0, 1.5)),
              Joint("j_button", "prismatic", "body", "button", (1, 0, 0), (-0.2, 0, 0.45), (0.0, 0.01)),
              Joint("j_lift", "prismatic", "body", "cap_helper", (0, 0, 1), (0, 0, 0.5), (0.0, 0.02)),
              Joint("j_cap", "continuous", "cap_helper", "cap", (0, 0, 1), (0, 0, 0.5))]
    return ArticulatedObject(parts, joints, "StorageFurniture", "bottle_cabinet")


def test_real_objects_load_split_cache_and_targets(tmp_path):
    """A URDF folder written here loads through ``real_objects`` (parts = links, URDF joints), the split
    follows the CRC32 rule, the npz cache gives the same object, and the samples carry the true targets
    (continuous -> revolute class, axis class of the true axis, screw cap through its helper)."""
    from kinemesh.articulation.dataset import part_samples, real_objects
    from kinemesh.articulation.predictor import PredictorConfig
    from kinemesh.data.partnet import write_partnet_folder
    from kinemesh.synth.real import hash_split

    src = tmp_path / "objs"
    ids = ["kitchenmodels__1", "kitchenmodels__2", "kitchenmodels__3", "kitchenmodels__4", "kitchenmodels__5"]
    for oid in ids:
        write_partnet_folder(_bottle_cabinet(), src / oid)
    train = [i for i in ids if hash_split(i, 0.2) == "train"]
    assert 0 < len(train) < len(ids)  # both splits occur among these ids
    cache = tmp_path / "cache"
    got = real_objects(src, "train", cache)
    assert [i for i, _ in got] == train
    assert sorted(p.name for p in cache.iterdir()) == sorted(f"{i}.npz" for i in train)
    assert [i for i, _ in real_objects(src, "val")] == [i for i in ids if i not in train]
    again = real_objects(src, "train", cache)  # from the cache
    a, b = got[0][1], again[0][1]
    ref = _bottle_cabinet()
    for obj in (a, b):
        assert {p.name for p in obj.parts} >= {"body", "door", "button", "cap", "cap_helper"}
        for p in ref.parts:
            if len(p.vertices):
                np.testing.assert_allclose(np.sort(obj.part(p.name).vertices, 0), np.sort(p.vertices, 0),
                                           atol=1e-6)
        j = {j.child: j for j in obj.joints}
        assert j["cap"].type == "continuous" and j["cap"].parent == "cap_helper"
        np.testing.assert_allclose(j["door"].axis, [0, 0, 1], atol=1e-9)
        np.testing.assert_allclose(j["button"].axis, [1, 0, 0], atol=1e-9)
    samples = {s["name"]: s for s in part_samples(b, np.random.default_rng(0), PredictorConfig(n_part=16, n_shape=16))}
    assert "cap_helper" not in samples and {"door", "button", "cap"} <= set(samples)
    assert samples["door"]["type"] == 1 and samples["door"]["axis_cls"] == 2
    assert samples["button"]["type"] == 2 and samples["button"]["axis_cls"] == 0
    assert samples["cap"]["type"] == 1 and samples["cap"]["axis_cls"] == 2  # continuous counts as revolute
    np.testing.assert_allclose(samples["cap"]["limits"], [-np.pi, np.pi], atol=1e-6)


@pytest.mark.parametrize("yaw", [0.5 * np.pi, -2.1, 3.0])
def test_yaw_turns_joints_with_the_shape(yaw):
    """The yawed object posed at q is the original posed at q, turned (float64); the training targets of the
    yawed object decode to the turned true axis."""
    from kinemesh.articulation.candidates import part_box
    from kinemesh.articulation.dataset import rotate_object
    from kinemesh.articulation.predictor import joint_targets

    obj = _bottle_cabinet()
    new = rotate_object(obj, yaw)
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    q = {"j_door": 0.9, "j_button": 0.007, "j_lift": 0.015, "j_cap": 2.2}
    a, b = new.posed_parts(q), obj.posed_parts(q)
    for name in a:
        np.testing.assert_allclose(a[name], b[name] @ R.T, atol=1e-12)
    for j_old, j_new in zip(obj.joints, new.joints):
        if j_old.child == "cap_helper":
            continue
        box = part_box(new.part(j_new.child).vertices)
        t = joint_targets(box, j_new.type, j_new.axis, j_new.origin, j_new.limits, 1.0, np.zeros(3))
        k = t["axis_cls"]
        a_box = (np.eye(3)[k] + t["axis_res"]) * (1 if t["sign"] == 0 else -1)
        axis = box.axes.T @ a_box
        np.testing.assert_allclose(axis / np.linalg.norm(axis), R @ j_old.axis, atol=1e-5)


def test_random_yaw_covers_quarter_turns_and_the_circle():
    from kinemesh.articulation.dataset import random_yaw

    rng = np.random.default_rng(0)
    y = np.array([random_yaw(rng, 0.5) for _ in range(400)])
    quarter = np.isclose(np.mod(y, 0.5 * np.pi), 0) | np.isclose(np.mod(y, 0.5 * np.pi), 0.5 * np.pi)
    assert 0.4 < quarter.mean() < 0.6
    turns = np.round(np.mod(y[quarter], 2 * np.pi) / (0.5 * np.pi)).astype(int) % 4
    assert np.bincount(turns, minlength=4).min() > 25  # all four faces
    assert np.histogram(y[~quarter], bins=4, range=(-np.pi, np.pi))[0].min() > 25  # the whole circle


def test_shipped_weights_score_a_tiny_real_like_object():
    """The shipped predictor loads (a float16 safetensors ensemble of 27 width-64 and 6 width-128 networks, 20
    MB; its ablation the 27's, under 10 MB) and articulates the -X facing fixture: every part is scored, none is
    read as fixed, the screw cap's axis is vertical."""
    from kinemesh.articulation.infer import articulate
    from kinemesh.articulation.predictor import DEFAULT_WEIGHTS, PredictorEnsemble, load_predictor
    from kinemesh.eval.articulation import _reroot_gt, _score, static_parts

    net = load_predictor(DEFAULT_WEIGHTS)
    assert isinstance(net, PredictorEnsemble) and len(net.members) == 33
    assert [m.config.width for m in net.members] == [64] * 27 + [128] * 6
    assert (DEFAULT_WEIGHTS / "model.safetensors").stat().st_size < 21e6
    assert len(load_predictor(DEFAULT_WEIGHTS / "no_pretrain").members) == 27
    assert (DEFAULT_WEIGHTS / "no_pretrain" / "model.safetensors").stat().st_size < 10e6
    obj = _bottle_cabinet()
    static = static_parts(obj)
    assert "cap_helper" not in {p.name for p in static.parts} | {j.child for j in static.joints}
    preds = articulate(static, net=net, seed=0)
    recs = {r["part"]: r for r in _score(preds, _reroot_gt(obj), 0.56)}
    assert set(recs) == {"door", "button", "cap"}
    assert all(r["pred"] != "fixed" and np.isfinite(r["axis"]) for r in recs.values())
    assert recs["cap"]["axis"] < 10.0


def test_validation_sets_never_touch_the_test_seeds():
    """--validation: training categories and assemblies, their realism copies and the held-out categories, all at
    seeds from VALIDATION_SEED_BASE (below the test seeds); no unlike, held-out-instance or real test set."""
    from kinemesh.articulation.dataset import HOLDOUT_CATEGORIES, TEST_SEED_BASE
    from kinemesh.eval.articulation import VALIDATION_SEED_BASE, ArticulationEvalConfig, sections

    val = sections(ArticulationEvalConfig(n_objects=1, validation=True, real="somewhere"))
    titles = [t for t, _, _ in val]
    assert len(titles) == 3 and "realism" in titles[1] and all(c in titles[2] for c in HOLDOUT_CATEGORIES)
    held = [o for _, o in val[2][1]]
    assert sorted(o.category for o in held) == sorted(HOLDOUT_CATEGORIES)
    for _, objects, _ in (val[0], val[2]):
        for _, o in objects:
            assert VALIDATION_SEED_BASE <= o.meta["seed"] < TEST_SEED_BASE
    test = sections(ArticulationEvalConfig(n_objects=1, no_unlike=True))
    assert all(o.meta["seed"] >= TEST_SEED_BASE for _, objects, _ in test for _, o in objects)


def test_category_held_out_check_takes_every_object_of_those_categories(tmp_path):
    """--holdout-categories: a section with every object of --real-val's folder in those categories, whatever
    its split (the check of weights trained with kinemesh.articulation.train --exclude-categories); a clear
    error without --real-val or when no object matches."""
    import json

    import pytest

    from kinemesh.errors import ConfigError
    from kinemesh.eval.articulation import ArticulationEvalConfig, is_real_validation, sections
    from tests.data_fixtures import make_partnet_folder

    folder = tmp_path / "real"
    for i in (1000, 1001, 1003):  # obj__1003 is of the validation split, the others of the training split
        make_partnet_folder(folder / f"obj__{i}")
    (folder / "obj__1001" / "meta.json").write_text(json.dumps({"model_cat": "Other", "anno_id": "1"}))
    assert is_real_validation("obj__1003") and not is_real_validation("obj__1000")
    cfg = ArticulationEvalConfig(n_objects=1, validation=True, real_val=str(folder), holdout_categories="TinyCabinet")
    title, objects, breakdown = sections(cfg)[-1]
    assert "category-held-out" in title and breakdown == "object"
    assert sorted(n for n, _ in objects) == ["obj__1000", "obj__1003"]  # both splits, only that category
    # --real-only: the real validation split and the held-out categories, no synthetic object
    only = sections(ArticulationEvalConfig(n_objects=1, validation=True, real_val=str(folder),
                                           holdout_categories="TinyCabinet", real_only=True))
    assert [t.split(" (")[0] for t, _, _ in only] == ["real validation split", "category-held-out check"]
    assert [n for n, _ in only[0][1]] == ["obj__1003"]
    with pytest.raises(ConfigError, match="--real-only needs"):
        ArticulationEvalConfig(real_only=True, holdout_categories="TinyCabinet")
    with pytest.raises(ConfigError, match="--real-val"):
        sections(ArticulationEvalConfig(n_objects=1, validation=True, holdout_categories="TinyCabinet"))
    with pytest.raises(ConfigError, match="no object"):
        sections(ArticulationEvalConfig(n_objects=1, validation=True, real_val=str(folder), holdout_categories="Oven"))
