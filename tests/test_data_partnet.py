"""PartNet-Mobility / URDF loading into the Z-up kinemesh frame, and the PartNet-style writer."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from data_fixtures import BODY, DOOR, DRAWER, LID, URDF, make_partnet_folder
from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.data.partnet import Y_UP_TO_Z_UP, load_articulated, write_partnet_folder
from kinemesh.errors import InputFileError, UnsafePathError

HALF_PI = np.pi / 2


def z_up(p):
    """File (Y up) -> the URDF's world frame through PartNet's base joint: (x, y, z) -> (-z, -x, y)."""
    p = np.asarray(p, float)
    return np.stack([-p[..., 2], -p[..., 0], p[..., 1]], axis=-1)


@pytest.fixture
def tiny_partnet(tmp_path) -> Path:
    return make_partnet_folder(tmp_path / "tiny_cabinet")


def test_conversion_matrix_is_plus_90_about_x():
    assert np.allclose(Y_UP_TO_Z_UP @ [0, 1, 0], [0, 0, 1])  # file up -> kinemesh up
    assert np.allclose(Y_UP_TO_Z_UP @ [1, 2, 3], [1, -3, 2])
    assert np.isclose(np.linalg.det(Y_UP_TO_Z_UP), 1.0)


def test_loads_structure_labels_and_meta(tiny_partnet):
    obj = load_articulated(tiny_partnet)
    assert obj.category == "TinyCabinet"
    assert obj.root == "link_3"  # the geometry-less 'base' and its fixed joint are dropped
    assert sorted(p.name for p in obj.parts) == ["link_0", "link_1", "link_2", "link_2_helper", "link_3"]
    labels = {p.name: p.label for p in obj.parts}
    assert labels == {
        "link_0": "rotation_door",
        "link_1": "drawer",
        "link_2": "lid",
        "link_2_helper": "",
        "link_3": "furniture_body",
    }
    types = {j.name: j.type for j in obj.joints}
    assert types == {
        "door_hinge": "revolute",
        "drawer_slide": "prismatic",
        "lid_spin": "continuous",
        "lid_lift": "prismatic",
    }
    assert len(obj.part("link_2_helper").vertices) == 0
    # The json agrees with the URDF (the drawer uses the flipped-axis convention): no warnings.
    assert "load_warnings" not in obj.meta or not any("mobility_v2" in w for w in obj.meta["load_warnings"])


def test_joint_axes_origins_limits_after_y_up_conversion(tiny_partnet):
    obj = load_articulated(tiny_partnet)
    j = {x.name: x for x in obj.joints}
    np.testing.assert_allclose(j["door_hinge"].axis, [0, 0, 1], atol=1e-12)  # (0, 2, 0) normalized, then Z up
    np.testing.assert_allclose(j["door_hinge"].origin, [-1, -1, 0], atol=1e-12)
    assert j["door_hinge"].limits == pytest.approx((0.0, HALF_PI))
    np.testing.assert_allclose(j["drawer_slide"].axis, [-1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(j["drawer_slide"].origin, [-0.5, -0.5, 0.5], atol=1e-12)
    assert j["drawer_slide"].limits == pytest.approx((-0.4, -0.1))  # negative range kept
    np.testing.assert_allclose(j["lid_lift"].axis, [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(j["lid_lift"].origin, [-0.5, -0.5, 1.0], atol=1e-12)
    np.testing.assert_allclose(j["lid_spin"].axis, [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(j["lid_spin"].origin, [-0.5, -0.5, 1.0], atol=1e-12)
    assert j["lid_spin"].limits is None
    assert j["lid_spin"].parent == "link_2_helper" and j["lid_lift"].child == "link_2_helper"


def test_rest_vertices_and_visual_origins(tiny_partnet):
    obj = load_articulated(tiny_partnet)
    np.testing.assert_allclose(obj.part("link_3").vertices, z_up(BODY), atol=1e-12)
    np.testing.assert_allclose(obj.part("link_1").vertices, z_up(DRAWER), atol=1e-12)
    np.testing.assert_allclose(obj.part("link_2").vertices, z_up(LID), atol=1e-12)
    door = obj.part("link_0").vertices
    assert len(door) == 16  # two visuals: slab + handle
    np.testing.assert_allclose(door[:8], z_up(DOOR), atol=1e-12)
    # handle corner (0.1, 0.02, 0.02): yaw pi/2 -> (-0.02, 0.1, 0.02), + visual xyz + link origin (1, 0, 1)
    np.testing.assert_allclose(door[8 + 6], z_up([0.78, 0.6, 1.07]), atol=1e-12)


def test_vertices_at_a_known_configuration(tiny_partnet):
    obj = load_articulated(tiny_partnet)
    posed = obj.posed_parts({"door_hinge": HALF_PI, "drawer_slide": -0.4, "lid_lift": 0.1, "lid_spin": np.pi})
    rest = {p.name: p.vertices for p in obj.parts}
    # door corner at world (-1, 0, 0) swings +90 deg about z through (-1, -1, 0) -> (-2, -1, 0)
    i = int(np.argmin(np.linalg.norm(rest["link_0"] - [-1, 0, 0], axis=1)))
    np.testing.assert_allclose(rest["link_0"][i], [-1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(posed["link_0"][i], [-2, -1, 0], atol=1e-12)
    # drawer: -0.4 m along (-1, 0, 0) = +0.4 in x
    np.testing.assert_allclose(posed["link_1"], rest["link_1"] + [0.4, 0, 0], atol=1e-12)
    # lid: up 0.1 and half a turn about the vertical line through (-0.5, -0.5)
    lid = rest["link_2"]
    expected = np.stack([-1.0 - lid[:, 0], -1.0 - lid[:, 1], lid[:, 2] + 0.1], axis=1)
    np.testing.assert_allclose(posed["link_2"], expected, atol=1e-12)
    np.testing.assert_allclose(posed["link_3"], rest["link_3"], atol=0)


def test_urdf_file_path_and_sequence(tiny_partnet):
    from kinemesh.data.loaders import load_sequence

    obj = load_articulated(tiny_partnet / "mobility.urdf")
    assert obj.meta["file_up"] == "z"
    seq = load_sequence(tiny_partnet, n_frames=5, seed=3)
    assert seq.n_frames == 5 and seq.kind == "articulated"
    np.testing.assert_allclose(seq.frames[0], seq.rest_vertices)  # frame 0 = rest pose
    names = {j["name"]: j for j in seq.joints}
    np.testing.assert_allclose(names["drawer_slide"]["axis"], [-1, 0, 0], atol=1e-7)
    for cfg in seq.meta["joint_values"][1:]:
        assert -0.4 <= cfg["drawer_slide"] <= -0.1 and 0 <= cfg["door_hinge"] <= HALF_PI
    again = load_sequence(tiny_partnet, n_frames=5, seed=3)
    np.testing.assert_array_equal(seq.frames, again.frames)  # deterministic by seed


def test_junk_in_mobility_json_warns(tmp_path, caplog):
    import json

    folder = make_partnet_folder(tmp_path / "junkjson")
    entries = json.loads((folder / "mobility_v2.json").read_text())
    entries[0]["jointData"]["limit"]["b"] = "ninety"
    entries[1]["joint"] = "wobble"
    (folder / "mobility_v2.json").write_text(json.dumps(entries))
    with caplog.at_level(logging.WARNING):
        obj = load_articulated(folder)
    assert "'ninety' is not numeric" in caplog.text and "unknown joint kind 'wobble'" in caplog.text
    assert {j.name: j.limits for j in obj.joints}["door_hinge"] == pytest.approx((0.0, HALF_PI))  # URDF wins


def test_corrupt_auxiliary_json_is_ignored_with_a_warning(tmp_path, caplog):
    folder = make_partnet_folder(tmp_path / "badjson")
    (folder / "mobility_v2.json").write_text("[{oops")
    (folder / "meta.json").write_text("")
    with caplog.at_level(logging.WARNING):
        obj = load_articulated(folder)
    assert (
        "mobility_v2.json is not valid JSON" in caplog.text and "meta.json is not valid JSON" in caplog.text
    )
    assert obj.meta["file_up"] == "z" and len(obj.movable_joints) == 4  # the URDF alone defines the object


@pytest.mark.parametrize("old,new,junk", [
    ('<origin xyz="0.5 0.5 0.5"/>', '<origin xyz="0.5 0.5 oops"/>', "oops"),
    ('<limit lower="0.0" upper="1.5707963267948966"/>', '<limit lower="abc" upper="1"/>', "abc"),
])
def test_junk_numbers_are_a_one_line_error(tmp_path, old, new, junk):
    folder = make_partnet_folder(tmp_path / "junk", URDF.replace(old, new))
    with pytest.raises(InputFileError, match=junk) as info:
        load_articulated(folder)
    assert "mobility.urdf" in str(info.value) and "\n" not in str(info.value)


def test_non_finite_limits_fall_back_to_mobility_json(tmp_path, caplog):
    urdf = URDF.replace('<limit lower="0.0" upper="1.5707963267948966"/>', '<limit lower="0" upper="nan"/>')
    with caplog.at_level(logging.WARNING):
        obj = load_articulated(make_partnet_folder(tmp_path / "nan", urdf))
    assert "not finite" in caplog.text
    assert {j.name: j.limits for j in obj.joints}["door_hinge"] == pytest.approx((0.0, HALF_PI))


@pytest.mark.parametrize(
    "old,new,error,needle",
    [
        ('filename="textured_objs/lid.obj"', 'filename="../outside.obj"', UnsafePathError, "escapes"),
        ('filename="textured_objs/lid.obj"', 'filename="/etc/hostname"', UnsafePathError, "absolute"),
        (
            'filename="textured_objs/lid.obj"',
            'filename="textured_objs/none.obj"',
            InputFileError,
            "not found",
        ),
        ('type="continuous"', 'type="ball"', InputFileError, "unknown type 'ball'"),
        ('type="continuous"', 'type="floating"', InputFileError, "does not support"),
        ('<parent link="link_2_helper"/>', '<parent link="nowhere"/>', InputFileError, "unknown link"),
        ("</robot>", "<oops></robot", InputFileError, "not valid XML"),
    ],
)
def test_bad_urdf(tmp_path, old, new, error, needle):
    (tmp_path / "outside.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    urdf = URDF.replace(old, new, 1)
    assert urdf != URDF
    folder = make_partnet_folder(tmp_path / "bad", urdf)
    with pytest.raises(error) as info:
        load_articulated(folder)
    msg = str(info.value)
    assert needle in msg and "mobility.urdf" in msg and "\n" not in msg


def test_corrupt_part_mesh_names_the_mesh(tmp_path):
    folder = make_partnet_folder(tmp_path / "corrupt")
    (folder / "textured_objs" / "drawer.obj").write_text("v 0 0 nan\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    with pytest.raises(InputFileError, match=r"drawer\.obj.*not finite"):
        load_articulated(folder)
    (folder / "textured_objs" / "drawer.obj").write_text("")
    with pytest.raises(InputFileError, match=r"drawer\.obj: file is empty"):
        load_articulated(folder)


def test_generic_urdf_is_z_up_with_primitives(tmp_path):
    (tmp_path / "arm.urdf").write_text("""<robot name="arm">
      <link name="world"/>
      <link name="upper"><visual><origin xyz="0 0 0.5"/>
        <geometry><box size="0.1 0.1 1"/></geometry></visual></link>
      <link name="lower"><visual><geometry><cylinder radius="0.05" length="0.4"/></geometry></visual></link>
      <joint name="fix" type="fixed"><parent link="world"/><child link="upper"/></joint>
      <joint name="elbow" type="revolute"><origin xyz="0 0 1" rpy="1.5707963267948966 0 0"/>
        <axis xyz="0 0 1"/><parent link="upper"/><child link="lower"/><limit lower="-1" upper="1"/></joint>
    </robot>""")
    obj = load_articulated(tmp_path / "arm.urdf")
    assert obj.meta["file_up"] == "z" and obj.root == "upper"
    j = obj.joints[0]
    np.testing.assert_allclose(j.origin, [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(j.axis, [0, -1, 0], atol=1e-12)  # local z after roll +90 deg about x
    lo, hi = obj.part("upper").vertices.min(0), obj.part("upper").vertices.max(0)
    np.testing.assert_allclose([lo[2], hi[2]], [0, 1], atol=1e-12)


def _assert_same_object(a: ArticulatedObject, b: ArticulatedObject):
    assert [p.name for p in a.parts] == [p.name for p in b.parts]
    for pa, pb in zip(a.parts, b.parts):
        assert pa.label == pb.label
        np.testing.assert_allclose(pb.vertices, pa.vertices, atol=1e-12)
        np.testing.assert_array_equal(pb.faces, pa.faces)
    ja, jb = {j.name: j for j in a.joints}, {j.name: j for j in b.joints}
    assert ja.keys() == jb.keys()
    for n in ja:
        assert (ja[n].type, ja[n].parent, ja[n].child) == (jb[n].type, jb[n].parent, jb[n].child)
        np.testing.assert_allclose(jb[n].axis, ja[n].axis, atol=1e-12)
        np.testing.assert_allclose(jb[n].origin, ja[n].origin, atol=1e-12)
        if ja[n].limits is None:
            assert jb[n].limits is None
        else:  # written widened to contain the rest pose
            np.testing.assert_allclose(jb[n].limits, ja[n].rest_limits(), atol=1e-12)
    cfg = {
        "door_hinge": 0.7,
        "drawer_slide": -0.2,
        "lid_lift": 0.05,
        "lid_spin": 2.0,
        "hinge": 0.3,
        "slide": 0.1,
        "spin": -1.0,
        "lift": 0.02,
    }
    np.testing.assert_allclose(b.merged(cfg)[0], a.merged(cfg)[0], atol=1e-12)


def test_write_partnet_folder_round_trip_of_loaded_object(tiny_partnet, tmp_path):
    obj = load_articulated(tiny_partnet)
    out = write_partnet_folder(obj, tmp_path / "written")
    assert (out / "mobility.urdf").is_file() and (out / "mobility_v2.json").is_file()
    assert (out / "semantics.txt").read_text().count("\n") == 4
    back = load_articulated(out)
    _assert_same_object(obj, back)
    assert back.category == obj.category and back.name == obj.name
    assert "load_warnings" not in back.meta  # json and URDF agree


def test_write_partnet_folder_round_trip_of_synthetic_object(tmp_path):
    import trimesh

    def mesh(center, extents):
        m = trimesh.creation.box(extents=extents)
        return m.vertices + center, m.faces

    body_v, body_f = mesh([0, 0, 0.5], [1, 0.6, 1])
    door_v, door_f = mesh([0.0, -0.32, 0.5], [1, 0.04, 0.9])
    top_v, top_f = mesh([0, 0, 1.1], [0.3, 0.3, 0.2])
    tilt = np.array([0.3, -0.2, 0.9])
    obj = ArticulatedObject(
        parts=[
            Part("body", body_v, body_f, "body"),
            Part("door", door_v, door_f, "door"),
            Part("helper", np.zeros((0, 3)), np.zeros((0, 3)), ""),
            Part("cap", top_v, top_f, "cap lid"),
        ],
        joints=[
            Joint("hinge", "revolute", "body", "door", tilt, [0.5, -0.32, 0.0], (-0.5, 2.0)),
            Joint("lift", "prismatic", "body", "helper", [0, 0, 1], [0, 0, 1.0], (0.0, 0.05)),
            Joint("spin", "continuous", "helper", "cap", [0, 0, 1], [0, 0, 1.0]),
        ],
        category="Cabinet",
        name="synthetic one",
    )
    out = write_partnet_folder(obj, tmp_path / "synthetic")
    back = load_articulated(out)
    obj.parts[3].label = "cap_lid"  # spaces in labels become underscores in semantics.txt
    _assert_same_object(obj, back)
    import json

    entries = json.loads((out / "mobility_v2.json").read_text())
    cap = next(e for e in entries if e["link"] == "cap")
    assert cap["joint"] == "slider" and cap["jointData"]["limit"]["rotates"] is True
    door = next(e for e in entries if e["link"] == "door")
    assert door["jointData"]["limit"]["b"] == pytest.approx(np.degrees(2.0))


def test_round_trip_keeps_coincident_vertices(tmp_path):
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0], [1, 1, 0]], float)  # vertex 3 repeats vertex 1
    f = np.array([[0, 1, 2], [3, 4, 2]])
    obj = ArticulatedObject(
        [Part("a", v, f), Part("b", v + [0, 0, 1], f)],
        [Joint("j", "revolute", "a", "b", [0, 0, 1], [0, 0, 0], (0, 1))],
    )
    back = load_articulated(write_partnet_folder(obj, tmp_path / "dup"))
    _assert_same_object(obj, back)
    merged = load_articulated(tmp_path / "dup", merge_vertices=True)
    assert len(merged.part("a").vertices) == 4
    np.testing.assert_array_equal(merged.part("a").faces, [[0, 1, 2], [1, 3, 2]])


def test_write_is_atomic_on_error(tiny_partnet, tmp_path, monkeypatch):
    import kinemesh.data.exporters as exporters

    obj = load_articulated(tiny_partnet)
    calls = []

    def failing(v, f, path, digits=9):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("v 0 0 0\n")

    monkeypatch.setattr(exporters, "export_obj", failing)
    with pytest.raises(OSError):
        write_partnet_folder(obj, tmp_path / "never")
    assert len(calls) == 2
    assert not (tmp_path / "never").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".never")]


# --------------------------------------------------------------------------- the 12 real objects
REAL_TABLE = {
    "sapien__45940": ("StorageFurniture", {"revolute": 2, "prismatic": 1}),
    "sapien__40147": ("StorageFurniture", {"revolute": 1, "prismatic": 1}),
    "gapartnet__45780": ("StorageFurniture", {"revolute": 2}),
    "genesis__3763": ("Bottle", {"prismatic": 1, "continuous": 1}),
    "kitchenmodels__7236": ("Microwave", {"revolute": 1}),
    "kitchenmodels__11178": ("Refrigerator", {"revolute": 2}),
    "kitchenmodels__11622": ("Dishwasher", {"revolute": 1}),
    "kitchenmodels__8867": ("Door", {"revolute": 2}),
    "kitchenmodels__45213": ("StorageFurniture", {"revolute": 1, "prismatic": 2}),
    "kitchenmodels__100154": ("Box", {"revolute": 4}),
    "kitchenmodels__103104": ("Stapler", {"revolute": 2}),
    "kitchenmodels__26608": ("Table", {"prismatic": 8}),
}


def _subtree(obj, part):
    out, stack = {part}, [part]
    while stack:
        name = stack.pop()
        for j in obj.joints:
            if j.parent == name:
                out.add(j.child)
                stack.append(j.child)
    return out


@pytest.mark.real
@pytest.mark.parametrize("folder", sorted(REAL_TABLE))
def test_real_objects(real_objects_dir, folder):
    from collections import Counter

    category, movable = REAL_TABLE[folder]
    obj = load_articulated(real_objects_dir / folder)
    assert obj.category == category
    assert dict(Counter(j.type for j in obj.movable_joints)) == movable
    rest = obj.posed_parts()
    v = np.concatenate(list(rest.values()))
    assert len(v) > 100 and np.isfinite(v).all()
    for j in obj.movable_joints:
        assert np.linalg.norm(j.axis) == pytest.approx(1.0, abs=1e-9)
        if j.limits is not None:
            lo, hi = j.limits
            value = hi if abs(hi) >= abs(lo) else lo
        else:
            value = 1.0
        posed = obj.posed_parts({j.name: value})
        moved = _subtree(obj, j.child)
        for name in rest:
            shift = np.abs(posed[name] - rest[name]).max() if len(rest[name]) else 0.0
            if name in moved:
                if len(rest[name]):
                    assert shift > 1e-3, (j.name, name)
            else:
                assert shift == 0.0, (j.name, name)
    # Z up: doors of furniture/appliances hinge about vertical axes, drawers slide horizontally,
    # the bottle lid screws along the vertical.
    if category in ("StorageFurniture", "Microwave", "Refrigerator", "Table", "Bottle"):
        for j in obj.movable_joints:
            vertical = abs(j.axis[2]) > 0.99
            assert vertical == (j.type != "prismatic" or category == "Bottle"), (j.name, j.axis)


def _yourdfpy_agreement(urdf_path, obj, cfg) -> tuple[float, float]:
    """Max difference between our part transforms and yourdfpy's forward kinematics (as rest-frame motions),
    and the largest motion yourdfpy applied (so the comparison cannot pass vacuously)."""
    import yourdfpy

    u = yourdfpy.URDF.load(
        str(urdf_path),
        build_scene_graph=True,
        load_meshes=False,
        build_collision_scene_graph=False,
        load_collision_meshes=False,
    )
    T0 = {link: u.get_transform(frame_to=link, frame_from=u.base_link) for link in u.link_map}
    u.update_cfg(cfg)
    T1 = {link: u.get_transform(frame_to=link, frame_from=u.base_link) for link in u.link_map}
    W = np.eye(4)  # our frame is the URDF's world frame
    ours = obj.part_transforms(cfg)
    err = max(np.abs(W @ T1[n] @ np.linalg.inv(T0[n]) @ np.linalg.inv(W) - ours[n]).max() for n in ours)
    moved = max(np.abs(T1[n] - T0[n]).max() for n in ours)
    return err, moved


def test_forward_kinematics_agrees_with_yourdfpy(tiny_partnet):
    obj = load_articulated(tiny_partnet)
    cfg = {"door_hinge": 1.1, "drawer_slide": -0.3, "lid_lift": 0.07, "lid_spin": -2.5}
    err, moved = _yourdfpy_agreement(tiny_partnet / "mobility.urdf", obj, cfg)
    assert moved > 0.05 and err < 1e-12


@pytest.mark.real
@pytest.mark.parametrize("folder", sorted(REAL_TABLE))
def test_real_objects_agree_with_yourdfpy(real_objects_dir, folder):
    obj = load_articulated(real_objects_dir / folder)
    # yourdfpy does not normalize prismatic axes (URDF requires unit axes); we do, so skip that quirk.
    from kinemesh.data.urdf import read_urdf

    raw = {j.name: j for j in read_urdf(real_objects_dir / folder / "mobility.urdf").joints}
    cfg = {}
    for j, s in zip(obj.movable_joints, np.linspace(0.2, 0.9, len(obj.movable_joints))):
        if j.type == "prismatic" and abs(np.linalg.norm(raw[j.name].axis) - 1) > 1e-6:
            continue
        lo, hi = j.limits if j.limits is not None else (0.0, 1.0)
        cfg[j.name] = lo + s * (hi - lo)
    err, moved = _yourdfpy_agreement(real_objects_dir / folder / "mobility.urdf", obj, cfg)
    assert moved > 1e-3 and err < 1e-9


def test_vertex_budget_decimates_parts_with_warning(tmp_path, caplog):
    (tmp_path / "ball.urdf").write_text("""<robot name="ball">
      <link name="stand"><visual><geometry><box size="1 1 0.1"/></geometry></visual></link>
      <link name="ball"><visual><geometry><sphere radius="0.3"/></geometry></visual></link>
      <joint name="spin" type="continuous"><origin xyz="0 0 0.5"/><axis xyz="0 0 1"/>
        <parent link="stand"/><child link="ball"/></joint>
    </robot>""")
    full = load_articulated(tmp_path / "ball.urdf", max_vertices=None)
    assert len(full.part("ball").vertices) == 162
    with caplog.at_level(logging.WARNING):
        small = load_articulated(tmp_path / "ball.urdf", max_vertices=100)
    n = sum(len(p.vertices) for p in small.parts)
    assert n <= 100 and len(small.part("stand").vertices) == 8
    assert "above the budget of 100" in caplog.text and "ball.urdf" in caplog.text
    radius = np.linalg.norm(small.part("ball").vertices - [0, 0, 0.5], axis=1)
    np.testing.assert_allclose(radius, 0.3, atol=0.03)


def test_sweep_motion_reaches_the_limits(tiny_partnet):
    from kinemesh.data.loaders import load_sequence

    seq = load_sequence(tiny_partnet, n_frames=4, motion="sweep")
    last = seq.meta["joint_values"][-1]
    assert last["door_hinge"] == pytest.approx(HALF_PI) and last["drawer_slide"] == pytest.approx(-0.1)
    assert last["lid_spin"] == pytest.approx(2 * np.pi)
    first = seq.meta["joint_values"][0]
    assert all(v == 0.0 for v in first.values())


def test_package_urls_resolve_inside_the_ros_package(tmp_path):
    pkg = tmp_path / "my_robot"
    (pkg / "urdf").mkdir(parents=True)
    (pkg / "meshes").mkdir()
    (pkg / "package.xml").write_text("<package><name>my_robot</name></package>")
    (pkg / "meshes" / "tri.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    body = (
        '<robot name="r"><link name="a"><visual><geometry><mesh filename="{}"/></geometry></visual>'
        "</link></robot>"
    )
    (pkg / "urdf" / "r.urdf").write_text(body.format("package://my_robot/meshes/tri.obj"))
    obj = load_articulated(pkg / "urdf" / "r.urdf")
    np.testing.assert_allclose(obj.part("a").vertices, [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    (tmp_path / "secret.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    (pkg / "urdf" / "r.urdf").write_text(body.format("package://my_robot/../secret.obj"))
    with pytest.raises(UnsafePathError, match="escapes"):
        load_articulated(pkg / "urdf" / "r.urdf")
    # without package.xml the ancestor is not a package: only the URDF's own folder is searched
    (pkg / "package.xml").unlink()
    (pkg / "urdf" / "r.urdf").write_text(body.format("package://my_robot/meshes/tri.obj"))
    with pytest.raises(InputFileError, match="not found"):
        load_articulated(pkg / "urdf" / "r.urdf")


def _assert_same_frame_as_yourdfpy(urdf_path: Path) -> None:
    """Our rest vertices and joint axes/origins equal those of yourdfpy's scene (world frame) to 1e-6."""
    import yourdfpy
    from scipy.spatial import cKDTree

    obj = load_articulated(urdf_path, max_vertices=None, merge_vertices=False)
    u = yourdfpy.URDF.load(str(urdf_path), build_scene_graph=True, load_meshes=True)
    for part in obj.parts:
        if not len(part.vertices):
            continue
        theirs = []
        for n in (n for n in u.scene.graph.nodes_geometry if _link_of(u, n) == part.name):
            T, geom = u.scene.graph.get(n)
            theirs.append(np.asarray(u.scene.geometry[geom].vertices) @ T[:3, :3].T + T[:3, 3])
        theirs = np.concatenate(theirs)
        d1 = cKDTree(theirs).query(part.vertices)[0].max()
        d2 = cKDTree(part.vertices).query(theirs)[0].max()
        assert max(d1, d2) < 1e-6, (urdf_path, part.name, d1, d2)
    for j in obj.joints:
        uj = u.joint_map[j.name]
        T = u.get_transform(frame_to=uj.parent, frame_from=u.base_link) @ uj.origin
        np.testing.assert_allclose(j.origin, T[:3, 3], atol=1e-6)
        if j.movable:
            a = T[:3, :3] @ uj.axis
            np.testing.assert_allclose(j.axis, a / np.linalg.norm(a), atol=1e-6)


def _link_of(u, node: str) -> str:
    """The link a yourdfpy scene geometry node hangs from."""
    parents = u.scene.graph.transforms.parents
    while node in parents and node not in u.link_map:
        node = parents[node]
    return node


def test_frame_equals_yourdfpy_tiny(tmp_path):
    """A tiny URDF whose base joint has roll, pitch and yaw (the yaw used to be dropped)."""
    folder = make_partnet_folder(tmp_path / "yawed", URDF.replace(
        'rpy="1.570796326794897 0 -1.570796326794897"', 'rpy="1.2 0.3 -0.7"'))
    _assert_same_frame_as_yourdfpy(folder / "mobility.urdf")


@pytest.mark.real
@pytest.mark.parametrize("folder", sorted(REAL_TABLE))
def test_real_objects_frame_equals_yourdfpy(real_objects_dir, folder):
    _assert_same_frame_as_yourdfpy(real_objects_dir / folder / "mobility.urdf")
