"""``kinemesh synth --from-urdf``: real 4D data from URDF / PartNet-Mobility folders, validity checks
(interpenetration beyond rest, detachment, no motion) and Dask distributed runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import trimesh

from kinemesh.cli import main
from kinemesh.data.manifest import read_manifest
from kinemesh.data.sequence import KinematicSequence
from kinemesh.geometry.validity import RestOverlap
from kinemesh.synth.real import clean_part, detachment, hash_split, prepare_object

REAL_TRAIN = Path(__file__).resolve().parents[1] / "data" / "real_train"


def _box(extents, centre):
    m = trimesh.creation.box(extents=extents)
    m.apply_translation(centre)
    return m


def _write_object(folder: Path, lid_axis="0 -2 0", drawer_limits=(0.0, 0.2), knob_depth=0.0) -> Path:
    """A closed box (two visual meshes) with a lid hinged on its back edge (non-unit axis), a drawer on the
    front and a knob that slides and turns through a ``_helper`` link (prismatic + continuous), Z up."""
    (folder / "meshes").mkdir(parents=True)
    meshes = {
        "body": _box((0.6, 0.4, 0.4), (0, 0, 0.2)),
        "foot": _box((0.1, 0.1, 0.05), (0, 0, -0.025)),
        "lid": _box((0.6, 0.4, 0.02), (0, 0, 0.411)),
        "drawer": _box((0.1, 0.3, 0.1), (0.351, 0, 0.2)),
        "knob": trimesh.creation.cylinder(radius=0.03, height=0.04, sections=12),
    }
    meshes["knob"].apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [1, 0, 0]))
    meshes["knob"].apply_translation([0, 0.221 - knob_depth, 0.2])
    for name, m in meshes.items():
        m.export(folder / "meshes" / f"{name}.obj")

    def link(name, *files, at="0 0 0"):  # meshes are in world coordinates: the visual origin undoes the link's
        vis = "".join(
            f'<visual><origin xyz="{at}"/><geometry><mesh filename="meshes/{f}.obj"/></geometry></visual>'
            for f in files
        )
        return f'<link name="{name}">{vis}</link>'

    lo, hi = drawer_limits
    urdf = f"""<robot name="chest">
  {link("body", "body", "foot")}{link("lid", "lid", at="0.3 0 -0.4")}{link("drawer", "drawer")}
  <link name="knob_helper"/>{link("knob", "knob", at="0 -0.22 -0.2")}
  <joint name="lid_hinge" type="revolute"><parent link="body"/><child link="lid"/>
    <origin xyz="-0.3 0 0.4"/><axis xyz="{lid_axis}"/><limit lower="0" upper="1.5"/></joint>
  <joint name="drawer_slide" type="prismatic"><parent link="body"/><child link="drawer"/>
    <axis xyz="1 0 0"/><limit lower="{lo}" upper="{hi}"/></joint>
  <joint name="knob_slide" type="prismatic"><parent link="body"/><child link="knob_helper"/>
    <axis xyz="0 1 0"/><limit lower="0" upper="0.05"/></joint>
  <joint name="knob_turn" type="continuous"><parent link="knob_helper"/><child link="knob"/>
    <origin xyz="0 0.22 0.2"/><axis xyz="0 1 0"/></joint>
</robot>"""
    (folder / "chest.urdf").write_text(urdf)
    return folder


def test_clean_part_welds_and_drops_degenerate_and_duplicate_faces():
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1e-9, 0, 0], [1, 1, 0], [5, 5, 5]], dtype=float)
    f = np.array([[0, 1, 2], [3, 4, 2], [1, 4, 2], [2, 1, 0], [0, 3, 1]])  # [2,1,0] repeats [0,1,2] flipped
    v2, f2, c = clean_part(v, f, tol=1e-6)
    assert c["welded"] == 1  # vertex 3 sits on vertex 0
    assert c["degenerate_faces"] == 1  # [0, 3, 1] collapses once 3 is welded to 0
    assert c["duplicate_faces"] == 1
    assert c["unused_vertices"] == 1  # (5, 5, 5)
    assert len(v2) == 4 and len(f2) == 3 and f2.max() == 3
    # geometry kept: every surviving face has its original area
    areas = 0.5 * np.linalg.norm(np.cross(v2[f2[:, 1]] - v2[f2[:, 0]], v2[f2[:, 2]] - v2[f2[:, 0]]), axis=1)
    np.testing.assert_allclose(sorted(areas), [0.5, 0.5, 0.5], atol=1e-8)


def test_hash_split_is_stable_and_matches_the_fraction():
    ids = [f"kitchenmodels__{i}" for i in range(2000)]
    val = [hash_split(i, 0.2) == "val" for i in ids]
    assert 0.17 < np.mean(val) < 0.23
    assert all(hash_split(f"kitchenmodels__{i}", 0.2) == hash_split(str(i), 0.2) for i in range(200))
    assert {hash_split(i, 0.0) for i in ids[:50]} == {"train"}


def test_rest_overlap_flags_penetration_beyond_rest_only(tmp_path):
    good, _ = prepare_object(_write_object(tmp_path / "good", knob_depth=0.015))
    check = RestOverlap(good)
    rng = np.random.default_rng(0)
    # the knob sits 1.5 cm inside the body at rest: that overlap is the baseline, not a violation
    assert all(not check(good.sample_values(rng)) for _ in range(12))
    bad, _ = prepare_object(_write_object(tmp_path / "bad", lid_axis="0 1 0", drawer_limits=(-0.3, 0.0)))
    check = RestOverlap(bad)
    assert not check({})
    hits = check({"lid_hinge": 1.0})  # the lid swings down into the closed body
    assert {h[0] for h in hits} == {"lid"} and max(h[2] for h in hits) > 0.3
    hits = check({"drawer_slide": -0.25})  # the drawer is pushed into the body
    assert {h[0] for h in hits} == {"drawer"}
    assert not check({"drawer_slide": -0.005})  # a few mm of contact is tolerated


def test_synth_from_urdf_writes_valid_sequences_and_resumes(tmp_path, capsys):
    src = tmp_path / "src"
    _write_object(src / "chest_a")
    _write_object(src / "chest_b", knob_depth=0.01)
    out = tmp_path / "real"
    args = ["synth", "--from-urdf", str(src), "--out", str(out), "--real-kinematic", "1", "--real-dynamic",
            "2", "--workers", "1", "--no-progress", "--val-fraction", "0.5"]
    assert main(args) == 0
    entries = read_manifest(out / "manifest.jsonl")
    assert len(entries) == 6 and {e["category"] for e in entries} == {"chest"}
    for e in entries:
        assert e["split"] == hash_split(e["instance"].split("/")[1], 0.5)
    objs = {n: prepare_object(src / n)[0] for n in ("chest_a", "chest_b")}
    for e in entries:
        seq = KinematicSequence.load(out / e["path"])
        obj = objs[seq.meta["instance"]]
        names = [p.name for p in obj.parts]
        # one part id per link with geometry (the body's two visual meshes share one), helper link has none
        assert sorted(set(seq.part_ids.tolist())) == [names.index(n) for n in ("body", "lid", "drawer", "knob")]
        joints = {j["name"]: j for j in seq.joints}
        assert joints["knob_slide"]["child"] == "knob_helper" and joints["knob_turn"]["type"] == "continuous"
        np.testing.assert_allclose(joints["lid_hinge"]["axis"], [0, -1, 0])  # normalised
        for vals in seq.meta["joint_values"]:
            for name, q in vals.items():  # continuous joints are unlimited; MuJoCo limits are soft (2e-2)
                lo, hi = joints[name]["limits"] or (-np.inf, np.inf)
                assert lo - 2e-2 <= q <= hi + 2e-2
        assert detachment(obj, seq) < 1e-5
        assert seq.meta["source"] == "kinemesh.synth.real" and seq.meta["motion"] in ("kinematic", "dynamic")
        moved = np.linalg.norm(seq.frames - seq.frames[:1], axis=-1).max()
        assert moved > 0.01 * np.linalg.norm(np.ptp(seq.rest_vertices, axis=0))
    report = json.loads((out / "synth_report.json").read_text())
    assert report["by_status"]["ok"] == 2 and report["cleaning"]["vertices_out"] > 0
    capsys.readouterr()
    assert main(args) == 0
    assert "0 objects done, 2 already present" in capsys.readouterr().out


def test_synth_from_urdf_rejects_a_folder_without_objects(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["synth", "--from-urdf", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) != 0
    assert "holds no object" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_still_sequences_are_dropped(tmp_path):
    from kinemesh.errors import KinemeshError
    from kinemesh.synth.dataset import retry_dynamic
    from kinemesh.geometry.validity import motion_extent, moves

    rest = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=np.float32)
    frames = np.repeat(rest[None], 4, axis=0)
    still = KinematicSequence(rest, [[0, 1, 2]], frames, np.arange(4), meta={"kind": "articulated"})
    assert motion_extent(still) == 0.0 and not moves(still)
    frames = frames.copy()
    frames[2, 1, 0] += 0.05 * np.sqrt(2)  # 5% of the diagonal (sqrt 2)
    moving = KinematicSequence(rest, [[0, 1, 2]], frames, np.arange(4), meta={"kind": "articulated"})
    assert motion_extent(moving) == pytest.approx(0.05, rel=1e-5) and moves(moving)
    # a joint with an empty range is frozen (fixed) on load; joints that barely move give no rollout at all
    obj, stats = prepare_object(_write_object(tmp_path / "stuck", drawer_limits=(0.0, 0.0)))
    assert obj.joints[1].type == "fixed" and stats["frozen_joints"] == 1
    obj.joints = [j for j in obj.joints if j.type != "continuous"]
    for j in obj.movable_joints:
        j.limits = (0.0, 1e-6)
    obj.part("knob").vertices, obj.part("knob").faces = np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    with pytest.raises(KinemeshError, match="no motion"):
        retry_dynamic(obj, np.random.default_rng(0), 12)


def test_rollout_frames_follow_the_recorded_joint_values(tmp_path):
    from kinemesh.synth.articulated_motion import dynamic_sequence

    obj, _ = prepare_object(_write_object(tmp_path / "o"))
    seq = dynamic_sequence(obj, np.random.default_rng(3), n_frames=12)
    assert detachment(obj, seq) < 1e-6  # frames read after mj_kinematics, not one step behind
    seq.frames[5, :10] += 0.01
    assert detachment(obj, seq) > 1e-3


def test_dask_local_cluster_gives_the_same_files_as_one_worker(tmp_path):
    pytest.importorskip("distributed")
    args = ["synth", "--kinds", "articulated", "--categories", "laptop", "--per-category", "2", "--seed", "3",
            "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "a"), "--workers", "1"]) == 0
    assert main(args + ["--out", str(tmp_path / "b"), "--scheduler", "local:2"]) == 0
    fa = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.npz"))
    fb = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.npz"))
    assert fa == fb and len(fa) == 4
    for rel in fa:
        with np.load(tmp_path / "a" / rel) as a, np.load(tmp_path / "b" / rel) as b:
            assert a.files == b.files
            for k in a.files:
                assert a[k].dtype == b[k].dtype
                np.testing.assert_array_equal(a[k], b[k])
    assert (tmp_path / "a" / "manifest.jsonl").read_text() == (tmp_path / "b" / "manifest.jsonl").read_text()


def test_bad_scheduler_is_refused_before_any_work(tmp_path, capsys):
    assert main(["synth", "--kinds", "articulated", "--categories", "laptop", "--per-category", "1",
                 "--scheduler", "local:0", "--out", str(tmp_path / "o")]) != 0
    assert "local:N" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.npz"))


@pytest.mark.parametrize("name", ["kitchenmodels__10849", "kitchenmodels__3616"])
def test_real_training_objects_give_valid_sequences(name, tmp_path):
    from kinemesh.synth.real import run_real_item

    if not (REAL_TRAIN / name).is_dir():
        pytest.skip(f"{REAL_TRAIN / name} not present")
    r = run_real_item((str(REAL_TRAIN / name), str(tmp_path), 0, 1, 1, 8, 12, 2000))
    assert r["status"] == "ok" and r["sequences"] == 2, r
    assert r["stats"]["vertices_out"] <= 2000 + 8 * r["stats"]["parts"]
    for f in tmp_path.rglob("*.npz"):
        seq = KinematicSequence.load(f)
        assert seq.meta["category"] in ("Refrigerator", "Bottle") and len(np.unique(seq.part_ids)) >= 2


def test_real_test_objects_load_for_synthesis(real_objects_dir):
    """Loading only (the real test split is never used to train or choose anything)."""
    for name in ("sapien__45940", "kitchenmodels__7236"):
        obj, stats = prepare_object(real_objects_dir / name)
        assert obj.movable_joints and stats["vertices_out"] <= 4000 + 8 * stats["parts"]
        assert RestOverlap(obj)({}) == []


def test_flat_parts_are_thickened_for_mujoco(tmp_path):
    from kinemesh.synth.articulated_motion import dynamic_sequence
    from kinemesh.synth.real import thickened

    obj, _ = prepare_object(_write_object(tmp_path / "o"))
    lid = obj.part("lid")
    lid.vertices, lid.faces = lid.vertices[lid.vertices[:, 2] > 0.415], np.array([[0, 1, 2], [1, 3, 2]])
    assert len(lid.vertices) == 4  # the lid is now its top face only: a zero-thickness panel
    sim = thickened(obj)
    assert len(sim.part("lid").vertices) == 8 and np.ptp(sim.part("lid").vertices[:, 2]) > 0
    assert len(sim.part("body").vertices) == len(obj.part("body").vertices)  # solid parts unchanged
    with pytest.raises(Exception, match="coplanar"):
        dynamic_sequence(obj, np.random.default_rng(0), n_frames=4)
    with np.errstate(all="ignore"):  # the open panel has no volume (the gravity force bound only)
        seq = dynamic_sequence(obj, np.random.default_rng(0), n_frames=4, sim_obj=sim)
    assert seq.n_vertices == sum(len(p.vertices) for p in obj.parts) and detachment(obj, seq) < 1e-6
