"""Files other tools take as they are: hostile names stay data, exported joints start at rest inside their
limits, USD read back with pxr."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import trimesh

from kinemesh.atomic import safe_names
from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.errors import KinemeshError

INJECTION = 'door"/><x a="'
HOSTILE = ["../../../../tmp/kinemesh_victim/victim", "/etc/kinemesh_victim", "a b", "a_b", "A_B", INJECTION]


def _box(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    m = trimesh.creation.box(bounds=[lo, hi])
    return np.asarray(m.vertices), np.asarray(m.faces)


def _cabinet(door: str = "door", limits=(0.054, 1.87), body: str = "body") -> ArticulatedObject:
    """A closed 0.4 m carcass with a door slab in front of it (y < -0.2), hinged on its left edge."""
    b, d = _box([-0.2, -0.2, 0], [0.2, 0.2, 0.4]), _box([-0.2, -0.215, 0], [0.2, -0.2025, 0.4])
    return ArticulatedObject([Part(body, *b, "body"), Part(door, *d, "door")],
                             [Joint("hinge", "revolute", body, door, (0, 0, -1), (-0.2, -0.21, 0), limits)],
                             category="cabinet", name="cab")


def test_safe_names_never_leave_the_folder_and_never_collide():
    stems = safe_names(HOSTILE + [""])
    assert len(set(s.lower() for s in stems.values())) == len(HOSTILE) + 1
    for s in stems.values():
        assert s and "/" not in s and "\\" not in s and not s.startswith(".")
    assert stems[""] == "part" and stems["a b"] == "a_b" and stems["a_b"] == "a_b_2"
    ids = safe_names(["1door", "x.y"], identifier=True)
    assert ids == {"1door": "_1door", "x.y": "x_y"}


def test_hostile_names_are_data_in_urdf_and_mjcf(tmp_path):
    import mujoco
    import yourdfpy

    from kinemesh.articulation.export import write_mjcf, write_urdf

    parts = [Part(n, *_box([i, 0, 0], [i + 0.5, 0.5, 0.5]), "") for i, n in enumerate(HOSTILE)]
    joints = [Joint(f"j{i}{n}", "revolute", HOSTILE[0], n, (0, 0, 1), (i, 0, 0), (0, 1)) for i, n in
              enumerate(HOSTILE[1:], 1)]
    obj = ArticulatedObject(parts, joints, name=INJECTION)
    out = tmp_path / "out"
    urdf = write_urdf(obj, out)
    assert not Path("/tmp/kinemesh_victim").exists() and not Path("/etc/kinemesh_victim.obj").exists()
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert len(written) == 1 + len(HOSTILE) and all(w == "object.urdf" or w.startswith("meshes/") for w in written)
    root = ET.parse(urdf).getroot()
    assert root.find("x") is None and root.get("name") == INJECTION  # the injection stays an attribute value
    u = yourdfpy.URDF.load(str(urdf), build_scene_graph=False, load_meshes=False)
    assert set(u.link_map) == set(HOSTILE)
    mjcf = write_mjcf(obj, tmp_path / "object.xml")
    model = mujoco.MjModel.from_xml_path(str(mjcf))
    assert model.body(INJECTION).id > 0 and model.joint(f"j5{INJECTION}").id >= 0
    with pytest.raises(KinemeshError, match="empty name"):
        ArticulatedObject([Part("", *_box([0, 0, 0], [1, 1, 1]))], [])
    assert ET.parse(mjcf).getroot().find(".//x") is None


def test_obj_group_names_cannot_write_outside_out(tmp_path):
    from kinemesh.cli import main

    lines, off = [], 0
    for i, name in enumerate(["../../../../tmp/kinemesh_victim/victim", INJECTION]):
        v, f = _box([0, 0, i * 0.3], [0.4, 0.4, i * 0.3 + 0.25])
        lines += [f"g {name}"] + [f"v {a} {b} {c}" for a, b, c in v] + [f"f {a + off + 1} {b + off + 1} {c + off + 1}" for a, b, c in f]
        off += len(v)
    (tmp_path / "two.obj").write_text("\n".join(lines) + "\n")
    import importlib.util

    usd = importlib.util.find_spec("pxr") is not None
    assert main(["articulate", str(tmp_path / "two.obj"), "--out", str(tmp_path / "out"), "--no-render",
                 "--no-validity"] + (["--usd"] if usd else [])) == 0
    assert not Path("/tmp/kinemesh_victim").exists()
    files = {p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert {"meshes/tmp_kinemesh_victim_victim.obj", "meshes/door_x_a.obj"} <= files
    root = ET.parse(tmp_path / "out" / "object.urdf").getroot()
    assert INJECTION in {link.get("name") for link in root.iter("link")}
    if usd:  # the USD names the injected part by its sanitised prim name and keeps the original as data
        from pxr import Usd

        stage = Usd.Stage.Open(str(tmp_path / "out" / "object.usda"))
        assert INJECTION in {p.GetAttribute("kinemesh:name").Get() for p in stage.Traverse()}


def test_mjcf_starts_at_rest_inside_widened_limits():
    import mujoco

    from kinemesh.synth.mjcf import MjcfOptions, load_model

    obj = _cabinet(limits=(0.054, 1.87))  # q = 0 (the closed door the mesh shows) outside the measured range
    assert obj.joints[0].rest_limits() == (0.0, 1.87)
    model = load_model(obj, MjcfOptions(gravity=False, contacts="none"))
    np.testing.assert_allclose(model.jnt_range[0], [0.0, 1.87])
    assert model.key("rest").qpos.tolist() == [0.0]
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("rest").id)
    for _ in range(250):
        mujoco.mj_step(model, data)
    assert abs(data.qpos[0]) < 1e-6  # no snap to the limit


def test_collision_free_limits_stop_a_door_closing_through_its_carcass():
    from kinemesh.articulation.export import collision_free_limits

    obj = _cabinet(limits=(-0.45, 1.5))  # -26 deg swings the slab into the closed carcass
    notes = collision_free_limits(obj)
    lo, hi = obj.joints[0].limits
    assert -0.1 < lo <= 0.0 and hi == pytest.approx(1.5) and len(notes) == 1
    obj = _cabinet(limits=(0.2, 1.5))  # rest outside, no collision on the opening side: only widened
    collision_free_limits(obj)
    assert obj.joints[0].limits == pytest.approx((0.0, 1.5))


@pytest.mark.real
def test_real_objects_export_with_rest_inside_limits(real_objects_dir, tmp_path):
    import mujoco

    from kinemesh.data.partnet import load_articulated, write_partnet_folder
    from kinemesh.synth.mjcf import MjcfOptions, load_model

    for folder in sorted(p for p in real_objects_dir.iterdir() if (p / "mobility.urdf").is_file()):
        obj = load_articulated(folder, max_vertices=3000)
        back = load_articulated(write_partnet_folder(obj, tmp_path / folder.name), max_vertices=None)
        model = load_model(obj, MjcfOptions(gravity=False, contacts="none"))
        for j in back.movable_joints:
            assert j.limits is None or j.limits[0] <= 0.0 <= j.limits[1], (folder.name, j.name, j.limits)
        limited = model.jnt_limited.astype(bool)
        assert (model.jnt_range[limited, 0] <= 0).all() and (model.jnt_range[limited, 1] >= 0).all(), folder.name
        data = mujoco.MjData(model)
        for _ in range(100):
            mujoco.mj_step(model, data)
        assert np.abs(data.qpos).max() < 1e-6, folder.name  # nothing snaps open at start


@pytest.mark.real
def test_articulate_real_object_limits_are_usable(real_objects_dir, tmp_path):
    """sapien__45940 through ``kinemesh articulate``: predicted ranges that miss the rest pose (e.g. [0.054,
    1.87] rad) or swing a door into its carcass are exported containing the rest pose, and sweeping any
    exported joint from rest to its closing limit enters no other part (a second pass changes nothing)."""
    import mujoco

    from kinemesh.articulation.export import collision_free_limits
    from kinemesh.cli import main
    from kinemesh.data.partnet import load_articulated

    out = tmp_path / "art"
    assert main(["articulate", str(real_objects_dir / "sapien__45940"), "--out", str(out), "--no-render"]) == 0
    model = mujoco.MjModel.from_xml_path(str(out / "object.xml"))
    limited = model.jnt_limited.astype(bool)
    assert limited.any() and (model.jnt_range[limited, 0] <= 0).all() and (model.jnt_range[limited, 1] >= 0).all()
    back = load_articulated(out / "object.urdf", max_vertices=None)
    assert all(j.limits[0] <= 0 <= j.limits[1] for j in back.movable_joints if j.limits is not None)
    assert collision_free_limits(back) == []


def test_usd_articulated_read_back(tmp_path):
    pytest.importorskip("pxr")
    from pxr import Gf, Usd, UsdGeom, UsdPhysics

    from kinemesh.data.usd import write_usd_articulated

    obj = _cabinet(door=INJECTION, limits=(0.054, 1.87))
    slide = Part("drawer", *_box([-0.1, -0.1, 0.1], [0.1, 0.1, 0.2]), "drawer")
    obj = ArticulatedObject(obj.parts + [slide], obj.joints + [
        Joint("slide", "prismatic", "body", "drawer", (0, -0.6, 0.8), (0, 0, 0.15), (-0.1, 0.3))], name="cab")
    path = write_usd_articulated(obj, tmp_path / "cab.usda")
    stage = Usd.Stage.Open(str(path))
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z and UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert stage.GetDefaultPrim().HasAPI(UsdPhysics.ArticulationRootAPI)
    joints = {p.GetAttribute("kinemesh:name").Get(): p for p in stage.Traverse() if p.IsA(UsdPhysics.Joint)
              and p.HasAttribute("kinemesh:name")}
    assert set(joints) == {"hinge", "slide"}
    for j in obj.joints:
        prim = joints[j.name]
        uj = UsdPhysics.PrismaticJoint(prim) if j.type == "prismatic" else UsdPhysics.RevoluteJoint(prim)
        axis = Gf.Rotation(uj.GetLocalRot0Attr().Get()).TransformDir(Gf.Vec3d(1, 0, 0))
        np.testing.assert_allclose(axis, j.axis, atol=1e-6)
        np.testing.assert_allclose(uj.GetLocalPos0Attr().Get(), j.origin, atol=1e-6)
        assert uj.GetAxisAttr().Get() == "X"
        scale = np.degrees(1.0) if j.type == "revolute" else 1.0
        np.testing.assert_allclose([uj.GetLowerLimitAttr().Get(), uj.GetUpperLimitAttr().Get()],
                                   np.array(j.rest_limits()) * scale, rtol=1e-6)
        child = stage.GetPrimAtPath(uj.GetBody1Rel().GetTargets()[0])
        assert child.GetAttribute("kinemesh:name").Get() == j.child and child.HasAPI(UsdPhysics.RigidBodyAPI)
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath(UsdPhysics.RevoluteJoint(joints["hinge"]).GetBody1Rel().GetTargets()[0]
                                            .AppendChild("mesh")))
    np.testing.assert_allclose(np.array(mesh.GetPointsAttr().Get()), obj.part(INJECTION).vertices, atol=1e-6)


def test_convert_sequence_to_usd_time_samples(tmp_path, tiny_sequence):
    pytest.importorskip("pxr")
    from pxr import Usd, UsdGeom

    from kinemesh.cli import main

    tiny_sequence.save(tmp_path / "s.npz")
    assert main(["convert", str(tmp_path / "s.npz"), str(tmp_path / "s.usda")]) == 0
    stage = Usd.Stage.Open(str(tmp_path / "s.usda"))
    mesh = next(UsdGeom.Mesh(p) for p in stage.Traverse() if p.IsA(UsdGeom.Mesh))
    points = mesh.GetPointsAttr()
    codes = points.GetTimeSamples()
    assert len(codes) == tiny_sequence.n_frames
    np.testing.assert_allclose(np.array(codes) / stage.GetTimeCodesPerSecond(), tiny_sequence.times, atol=1e-9)
    for code, frame in zip(codes, tiny_sequence.frames):
        np.testing.assert_allclose(np.array(points.Get(code)), frame, atol=1e-6)
    assert np.array(mesh.GetFaceVertexIndicesAttr().Get()).reshape(-1, 3).tolist() == tiny_sequence.faces.tolist()
