"""Wheels, swivel casters and knobs from the shape (``kinemesh.articulation.infer.wheel_axis``, ``axle_holder``,
``_roll_wheels``, ``knob_axis``, ``_turn_knobs``). Tiny meshes built here: a table top on a swivel caster (fork +
wheel), a cart body holding a wheel's axle itself, shapes that are no wheels (a square foot, a large disc, a
wheel off the ground), an oven front with a knob, a flat round button and a square button, and a camera body with
a button on top."""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.articulation.infer import (
    PartPrediction, _press_buttons, _roll_wheels, _turn_knobs, axle_holder, button_axis, knob_axis, wheel_axis,
)
from kinemesh.data.articulated import Part
from kinemesh.geometry.metrics import axis_angle_error_deg, axis_line_distance


def _part(name, mesh) -> Part:
    return Part(name, np.asarray(mesh.vertices, float), np.asarray(mesh.faces))


def _boxes(name, *boxes) -> Part:
    return _part(name, trimesh.util.concatenate([trimesh.creation.box(bounds=np.array(b, float)) for b in boxes]))


def _wheel(name="wheel", centre=(0.0, 0.0, 0.05), radius=0.05, width=0.02) -> Part:
    """A cylinder turning about +X (its axis) at ``centre`` (m)."""
    m = trimesh.creation.cylinder(radius=radius, height=width, sections=48)
    m.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0]))
    m.apply_translation(centre)
    return _part(name, m)


def _caster_table():
    """Top (0.6 m square at z 0.2..0.24), a caster fork under it (top plate touching the top, two arms at
    x = +-0.02 across the axle) and a wheel of radius 0.05 on the ground, axle along X at z = 0.05."""
    top = _boxes("top", ([-0.3, -0.3, 0.2], [0.3, 0.3, 0.24]))
    fork = _boxes("fork", ([-0.025, -0.03, 0.12], [0.025, 0.03, 0.2]),
                  ([-0.025, -0.03, 0.02], [-0.015, 0.03, 0.12]), ([0.015, -0.03, 0.02], [0.025, 0.03, 0.12]))
    return top, fork, _wheel(width=0.02)


def _pred(name, parent, type_="prismatic"):
    return PartPrediction(name, type_, np.array([0.0, 1.0, 0.0]), np.zeros(3), (0.0, 0.1), parent, 0.9)


def test_wheel_axis_finds_round_parts_on_the_ground_only():
    z0, size = 0.0, 0.6
    axis, centre = wheel_axis(_wheel(), z0, size)
    assert axis_angle_error_deg(axis, [1, 0, 0]) < 1.0
    assert np.allclose(centre, [0, 0, 0.05], atol=2e-3)
    assert wheel_axis(_wheel(centre=(0, 0, 0.3)), z0, size) is None  # off the ground: a knob, not a wheel
    assert wheel_axis(_boxes("foot", ([-0.05, -0.01, 0], [0.05, 0.01, 0.1])), z0, size) is None  # square outline
    assert wheel_axis(_wheel(radius=0.2, centre=(0, 0, 0.2)), z0, size) is None  # too large: a lens cap, a lid


def test_axle_holder_is_the_fork_not_the_top():
    top, fork, wheel = _caster_table()
    assert axle_holder(np.array([1.0, 0, 0]), np.array([0, 0, 0.05]), 0.05, [top, fork]) == 1
    assert axle_holder(np.array([1.0, 0, 0]), np.array([0, 0, 0.05]), 0.05, [top]) is None


def test_roll_wheels_types_wheel_and_swivel_caster():
    top, fork, wheel = _caster_table()
    preds = {"fork": _pred("fork", "top"), "wheel": _pred("wheel", "top")}  # both read as slides (the failure)
    _roll_wheels([top, fork, wheel], "top", preds)
    w, c = preds["wheel"], preds["fork"]
    assert w.type == "revolute" and w.parent == "fork" and w.limits == (-np.pi, np.pi)
    assert axis_angle_error_deg(w.axis, [1, 0, 0]) < 1.0 and axis_line_distance(w.origin, w.axis, [0, 0, 0.05], [1, 0, 0]) < 2e-3
    assert c.type == "revolute" and axis_angle_error_deg(c.axis, [0, 0, 1]) < 1e-6
    assert axis_line_distance(c.origin, c.axis, [0, 0, 0], [0, 0, 1]) < 5e-3  # through the fork's top contact


def test_wheels_and_casters_are_exported_as_continuous_joints(tmp_path):
    """A part the wheel rule turns over a whole turn is a continuous joint (no limits) in the object, its URDF
    and its MJCF, as PartNet-Mobility annotates real wheels; a door's limited hinge stays revolute."""
    import mujoco
    import yourdfpy

    from kinemesh.articulation import export
    from kinemesh.articulation.infer import full_turn, to_articulated
    from kinemesh.data.articulated import ArticulatedObject, Joint

    top, fork, wheel = _caster_table()
    flap = _boxes("flap", ([0.3, -0.1, 0.2], [0.31, 0.1, 0.24]))
    preds = {"fork": _pred("fork", "top"), "wheel": _pred("wheel", "top"),
             "flap": PartPrediction("flap", "revolute", np.array([0.0, 1.0, 0.0]), np.array([0.3, 0, 0.24]),
                                    (0.0, 1.5), "top", 0.9)}
    _roll_wheels([top, fork, wheel], "top", preds)
    assert full_turn(preds["wheel"]) and full_turn(preds["fork"]) and not full_turn(preds["flap"])
    static = [Joint(f"s_{n}", "fixed", "top", n, (0, 0, 1), (0, 0, 0)) for n in ("fork", "wheel", "flap")]
    obj = ArticulatedObject([top, fork, wheel, flap], static, name="cart")
    art = to_articulated(obj, list(preds.values()))
    types = {j.child: (j.type, j.limits) for j in art.joints}
    assert types["wheel"] == ("continuous", None) and types["fork"] == ("continuous", None)
    assert types["flap"] == ("revolute", (0.0, 1.5))
    export.write_urdf(art, tmp_path)
    urdf = yourdfpy.URDF.load(str(tmp_path / "object.urdf"))
    assert sorted(j.type for j in urdf.robot.joints) == ["continuous", "continuous", "revolute"]
    export.write_mjcf(art, tmp_path / "object.xml")
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "object.xml"))
    assert sorted(bool(x) for x in m.jnt_limited) == [False, False, True]


def test_roll_wheels_axle_on_the_root_makes_no_caster():
    body = _boxes("body", ([-0.15, -0.15, 0.08], [0.15, 0.15, 0.2]), ([-0.03, -0.015, 0.015], [-0.015, 0.015, 0.08]),
                  ([0.015, -0.015, 0.015], [0.03, 0.015, 0.08]),
                  ([-0.04, -0.006, 0.024], [0.04, 0.006, 0.036]))  # two lugs hanging from the body, an axle rod
    handle = _boxes("handle", ([0.15, -0.05, 0.15], [0.17, 0.05, 0.18]))
    wheel = _wheel(centre=(0, 0, 0.03), radius=0.03)
    preds = {"wheel": _pred("wheel", "handle"), "handle": _pred("handle", "body", "fixed")}
    _roll_wheels([body, handle, wheel], "body", preds)
    assert preds["wheel"].type == "revolute" and preds["wheel"].parent == "body"
    assert preds["handle"].type == "fixed" and not preds["handle"].info.get("caster")


def _oven_front():
    """A 0.6 m oven body (front face at x = -0.3) with a knob (radius 2 cm, 2 cm deep) sticking out of the front
    at y = 0.1, z = 0.5; a flat round button (radius 1 cm, 2 mm deep) and a square button (2 cm, 1 cm deep)."""
    body = _boxes("body", ([-0.3, -0.3, 0.0], [0.3, 0.3, 0.6]))
    knob = _wheel("knob", centre=(-0.31, 0.1, 0.5), radius=0.02, width=0.02)
    button = _wheel("button", centre=(-0.301, -0.1, 0.5), radius=0.01, width=0.002)
    square = _boxes("square", ([-0.31, -0.01, 0.49], [-0.3, 0.01, 0.51]))
    return body, knob, button, square


def test_knob_axis_finds_small_round_parts_that_stand_out():
    body, knob, button, square = _oven_front()
    axis, centre = knob_axis(knob, 0.6)
    assert axis_angle_error_deg(axis, [1, 0, 0]) < 1.0 and np.allclose(centre, [-0.31, 0.1, 0.5], atol=2e-3)
    assert knob_axis(button, 0.6) is None  # flat: a push button
    assert knob_axis(_wheel("tiny", centre=(-0.305, 0.0, 0.4), radius=0.005, width=0.005), 0.6) is None  # too small
    assert knob_axis(square, 0.6) is None  # square outline
    assert knob_axis(_wheel("lid", radius=0.2, width=0.1), 0.6) is None  # too large beside the object: a lid


def test_turn_knobs_replaces_type_axis_and_origin_of_knobs_only():
    body, knob, button, square = _oven_front()
    preds = {n: _pred(n, "body") for n in ("knob", "button", "square")}  # all read as slides along y (the failure)
    preds["knob"].type = "fixed"
    _turn_knobs([body, knob, button, square], preds)
    k = preds["knob"]
    assert k.type == "revolute" and k.limits == (-np.pi, np.pi) and k.info["knob"]["from"] == "fixed"
    assert axis_angle_error_deg(k.axis, [1, 0, 0]) < 1.0
    assert axis_line_distance(k.origin, k.axis, [-0.31, 0.1, 0.5], [1, 0, 0]) < 2e-3
    assert preds["button"].type == "prismatic" and preds["square"].type == "prismatic"
    assert "knob" not in preds["button"].info


def test_turn_knobs_leaves_a_round_pull_on_a_drawer_fixed():
    body, knob, _, _ = _oven_front()
    drawer = _boxes("drawer", ([-0.32, -0.25, 0.05], [0.0, 0.25, 0.25]))  # its front 2 cm before the body's
    pull = _wheel("pull", centre=(-0.33, 0.0, 0.15), radius=0.02, width=0.02)
    preds = {"drawer": _pred("drawer", "body"), "pull": _pred("pull", "drawer", "fixed"),
             "knob": _pred("knob", "drawer")}  # a wrong tree parent; the body holds it
    preds["drawer"].axis = np.array([1.0, 0.0, 0.0])
    _turn_knobs([body, drawer, pull, knob], preds)
    assert preds["pull"].type == "fixed" and "knob" not in preds["pull"].info
    assert preds["knob"].type == "revolute" and preds["knob"].parent == "body"  # the same shape on the body


def test_press_buttons_slides_small_parts_into_their_parent_along_their_thinnest_side():
    """A 12 cm camera body with a 1.5 x 1.5 x 0.5 cm button on top, read as sliding along the top (+x, the failure on
    a category the network never saw), and a drawer-sized slab on its side read sliding along x as well."""
    body = _boxes("body", ([-0.06, -0.04, 0.0], [0.06, 0.04, 0.08]))
    button = _boxes("button", ([-0.0075, -0.0075, 0.08], [0.0075, 0.0075, 0.085]))
    slab = _boxes("slab", ([-0.06, 0.04, 0.0], [0.06, 0.05, 0.08]))
    a = button_axis(button, body, 0.12)
    assert axis_angle_error_deg(a, [0, 0, -1]) < 1e-6  # pressed down into the body
    assert button_axis(slab, body, 0.12) is None  # as large as the object: no button
    preds = {n: PartPrediction(n, "prismatic", np.array([1.0, 0.0, 0.0]), np.zeros(3), (0.0, 0.004), "body", 0.9)
             for n in ("button", "slab")}
    _press_buttons([body, button, slab], preds)
    b = preds["button"]
    assert axis_angle_error_deg(b.axis, [0, 0, -1]) < 1e-6 and b.limits == (0.0, 0.004) and "button" in b.info
    assert np.allclose(preds["slab"].axis, [1, 0, 0]) and "button" not in preds["slab"].info
    # read pressed in already, but with limits that pull it 3 mm out of the body: pressed in only (BUTTON_LIMITS)
    preds = {"button": PartPrediction("button", "prismatic", np.array([0.0, 0.0, -1.0]), np.zeros(3), (-0.003, 0.001),
                                      "body", 0.9)}
    _press_buttons([body, button], preds)
    assert np.allclose(preds["button"].axis, [0, 0, -1]) and preds["button"].limits == (0.0, 0.003)
    assert preds["button"].info["button"] == {"limits": [-0.003, 0.001]}


def test_turn_knobs_never_hangs_a_knob_from_its_own_cap():
    """A knob 1 mm off the oven's front with a cap on its front face (the cap hangs from the knob): the cap is
    nearer to the knob's end faces than the body, but the knob keeps the body as its parent (no cycle)."""
    body = _boxes("body", ([-0.3, -0.3, 0.0], [0.3, 0.3, 0.6]))
    knob = _wheel("knob", centre=(-0.311, 0.1, 0.5), radius=0.02, width=0.02)  # back face at x = -0.301
    cap = _wheel("cap", centre=(-0.322, 0.1, 0.5), radius=0.01, width=0.002)  # on its front face, x = -0.321
    preds = {"knob": _pred("knob", "body"), "cap": _pred("cap", "knob", "fixed")}
    _turn_knobs([body, knob, cap], preds)
    assert preds["knob"].type == "revolute" and preds["knob"].parent == "body" and preds["cap"].parent == "knob"


def test_roll_wheels_never_hangs_a_wheel_from_its_own_hubcap():
    """A wheel with a hubcap on its face (the hubcap hangs from the wheel) under a body that holds no axle: the
    hubcap holds the axle line, but the wheel keeps its parent (no cycle)."""
    body = _boxes("body", ([-0.3, -0.3, 0.12], [0.3, 0.3, 0.2]))
    wheel = _wheel(centre=(0.0, 0.0, 0.05), radius=0.05, width=0.02)
    hubcap = _wheel("hubcap", centre=(0.012, 0.0, 0.05), radius=0.015, width=0.004)
    preds = {"wheel": _pred("wheel", "body"), "hubcap": _pred("hubcap", "wheel", "fixed")}
    _roll_wheels([body, wheel, hubcap], "body", preds)
    assert preds["wheel"].type == "revolute" and preds["wheel"].parent == "body" and preds["hubcap"].parent == "wheel"
