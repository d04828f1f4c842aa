"""``kinemesh synth`` end to end: files, manifest splits, determinism, resume, assets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kinemesh.cli import main
from kinemesh.data.manifest import read_manifest
from kinemesh.data.sequence import KinematicSequence


def _synth(out, *extra):
    return main(
        [
            "synth",
            "--kinds",
            "articulated",
            "--categories",
            "laptop,chest",
            "--per-category",
            "2",
            "--seed",
            "5",
            "--workers",
            "1",
            "--no-progress",
            "--holdout-categories",
            "chest",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_synth_writes_sequences_manifest_and_resumes(tmp_path, capsys):
    out = tmp_path / "ds"
    assert _synth(out, "--write-assets") == 0
    files = sorted(out.rglob("*.npz"))
    assert len(files) == 8  # 2 categories x 2 instances x (kinematic + dynamic)
    assert all(f.parent.parent.name == "articulated" for f in files)
    entries = read_manifest(out / "manifest.jsonl")
    assert len(entries) == 8
    assert {e["split"] for e in entries if e["category"] == "chest"} == {"test_category"}
    laptop = [e for e in entries if e["category"] == "laptop"]
    assert {e["split"] for e in laptop} == {"train", "test"}
    for inst in {e["instance"] for e in laptop}:  # kinematic + dynamic of one object share a split
        assert len({e["split"] for e in laptop if e["instance"] == inst}) == 1
    seq = KinematicSequence.load(out / entries[0]["path"])
    assert seq.meta["joints"] and seq.n_vertices == entries[0]["n_vertices"]
    assert (out / "assets" / "laptop" / "laptop_0000" / "mobility.urdf").is_file()
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(out / "assets" / "laptop" / "laptop_0000.xml"))
    assert model.njnt == 1 and model.nmesh == 2
    report = json.loads((out / "synth_report.json").read_text())
    assert report["by_status"]["ok"] == 4 and report["by_status"]["failed"] == 0

    mtimes = {f: f.stat().st_mtime_ns for f in files}
    stale = files[0].parent / ".laptop_0001_kinematic.k2j4_x9a.tmp.npz"  # left by a run killed mid-write
    stale.write_bytes(b"half")
    capsys.readouterr()
    assert _synth(out) == 0
    printed = capsys.readouterr().out
    assert "0 generated, 4 already present" in printed and "removed stale temporary" in printed
    assert not stale.exists()
    assert {f: f.stat().st_mtime_ns for f in files} == mtimes
    assert not list(out.rglob(".*tmp*")), "temporary files left behind"


def test_synth_is_deterministic_for_a_seed(tmp_path):
    args = [
        "synth",
        "--kinds",
        "articulated,cloth",
        "--categories",
        "laptop,towel",
        "--per-category",
        "1",
        "--seed",
        "9",
        "--workers",
        "1",
        "--no-progress",
    ]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    # the process pool gives the same files as one worker (each item's seed depends on the item only)
    assert main(args + ["--out", str(tmp_path / "b"), "--workers", "2"]) == 0
    fa = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.npz"))
    fb = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.npz"))
    assert fa == fb and len(fa) == 3
    for rel in fa:
        a, b = KinematicSequence.load(tmp_path / "a" / rel), KinematicSequence.load(tmp_path / "b" / rel)
        np.testing.assert_array_equal(a.frames, b.frames)
        np.testing.assert_array_equal(a.faces, b.faces)


def test_synth_rejects_unknown_kind(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:  # an argparse type: the usage error names the option, exit status 2
        main(["synth", "--kinds", "gas", "--out", str(tmp_path / "x"), "--no-progress"])
    assert exc.value.code == 2
    assert "argument --kinds: expected kinds among articulated, elastic, cloth, got 'gas'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_synth_rejects_bad_names_and_fractions_before_generating(tmp_path, capsys):
    base = ["synth", "--kinds", "articulated", "--per-category", "1", "--workers", "1", "--no-progress"]
    out = tmp_path / "x"
    cases = [
        (["--categories", "laptop,cabnet"], "--categories: unknown ['cabnet']"),
        (["--categories", "towel"], "--categories: unknown ['towel'] for kinds articulated"),
        (
            ["--categories", "laptop", "--holdout-categories", "lptop"],
            "--holdout-categories: unknown ['lptop']",
        ),
        (["--categories", "laptop", "--instance-fraction", "2"], "--instance-fraction must be in [0, 1)"),
    ]
    for extra, needle in cases:
        assert main(base + extra + ["--out", str(out)]) == 1, extra
        err = capsys.readouterr().err.strip()
        assert needle in err and "\n" not in err, (needle, err)
        assert not out.exists(), extra  # nothing generated, no folder created


def test_synth_simulates_a_users_mesh_and_rejects_open_ones(tmp_path, capsys):
    import trimesh

    blob = trimesh.creation.icosphere(2, radius=0.06)
    blob.export(tmp_path / "bean.obj")
    out = tmp_path / "u"
    args = [
        "synth",
        "--kinds",
        "elastic",
        "--categories",
        "user_bean",
        "--per-category",
        "1",
        "--workers",
        "1",
        "--no-progress",
        "--holdout-categories",
        "",
        "--out",
        str(out),
    ]
    assert main(args + ["--elastic-meshes", str(tmp_path / "bean.obj")]) == 0
    seq = KinematicSequence.load(out / "elastic" / "user_bean" / "user_bean_0000.npz")
    assert seq.category == "user_bean" and seq.n_vertices == len(blob.vertices)
    assert np.isfinite(seq.frames).all() and seq.rest_vertices[:, 2].min() >= -1e-6

    sheet = trimesh.Trimesh([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]])
    sheet.export(tmp_path / "sheet.obj")
    capsys.readouterr()
    assert main(args + ["--elastic-meshes", str(tmp_path / "sheet.obj")]) == 1
    assert "watertight" in capsys.readouterr().err
