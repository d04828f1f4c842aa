"""Hinge lines put on the box edge where a panel meets its parent (``kinemesh.articulation.infer.hinge_edge``
/ ``_snap_to_edges``). Tiny meshes built here: an open-front cabinet (fronts face -X) with a 2 cm door closing
it, hinged on its inner face (x = 0) along its -y edge; a knob on the door (not a panel)."""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.articulation.infer import PartPrediction, _snap_to_edges, _with_tree, hinge_edge
from kinemesh.data.articulated import Part
from kinemesh.geometry.metrics import axis_line_distance

Z = np.array([0.0, 0.0, 1.0])
HINGE = np.array([0.0, -0.4, 0.4])  # the true hinge: inner face x = 0, edge y = -0.4


def _part(name, *boxes) -> Part:
    """A part made of axis-aligned boxes given as (lo, hi) corner pairs (m)."""
    m = trimesh.util.concatenate([trimesh.creation.box(bounds=np.array([lo, hi], float)) for lo, hi in boxes])
    return Part(name, np.asarray(m.vertices), np.asarray(m.faces))


def _cabinet() -> tuple[Part, Part]:
    t = 0.02
    body = _part("body", ([0, -0.4, 0], [0.5, 0.4, t]), ([0, -0.4, 0.8 - t], [0.5, 0.4, 0.8]),
                 ([0, -0.4, 0], [0.5, -0.4 + t, 0.8]), ([0, 0.4 - t, 0], [0.5, 0.4, 0.8]),
                 ([0.5 - t, -0.4, 0], [0.5, 0.4, 0.8]))
    return body, _part("door", ([-0.02, -0.4, 0.0], [0.0, 0.4, 0.8]))


def test_off_line_moved_onto_contact_edge():
    body, door = _cabinet()
    # the real-validation failure: the line inside the door's slab and 8 cm in from its hinge edge
    off = np.array([-0.012, -0.32, 0.1])
    assert axis_line_distance(off, Z, HINGE, Z) > 0.08
    point = hinge_edge(door, body, Z, off, 0.8)
    assert point is not None
    assert axis_line_distance(point, Z, HINGE, Z) < 1e-9  # the back face's -y edge (the side the line leans to)
    assert abs(point[2] - 0.4) < 1e-9  # the edge's midpoint
    # a line leaning to the +y side goes to the +y edge of the same face
    plus = hinge_edge(door, body, Z, np.array([-0.012, 0.33, 0.1]), 0.8)
    assert axis_line_distance(plus, Z, [0.0, 0.4, 0.0], Z) < 1e-9


def test_outer_face_kept_and_lines_that_must_not_move():
    body, door = _cabinet()
    # a line on the door's outer face (x = -0.02, the synthetic objects' convention) keeps that face
    outer = hinge_edge(door, body, Z, np.array([-0.019, -0.37, 0.5]), 0.8)
    assert axis_line_distance(outer, Z, [-0.02, -0.4, 0.0], Z) < 1e-9
    # a line through the door's middle is no edge line
    assert hinge_edge(door, body, Z, np.array([-0.01, 0.05, 0.4]), 0.8) is None
    # an axis normal to the panel (a blade or dial turning in its plane) is no hinge edge
    assert hinge_edge(door, body, np.array([1.0, 0.0, 0.0]), np.array([0.0, -0.35, 0.05]), 0.8) is None
    # a tilted axis (more than 10 deg off every box axis) is left to the other rules
    tilted = np.array([0.0, np.sin(np.radians(20)), np.cos(np.radians(20))])
    assert hinge_edge(door, body, tilted, np.array([-0.01, -0.35, 0.4]), 0.8) is None
    # not a panel: a 4 cm knob cube on the door
    knob = _part("knob", ([-0.06, 0.2, 0.38], [-0.02, 0.24, 0.42]))
    assert hinge_edge(knob, door, Z, np.array([-0.05, 0.23, 0.4]), 0.8) is None


def test_snap_to_edges_end_to_end():
    from kinemesh.articulation.infer import geometric_parts
    from kinemesh.data.articulated import ArticulatedObject, Joint
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig

    body, door = _cabinet()
    obj = ArticulatedObject([body, door], [Joint("j", "fixed", "body", "door", (0, 0, 1), (0, 0, 0))], "cabinet", "c")
    parts = geometric_parts(obj)
    parents = {"door": "body"}
    grid = OccupancyGrid(_with_tree(parts, "body", parents),
                         ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02))
    # opens outward (towards -x) turning about +z through the -y edge: limits (0, 86 deg)
    pr = PartPrediction("door", "revolute", Z.copy(), np.array([-0.012, -0.32, 0.1]), (0.0, 1.5), "body", 0.9)
    _snap_to_edges(parts, parents, {"door": pr}, grid)
    assert pr.info.get("moved_to_edge")
    assert axis_line_distance(pr.origin, pr.axis, HINGE, Z) < 1e-9
    assert pr.type == "revolute" and pr.limits == (0.0, 1.5) and np.allclose(pr.axis, Z)
    # already on the edge: nothing proposed, nothing moved
    pr2 = PartPrediction("door", "revolute", Z.copy(), HINGE.copy(), (0.0, 1.5), "body", 0.9)
    _snap_to_edges(parts, parents, {"door": pr2}, grid)
    assert "moved_to_edge" not in pr2.info and "moved_to_edge_tried" not in pr2.info
