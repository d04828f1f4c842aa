"""``kinemesh demo`` on one bundled example with a tiny untrained checkpoint (fast settings)."""

from __future__ import annotations

import numpy as np
import pytest


def test_demo_writes_animation_files_and_contact_sheet(tmp_path, capsys):
    import trimesh

    from kinemesh.cli import main
    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.model import untrained_model

    untrained_model().save(tmp_path / "ckpt")
    out = tmp_path / "demo"
    code = main(["demo", "--checkpoint", str(tmp_path / "ckpt"), "--out", str(out), "--examples", "cloth",
                 "--frames", "3", "--points", "64", "--k-q", "2", "--no-video"])
    assert code == 0
    printed = capsys.readouterr().out
    for name in ("cloth.glb", "cloth.npz", "cloth_energy.png", "contact_sheet.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
        assert name in printed  # the command says where its outputs are
    seq = KinematicSequence.load(out / "cloth.npz")
    assert seq.n_frames == 3 and np.isfinite(seq.frames).all() and seq.meta["kind"] == "cloth"
    np.testing.assert_allclose(seq.frames[0], seq.rest_vertices, atol=1e-5)  # starts at the input mesh
    geom = trimesh.load(out / "cloth.glb")
    geom = next(iter(geom.geometry.values())) if hasattr(geom, "geometry") else geom
    assert len(geom.metadata.get("targetNames", [])) == 3


def test_demo_rejects_unknown_example(tmp_path, capsys):
    from kinemesh.cli import main

    assert main(["demo", "--examples", "dragon", "--out", str(tmp_path)]) == 1
    assert "dragon" in capsys.readouterr().err


def test_demo_cabinet_moves_a_door_of_three_components_as_one_and_measures_it(tmp_path, capsys, monkeypatch):
    """The cabinet example is loaded part by part: a door link of three separate components moves rigidly,
    and summary.json holds the door's opening angle, measured again here from cabinet.npz."""
    import json

    from scipy.spatial.transform import Rotation

    from kinemesh.cli import main
    from kinemesh.commands import demo
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.data.partnet import write_partnet_folder
    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.geometry import metrics
    from kinemesh.geometry.procrustes import kabsch
    from kinemesh.model import untrained_model
    from tests.toys import merge_meshes, three_component_door

    (_, bv, bf), *door = three_component_door()
    hinge = Joint("hinge", "revolute", "body", "door", (0, 0, 1), (-0.25, 0.0, 0.0), (0.0, 2.0))
    obj = ArticulatedObject([Part("body", bv, bf), Part("door", *merge_meshes(*[(v, f) for _, v, f in door]))],
                            [hinge])
    write_partnet_folder(obj, tmp_path / "examples" / "cabinet")
    monkeypatch.setattr(demo, "EXAMPLES_DIR", tmp_path / "examples")
    untrained_model("tiny").save(tmp_path / "ck")
    out = tmp_path / "demo"
    assert main(["demo", "--checkpoint", str(tmp_path / "ck"), "--out", str(out), "--examples", "cabinet",
                 "--frames", "4", "--points", "64", "--k-q", "3", "--no-video"]) == 0
    printed = capsys.readouterr().out
    assert "2 parts (links)" in printed and "summary.json" in printed and "target >= 60" in printed
    seq = KinematicSequence.load(out / "cabinet.npz")
    door_v = seq.part_ids == 1
    assert door_v.sum() == 24 and seq.kind == "articulated"
    rest, frames = seq.rest_vertices[door_v], seq.frames[:, door_v]
    body = seq.frames[:, seq.part_ids == 0] - seq.rest_vertices[seq.part_ids == 0]
    # the door is dragged (an untrained model follows a little), the body stands still (its base is held), and the
    # door moves as one piece (up to the rest-fit
    assert np.abs(frames - rest).max() > 0.03 and np.abs(body).max() < 1e-4
    # offset simulate adds per vertex, as in test_segments)
    assert metrics.within_part_rigidity(rest, frames, np.zeros(24, int)) < 0.01
    R, _ = kabsch(rest, frames)
    angle = np.degrees(Rotation.from_matrix(R).as_rotvec() @ [0, 0, 1]).max()
    summary = json.loads((out / "summary.json").read_text())["examples"]["cabinet"]
    assert summary["value"] == pytest.approx(angle, abs=1e-3) and summary["target"] == 60.0
    assert summary["met"] == (angle >= 60.0) and summary["unit"] == "deg"


def test_demo_videos_show_the_npz_frames_and_stages_are_timed(tmp_path, capsys):
    """With videos, the MP4 (rendered from the example's .npz in the demo's writer process) shows the npz's
    frames from the demo's camera, and summary.json times every stage."""
    import json

    import imageio.v2 as iio

    from kinemesh.cli import main
    from kinemesh.commands import demo
    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.model import untrained_model
    from kinemesh.viz.render import RenderStyle, SceneRenderer

    untrained_model("tiny").save(tmp_path / "ck")
    out = tmp_path / "demo"
    assert main(["demo", "--checkpoint", str(tmp_path / "ck"), "--out", str(out), "--examples", "cloth",
                 "--frames", "3", "--points", "64", "--k-q", "2", "--fps", "10"]) == 0
    assert str(out / "cloth.mp4") in capsys.readouterr().out
    reader = iio.get_reader(out / "cloth.mp4")
    try:
        assert reader.count_frames() == 3 and tuple(reader.get_meta_data()["size"]) == (640, 480)
        last = reader.get_data(2).astype(int)
    finally:
        reader.close()
    seq = KinematicSequence.load(out / "cloth.npz")
    want = SceneRenderer(seq.frames, seq.faces, seq.part_ids, style=RenderStyle(azimuth=demo.VIEW_TURN_DEG))
    assert np.abs(last - want.render(seq.frames[2])).mean() < 3  # H.264 noise only
    stages = json.loads((out / "summary.json").read_text())["stage_seconds"]
    assert {"model load", "binding", "simulation", "contact sheet", "waiting for the videos"} <= set(stages)
    assert all(s >= 0 for s in stages.values()) and stages["videos (writer process, meanwhile)"] > 0
