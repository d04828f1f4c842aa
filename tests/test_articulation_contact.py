"""Pivot refinement by the rest contact (``kinemesh.articulation.infer.contact_pivot`` / ``_snap_to_contact``):
a revolute line that misses the parent is moved through a compact contact region (pliers blades crossing
at their rivet); a door's line, on or off its hinge, is left alone (its contact is not compact)."""

from __future__ import annotations

import numpy as np
import pytest

from kinemesh.articulation.dataset import build_object
from kinemesh.articulation.infer import PartPrediction, _snap_to_contact, _with_tree, contact_pivot
from kinemesh.geometry.metrics import axis_line_distance


def _size(obj) -> float:
    v, _, _ = obj.merged()
    return float(np.max(np.ptp(v, axis=0)))


@pytest.fixture(scope="module")
def pliers():
    return build_object("pliers", 3)  # a training-range seed: only the geometry is used


def test_pliers_pivot_snapped_back(pliers):
    j = next(j for j in pliers.joints if j.type == "revolute")
    size = _size(pliers)
    # the decoder's failure on held-out pliers: the line 4.5 cm along the handle (towards -x), off the parent
    wrong = np.asarray(j.origin) + [-0.045, 0.007, 0.0]
    assert axis_line_distance(wrong, j.axis, j.origin, j.axis) / size > 0.2
    new = contact_pivot(pliers.part(j.child), pliers.part(j.parent), np.asarray(j.axis), wrong, size)
    assert new is not None
    assert axis_line_distance(new, j.axis, j.origin, j.axis) / size < 0.1
    # moved along the line's normal only (the axis direction's coordinate of the origin is kept)
    assert abs(new[2] - wrong[2]) < 1e-9
    # a line already through the rivet stays
    assert contact_pivot(pliers.part(j.child), pliers.part(j.parent), np.asarray(j.axis), np.asarray(j.origin),
                         size) is None


def test_snap_to_contact_end_to_end(pliers):
    from kinemesh.articulation.infer import geometric_parts
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig

    j = next(j for j in pliers.joints if j.type == "revolute")
    parts = geometric_parts(pliers)
    parents = {j.child: j.parent}
    grid = OccupancyGrid(_with_tree(parts, j.parent, parents),
                         ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02))
    wrong = np.asarray(j.origin) + [-0.045, 0.007, 0.0]
    pr = PartPrediction(j.child, "revolute", np.asarray(j.axis, float), wrong, j.limits, j.parent, 0.9)
    _snap_to_contact(parts, parents, {j.child: pr}, grid)
    assert pr.info.get("moved_to_contact")
    assert axis_line_distance(pr.origin, pr.axis, j.origin, j.axis) / _size(pliers) < 0.1
    assert pr.limits == j.limits and pr.type == "revolute"


def test_door_left_alone():
    obj = build_object("cabinet", 0)
    size = _size(obj)
    doors = [j for j in obj.joints if j.type == "revolute"]
    assert doors
    for j in doors:
        door, body = obj.part(j.child), obj.part(j.parent)
        a = np.asarray(j.axis, float)
        # the true hinge line passes along the body: kept
        assert contact_pivot(door, body, a, np.asarray(j.origin), size) is None
        # a line off the body (10 cm in front of the door): the door's contact with the body is its whole
        # rim, not compact, so no contact pivot is proposed
        off = np.asarray(j.origin) + [0.0, -0.1, 0.0]
        assert contact_pivot(door, body, a, off, size) is None
