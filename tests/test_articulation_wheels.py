"""Wheels and swivel casters from the shape (``kinemesh.articulation.infer.wheel_axis``, ``axle_holder``,
``_roll_wheels``). Tiny meshes built here: a table top on a swivel caster (fork + wheel), a cart body holding
a wheel's axle itself, and shapes that are no wheels (a square foot, a large disc, a wheel off the ground)."""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.articulation.infer import PartPrediction, _roll_wheels, axle_holder, wheel_axis
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
