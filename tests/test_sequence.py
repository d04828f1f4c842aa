import json

import numpy as np
import pytest

from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import InputFileError


def test_round_trip_exact(tmp_path, tiny_sequence):
    path = tiny_sequence.save(tmp_path / "s.npz")
    back = KinematicSequence.load(path)
    np.testing.assert_array_equal(back.frames, tiny_sequence.frames)
    np.testing.assert_array_equal(back.faces, tiny_sequence.faces)
    assert back.frames.dtype == np.float32 and back.faces.dtype == np.int32
    assert back.meta["units"] == "m" and back.meta["up"] == "z" and back.meta["kind"] == "elastic"
    assert not list(tmp_path.glob(".*tmp*")), "temporary file left behind"


def _write(path, **arrays):
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda a: a.update(frames=a["frames"][:, :-1]), "topology mismatch"),
        (lambda a: a["frames"].__setitem__((1, 0, 0), np.nan), "NaN"),
        (lambda a: a.update(frames=a["frames"][:0], times=a["times"][:0]), "empty"),
        (lambda a: a.update(faces=a["faces"] + 100), "indices"),
        (lambda a: a.update(meta=np.array("{not json")), "not valid JSON"),
        (lambda a: a.pop("times"), "'times' is missing"),
    ],
)
def test_validation_names_file_and_field(tmp_path, tiny_sequence, mutate, message):
    arrays = dict(
        rest_vertices=tiny_sequence.rest_vertices,
        faces=tiny_sequence.faces,
        frames=tiny_sequence.frames.copy(),
        times=tiny_sequence.times,
        meta=np.array(json.dumps(tiny_sequence.meta)),
    )
    mutate(arrays)
    path = tmp_path / "bad.npz"
    _write(path, **arrays)
    with pytest.raises(InputFileError) as err:
        KinematicSequence.load(path)
    assert "bad.npz" in str(err.value) and message in str(err.value)


def test_truncated_and_empty_files(tmp_path, tiny_sequence):
    good = tiny_sequence.save(tmp_path / "good.npz")
    trunc = tmp_path / "trunc.npz"
    trunc.write_bytes(good.read_bytes()[:100])
    with pytest.raises(InputFileError, match="trunc.npz"):
        KinematicSequence.load(trunc)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(InputFileError, match="empty"):
        KinematicSequence.load(empty)


def test_save_refuses_invalid_and_writes_nothing(tmp_path, tiny_sequence):
    tiny_sequence.frames[2, 3, 1] = np.inf
    with pytest.raises(InputFileError):
        tiny_sequence.save(tmp_path / "x.npz")
    assert list(tmp_path.iterdir()) == []


def test_joint_validation(tmp_path, tiny_sequence):
    tiny_sequence.meta["joints"] = [
        {"name": "j", "type": "hinge", "parent": "a", "child": "b", "axis": [0, 0, 1], "origin": [0, 0, 0]}
    ]
    with pytest.raises(InputFileError, match="unknown type 'hinge'"):
        tiny_sequence.validate("seq.npz")


def test_articulated_forward_kinematics_chain():
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part

    cube = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)
    tri = np.array([[0, 1, 2]])
    obj = ArticulatedObject(
        parts=[Part("base", cube, tri), Part("arm", cube + [1, 0, 0], tri), Part("tip", cube + [2, 0, 0], tri)],
        joints=[
            Joint("j1", "revolute", "base", "arm", [0, 0, 2], [1, 0, 0], (-3, 3)),
            Joint("j2", "prismatic", "arm", "tip", [1, 0, 0], [2, 0, 0], (0, 1)),
        ],
    )
    posed = obj.posed_parts({"j1": np.pi / 2, "j2": 0.5})
    # arm rotated 90 deg about z through (1,0,0): (2,0,0) -> (1,1,0)
    np.testing.assert_allclose(posed["arm"][1], [1, 1, 0], atol=1e-12)
    # tip slides 0.5 along the arm's (rotated) x axis, which now points along +y
    np.testing.assert_allclose(posed["tip"][0], [1, 1.5, 0], atol=1e-12)
    seq = obj.to_sequence([{}, {"j1": 0.3}])
    assert seq.validate().n_frames == 2 and len(seq.meta["joints"]) == 2
