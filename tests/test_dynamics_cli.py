"""``kinemesh simulate`` end to end on a tiny mesh with a tiny (untrained) checkpoint, and its bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from kinemesh.cli import main


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import trimesh

    from kinemesh.model import untrained_model

    d = tmp_path_factory.mktemp("sim")
    untrained_model().save(d / "ckpt")
    body = trimesh.creation.box(extents=(0.6, 0.3, 0.2))
    door = trimesh.creation.box(extents=(0.3, 0.02, 0.2))
    door.apply_translation((0.15, -0.2, 0))
    mesh = trimesh.util.concatenate([body, door])
    mesh.export(d / "tiny.obj")
    n = len(trimesh.load(d / "tiny.obj", process=False).vertices)
    return d, n


def _base(d):
    return ["simulate", str(d / "tiny.obj"), "--checkpoint", str(d / "ckpt"), "--points", "128", "--k-q", "3",
            "--frames", "4"]


def test_simulate_poke_writes_glb_npz_and_energy_plot(tiny):
    import trimesh

    from kinemesh.data.sequence import KinematicSequence

    d, n = tiny
    code = main(_base(d) + ["--kind", "articulated", "--poke", str(n - 1), "--impulse", "0,-0.5,0",
                            "--out", str(d / "a.glb"),
                            "--npz", str(d / "a.npz"), "--plot-energy", str(d / "e.png")])
    assert code == 0
    scene = trimesh.load(d / "a.glb")
    geom = next(iter(scene.geometry.values())) if hasattr(scene, "geometry") else scene
    assert len(geom.metadata.get("targetNames", [])) == 4  # one morph target per frame
    seq = KinematicSequence.load(d / "a.npz")
    assert seq.frames.shape == (4, n, 3) and np.isfinite(seq.frames).all()
    assert np.abs(seq.frames[-1] - seq.frames[0]).max() > 0  # the poke moved something
    assert seq.meta["kind"] == "articulated" and seq.meta["source"] == "kinemesh.dynamics"
    assert seq.meta["simulation"]["integrator"] == "local"  # --integrator auto on an articulated object
    assert (d / "e.png").stat().st_size > 1000


def test_simulate_elastic_poke_takes_the_distilled_integrator(tiny):
    from kinemesh.data.sequence import KinematicSequence

    d, n = tiny
    assert main(_base(d) + ["--kind", "elastic", "--poke", str(n - 1), "--impulse", "0,-0.5,0",
                            "--npz", str(d / "s.npz"), "--out", str(d / "s.glb")]) == 0
    seq = KinematicSequence.load(d / "s.npz")
    assert seq.meta["simulation"]["integrator"] == "distilled"  # --integrator auto on an elastic body
    assert np.isfinite(seq.frames).all() and np.abs(seq.frames[-1] - seq.frames[0]).max() > 0


def test_simulate_drag_with_lead_in(tiny):
    d, n = tiny
    code = main(_base(d) + ["--action", "drag", "--vertex", str(n - 1), "--to", "0.3,-0.35,0.1", "--lead-in",
                            "0.067", "--gravity", "--npz", str(d / "b.npz"), "--out", str(d / "b.glb")])
    assert code == 0
    from kinemesh.data.sequence import KinematicSequence

    seq = KinematicSequence.load(d / "b.npz")
    assert seq.meta["simulation"]["lead_in_frames"] == 2
    assert "drag_residual_m" in seq.meta["simulation"]


@pytest.mark.parametrize("extra,message", [
    (["--poke", "99999", "--impulse", "0,0,1"], "out of range"),
    (["--action", "drag", "--vertex", "0", "--to=BASE0"], "zero-length drag"),
    (["--action", "drag", "--vertex", "0"], "--to"),
    (["--poke", "0"], "--impulse"),
])
def test_simulate_bad_input_is_one_line_error_and_writes_nothing(tiny, capsys, extra, message):
    import trimesh

    d, n = tiny
    v0 = trimesh.load(d / "tiny.obj", process=False).vertices[0]
    extra = [e.replace("BASE0", ",".join(f"{x:.9g}" for x in v0)) for e in extra]
    out = d / "bad.glb"
    code = main(_base(d) + extra + ["--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_simulate_unstable_setting_reduces_step_without_nan(tiny, caplog):
    d, n = tiny
    with caplog.at_level("WARNING"):
        code = main(_base(d) + ["--kind", "elastic", "--stiffness", "60", "--substeps", "1", "--integrator", "rk4",
                                "--poke", "0",
                                "--impulse", "0,0,0.5", "--npz", str(d / "c.npz"), "--out", str(d / "c.glb")])
    assert code == 0
    from kinemesh.data.sequence import KinematicSequence

    seq = KinematicSequence.load(d / "c.npz")
    assert np.isfinite(seq.frames).all()
    assert any("reducing the step" in r.getMessage() for r in caplog.records)
    assert seq.meta["simulation"]["substeps_final"] > 1
    # far beyond what halving can fix: a clear error and no file
    code = main(_base(d) + ["--kind", "elastic", "--stiffness", "1e7", "--substeps", "1", "--integrator", "rk4",
                            "--poke", "0", "--impulse", "0,0,0.5", "--out", str(d / "e.glb")])
    assert code == 1 and not (d / "e.glb").exists()


def test_demo_without_default_checkpoint_errors_clearly(tmp_path, capsys, monkeypatch):
    import kinemesh.model.api as api

    monkeypatch.setattr(api, "DEFAULT_CHECKPOINT", tmp_path / "missing")  # load_model's default
    code = main(["demo", "--out", str(tmp_path / "demo")])
    assert code == 1
    assert "default checkpoint is missing" in capsys.readouterr().err


def test_simulate_messages_name_the_files_vertex_id_not_the_working_meshs(tiny, capsys):
    """A file whose triangles carry their own corners (a mesh exported unindexed) is merged into a working mesh
    with other vertex ids; an error about --vertex names the id the user gave."""
    import trimesh

    d, _ = tiny
    box = trimesh.creation.box(extents=(0.6, 0.3, 0.2))
    soup = trimesh.Trimesh(box.vertices[box.faces.reshape(-1)], np.arange(3 * len(box.faces)).reshape(-1, 3),
                           process=False)
    path = d / "soup.obj"
    soup.export(path)
    vid = len(soup.vertices) - 1  # a corner the working mesh merges into a lower id
    target = ",".join(f"{x:.9g}" for x in soup.vertices[vid])
    args = ["simulate", str(path), "--checkpoint", str(d / "ckpt"), "--points", "128", "--k-q", "3", "--frames",
            "4", "--action", "drag", "--vertex", str(vid), f"--to={target}", "--out", str(d / "soup.glb")]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert f"target of vertex {vid} is its rest position" in err
