"""Held-out unlike categories (kinemesh.synth.unlike) and the real validation split of eval articulation."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from kinemesh.synth.unlike import UNLIKE_CATEGORIES, build_unlike


def _size(obj) -> float:
    return float(np.ptp(obj.merged()[0], axis=0).max())


@pytest.mark.parametrize("category", sorted(UNLIKE_CATEGORIES))
def test_unlike_category_joints_valid_and_attached(category):
    obj = build_unlike(category, 100_001)
    size = _size(obj)
    assert obj.category == category and obj.movable_joints
    assert np.isclose(obj.merged()[0][:, 2].min(), 0.0, atol=1e-9)  # stands on z = 0
    for j in obj.movable_joints:
        assert np.isclose(np.linalg.norm(j.axis), 1.0)
        child, parent = obj.part(j.child), obj.part(j.parent)
        lo, hi = child.vertices.min(0) - 0.05 * size, child.vertices.max(0) + 0.05 * size
        assert np.all((j.origin >= lo) & (j.origin <= hi)), f"{j.name}: origin far from its part"
        lim = j.limits if j.limits is not None else (-np.pi, np.pi)
        assert lim[1] > lim[0]
        mesh = trimesh.Trimesh(child.vertices, child.faces, process=False)
        pts = np.concatenate([trimesh.sample.sample_surface(mesh, 400, seed=0)[0], child.vertices])
        for q in (lim[0], lim[1], 0.5 * (lim[0] + lim[1])):
            T = obj.part_transforms({j.name: q})
            # the posed child's nearest point to its (posed) parent: exact distance to the parent's surface
            Tr = np.linalg.inv(T[j.parent]) @ T[j.child]
            local = pts @ Tr[:3, :3].T + Tr[:3, 3]
            _, dist, _ = trimesh.proximity.closest_point(trimesh.Trimesh(parent.vertices, parent.faces,
                                                                         process=False), local)
            assert dist.min() < 0.01 * size, f"{j.name} at {q:.3f}: {dist.min() / size:.3f} x size away"


def test_unlike_deterministic_and_varied():
    for c in UNLIKE_CATEGORIES:
        a, b, other = build_unlike(c, 7), build_unlike(c, 7), build_unlike(c, 8)
        va, vb = a.merged()[0], b.merged()[0]
        assert np.array_equal(va, vb)
        assert [j.to_dict() for j in a.joints] == [j.to_dict() for j in b.joints]
        vo = other.merged()[0]
        assert va.shape != vo.shape or not np.allclose(va, vo), f"{c}: seed does not change the object"


def test_unlike_set_is_unlike_the_training_sets():
    from kinemesh.articulation.dataset import HOLDOUT_CATEGORIES
    from kinemesh.errors import ConfigError
    from kinemesh.synth.categories import CATEGORIES

    assert len(UNLIKE_CATEGORIES) >= 8
    assert not set(UNLIKE_CATEGORIES) & (set(CATEGORIES) | set(HOLDOUT_CATEGORIES))
    objs = [build_unlike(c, 3) for c in UNLIKE_CATEGORIES]
    # real-asset traits: parts made of several separate components, open shells, oblique axes
    meshes = [[trimesh.Trimesh(p.vertices, p.faces) for p in o.parts] for o in objs]
    multi = sum(any(len(m.split(only_watertight=False)) > 1 for m in ms) for ms in meshes)
    shells = sum(any(not m.is_watertight for m in ms) for ms in meshes)
    oblique = sum(any(np.sort(np.abs(j.axis))[-2] > 0.2 for j in o.movable_joints) for o in objs)
    assert multi >= 8 and shells >= 4 and oblique >= 3, (multi, shells, oblique)
    # joint layouts: two prismatic joints in series, and several joints on one shared axis line
    suit = build_unlike("suitcase", 3)
    chain = {j.child: j for j in suit.joints}
    assert chain["handle_inner"].type == chain[chain["handle_inner"].parent].type == "prismatic"
    toilet = {j.child: j for j in build_unlike("toilet", 3).joints}
    assert np.allclose(toilet["seat"].origin, toilet["lid"].origin)
    with pytest.raises(ConfigError, match="unknown unlike category"):
        build_unlike("cabinet", 0)


def test_real_validation_split_rule():
    import zlib

    from kinemesh.eval.articulation import is_real_validation

    ids = [str(i) for i in range(1000, 1400)]
    val = [i for i in ids if is_real_validation(i)]
    assert 0.15 < len(val) / len(ids) < 0.25
    # the same rule as the real 4D data's val split, and a folder name with a source prefix falls like its bare id
    assert all(is_real_validation(i) == (zlib.crc32(i.encode()) / 2**32 < 0.2) for i in ids)
    assert all(is_real_validation(f"kitchenmodels__{i}") == is_real_validation(i) for i in ids)


def test_eval_tables_per_object_and_category(tmp_path):
    from kinemesh.data.articulated import Joint
    from kinemesh.errors import InputFileError
    from kinemesh.eval.articulation import _category_table, _object_table, evaluate_objects, load_real_objects

    obj = build_unlike("barn_door", 1)

    def oracle(static):  # the ground truth, the door's axis turned by 30 deg about Z
        out = []
        for j in obj.joints:
            axis = j.axis
            if j.child == "door":
                c, s = np.cos(np.pi / 6), np.sin(np.pi / 6)
                axis = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ j.axis
            out.append(Joint(j.child, j.type, j.parent, j.child, axis, j.origin, j.limits))  # named by part
        return out

    per = {}
    res = evaluate_objects([("barn_door/1", obj)], {"oracle": oracle}, 0, motion=False, per_object=per)
    assert res["oracle"]["n_mov"] == 2 and np.isclose(res["oracle"]["axis"], 15.0, atol=1e-6)
    rows = _object_table("t", per, "oracle")
    assert "| barn_door/1 | barn_door | 2 | 2 | 15.00 |" in rows[-2] and "door: axis 30 deg" in rows[-2]
    cat = _category_table("t", per, "oracle")
    assert cat[-2].startswith("| barn_door | 2 | 2 | 15.00 / 15.00 |")
    with pytest.raises(InputFileError, match="not a folder"):
        load_real_objects(tmp_path / "missing")


def test_synth_unlike_folders_load_with_their_joints_and_run_eval_real(tmp_path, capsys):
    """``kinemesh synth --unlike`` writes PartNet-Mobility folders that load_articulated (eval real, simulate) reads
    back with the built object's joints and vertices; eval real then drags every movable joint of one of them."""
    import json

    from kinemesh.cli import main
    from kinemesh.data.partnet import load_articulated
    from kinemesh.model import untrained_model

    out = tmp_path / "unlike"
    args = ["synth", "--unlike", "--categories", "toilet,suitcase", "--per-category", "1", "--seed", "2",
            "--no-progress", "--out", str(out)]
    assert main(args[:3] + ["toilet,cabinet"] + args[4:]) == 1 and not out.exists()  # nothing half-written
    assert "unknown unlike category 'cabinet'" in capsys.readouterr().err
    assert main(args + ["--from-urdf", str(tmp_path)]) == 1 and not out.exists()
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == ["suitcase_102000", "toilet_102000"]
    for c in ("toilet", "suitcase"):
        built, read = build_unlike(c, 102_000), load_articulated(out / f"{c}_102000", max_vertices=None)
        assert read.category == c and len(read.movable_joints) == len(built.movable_joints) >= 3
        truth = {j.name: j for j in built.movable_joints}
        for j in read.movable_joints:
            t = truth[j.name]
            assert (j.type, j.parent, j.child) == (t.type, t.parent, t.child)
            assert np.allclose(j.axis, t.axis) and np.allclose(j.origin, t.origin, atol=1e-9)
            assert np.allclose(j.limits if j.limits else 0, t.rest_limits() if t.limits else 0)
        for p in built.parts:
            assert np.allclose(read.part(p.name).vertices, p.vertices, atol=1e-9)
    untrained_model("tiny").save(tmp_path / "ckpt")
    assert main(["eval", "real", "--real", str(out), "--checkpoint", str(tmp_path / "ckpt"), "--max-objects", "1",
                 "--frames", "3", "--points", "64", "--samples", "2", "--joints", "given",
                 "--out", str(tmp_path / "r.json")]) == 0
    (row,) = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert row["object"] == "suitcase_102000" and row["category"] == "suitcase" and row["kind"] == "articulated"
    assert {d["joint"] for d in row["drags"]} == {j.name for j in build_unlike("suitcase", 102_000).movable_joints}
    # prior samples and reduced samples along the URDF's joints: attached (the given joints), and the reduced ones
    # move every joint (the shares are of the joints the decoders can move)
    assert row["joint_prior_attached"] == 1.0 and row["reduced_joint_attached"] == 1.0
    assert 0.0 <= row["joint_prior_moving"] <= 1.0 and row["reduced_joint_moving"] == 1.0
