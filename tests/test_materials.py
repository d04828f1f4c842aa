"""Materials and physics test cases (SOPHY): library, assignment, MuJoCo simulations, CLI."""

import json

import numpy as np
import pytest
import trimesh

from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.errors import ConfigError, InputFileError
from kinemesh.materials.assign import (
    PartMaterial,
    infer_materials,
    load_materials_file,
    write_assignment,
)
from kinemesh.materials.library import BEHAVIORS, get_material, library_entry, material_names
from kinemesh.materials.physics import CaseConfig, _damping_ratio, _restitution_table, run_case


def _ball(name="ball", radius=0.05, subdivisions=1):
    m = trimesh.creation.icosphere(subdivisions=subdivisions, radius=radius)
    return ArticulatedObject([Part(name, m.vertices, m.faces, name)], [], category=name, name=name)


def _cloth(n=7, size=0.3):
    g = np.linspace(-size / 2, size / 2, n)
    xx, yy = np.meshgrid(g, g)
    v = np.stack([xx.ravel(), yy.ravel(), np.zeros(n * n)], 1)
    f = []
    for i in range(n - 1):
        for j in range(n - 1):
            a = i * n + j
            f += [[a, a + 1, a + n + 1], [a, a + n + 1, a + n]]
    return ArticulatedObject([Part("towel", v, np.array(f), "towel")], [], category="towel", name="towel")


def _box_with_lid():
    body = trimesh.creation.box(extents=(0.3, 0.2, 0.15))
    body.apply_translation((0, 0, 0.075))
    lid = trimesh.creation.box(extents=(0.3, 0.2, 0.02))
    lid.apply_translation((0, 0, 0.16))
    return ArticulatedObject(
        [Part("body", body.vertices, body.faces, "body"), Part("lid", lid.vertices, lid.faces, "lid")],
        [Joint("hinge", "revolute", "body", "lid", (1, 0, 0), (0, 0.1, 0.15), (0.0, 1.5))],
        category="chest", name="chest")


def _assign(obj, material, **overrides):
    m = get_material(material, **overrides)
    return {p.name: PartMaterial(p.name, m, "test") for p in obj.parts if len(p.vertices)}


# ------------------------------------------------------------------------------------------- library
def test_library_has_at_least_12_materials_with_sources_and_ranges():
    names = material_names()
    assert len(names) >= 12
    behaviors = set()
    for name in names:
        entry = library_entry(name)
        m = get_material(name)
        behaviors.add(m.behavior)
        for key in ("youngs_modulus", "poisson_ratio", "density", "yield_stress", "friction_angle"):
            lo, hi = entry[key]["range"]
            assert lo <= entry[key]["value"] <= hi, (name, key)
            assert entry[key]["source"], (name, key)
    assert behaviors == set(BEHAVIORS)


@pytest.mark.parametrize(
    "overrides, message",
    [({"youngs_modulus": -1.0}, "youngs_modulus"), ({"poisson_ratio": 0.5}, "poisson_ratio"),
     ({"density": 0.0}, "density"), ({"friction_angle": 95.0}, "friction_angle")],
)
def test_non_physical_parameters_are_rejected(overrides, message):
    with pytest.raises(ConfigError, match=message):
        get_material("wood", **overrides)


def test_unknown_material_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown material 'unobtainium'.*rubber"):
        get_material("unobtainium")


# ------------------------------------------------------------------------------------------- assignment
def test_rules_infer_materials_from_names_and_shape():
    obj = _box_with_lid()
    obj.parts[1].label = "glass lid"
    out = infer_materials(obj.parts + _cloth().parts, category="chest")
    assert out["body"].material.name == "wood" and "rule" in out["body"].reason
    assert out["lid"].material.name == "glass"
    assert out["towel"].material.name == "fabric"


def test_rules_match_short_words_only_as_words_and_names_beat_sheet_shape():
    box = trimesh.creation.box(extents=(0.2, 0.2, 0.2))
    sheet = _cloth().parts[0]

    def infer(category, *names, vertices=box.vertices, faces=box.faces):
        parts = [Part(n, vertices, faces, n) for n in names]
        return {n: pm.material.name for n, pm in infer_materials(parts, category=category).items()}

    # 'cabinet' contains 'bin', 'stapler' contains 'tap', 'cupboard' contains 'cup', 'panel' contains 'pane'
    assert infer("cabinet", "body", "door_left") == {"body": "wood", "door_left": "wood"}
    assert set(infer("Stapler", "stapler_body", "lid").values()) == {"hard_plastic"}
    assert infer("cupboard", "door_panel") == {"door_panel": "wood"}
    assert infer("TrashCan", "bin_lid", "lamp_arm") == {"bin_lid": "hard_plastic", "lamp_arm": "metal"}
    # a named rigid part whose mesh is an open flat panel stays rigid; an unnamed sheet becomes fabric
    assert infer("Bottle", "rotation_lid", vertices=sheet.vertices, faces=sheet.faces) == {
        "rotation_lid": "hard_plastic"}
    assert infer("thing", "part_0", vertices=sheet.vertices, faces=sheet.faces) == {"part_0": "fabric"}


def test_materials_file_round_trip_and_errors(tmp_path):
    obj = _box_with_lid()
    path = tmp_path / "materials.json"
    path.write_text(json.dumps({"default": "wood", "parts": {"lid": {"material": "metal", "density": 7000}}}))
    got = load_materials_file(path, ["body", "lid"])
    assert got["body"].material.name == "wood" and got["lid"].material.density == 7000
    write_assignment(got, tmp_path / "written.json")
    again = load_materials_file(tmp_path / "written.json", ["body", "lid"])
    assert again["lid"].material == got["lid"].material and again["body"].material == got["body"].material

    path.write_text(json.dumps({"parts": {"door": "wood"}}))
    with pytest.raises(InputFileError, match="part 'door' does not exist.*body, lid"):
        load_materials_file(path, [p.name for p in obj.parts])
    path.write_text(json.dumps({"parts": {"lid": "wood"}}))
    with pytest.raises(InputFileError, match="part 'body' has no material"):
        load_materials_file(path, ["body", "lid"])
    path.write_text(json.dumps({"default": "wood", "parts": {"lid": "kryptonite"}}))
    with pytest.raises(InputFileError, match="part 'lid'.*unknown material 'kryptonite'"):
        load_materials_file(path, ["body", "lid"])
    path.write_text(json.dumps({"default": "wood", "parts": {"lid": {"material": "rubber", "poisson_ratio": 0.5}}}))
    with pytest.raises(InputFileError, match="part 'lid'.*poisson_ratio"):
        load_materials_file(path, ["body", "lid"])


# ------------------------------------------------------------------------------------------- physics
def test_contact_calibration_reproduces_restitution():
    ratios, measured = _restitution_table(0.005, 5e-4)
    assert np.all(np.diff(measured) <= 0) and measured[0] < 1.0
    # the calibrated damping ratio for e = 0.5 sits between the measured neighbours
    z = _damping_ratio(0.5, 0.005, 5e-4)
    assert np.interp(z, ratios, measured) == pytest.approx(0.5, abs=0.02)


def test_material_matters_for_a_drop():
    """Rubber bounces higher than wood, wood higher than foam (their coefficients of restitution); under
    Hertz contact the peak deformation scales as (density / E*)^(2/5): rubber > foam > wood (rigid)."""
    obj = _ball(subdivisions=2)
    cfg = CaseConfig(case="drop", duration=0.8, height=0.3)
    res = {m: run_case(obj, _assign(obj, m), cfg).report for m in ("rubber", "wood", "foam")}
    bounce = {m: r["bounce_height_m"] for m, r in res.items()}
    deform = {m: r["peak_deformation"] for m, r in res.items()}
    assert bounce["rubber"] > bounce["wood"] > bounce["foam"] > 0.0
    # a rigid wood ball bounces to e^2 h = 0.25 * 0.3 m
    assert bounce["wood"] == pytest.approx(0.075, rel=0.25)
    hertz = {m: (get_material(m).density * (1 - get_material(m).poisson_ratio ** 2)
                 / get_material(m).youngs_modulus) ** 0.4 for m in ("rubber", "foam")}
    assert hertz["rubber"] > hertz["foam"]
    assert deform["rubber"] > deform["foam"] > 10 * deform["wood"]
    assert deform["wood"] < 1e-5  # rigid: only float32 rounding


def test_elastoplastic_clay_keeps_a_dent_and_rubber_does_not():
    obj = _ball()
    cfg = CaseConfig(case="drop", duration=0.8, height=0.5)
    clay = run_case(obj, _assign(obj, "clay"), cfg).report["final_deformation"]
    rubber = run_case(obj, _assign(obj, "rubber"), cfg).report["final_deformation"]
    assert clay > 5 * rubber and clay > 1e-3


def test_tilt_slides_only_below_the_friction_angle():
    """On a 30 degree plane a block slides when tan(phi) < tan(30 deg) and sticks otherwise."""
    box = trimesh.creation.box(extents=(0.1, 0.1, 0.05))
    obj = ArticulatedObject([Part("block", box.vertices, box.faces, "block")], [], name="block")
    cfg = CaseConfig(case="tilt", tilt_deg=30.0, duration=0.6)
    slippery = run_case(obj, _assign(obj, "wood", friction_angle=15.0), cfg).report["slide_distance_m"]
    grippy = run_case(obj, _assign(obj, "wood", friction_angle=45.0), cfg).report["slide_distance_m"]
    # frictional sliding: a = g (sin 30 - cos 30 tan 15) = 2.63 m/s^2 -> 0.47 m in 0.6 s
    assert slippery == pytest.approx(0.5 * 9.81 * (0.5 - np.cos(np.pi / 6) * np.tan(np.radians(15))) * 0.6**2, rel=0.2)
    assert abs(grippy) < 0.01


@pytest.mark.parametrize("case", ["drop", "throw", "tilt", "drag", "wind"])
def test_every_case_runs_on_articulated_soft_and_cloth(case):
    for obj, material in ((_box_with_lid(), "wood"), (_ball(subdivisions=1), "rubber"), (_cloth(), "fabric")):
        cfg = CaseConfig(case=case, duration=0.3, fps=20)
        result = run_case(obj, _assign(obj, material), cfg)
        seq = result.sequence
        assert seq.n_frames == 7 and np.isfinite(seq.frames).all()
        moved = np.abs(seq.frames[-1] - seq.frames[0]).max()
        assert moved > 1e-3, (case, material)
        assert seq.kind == {"wood": "articulated", "rubber": "elastic", "fabric": "cloth"}[material]


def test_wind_pushes_downwind_and_drag_pulls_towards_target():
    obj = _ball(subdivisions=1)
    wind = run_case(obj, _assign(obj, "rubber"), CaseConfig(case="wind", duration=0.4, wind_velocity=(15, 0, 0)))
    com = wind.sequence.frames.mean(1)
    assert com[-1, 0] - com[0, 0] > 0.005
    drag = run_case(obj, _assign(obj, "wood"), CaseConfig(case="drag", duration=0.6, drag_direction=(0, 1, 0)))
    com = drag.sequence.frames.mean(1)
    assert com[-1, 1] - com[0, 1] > 0.1 and abs(com[-1, 0] - com[0, 0]) < 0.05


def test_rigid_wind_from_the_bodies_frames_equals_the_load_on_the_posed_faces():
    """_RigidWind: per body, the force and the torque about its origin from the faces' normals, areas and
    centres in its own frame equal the sums of ``_face_forces`` over its faces posed in the world (float64),
    for turned bodies; faces turned away from the wind carry nothing."""
    from types import SimpleNamespace

    from kinemesh.materials.physics import _face_forces, _RigidWind
    from kinemesh.data.articulated import axis_angle_matrix

    rng = np.random.default_rng(0)
    box = trimesh.creation.box(extents=(0.3, 0.2, 0.1))
    ball = trimesh.creation.icosphere(subdivisions=1, radius=0.05)
    items = [(1, np.asarray(box.vertices) + 0.05), (3, np.asarray(ball.vertices))]
    faces = np.concatenate([box.faces, ball.faces + len(box.vertices)])
    wind = _RigidWind(SimpleNamespace(items=items), faces)
    xpos, xmat = rng.normal(size=(4, 3)), np.zeros((4, 9))
    for b in (1, 3):
        axis = rng.normal(size=3)
        xmat[b] = axis_angle_matrix(axis / np.linalg.norm(axis), rng.uniform(0.3, 2.5)).ravel()
    w = np.array([6.0, -2.0, 1.0])
    x = np.concatenate([xpos[b] + v @ xmat[b].reshape(3, 3).T for b, v in items])
    f, c = _face_forces(x, faces, w, 1.2, 1.1, False)
    owner = np.repeat([1, 3], [len(box.faces), len(ball.faces)])
    loads = wind.loads(xpos, xmat, w, 1.2, 1.1)
    assert [b for b, _, _ in loads] == [1, 3]
    for b, force, torque in loads:
        sel = owner == b
        assert np.allclose(force, f[sel].sum(0), atol=1e-12)
        assert np.allclose(torque, np.cross(c[sel] - xpos[b], f[sel]).sum(0), atol=1e-12)
        assert np.linalg.norm(force) > 0.01 and force @ w > 0  # pushed downwind
    assert (np.abs(f).sum(1) == 0).sum() > len(faces) // 3  # the lee side


def test_non_star_shaped_soft_part_runs_on_a_tetrahedral_cage():
    """Two overlapping spheres (like the bundled soft toy): surface-to-centre tetrahedra would invert, so the
    part is simulated on a cage that carries the surface; the output keeps the input's vertices."""
    from kinemesh.materials.physics import build_scene

    a = trimesh.creation.icosphere(subdivisions=1, radius=0.03)
    b = a.copy()
    a.apply_translation((-0.025, 0, 0))
    b.apply_translation((0.025, 0, 0))
    m = trimesh.util.concatenate([a, b])
    obj = ArticulatedObject([Part("blob", m.vertices, m.faces, "blob")], [], category="blob", name="blob")
    assignment = _assign(obj, "rubber")
    assert "cage" in build_scene(obj, assignment, CaseConfig(case="drop"))[2]
    assert "cage" not in build_scene(_ball(), _assign(_ball(), "rubber"), CaseConfig(case="drop"))[2]
    drop = run_case(obj, assignment, CaseConfig(case="drop", duration=0.4, height=0.1))
    assert drop.sequence.frames.shape[1] == len(m.vertices)
    assert drop.sequence.frames[-1, :, 2].min() < 0.02  # it fell onto the floor
    drag = run_case(obj, assignment, CaseConfig(case="drag", duration=0.4, drag_direction=(0, 1, 0)))
    com = drag.sequence.frames.mean(1)
    assert com[-1, 1] - com[0, 1] > 0.02


def test_divergence_is_retried_with_smaller_steps_then_reported_and_nothing_written(tmp_path, capsys,
                                                                                   monkeypatch):
    import kinemesh.materials.physics as physics
    from kinemesh.cli import main
    from kinemesh.errors import SimulationDivergedError

    steps = []

    def always_diverges(obj, assignment, cfg, progress):
        steps.append(cfg.timestep)
        raise SimulationDivergedError("diverged at t = 0.100 s")

    monkeypatch.setattr(physics, "_simulate_once", always_diverges)
    trimesh.creation.icosphere(subdivisions=1, radius=0.05).export(tmp_path / "ball.obj")
    code = main(["physics", str(tmp_path / "ball.obj"), "--out", str(tmp_path / "o"), "--no-video"])
    err = capsys.readouterr().err
    assert code == 1 and "diverged" in err and "nothing was written" in err
    assert steps == [5e-4, 2.5e-4, 1.25e-4]
    assert not (tmp_path / "o").exists()


def test_deformable_part_in_an_articulated_object_is_a_clear_error():
    obj = _box_with_lid()
    assignment = _assign(obj, "wood")
    assignment["lid"] = PartMaterial("lid", get_material("rubber"), "test")
    with pytest.raises(ConfigError, match="part 'lid' is deformable"):
        run_case(obj, assignment, CaseConfig(case="drop", duration=0.1))


# ------------------------------------------------------------------------------------------- CLI
def test_cli_physics_end_to_end(tmp_path, capsys):
    from kinemesh.cli import main

    mesh = trimesh.creation.icosphere(subdivisions=1, radius=0.05)
    path = tmp_path / "toy_ball.obj"
    mesh.export(path)
    out = tmp_path / "out"
    code = main(["physics", str(path), "--case", "drop", "--out", str(out), "--duration", "0.4",
                 "--no-video"])
    assert code == 0
    assignment = json.loads((out / "materials.json").read_text())
    assert assignment["parts"]["toy_ball"]["material"] == "rubber"  # rule: toy|ball -> rubber
    report = json.loads((out / "report.json").read_text())
    assert report["bounce_height_m"] > 0.01
    from kinemesh.data.sequence import KinematicSequence

    seq = KinematicSequence.load(out / "sequence.npz")
    assert seq.n_frames == 13 and seq.meta["materials"]["toy_ball"]["name"] == "rubber"
    import mujoco  # the written scene is self-contained: MuJoCo loads it as it is, the soft ball a flex

    assert mujoco.MjModel.from_xml_path(str(out / "scene.xml")).nflex == 1
    # re-run with the written assignment, edited
    assignment["parts"]["toy_ball"] = "wood"
    (tmp_path / "edited.json").write_text(json.dumps(assignment))
    assert main(["physics", str(path), "--materials", str(tmp_path / "edited.json"), "--out",
                 str(tmp_path / "out2"), "--duration", "0.4", "--no-video"]) == 0
    assert json.loads((tmp_path / "out2" / "materials.json").read_text())["parts"]["toy_ball"]["material"] == "wood"


def test_cli_bad_material_names_the_part_and_writes_nothing(tmp_path, capsys):
    from kinemesh.cli import main

    mesh = trimesh.creation.icosphere(subdivisions=1, radius=0.05)
    path = tmp_path / "ball.obj"
    mesh.export(path)
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"parts": {"ball": "vibranium"}}))
    code = main(["physics", str(path), "--materials", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1 and "part 'ball'" in err and "vibranium" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_granular_sand_collapses_and_spreads_with_mpm():
    """Dry sand dropped as a cube collapses into a heap wider and lower than the cube (implicit MPM).
    Slow (about 30 s of warp kernel set-up on 2 cores): `make test-slow` runs it."""
    pytest.importorskip("newton")
    from kinemesh.materials.mpm import simulate_granular

    box = trimesh.creation.box(extents=(0.08, 0.08, 0.08))
    obj = ArticulatedObject([Part("sand", box.vertices, box.faces, "sand")], [], name="sandpile")
    cfg = CaseConfig(case="drop", duration=0.3, fps=10, height=0.02)
    result = simulate_granular(obj, {"sand": PartMaterial("sand", get_material("sand"), "t")}, cfg, voxel=0.03)
    last = result.sequence.frames[-1]
    assert np.isfinite(result.sequence.frames).all() and result.sequence.n_frames == 4
    assert np.ptp(last[:, 2]) < 0.8 * 0.08  # lower than the cube
    assert result.report["spread_m"] > 0.08  # wider than the cube
    with pytest.raises(ConfigError, match="granular materials support"):
        simulate_granular(obj, {"sand": PartMaterial("sand", get_material("sand"), "t")}, CaseConfig(case="wind"))


def test_a_box_with_a_zero_thickness_flap_drops_and_its_frames_pose_the_original_meshes():
    """A real cardboard box's flaps are single sheets, which MuJoCo refuses as meshes (`kinemesh physics` on
    one failed): the simulated scene gives them a second, offset layer; the recorded frames still pose the
    object's own vertices (4 for the flap), and the flap stays on its hinge."""
    box = trimesh.creation.box(bounds=[[-0.2, -0.2, 0.0], [0.2, 0.2, 0.3]])
    sheet = np.array([[-0.2, 0.2, 0.3], [0.2, 0.2, 0.3], [0.2, 0.4, 0.3], [-0.2, 0.4, 0.3]])
    obj = ArticulatedObject(
        [Part("body", np.asarray(box.vertices), np.asarray(box.faces)),
         Part("flap", sheet, np.array([[0, 1, 2], [0, 2, 3]]))],
        [Joint("hinge", "revolute", "body", "flap", (1, 0, 0), (0, 0.2, 0.3), (-2.0, 2.0))],
        category="box", name="box")
    res = run_case(obj, _assign(obj, "cardboard"), CaseConfig(case="drop", duration=0.3, height=0.2))
    seq = res.sequence
    assert seq.n_vertices == len(box.vertices) + 4 and np.isfinite(seq.frames).all()
    flap = seq.frames[:, seq.part_ids == 1]
    edge = flap[:, :2]  # the flap's two vertices on its hinge line stay 40 cm apart in every frame (rigid)
    assert np.allclose(np.linalg.norm(edge[:, 0] - edge[:, 1], axis=1), 0.4, atol=1e-4)


def test_cli_physics_of_a_segmented_mesh_gives_each_part_its_material(tmp_path):
    """An OBJ with groups (what `kinemesh convert FOLDER x.obj` writes): one material per group, the parts
    welded into one body (its mass the parts' sum), the sequence in the file's vertex order."""
    from kinemesh.cli import main
    from kinemesh.data.sequence import KinematicSequence
    from tests.toys import box, write_obj_groups

    body, wheel = box([0, 0, 0.05], [0.4, 0.2, 0.25]), box([0.0, 0.0, 0.0], [0.05, 0.05, 0.05])
    path = tmp_path / "cart.obj"
    write_obj_groups(path, [("wheel", *wheel), ("body", *body)])  # the wheel first: order is the file's
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"parts": {"body": "wood", "wheel": "metal"}}))
    out = tmp_path / "out"
    assert main(["physics", str(path), "--materials", str(m), "--case", "drop", "--out", str(out),
                 "--duration", "0.3", "--no-video"]) == 0
    parts = json.loads((out / "materials.json").read_text())["parts"]
    assert parts["body"]["material"] == "wood" and parts["wheel"]["material"] == "metal"
    report = json.loads((out / "report.json").read_text())
    mass = sum(get_material(name).density * trimesh.Trimesh(*b).volume for name, b in (("wood", body),
                                                                                       ("metal", wheel)))
    assert report["total_mass_kg"] == pytest.approx(mass, rel=0.02)
    seq = KinematicSequence.load(out / "sequence.npz")
    file_v = np.concatenate([wheel[0], body[0]])
    shift = seq.rest_vertices - file_v  # placed for the drop: one translation of the file's vertices
    np.testing.assert_allclose(shift, np.broadcast_to(shift[0], shift.shape), atol=1e-6)
    # welded: wheel and body move as one rigid body (distances between them kept)
    d = [np.linalg.norm(x[:8, None] - x[None, 8:], axis=-1) for x in (seq.frames[0], seq.frames[-1])]
    np.testing.assert_allclose(d[1], d[0], atol=1e-4)
    assert np.abs(seq.frames[-1] - seq.frames[0]).max() > 0.01  # and it fell


def test_welded_object_names_parts_apart_and_keeps_the_vertex_order():
    """GLB nodes may share a name: each welded part gets its own; ``order`` maps merged vertices back."""
    from kinemesh.materials.objects import welded_object

    a = trimesh.creation.box(bounds=[[0, 0, 0], [1, 1, 1]])
    b = trimesh.creation.box(bounds=[[1, 0, 0], [1.2, 1, 1]])
    m = trimesh.util.concatenate([b, a])  # the small box first: the large one is the root
    ids = np.r_[np.zeros(8, int), np.ones(8, int)]
    obj, order = welded_object(m, ids, ["Object", "Object"], "x")
    assert [p.name for p in obj.parts] == ["Object", "Object_1"]
    assert [(j.type, j.parent, j.child) for j in obj.joints] == [("fixed", "Object_1", "Object")]
    np.testing.assert_array_equal(obj.merged()[0], np.asarray(m.vertices)[order])


def _cabinet(door_side: float = -1.0):
    """A carcass with a door on its x = door_side face, hinged about a vertical edge."""
    body = trimesh.creation.box(extents=(0.4, 0.5, 0.6))
    body.apply_translation((0, 0, 0.3))
    door = trimesh.creation.box(extents=(0.02, 0.5, 0.6))
    x = door_side * 0.21
    door.apply_translation((x, 0, 0.3))
    return ArticulatedObject(
        [Part("body", body.vertices, body.faces, "body"), Part("door", door.vertices, door.faces, "door")],
        [Joint("hinge", "revolute", "body", "door", (0, 0, 1), (x, -0.25, 0.3),
               (0.0, 1.5) if door_side < 0 else (-1.5, 0.0))],
        category="cabinet", name="cabinet")


def test_scaled_object_scales_shapes_origins_and_slides_not_turns():
    from kinemesh.errors import KinemeshError

    drawer = trimesh.creation.box(extents=(0.2, 0.2, 0.1))
    obj = _box_with_lid()
    obj = ArticulatedObject(obj.parts + [Part("drawer", drawer.vertices, drawer.faces, "drawer")],
                            obj.joints + [Joint("slide", "prismatic", "body", "drawer", (1, 0, 0), (0, 0, 0.05),
                                                (0.0, 0.15))], category="chest", name="chest")
    big = obj.scaled(2.5)
    assert big.part("lid").vertices == pytest.approx(2.5 * obj.part("lid").vertices)
    by = {j.name: j for j in big.joints}
    assert by["hinge"].limits == (0.0, 1.5) and by["slide"].limits == pytest.approx((0.0, 0.375))
    # the same motion at 2.5 x the size: turn by the same angle, slide 2.5 x as far
    posed = obj.merged({"hinge": 0.9, "slide": 0.1})[0]
    assert big.merged({"hinge": 0.9, "slide": 0.25})[0] == pytest.approx(2.5 * posed)
    assert obj.part("lid").vertices.max() < 0.2  # the original is untouched
    with pytest.raises(KinemeshError, match="positive"):
        obj.scaled(0.0)


def test_open_values_take_each_joints_larger_excursion():
    obj = _cabinet(door_side=1.0)  # limits (-1.5, 0)
    assert obj.open_values(0.5) == {"hinge": pytest.approx(-0.75)}
    assert _cabinet(-1.0).open_values() == {"hinge": pytest.approx(0.9)}


@pytest.mark.parametrize("side", [-1.0, 1.0])
def test_physics_video_camera_faces_the_side_the_joints_open_to(side):
    from kinemesh.viz.render import _VIEW_PRESETS, opening_turn

    az = np.radians(_VIEW_PRESETS[0][0] + opening_turn(_cabinet(side)))
    assert np.cos(az) * side > 0.5  # the first camera sits on the door's side of the cabinet
    assert opening_turn(_ball()) == 0.0  # nothing moves: the preset


def test_cli_physics_size_rescales_the_object(tmp_path, capsys):
    from kinemesh.cli import main
    from kinemesh.data.sequence import KinematicSequence

    mesh = trimesh.creation.box(extents=(0.1, 0.05, 0.02))
    path = tmp_path / "wood_block.obj"
    mesh.export(path)
    out = tmp_path / "out"
    assert main(["physics", str(path), "--size", "0.4", "--out", str(out), "--duration", "0.2", "--no-video"]) == 0
    assert "object: 0.4 x 0.2 x 0.08 m" in capsys.readouterr().out
    seq = KinematicSequence.load(out / "sequence.npz")
    assert np.ptp(seq.rest_vertices, axis=0) == pytest.approx([0.4, 0.2, 0.08])
    mass = json.loads((out / "report.json").read_text())["total_mass_kg"]
    assert main(["physics", str(path), "--out", str(tmp_path / "o2"), "--duration", "0.2", "--no-video"]) == 0
    assert "object: 0.1 x 0.05 x 0.02 m\n" in capsys.readouterr().out
    small = json.loads((tmp_path / "o2" / "report.json").read_text())["total_mass_kg"]
    assert mass > 10 * small  # a solid block 4 x as long weighs more (64 x as a solid)


def test_cli_physics_of_a_partnet_folder_says_its_units_are_normalized(tmp_path, capsys):
    from data_fixtures import make_partnet_folder

    from kinemesh.cli import main

    folder = make_partnet_folder(tmp_path / "cab")
    args = ["physics", str(folder), "--duration", "0.1", "--no-video", "--out"]
    assert main(args + [str(tmp_path / "a")]) == 0
    assert "units are normalized" in capsys.readouterr().out
    assert main(args + [str(tmp_path / "b"), "--size", "0.5"]) == 0
    line = capsys.readouterr().out.split("object: ")[1].splitlines()[0]
    assert "units are normalized" not in line and line.endswith(" m")
    assert max(float(x) for x in line[:-2].split(" x ")) == pytest.approx(0.5)
