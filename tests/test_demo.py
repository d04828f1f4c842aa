"""``kinemesh demo`` on one bundled example with a tiny untrained checkpoint (fast settings)."""

from __future__ import annotations

import numpy as np


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
