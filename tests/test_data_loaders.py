"""Mesh and sequence loaders: formats, natural order, .anime, decimation budget, bad input."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import trimesh

from data_fixtures import BODY, BOX_F, make_frame_folder, write_anime, write_obj
from kinemesh.data.loaders import load_anime, load_mesh_folder, load_sequence, natural_key
from kinemesh.data.meshes import load_mesh
from kinemesh.errors import InputFileError


@pytest.mark.parametrize("suffix", [".obj", ".ply", ".stl", ".off", ".glb"])
def test_load_mesh_formats(tmp_path, suffix):
    box = trimesh.creation.box(extents=(1.0, 0.5, 0.25))
    path = tmp_path / f"box{suffix}"
    box.export(path)
    mesh = load_mesh(path)
    assert len(mesh.faces) == 12 and len(mesh.vertices) == 8
    lo, hi = mesh.bounds
    if suffix == ".glb":  # glTF is Y up: trimesh wrote our Z-up box as Y-up data, we read it back rotated
        np.testing.assert_allclose(hi - lo, [1.0, 0.25, 0.5], atol=1e-6)
    else:
        np.testing.assert_allclose(hi - lo, [1.0, 0.5, 0.25], atol=1e-6)


def test_obj_with_material_reads_geometry_only(tmp_path):
    write_obj(tmp_path / "m.obj", BODY, with_material=True)  # its texture file does not exist
    mesh = load_mesh(tmp_path / "m.obj", process=False)
    np.testing.assert_allclose(mesh.vertices, BODY)


def test_decimation_to_budget_warns(tmp_path, caplog):
    path = tmp_path / "sphere.ply"
    trimesh.creation.icosphere(subdivisions=4).export(path)  # 2562 vertices
    with caplog.at_level(logging.WARNING):
        mesh = load_mesh(path, max_vertices=500)
    assert 100 < len(mesh.vertices) <= 500
    assert "exceed the budget of 500" in caplog.text and "sphere.ply" in caplog.text
    np.testing.assert_allclose(np.linalg.norm(mesh.vertices, axis=1), 1.0, atol=0.05)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert len(load_mesh(path, max_vertices=None).vertices) == 2562
    assert caplog.text == ""


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"", "file is empty"),
        (b"v 0 0 nan\nv 1 0 0\nv 0 1 0\nf 1 2 3\n", "not finite"),
        (b"v 0 0 0\nv 1 0 0\n", "no triangles"),
    ],
)
def test_load_mesh_bad_input(tmp_path, content, needle):
    path = tmp_path / "bad.obj"
    path.write_bytes(content)
    with pytest.raises(InputFileError) as info:
        load_mesh(path)
    assert needle in str(info.value) and "bad.obj" in str(info.value)


def test_load_mesh_corrupt_binary_and_missing(tmp_path):
    path = tmp_path / "bad.glb"
    path.write_bytes(b"glTF\x02\x00\x00\x00garbage")
    with pytest.raises(InputFileError, match="bad.glb"):
        load_mesh(path)
    with pytest.raises(InputFileError, match="not found"):
        load_mesh(tmp_path / "missing.ply")
    (tmp_path / "x.xyz").write_text("1 2 3")
    with pytest.raises(InputFileError, match="unsupported mesh format"):
        load_mesh(tmp_path / "x.xyz")


def test_natural_sort_key():
    names = ["f10.obj", "f2.obj", "f1.obj", "F3.obj"]
    assert sorted(names, key=natural_key) == ["f1.obj", "f2.obj", "F3.obj", "f10.obj"]


def test_mesh_folder_natural_order(tmp_path):
    folder, frames = make_frame_folder(tmp_path / "frames", n_frames=12)
    (folder / "notes.txt").write_text("ignored")
    seq = load_mesh_folder(folder, fps=10.0)
    assert seq.n_frames == 12
    np.testing.assert_allclose(seq.frames, frames, atol=1e-6)  # frame_10 after frame_9, not after frame_1
    np.testing.assert_allclose(seq.times, np.arange(12) / 10.0, atol=1e-6)
    np.testing.assert_array_equal(seq.faces, BOX_F)
    assert seq.meta["frame_files"][2] == "frame_2.obj"


def test_mesh_folder_topology_mismatch_names_the_file(tmp_path):
    folder, frames = make_frame_folder(tmp_path / "frames", n_frames=4)
    write_obj(folder / "frame_2.obj", frames[2], BOX_F[::-1])  # same vertices, different faces
    with pytest.raises(InputFileError, match=r"frame_2\.obj: topology mismatch"):
        load_mesh_folder(folder)
    write_obj(folder / "frame_2.obj", frames[2][:7], BOX_F[:2])
    with pytest.raises(InputFileError, match=r"frame_2\.obj: topology mismatch"):
        load_mesh_folder(folder)


def test_empty_mesh_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileError, match="no mesh frames"):
        load_sequence(tmp_path / "empty")


def _anime_data():
    v0 = BODY.astype(np.float32)
    frames = np.stack([v0 + np.float32(0.05 * t) * v0 for t in range(5)])
    return v0, BOX_F, frames


def test_anime_round_values(tmp_path):
    v0, faces, frames = _anime_data()
    path = write_anime(tmp_path / "bear_run.anime", v0, faces, frames)
    seq = load_anime(path, fps=25.0)
    assert (seq.n_frames, seq.n_vertices, seq.n_faces) == (5, 8, 12)
    np.testing.assert_allclose(seq.frames, frames, atol=1e-6)  # offsets are relative to frame 0
    np.testing.assert_array_equal(seq.faces, faces)
    np.testing.assert_allclose(seq.times, np.arange(5) / 25.0)
    assert seq.category == "bear"
    seq2 = load_sequence(path)
    np.testing.assert_allclose(seq2.frames, frames, atol=1e-6)


def test_anime_bad_input(tmp_path):
    v0, faces, frames = _anime_data()
    trunc = write_anime(tmp_path / "t.anime", v0, faces, frames, truncate=7)
    with pytest.raises(InputFileError, match=r"t\.anime: truncated"):
        load_anime(trunc)
    (tmp_path / "e.anime").write_bytes(b"")
    with pytest.raises(InputFileError, match="empty"):
        load_anime(tmp_path / "e.anime")
    (tmp_path / "h.anime").write_bytes(b"\x01\x00")
    with pytest.raises(InputFileError, match="header"):
        load_anime(tmp_path / "h.anime")
    bad = faces.copy()
    bad[0, 0] = 99
    write_anime(tmp_path / "f.anime", v0, bad, frames)
    with pytest.raises(InputFileError, match="out of range"):
        load_anime(tmp_path / "f.anime")
    nan = frames.copy()
    nan[3, 2, 1] = np.nan
    write_anime(tmp_path / "n.anime", v0, faces, nan)
    with pytest.raises(InputFileError, match="frame 3 contains NaN"):
        load_anime(tmp_path / "n.anime")


def test_load_sequence_dispatch(tmp_path, tiny_sequence):
    path = tiny_sequence.save(tmp_path / "s.npz")
    seq = load_sequence(path)
    np.testing.assert_array_equal(seq.frames, tiny_sequence.frames)
    write_obj(tmp_path / "one.obj", BODY)
    single = load_sequence(tmp_path / "one.obj")
    assert single.n_frames == 1 and single.n_vertices == 8
    with pytest.raises(InputFileError, match="not found"):
        load_sequence(tmp_path / "nope.npz")
    (tmp_path / "x.bin").write_bytes(b"123")
    with pytest.raises(InputFileError, match="unsupported input"):
        load_sequence(tmp_path / "x.bin")


def test_gltf_with_escaping_buffer_uri_is_refused(tmp_path):
    import json

    from kinemesh.errors import UnsafePathError

    doc = {"asset": {"version": "2.0"}, "buffers": [{"uri": "../secret.bin", "byteLength": 4}]}
    (tmp_path / "evil.gltf").write_text(json.dumps(doc))
    with pytest.raises(UnsafePathError, match=r"evil\.gltf: buffers uri '\.\./secret\.bin' leaves"):
        load_mesh(tmp_path / "evil.gltf")
    box = trimesh.creation.box()
    box.export(tmp_path / "ok.gltf")  # trimesh writes an embedded (data:) buffer
    assert len(load_mesh(tmp_path / "ok.gltf").faces) == 12
