"""Exporters: animated GLB (morph targets + weights animation), OBJ frame folders, NPZ, .anime."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from kinemesh.data.exporters import (
    Z_UP_TO_GLTF,
    accessor_array,
    export_anime,
    export_glb,
    export_npz,
    export_obj_sequence,
    read_glb,
)
from kinemesh.data.loaders import load_anime, load_mesh_folder
from kinemesh.data.meshes import load_mesh
from kinemesh.data.sequence import KinematicSequence


@pytest.fixture
def parted(tiny_sequence):
    seq = tiny_sequence
    seq.part_ids = (seq.rest_vertices[:, 2] > 0).astype(np.int32)
    seq.times = np.array([0.0, 0.1, 0.25, 0.5], dtype=np.float32)
    return seq


def test_glb_structure_and_morph_targets(parted, tmp_path):
    path = export_glb(parted, tmp_path / "anim.glb")
    doc, blob = read_glb(path)
    assert doc["asset"]["version"] == "2.0"
    prim = doc["meshes"][0]["primitives"][0]
    T, n = parted.n_frames, parted.n_vertices
    assert len(prim["targets"]) == T and len(doc["meshes"][0]["weights"]) == T
    rest = accessor_array(doc, blob, prim["attributes"]["POSITION"])
    np.testing.assert_allclose(rest, parted.rest_vertices @ Z_UP_TO_GLTF.T, atol=1e-6)
    for t in range(T):
        delta = accessor_array(doc, blob, prim["targets"][t]["POSITION"])
        np.testing.assert_allclose(rest + delta, parted.frames[t] @ Z_UP_TO_GLTF.T, atol=1e-6)
        acc = doc["accessors"][prim["targets"][t]["POSITION"]]
        np.testing.assert_allclose(acc["min"], delta.min(0), atol=1e-6)  # POSITION accessors need min/max
    faces = accessor_array(doc, blob, prim["indices"]).reshape(-1, 3)
    np.testing.assert_array_equal(faces, parted.faces)
    colours = accessor_array(doc, blob, prim["attributes"]["COLOR_0"])
    assert colours.shape == (n, 4) and len({tuple(c) for c in colours}) == 2  # two parts, two colours
    anim = doc["animations"][0]
    assert anim["channels"][0]["target"] == {"node": 0, "path": "weights"}
    sampler = anim["samplers"][anim["channels"][0]["sampler"]]
    times = accessor_array(doc, blob, sampler["input"])
    np.testing.assert_allclose(times, [0.0, 0.1, 0.25, 0.5], atol=1e-7)
    weights = accessor_array(doc, blob, sampler["output"]).reshape(T, T)
    np.testing.assert_array_equal(weights, np.eye(T))  # keyframe t shows exactly frame t
    for view in doc["bufferViews"]:
        assert view["byteOffset"] % 4 == 0
    assert path.stat().st_size % 4 == 0


def test_glb_reads_back_with_trimesh(parted, tmp_path):
    path = export_glb(parted, tmp_path / "anim.glb")
    scene = trimesh.load(path)
    (mesh,) = scene.geometry.values()
    assert mesh.metadata["targetNames"] == [f"frame_{t:04d}" for t in range(4)]  # trimesh sees the targets
    assert len(mesh.faces) == parted.n_faces
    # our loader turns glTF's Y up back into Z up: the rest shape comes back in place
    back = load_mesh(path, process=False)
    np.testing.assert_allclose(back.vertices, parted.rest_vertices, atol=1e-6)


def test_obj_sequence_round_trip(parted, tmp_path):
    out = export_obj_sequence(parted, tmp_path / "objs")
    assert sorted(p.name for p in out.glob("*.obj"))[:2] == ["frame_0000.obj", "frame_0001.obj"]
    seq = load_mesh_folder(out)
    np.testing.assert_allclose(seq.frames, parted.frames, atol=1e-6)
    np.testing.assert_array_equal(seq.faces, parted.faces)
    np.testing.assert_allclose(seq.times, parted.times, atol=1e-7)  # restored from sequence.json
    assert seq.meta["kind"] == parted.meta["kind"] and seq.category == parted.category


def test_npz_and_anime_round_trip(parted, tmp_path):
    seq = KinematicSequence.load(export_npz(parted, tmp_path / "s.npz"))
    np.testing.assert_array_equal(seq.part_ids, parted.part_ids)
    np.testing.assert_array_equal(seq.frames, parted.frames)
    back = load_anime(export_anime(parted, tmp_path / "s.anime"))
    np.testing.assert_allclose(back.frames, parted.frames, atol=1e-6)


def test_exporters_leave_nothing_on_invalid_input(parted, tmp_path):
    parted.frames[2, 0, 0] = np.nan
    for fn, name in (
        (export_glb, "a.glb"),
        (export_npz, "a.npz"),
        (export_obj_sequence, "objs"),
        (export_anime, "a.anime"),
    ):
        with pytest.raises(Exception, match="NaN"):
            fn(parted, tmp_path / name)
    assert list(tmp_path.iterdir()) == []
