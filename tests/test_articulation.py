"""Articulation: candidates, validity sweeps, from-motion fits, prompts, export to URDF/MJCF, CLI, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import trimesh

from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.errors import KinemeshError


# ---------------------------------------------------------------------------------------------- fixtures
def _box(lo, hi) -> trimesh.Trimesh:
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    m = trimesh.creation.box(extents=hi - lo)
    m.apply_translation(0.5 * (lo + hi))
    return m


def _open_box(lo, hi, t) -> trimesh.Trimesh:
    """A carcass open at -Y: the union of five wall slabs (watertight via manifold3d)."""
    from kinemesh.synth.shapes import open_box

    return open_box(lo, hi, t, "-y")


def _part(name, m, label="") -> Part:
    return Part(name, np.asarray(m.vertices), np.asarray(m.faces), label)


def two_door_cabinet() -> ArticulatedObject:
    """0.8 x 0.4 x 0.6 m carcass open at the front (-Y) with two doors hinged at the outer edges."""
    W, D, H, t, th, gap = 0.8, 0.4, 0.6, 0.02, 0.02, 0.004
    body = _open_box([-W / 2, -D / 2, 0], [W / 2, D / 2, H], t)
    y1 = -D / 2 - gap
    left = _box([-W / 2, y1 - th, 0], [-gap / 2, y1, H])
    right = _box([gap / 2, y1 - th, 0], [W / 2, y1, H])
    parts = [_part("body", body, "body"), _part("door_left", left, "door"), _part("door_right", right, "door")]
    joints = [Joint("hinge_left", "revolute", "body", "door_left", (0, 0, -1), (-W / 2, y1 - th, 0), (0, 2.0)),
              Joint("hinge_right", "revolute", "body", "door_right", (0, 0, 1), (W / 2, y1 - th, 0), (0, 2.0))]
    return ArticulatedObject(parts, joints, "cabinet", "two_door_cabinet")


def drawer_cabinet() -> ArticulatedObject:
    """A carcass with one drawer (front panel + tray) sliding out along -Y."""
    W, D, H, t, gap = 0.6, 0.5, 0.3, 0.02, 0.004
    body = _open_box([-W / 2, -D / 2, 0], [W / 2, D / 2, H], t)
    y1 = -D / 2 - gap
    panel = _box([-W / 2, y1 - 0.02, 0], [W / 2, y1, H])
    tray = _box([-W / 2 + t + 0.01, y1 - 0.001, t + 0.01], [W / 2 - t - 0.01, D / 2 - t - 0.05, H - t - 0.01])
    from kinemesh.synth.shapes import union

    drawer = union([panel, tray])
    parts = [_part("body", body, "body"), _part("drawer", drawer, "drawer")]
    joints = [Joint("slide", "prismatic", "body", "drawer", (0, -1, 0), (0, y1, H / 2), (0, 0.3))]
    return ArticulatedObject(parts, joints, "drawer_cabinet", "drawer_cabinet")


# ---------------------------------------------------------------------------------------------- candidates
def test_candidates_grid_and_nearest():
    from kinemesh.articulation.candidates import N_CANDIDATES, candidate_motions, part_box
    from kinemesh.geometry.metrics import axis_line_distance

    obj = two_door_cabinet()
    door = obj.part("door_left")
    box = part_box(door.vertices)
    np.testing.assert_allclose(np.abs(box.axes), np.eye(3), atol=1e-6)  # world-ordered box frame
    cands = candidate_motions(box)
    assert len(cands) == N_CANDIDATES == 60
    assert [c.index for c in cands] == list(range(60))
    j = obj.joints[0]
    hinge = [c for c in cands if c.type == "revolute" and c.axis @ j.axis > 1 - 1e-9
             and axis_line_distance(c.origin, c.axis, j.origin, j.axis) < 1e-6]  # the hinge edge is a candidate line
    assert len(hinge) == 1 and hinge[0].box_axis == 2 and hinge[0].sign == -1


# ---------------------------------------------------------------------------------------------- validity
def test_validity_rejects_door_hinged_in_middle():
    from kinemesh.articulation.candidates import Candidate, candidate_motions, part_box
    from kinemesh.geometry.validity import OccupancyGrid, check_candidates

    obj = two_door_cabinet()
    grid = OccupancyGrid(obj)
    door = obj.part("door_left")
    box = part_box(door.vertices)
    j = obj.joints[0]
    hinge = Candidate("revolute", j.axis, j.origin, (0, np.pi / 2), 2, -1)
    middle = [c for c in candidate_motions(box) if c.type == "revolute" and c.box_axis == 2 and c.grid == (0, 0)]
    check_candidates(grid, ["door_left"], [hinge] + middle)
    assert hinge.valid, hinge.info
    assert len(middle) == 2 and not any(c.valid for c in middle), [c.info for c in middle]
    assert all(c.info["collision"] > 0.02 for c in middle)
    # sliding the door straight forward detaches it
    fwd = Candidate("prismatic", np.array([0, -1.0, 0]), box.center, (0, 0.4), 1, -1)
    check_candidates(grid, ["door_left"], [fwd])
    assert not fwd.valid and fwd.info["gap"] > 0.1


def test_validity_rejects_drawer_sliding_into_carcass():
    from kinemesh.articulation.candidates import Candidate, part_box
    from kinemesh.geometry.validity import OccupancyGrid, check_candidates

    obj = drawer_cabinet()
    box = part_box(obj.part("drawer").vertices)
    out = Candidate("prismatic", np.array([0, -1.0, 0]), box.center, (0, 0.3), 1, -1)
    into = Candidate("prismatic", np.array([0, 1.0, 0]), box.center, (0, 0.3), 1, 1)
    side = Candidate("prismatic", np.array([1.0, 0, 0]), box.center, (0, 0.3), 0, 1)
    check_candidates(OccupancyGrid(obj), ["drawer"], [out, into, side])
    assert out.valid, out.info
    assert not into.valid and into.info["collision"] > 0.02
    assert not side.valid


# ---------------------------------------------------------------------------------------------- from motion
def _planted() -> ArticulatedObject:
    base = _box([-0.3, -0.2, 0], [0.3, 0.2, 0.4])
    lid = _box([-0.3, -0.2, 0.404], [0.3, 0.2, 0.43])
    slider = _box([0.304, -0.1, 0.1], [0.4, 0.1, 0.2])
    ax_r = np.array([1.0, 0.13, 0.05])  # deliberately not box-aligned
    ax_p = np.array([1.0, -0.08, 0.11])
    parts = [_part("base", base), _part("lid", lid), _part("slider", slider)]
    joints = [Joint("j_lid", "revolute", "base", "lid", ax_r, (0.05, 0.21, 0.43), (-1.0, 1.5)),
              Joint("j_slide", "prismatic", "base", "slider", ax_p, (0.35, 0, 0.15), (0.0, 0.2))]
    return ArticulatedObject(parts, joints, "planted", "planted")


def test_from_motion_recovers_planted_axes_within_1_deg():
    from kinemesh.articulation.from_motion import fit_sequence
    from kinemesh.geometry.metrics import axis_angle_error_deg, axis_line_distance

    obj = _planted()
    rng = np.random.default_rng(0)
    seq = obj.to_sequence([obj.sample_values(rng) for _ in range(5)])
    fits = {f.part: f for f in fit_sequence(seq)}
    assert set(fits) == {"lid", "slider"}
    lid, sl = fits["lid"], fits["slider"]
    j_lid, j_sl = obj.joints
    assert lid.type == "revolute" and sl.type == "prismatic"
    assert axis_angle_error_deg(lid.axis, j_lid.axis) < 1.0
    assert axis_angle_error_deg(sl.axis, j_sl.axis) < 1.0
    assert axis_line_distance(lid.origin, lid.axis, j_lid.origin, j_lid.axis) < 1e-3
    assert lid.parent == "base" and sl.parent == "base"
    # recovered per-frame values reproduce the planted ones (up to the axis sign)
    true = np.array([c["j_lid"] for c in seq.meta["joint_values"]])
    s = np.sign(lid.axis @ j_lid.axis)
    np.testing.assert_allclose(s * lid.values, true, atol=1e-3)


def test_from_clouds_selects_candidate_without_correspondences():
    from kinemesh.articulation.from_motion import fit_from_clouds
    from kinemesh.geometry.metrics import axis_angle_error_deg
    from kinemesh.geometry.sampling import sample_surface

    obj = two_door_cabinet()
    j = obj.joints[1]
    rng = np.random.default_rng(0)
    door = obj.part("door_right")
    pp = sample_surface(door.vertices, door.faces, 400, seed=rng)[0]
    rest = np.concatenate([sample_surface(p.vertices, p.faces, 400, seed=rng)[0] for p in obj.parts
                           if p.name != "door_right"])
    clouds = []
    for v in (0.4, 0.9):
        posed = obj.posed_parts({j.name: v})
        clouds.append(np.concatenate([sample_surface(posed[p.name], p.faces, 500, seed=rng)[0] for p in obj.parts]))
    fit = fit_from_clouds(pp, rest, clouds, "door_right", n_values=25, icp_iters=8)
    assert fit.type == "revolute"
    assert axis_angle_error_deg(fit.axis, j.axis) < 3.0


# ---------------------------------------------------------------------------------------------- prompts
def test_prompts_pick_parts_on_two_door_cabinet():
    from kinemesh.articulation.prompt import resolve_prompt

    obj = two_door_cabinet()
    parts = [(p.name, p.label, p.vertices) for p in obj.parts]
    # names hidden: geometry alone must decide left/right (front = -Y, viewer's left = -X)
    anon = [(f"link_{i}", lab, v) for i, (_, lab, v) in enumerate(parts)]
    r = resolve_prompt("open the left door", anon, exclude={"link_0"})
    assert r.part == "link_1" and r.motion_type == "revolute"
    assert resolve_prompt("Open the RIGHT door!", anon, exclude={"link_0"}).part == "link_2"
    assert resolve_prompt("swing door_right open", parts).part == "door_right"
    with pytest.raises(KinemeshError, match="ambiguous.*door_left.*door_right"):
        resolve_prompt("open the door", parts, exclude={"body"})
    with pytest.raises(KinemeshError, match="names no part.*door_left"):
        resolve_prompt("pull out the drawer", parts, exclude={"body"})
    d = drawer_cabinet()
    r = resolve_prompt("open the drawer", [(p.name, p.label, p.vertices) for p in d.parts])
    assert r.part == "drawer" and r.motion_type == "prismatic"


# ---------------------------------------------------------------------------------------------- export
def _mujoco_child_rotation(path, joint: str, child: str, value: float):
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(model)
    jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, child)
    assert jid >= 0 and bid >= 0
    mujoco.mj_forward(model, data)
    R0, p0 = data.xmat[bid].reshape(3, 3).copy(), data.xpos[bid].copy()
    data.qpos[model.jnt_qposadr[jid]] = value
    mujoco.mj_forward(model, data)
    return R0, p0, data.xmat[bid].reshape(3, 3).copy(), data.xpos[bid].copy(), model


def test_exported_urdf_and_mjcf_load_and_move_in_mujoco(tmp_path):
    import mujoco

    from kinemesh.articulation.export import write_mjcf, write_urdf

    obj = two_door_cabinet()
    urdf = write_urdf(obj, tmp_path / "u")
    mjcf = write_mjcf(obj, tmp_path / "m" / "object.xml")
    j = obj.joints[0]
    T = obj.part_transforms({j.name: 0.7})["door_left"]
    v = obj.part("door_left").vertices[:5]
    for path in (urdf, mjcf):
        R0, p0, R1, p1, model = _mujoco_child_rotation(path, j.name, "door_left", 0.7)
        assert model.njnt == 2
        world = (R1 @ (R0.T @ (v - p0).T)).T + p1  # vertices carried by the body
        np.testing.assert_allclose(world, v @ T[:3, :3].T + T[:3, 3], atol=1e-5)
    # driven by its motor, the door turns
    model = mujoco.MjModel.from_xml_path(str(mjcf))
    data = mujoco.MjData(model)
    data.ctrl[:] = 2.0
    for _ in range(300):
        mujoco.mj_step(model, data)
    assert np.all(np.abs(data.qpos) > 0.01)


def test_mjcf_export_of_a_zero_thickness_flap_loads_in_mujoco(tmp_path):
    """A real cardboard box's flaps are single sheets (all vertices in one plane), which MuJoCo refuses as
    meshes (`kinemesh articulate` on one failed): the MJCF export gives such a part a second copy of its
    vertices 0.001 x the object's diagonal along its normal; the flap still turns on its motor."""
    import mujoco

    from kinemesh.articulation.export import write_mjcf
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.errors import KinemeshError
    from kinemesh.synth.mjcf import articulated_to_mjcf

    box = trimesh.creation.box(bounds=[[-0.2, -0.2, 0.0], [0.2, 0.2, 0.3]])
    sheet = np.array([[-0.2, 0.2, 0.3], [0.2, 0.2, 0.3], [0.2, 0.4, 0.3], [-0.2, 0.4, 0.3]])
    flap = Part("flap", sheet, np.array([[0, 1, 2], [0, 2, 3]]))
    obj = ArticulatedObject([Part("box", np.asarray(box.vertices), np.asarray(box.faces)), flap],
                            [Joint("hinge", "revolute", "box", "flap", np.array([1.0, 0.0, 0.0]),
                                   np.array([0.0, 0.2, 0.3]), (0.0, 2.0))], "box", "box")
    with pytest.raises(KinemeshError, match="coplanar"):
        articulated_to_mjcf(obj)
    model = mujoco.MjModel.from_xml_path(str(write_mjcf(obj, tmp_path / "object.xml")))
    data = mujoco.MjData(model)
    data.ctrl[:] = 1.0
    for _ in range(200):
        mujoco.mj_step(model, data)
    assert data.qpos[0] > 0.01
    assert len(obj.part("flap").vertices) == 4  # the object itself is left as it was


# ---------------------------------------------------------------------------------------------- predictor + CLI
def test_predictor_shipped_weights_and_cli(tmp_path):
    from kinemesh.articulation.predictor import DEFAULT_WEIGHTS
    from kinemesh.cli import main
    from kinemesh.data.partnet import write_partnet_folder

    if not (DEFAULT_WEIGHTS / "model.safetensors").is_file():
        pytest.skip("articulation weights not shipped")
    folder = tmp_path / "cab"
    write_partnet_folder(two_door_cabinet(), folder)
    out = tmp_path / "out"
    assert main(["articulate", str(folder), "--out", str(out), "--prompt", "open the right door", "--no-render"]) == 0
    data = json.loads((out / "articulation.json").read_text())
    assert data["units"] == "m" and data["up"] == "z"
    names = {p["name"]: p for p in data["parts"]}
    assert set(names) == {"body", "door_left", "door_right"}
    assert data["target"]["part"] == "door_right" and names["door_right"]["type"] == "revolute"
    for p in data["parts"]:
        assert set(p) == {"name", "type", "axis", "origin", "limits", "parent", "confidence", "type_from"}
    assert names["body"]["type_from"] == "root" and names["door_right"]["type_from"] == "prompt"
    assert names["door_right"]["parent"] == "body"
    import mujoco

    for f in ("object.urdf", "object.xml"):
        m = mujoco.MjModel.from_xml_path(str(out / f))
        assert m.njnt >= 1


def test_predictor_config_accepts_only_known_keys(tmp_path):
    """Shipped configs load (``members`` -> an ensemble); a removed option's key loads only with the value that
    behaves as this version does; unknown keys are refused with the file named."""
    import shutil

    from kinemesh.articulation.predictor import DEFAULT_WEIGHTS, REMOVED_OPTIONS, PredictorEnsemble, load_predictor
    from kinemesh.errors import InputFileError

    if not (DEFAULT_WEIGHTS / "model.safetensors").is_file():
        pytest.skip("articulation weights not shipped")
    for folder in (DEFAULT_WEIGHTS, DEFAULT_WEIGHTS / "no_pretrain"):
        net = load_predictor(folder)
        n_members = json.loads((folder / "config.json").read_text())["members"]
        assert isinstance(net, PredictorEnsemble) and len(net.members) == n_members >= 3
        assert net.config.shape_uniform == 0.5
    tmp = tmp_path / "w"
    shutil.copytree(DEFAULT_WEIGHTS, tmp, ignore=shutil.ignore_patterns("no_pretrain"))
    shipped = json.loads((DEFAULT_WEIGHTS / "config.json").read_text())
    assert REMOVED_OPTIONS == {"shape_floor": 0.0}
    for extra, ok in (({"shape_floor": 0.0}, True), ({"shape_floor": 0.03}, False), ({"p_mirror": 0.0}, False)):
        (tmp / "config.json").write_text(json.dumps({**shipped, **extra}))
        if ok:
            assert isinstance(load_predictor(tmp), PredictorEnsemble)
        else:
            with pytest.raises(InputFileError, match="config.json"):
                load_predictor(tmp)


@pytest.mark.parametrize("uniform, lo, hi", [(0.0, 0, 8), (0.5, 15, 192)])
def test_shape_context_sees_the_door_handle(uniform, lo, hi):
    """The hinge side of a door is read from its handle, a tiny part: by surface area alone it gets about 1
    of the 192 context samples; with ``shape_uniform`` = 0.5 (shipped, the default) half the context is spread
    equally over the other parts, and the microwave's handle gets tens of samples."""
    from kinemesh.articulation.dataset import build_object
    from kinemesh.articulation.predictor import PredictorConfig, part_features

    cfg = PredictorConfig(shape_uniform=uniform)
    obj = build_object("microwave", 0)
    parts = [p for p in obj.parts if len(p.vertices)]
    i = [p.name for p in parts].index("door")
    counts = []
    for seed in range(5):
        pts, _, box, (center, scale) = part_features([(p.vertices, p.faces) for p in parts], i,
                                                     np.random.default_rng(seed), cfg, "door")
        assert pts.shape == (cfg.n_part + cfg.n_shape, 4)
        h = box.to_box((obj.part("door_handle").vertices - center) * scale)
        ctx = pts[pts[:, 3] == 0, :3]
        counts.append(int(np.all((ctx >= h.min(0) - 1e-6) & (ctx <= h.max(0) + 1e-6), axis=1).sum()))
    assert lo <= np.mean(counts) <= hi, counts


def test_bad_inputs_give_clear_messages(tmp_path, capsys):
    from kinemesh.articulation.candidates import part_box
    from kinemesh.articulation.infer import geometric_parts
    from kinemesh.articulation.parts import load_parts, static_object
    from kinemesh.cli import main

    # a single-part mesh
    path = tmp_path / "box.obj"
    _box([0, 0, 0], [1, 1, 1]).export(path)
    assert main(["articulate", str(path), "--out", str(tmp_path / "o")]) == 1
    captured = capsys.readouterr()
    assert "at least two parts" in captured.err + captured.out
    with pytest.raises(KinemeshError, match="at least two parts"):
        geometric_parts(load_parts(path))
    assert not (tmp_path / "o").exists()
    # a flat part (a zero-thickness quad door) still gets a box with a clamped thickness
    quad = Part("flap", np.array([[0, 0, 0], [1, 0, 0], [1, 0, 1], [0, 0, 1.0]]), np.array([[0, 1, 2], [0, 2, 3]]))
    box = part_box(quad.vertices, "flap")
    assert box.extents.min() > 0 and box.extents.max() == pytest.approx(1.0)
    # a degenerate part (all vertices on a line) is named in the error
    line = Part("stick", np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0.0]]), np.array([[0, 1, 2]]))
    body = _part("body", _box([0, 0, -1], [1, 1, 0]))
    with pytest.raises(KinemeshError, match="stick"):
        geometric_parts(static_object([body, line]))
    # per-face labels of the wrong length
    labels = tmp_path / "labels.txt"
    labels.write_text("0\n1\n")
    with pytest.raises(KinemeshError, match="2 labels for the 12 faces"):
        load_parts(path, labels=labels)


def test_part_box_is_kept_per_vertex_content_and_handed_out_as_copies(monkeypatch):
    """``part_box`` keeps the boxes it computed (one articulation asks for each part's box many times): the
    same vertices give the same box without recomputing it, each call gets its own copy (editing one leaves
    the next untouched), other vertices get their own box, the cache stays within ``BOX_CACHE`` and a
    degenerate part is refused under its own name every time (errors are not kept)."""
    from kinemesh.articulation import candidates
    from kinemesh.articulation.candidates import part_box

    monkeypatch.setattr(candidates, "_BOXES", type(candidates._BOXES)())
    monkeypatch.setattr(candidates, "BOX_CACHE", 3)
    calls = []
    real = candidates._part_box
    monkeypatch.setattr(candidates, "_part_box", lambda v, name: calls.append(name) or real(v, name))
    rng = np.random.default_rng(0)
    v = rng.random((50, 3)) * [1.0, 0.5, 0.2]
    a = part_box(v, "a")
    a.axes[0] = 0.0
    a.center += 1.0
    b = part_box(v.copy(), "b")  # equal content, another array
    assert calls == ["a"]
    ref = real(v, "ref")
    assert np.array_equal(b.axes, ref.axes) and np.array_equal(b.center, ref.center)
    assert np.array_equal(b.extents, ref.extents)
    part_box(v + [0.0, 0.0, 1e-9], "moved")  # other content: computed again
    assert calls == ["a", "moved"]
    for k in range(4):
        part_box(rng.random((20, 3)), f"other{k}")
    assert len(candidates._BOXES) == 3
    line = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0.0]])
    for name in ("stick", "rod"):
        with pytest.raises(KinemeshError, match=name):
            part_box(line, name)


def test_parts_from_components_and_labels(tmp_path):
    from kinemesh.articulation.parts import load_parts

    a, b = _box([0, 0, 0], [1, 1, 1]), _box([1.01, 0, 0], [1.5, 1, 1])
    both = trimesh.util.concatenate([a, b])
    path = tmp_path / "two.ply"
    both.export(path)
    obj = load_parts(path)
    assert len(obj.parts) == 2 and sorted(len(p.faces) for p in obj.parts) == [12, 12]
    lab = tmp_path / "lab.npy"
    np.save(lab, np.array([0] * 12 + [1] * 12))
    obj2 = load_parts(path, labels=lab)
    assert {p.name for p in obj2.parts} == {"part_0", "part_1"}


def test_parts_of_a_plain_mesh_are_grouped_as_simulate_groups_them(tmp_path):
    """A plain mesh (no groups or labels): ``articulate`` takes the parts ``simulate`` moves
    (``group_components``: a door in three components, slab, glass and handle, is one part, buttons stay on
    the body), not every connected component; ``auto_parts=False`` keeps the components (slivers merged)."""
    from kinemesh.articulation.parts import load_parts
    from tests.test_segments import _cabinet

    v, f, door = _cabinet()
    path = tmp_path / "cabinet.ply"
    trimesh.Trimesh(v, f, process=False).export(path)
    obj = load_parts(path)
    assert [p.name for p in obj.parts] == ["part_0", "part_1"]
    by_size = sorted(obj.parts, key=lambda p: len(p.vertices))
    # the door's three components, the body's three (body and buttons)
    assert [len(p.vertices) for p in by_size] == [len(v) - door, door]
    assert len(load_parts(path, auto_parts=False).parts) > 2


def test_cli_observed_sequence_fits_joints(tmp_path):
    from kinemesh.cli import main
    from kinemesh.data.partnet import write_partnet_folder
    from kinemesh.geometry.metrics import axis_angle_error_deg

    obj = two_door_cabinet()
    folder = tmp_path / "cab"
    write_partnet_folder(obj, folder)
    rng = np.random.default_rng(1)
    seq = obj.to_sequence([obj.sample_values(rng) for _ in range(4)])
    seq.save(tmp_path / "obs.npz")
    out = tmp_path / "out"
    assert main(["articulate", str(folder), "--out", str(out), "--observed", str(tmp_path / "obs.npz"),
                 "--no-render"]) == 0
    parts = {p["name"]: p for p in json.loads((out / "articulation.json").read_text())["parts"]}
    for j in obj.joints:
        p = parts[j.child]
        assert p["type"] == "revolute" and p["parent"] == "body"
        assert axis_angle_error_deg(p["axis"], j.axis) < 1.0


def test_parts_from_obj_groups_and_glb_nodes(tmp_path):
    from kinemesh.articulation.parts import load_parts

    a, b = _box([-0.5, -0.5, -0.5], [0.5, 0.5, 0.5]), _box([0.5, -0.1, -0.1], [0.7, 0.1, 0.1])
    lines = []
    for name, m, off in (("body", a, 0), ("knob", b, 8)):
        lines.append(f"o {name}")
        lines += [f"v {x} {y} {z}" for x, y, z in m.vertices]
        lines += [f"f {i + 1 + off} {j + 1 + off} {k + 1 + off}" for i, j, k in m.faces]
    (tmp_path / "g.obj").write_text("\n".join(lines) + "\n")
    obj = load_parts(tmp_path / "g.obj")
    assert {p.name for p in obj.parts} == {"body", "knob"} and obj.root == "body"
    np.testing.assert_allclose(obj.part("knob").vertices.mean(0), [0.6, 0, 0], atol=1e-9)
    scene = trimesh.Scene()
    scene.add_geometry(a, node_name="body")
    scene.add_geometry(b, node_name="knob")
    scene.export(tmp_path / "s.glb")
    glb = load_parts(tmp_path / "s.glb")  # glTF is Y up: (x, y, z) -> (x, -z, y)
    np.testing.assert_allclose(glb.part("knob").vertices.mean(0), [0.6, 0, 0], atol=1e-6)


@pytest.mark.parametrize("samplings", [1, 3])
def test_articulate_averages_the_network_over_surface_samplings(monkeypatch, samplings):
    """Test-time sampling (``infer.SAMPLINGS``): the network sees every part under that many surface samplings in
    one batch, and decoding reads the mean of its outputs. The stand-in network's type logits are a function of
    the sampled points, so each sampling reads differently; the decoded type probabilities must be the softmax
    of the mean logits over the samplings that ``part_features`` draws from the same generator."""
    import torch

    from kinemesh.articulation import infer
    from kinemesh.articulation.predictor import ArticulationNet, PredictorConfig, part_features

    cfg = PredictorConfig()
    torch.manual_seed(0)
    inner = ArticulationNet(cfg).eval()
    batches = []

    def logits(points):  # (B, P, 4) -> (B, 3): depends on where the part's samples fell
        part = points[..., 3:] > 0.5
        xyz = points[..., :3]
        m = (xyz * part).sum(1) / part.sum(1).clamp(min=1)
        return 40.0 * torch.stack([m[:, 0], m[:, 1], -m[:, 0] - m[:, 1]], 1)

    class Sampled(torch.nn.Module):
        config = cfg

        def forward(self, points, box_feat):
            batches.append(len(points))
            out = dict(inner(points, box_feat))
            out["type"] = logits(points)
            return out

    obj = two_door_cabinet()
    monkeypatch.setattr(infer, "SAMPLINGS", samplings)
    preds = infer.articulate(obj, net=Sampled(), seed=3, check_validity=False)
    assert batches == [2 * samplings]  # two doors, every sampling in one batch
    parts = infer.geometric_parts(obj)
    root, _, _ = infer.part_tree(parts, seed=3)
    geo = [(p.vertices, p.faces) for p in parts]
    rng = np.random.default_rng(3)
    rows = [torch.as_tensor(part_features(geo, i, rng, cfg, p.name)[0])[None]
            for _ in range(samplings) for i, p in enumerate(parts) if p.name != root]
    per = logits(torch.cat(rows)).view(samplings, 2, 3)
    want = torch.softmax(per.mean(0).double(), -1).numpy()
    got = np.array([p.info["type_probs"] for p in preds])
    np.testing.assert_allclose(got, want, atol=1e-5)
    if samplings > 1:  # the samplings differ, so the mean is not any one of them
        assert float((per[0] - per[1]).abs().max()) > 0.1
        assert not np.allclose(got, torch.softmax(per[0].double(), -1).numpy(), atol=1e-3)
