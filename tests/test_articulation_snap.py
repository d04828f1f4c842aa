"""Movable axes turn onto the object's own axes (``infer.object_frame``, ``infer._snap_axes``)."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from kinemesh.articulation.infer import PartPrediction, _snap_axes, object_frame
from kinemesh.data.articulated import Part


def _turned(mesh: trimesh.Trimesh, yaw_deg: float) -> trimesh.Trimesh:
    m = mesh.copy()
    m.apply_transform(trimesh.transformations.rotation_matrix(np.radians(yaw_deg), (0, 0, 1)))
    return m


def _frame_with_temple(yaw_deg: float = 0.0):
    """A glasses-like front (wide, flat) and a temple behind its left end, turned about Z by ``yaw_deg``."""
    front = trimesh.creation.box(extents=(0.02, 0.14, 0.05))
    temple = trimesh.creation.box(extents=(0.14, 0.006, 0.012))
    temple.apply_translation((-0.08, 0.068, 0.015))
    return [Part(n, _turned(m, yaw_deg).vertices, m.faces, n) for n, m in (("front", front), ("temple", temple))]


def _pred(axis, origin=(0.0, 0.0, 0.0), **info):
    a = np.asarray(axis, float)
    return PartPrediction("temple", "revolute", a / np.linalg.norm(a), np.asarray(origin, float), (0.0, 1.5),
                          "front", 0.9, "temple", dict(info))


def _deg(a, b):
    return float(np.degrees(np.arccos(min(1.0, abs(float(np.dot(a, b)) / np.linalg.norm(a) / np.linalg.norm(b))))))


@pytest.mark.parametrize("yaw", [0.0, 30.0])
def test_object_frame_is_up_and_the_footprints_rectangle(yaw):
    F = object_frame(_frame_with_temple(yaw))
    assert F @ F.T == pytest.approx(np.eye(3), abs=1e-9)
    assert F[2] == pytest.approx([0, 0, 1])
    u = np.array([np.cos(np.radians(yaw)), np.sin(np.radians(yaw)), 0.0])  # the front's width turned by yaw
    assert min(_deg(F[0], u), _deg(F[1], u)) < 1.0


@pytest.mark.parametrize("yaw", [0.0, 30.0])
def test_a_tilted_hinge_turns_onto_the_objects_nearest_axis_through_where_the_part_touches_its_parent(yaw):
    parts = _frame_with_temple(yaw)
    R = trimesh.transformations.rotation_matrix(np.radians(yaw), (0, 0, 1))[:3, :3]
    tilt = np.radians(20.0)
    axis = R @ np.array([np.sin(tilt), 0.0, np.cos(tilt)])  # a temple's hinge read 20 deg off the vertical
    hinge = R @ np.array([-0.01, 0.068, 0.015])  # where the temple meets the front
    origin = hinge - 0.3 * axis  # the decoded point: on the hinge line, far below the temple
    preds = {"temple": _pred(axis, origin)}
    _snap_axes(parts, preds, 35.0, 0.2)
    pr = preds["temple"]
    assert pr.axis == pytest.approx([0, 0, 1]) and pr.info["axis_snapped_deg"] == pytest.approx(20.0)
    # turned about the old line's point nearest the temple's contact with the front: the hinge itself
    assert np.linalg.norm(pr.origin - hinge) < 0.01
    assert np.linalg.norm(np.cross(pr.origin - origin, axis)) == pytest.approx(0.0, abs=1e-12)  # on the old line
    # a slide has no hinge: its direction turns, its point stays
    slide = _pred(axis, origin)
    slide.type = "prismatic"
    _snap_axes(parts, {"temple": slide}, 35.0, 0.2)
    assert slide.axis == pytest.approx([0, 0, 1]) and slide.origin == pytest.approx(origin)


def test_far_axes_and_axes_from_a_parts_own_shape_stay():
    parts = _frame_with_temple()
    far = np.array([np.sin(np.radians(40.0)), 0.0, np.cos(np.radians(40.0))])
    preds = {"temple": _pred(far)}
    _snap_axes(parts, preds, 35.0, 0.2)
    assert preds["temple"].axis == pytest.approx(far) and "axis_snapped_deg" not in preds["temple"].info
    tilted_knob = np.array([0.0, np.sin(np.radians(15.0)), np.cos(np.radians(15.0))])  # on a tilted panel
    preds = {"temple": _pred(tilted_knob, knob={"from": "revolute"})}
    _snap_axes(parts, preds, 35.0, 0.2)
    assert preds["temple"].axis == pytest.approx(tilted_knob)
    fixed = _pred([0.1, 0.0, 1.0])
    fixed.type = "fixed"
    _snap_axes(parts, {"temple": fixed}, 35.0, 0.2)
    assert "axis_snapped_deg" not in fixed.info
