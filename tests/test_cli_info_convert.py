"""End-to-end: ``kinemesh info`` and ``kinemesh convert`` through kinemesh.cli.main."""

from __future__ import annotations


import numpy as np
import pytest

from data_fixtures import BODY, BOX_F, URDF, make_frame_folder, make_partnet_folder, write_anime, write_obj
from kinemesh.cli import main
from kinemesh.data.exporters import read_glb
from kinemesh.data.partnet import load_articulated
from kinemesh.data.sequence import KinematicSequence


def test_info_articulated_folder(tmp_path, capsys):
    folder = make_partnet_folder(tmp_path / "cab")
    assert main(["info", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "5 parts, 4 joints (4 movable)" in out
    assert "joint door_hinge: revolute link_3 -> link_0, axis [-0.0, 0.0, 1.0], origin [-1.0, -1.0, -0.0]" in out
    assert "[0.0, 90.0] deg" in out and "limits [-0.4000, -0.1000] m" in out


def test_info_mesh_sequence_anime(tmp_path, capsys, tiny_sequence):
    write_obj(tmp_path / "box.obj", BODY)
    assert main(["info", str(tmp_path / "box.obj")]) == 0
    out = capsys.readouterr().out
    assert "8 vertices, 12 faces" in out and "watertight True, connected components 1" in out
    tiny_sequence.save(tmp_path / "s.npz")
    assert main(["info", str(tmp_path / "s.npz")]) == 0
    assert "frames 4" in capsys.readouterr().out
    write_anime(tmp_path / "a.anime", BODY, BOX_F, np.stack([BODY, BODY + 1]))
    assert main(["info", str(tmp_path / "a.anime")]) == 0
    assert "frames 2" in capsys.readouterr().out


@pytest.mark.parametrize(
    "out_name,fmt",
    [("o.npz", "npz"), ("o.glb", "glb"), ("o.obj", "obj"), ("frames", "obj-seq"), ("o.anime", "anime")],
)
def test_convert_articulated(tmp_path, capsys, out_name, fmt):
    folder = make_partnet_folder(tmp_path / "cab")
    out = tmp_path / out_name
    assert main(["convert", str(folder), str(out), "--frames", "6", "--seed", "2"]) == 0
    printed = capsys.readouterr().out
    assert out.exists() and f"({fmt}:" in printed
    assert ("the rest frame" if fmt == "obj" else "6 frames") in printed  # a single .obj holds the rest pose
    if fmt == "npz":
        seq = KinematicSequence.load(out)
        assert seq.n_frames == 6 and len(seq.joints) == 4 and seq.kind == "articulated"
        assert seq.part_ids is not None and len(np.unique(seq.part_ids)) == 4
    elif fmt == "glb":
        doc, _ = read_glb(out)
        assert len(doc["meshes"][0]["primitives"][0]["targets"]) == 6
    elif fmt == "obj-seq":
        assert len(list(out.glob("*.obj"))) == 6


def test_convert_rest_obj_keeps_the_links_as_groups(tmp_path, capsys):
    """A URDF folder's rest OBJ carries its links as ``o`` groups (vertex ids unchanged), so a segmented
    object stays segmented through convert: simulate, sample and ik read the same parts back."""
    from kinemesh.data.meshes import read_face_parts, read_obj_geometry
    from kinemesh.geometry.segments import load_segmented

    folder = make_partnet_folder(tmp_path / "cab")
    out = tmp_path / "rest.obj"
    assert main(["convert", str(folder), str(out)]) == 0
    assert "4 parts as o groups" in capsys.readouterr().out
    v, f = read_obj_geometry(out)
    rv, rf, pid = load_articulated(folder).merged({})
    np.testing.assert_allclose(v, rv, atol=1e-6)
    np.testing.assert_array_equal(f, rf)
    face_parts, names, source = read_face_parts(out)
    assert source == "groups" and names == ["link_0", "link_1", "link_2", "link_3"]
    rank = np.unique(pid, return_inverse=True)[1].reshape(-1)  # link index among the links with geometry
    np.testing.assert_array_equal(face_parts, rank[rf[:, 0]])
    assert main(["info", str(out)]) == 0
    assert "parts 4 (groups): link_0 (" in capsys.readouterr().out
    a, b = load_segmented(out), load_segmented(folder)
    assert a.part_source == "groups"  # every working vertex in the part of the same name
    np.testing.assert_array_equal(np.array(a.part_names)[a.part_ids], np.array(b.part_names)[b.part_ids])


def test_convert_glb_keeps_the_links_as_part_ids(tmp_path):
    """An animated GLB of a URDF folder carries its part ids (``_PART_ID``): simulate, sample and ik read the
    links back as parts, vertex for vertex; a GLB without them is read by its nodes as before."""
    from kinemesh.data.exporters import PART_ATTRIBUTE
    from kinemesh.data.meshes import read_face_parts
    from kinemesh.geometry.segments import load_segmented

    folder = make_partnet_folder(tmp_path / "cab")
    out = tmp_path / "o.glb"
    assert main(["convert", str(folder), str(out), "--frames", "3"]) == 0
    doc, _ = read_glb(out)
    assert PART_ATTRIBUTE in doc["meshes"][0]["primitives"][0]["attributes"]
    face_parts, names, source = read_face_parts(out)
    assert source == "part ids" and names == ["link_0", "link_1", "link_2", "link_3"]
    a, b = load_segmented(out), load_segmented(folder)
    np.testing.assert_array_equal(np.array(a.part_names)[a.part_ids], np.array(b.part_names)[b.part_ids])
    np.testing.assert_allclose(np.asarray(a.mesh.vertices), np.asarray(b.mesh.vertices), atol=1e-6)


def test_convert_to_partnet_folder_and_back(tmp_path):
    folder = make_partnet_folder(tmp_path / "cab")
    assert main(["convert", str(folder), str(tmp_path / "copy"), "--format", "partnet"]) == 0
    a, b = load_articulated(folder), load_articulated(tmp_path / "copy")
    np.testing.assert_allclose(a.merged({"door_hinge": 1.0})[0], b.merged({"door_hinge": 1.0})[0], atol=1e-12)


def test_convert_frames_and_anime(tmp_path):
    folder, frames = make_frame_folder(tmp_path / "frames", n_frames=5)
    assert main(["convert", str(folder), str(tmp_path / "f.npz"), "--kind", "elastic"]) == 0
    seq = KinematicSequence.load(tmp_path / "f.npz")
    np.testing.assert_allclose(seq.frames, frames, atol=1e-6)
    assert seq.kind == "elastic"
    write_anime(tmp_path / "a.anime", BODY, BOX_F, frames)
    assert main(["convert", str(tmp_path / "a.anime"), str(tmp_path / "a.glb")]) == 0
    assert main(["convert", str(tmp_path / "a.anime"), str(tmp_path / "a.glb")]) == 1  # exists, no --force
    assert main(["convert", str(tmp_path / "a.anime"), str(tmp_path / "a.glb"), "--force"]) == 0


def test_simulate_a_folder_of_frames_says_it_is_a_sequence(tmp_path, capsys):
    """A folder of mesh frames given where an object is expected: the error names it a 4D sequence, and nothing
    is written."""
    folder, _ = make_frame_folder(tmp_path / "frames", n_frames=3)
    assert main(["simulate", str(folder), "--frames", "2", "--out", str(tmp_path / "s.glb")]) == 1
    err = capsys.readouterr().err
    assert "frames" in err and "4D sequence, not an object" in err and str(folder) in err
    assert not (tmp_path / "s.glb").exists()


def _bad_inputs(tmp_path):
    (tmp_path / "empty.obj").write_bytes(b"")
    (tmp_path / "nan.ply").write_text(
        "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
        "property float z\nelement face 1\nproperty list uchar int vertex_indices\n"
        "end_header\n0 0 nan\n1 0 0\n0 1 0\n3 0 1 2\n"
    )
    write_anime(tmp_path / "trunc.anime", BODY, BOX_F, np.stack([BODY, BODY]), truncate=5)
    frames, _ = make_frame_folder(tmp_path / "mismatch", n_frames=3)
    write_obj(frames / "frame_1.obj", BODY[:4], BOX_F[:2])
    escape = make_partnet_folder(
        tmp_path / "escape", URDF.replace("textured_objs/lid.obj", "../../outside.obj")
    )
    (tmp_path / "outside.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    unknown = make_partnet_folder(tmp_path / "unknown", URDF.replace('type="continuous"', 'type="spherical"'))
    (tmp_path / "corrupt.npz").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "empty.jsonl").write_bytes(b"")
    return [
        (tmp_path / "empty.obj", "empty.obj: file is empty"),
        (tmp_path / "nan.ply", "nan.ply: vertex 0 is not finite"),
        (tmp_path / "trunc.anime", "trunc.anime: truncated"),
        (frames, "frame_1.obj: topology mismatch"),
        (escape, "escapes the asset folder"),
        (unknown, "unknown type 'spherical'"),
        (tmp_path / "corrupt.npz", "corrupt.npz: not a readable .npz"),
        (tmp_path / "missing.npz", "missing.npz: file or folder not found"),
        (tmp_path / "empty.jsonl", "empty.jsonl:"),
    ]


@pytest.mark.parametrize("command", ["info", "convert"])
def test_bad_inputs_one_line_exit_1_nothing_written(tmp_path, capsys, command):
    for src, needle in _bad_inputs(tmp_path):
        before = sorted(p.name for p in (tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else []
        argv = (
            ["info", str(src)]
            if command == "info"
            else ["convert", str(src), str(tmp_path / "out" / "x.npz")]
        )
        assert main(argv) == 1, src
        err = capsys.readouterr().err.strip()
        assert needle in err, (needle, err)
        assert err.startswith(f"kinemesh {command}: error:") and "\n" not in err and "Traceback" not in err
        if command == "convert":
            after = (
                sorted(p.name for p in (tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else []
            )
            assert after == before == []
