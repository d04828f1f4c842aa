"""Predicted limits end where a part would leave its parent (``infer.contact_limit``, ``infer._limits_in_contact``)."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from kinemesh.articulation import infer
from kinemesh.articulation.infer import PartPrediction, _limits_in_contact, contact_limit
from kinemesh.data.articulated import Part


def _part(name: str, mesh: trimesh.Trimesh) -> Part:
    return Part(name, np.asarray(mesh.vertices, float), np.asarray(mesh.faces), name)


def _bottle_and_cap():
    """A 0.3 m bottle (a box) with a 4 cm cap resting on its top (touching it)."""
    body = trimesh.creation.box(extents=(0.1, 0.1, 0.3))
    cap = trimesh.creation.box(extents=(0.06, 0.06, 0.04))
    cap.apply_translation((0.0, 0.0, 0.17))
    return _part("body", body), _part("cap", cap)


def _carcass_and_drawer(depth: float = 0.4):
    """An open-fronted carcass (five 1 cm walls, 0.5 m wide, ``depth`` deep, open towards +x) and a drawer box
    inside it touching its floor."""
    walls = []
    w, h, t = 0.5, 0.4, 0.01
    for ext, at in (((depth, w, t), (0, 0, -h / 2)), ((depth, w, t), (0, 0, h / 2)),
                    ((depth, t, h), (0, -w / 2, 0)), ((depth, t, h), (0, w / 2, 0)),
                    ((t, w, h), (-depth / 2, 0, 0))):
        b = trimesh.creation.box(extents=ext)
        b.apply_translation(at)
        walls.append(b)
    drawer = trimesh.creation.box(extents=(depth - 0.02, w - 0.04, 0.1))
    drawer.apply_translation((0.01, 0.0, -h / 2 + t / 2 + 0.05))
    return _part("carcass", trimesh.util.concatenate(walls)), _part("drawer", drawer)


def _pred(name, parent, type_, axis, origin, limits):
    return PartPrediction(name, type_, np.asarray(axis, float), np.asarray(origin, float), limits, parent, 0.9,
                          name, {})


def _size(parts):
    v = np.concatenate([p.vertices for p in parts])
    return float(np.ptp(v, axis=0).max())


def _scaled(part: Part, k: float) -> Part:
    return Part(part.name, part.vertices * k, part.faces, part.label)


@pytest.mark.parametrize("scale", [1.0, 6.0])
def test_a_cap_read_as_sliding_far_up_stops_where_it_leaves_the_bottle(scale):
    from kinemesh.dynamics.joints import CLOSED_LIMIT

    body, cap = (_scaled(p, scale) for p in _bottle_and_cap())
    size = _size([body, cap])
    preds = {"cap": _pred("cap", "body", "prismatic", (0, 0, 1), (0, 0, 0.17 * scale), (-0.02, 1.5 * scale))}
    _limits_in_contact([body, cap], preds, size)
    lo, hi = preds["cap"].limits
    # lifted, the cap's gap to the bottle grows 1:1 with the slide: it stops at LIMIT_GAP x size (within the
    # spacing of the surface samples), but never nearer rest than 1.5 x the dynamics' closed-stop distance (the
    # 0.34 m bottle: 5 mm -> 15 mm; the 2 m one: 31 mm); pushed into the bottle it never leaves it: kept
    keep = 1.5 * CLOSED_LIMIT[1]
    assert hi == pytest.approx(max(infer.LIMIT_GAP * size, keep), abs=0.01 * scale)
    assert (hi == keep) == (scale == 1.0)
    assert lo == pytest.approx(-0.02)
    assert preds["cap"].info["limits_before_contact"] == pytest.approx([-0.02, 1.5 * scale])


def test_a_drawer_keeps_the_travel_that_leaves_it_in_its_carcass_and_loses_the_rest():
    carcass, drawer = _carcass_and_drawer(depth=0.4)
    size = _size([carcass, drawer])
    preds = {"drawer": _pred("drawer", "carcass", "prismatic", (1, 0, 0), (0, 0, 0), (0.0, 0.3))}
    _limits_in_contact([carcass, drawer], preds, size)
    assert preds["drawer"].limits == (0.0, 0.3) and "limits_before_contact" not in preds["drawer"].info
    preds = {"drawer": _pred("drawer", "carcass", "prismatic", (1, 0, 0), (0, 0, 0), (0.0, 0.9))}
    _limits_in_contact([carcass, drawer], preds, size)
    hi = preds["drawer"].limits[1]
    # it touches the carcass until its back passes the front edge, 0.39 m out: no further than that + the gap
    assert 0.36 < hi < 0.39 + infer.LIMIT_GAP * size + 0.02


def test_a_drawer_clear_of_its_carcass_walls_keeps_its_travel_until_it_has_slid_out():
    """Real drawers touch their carcass only at the front frame: inside, 3 cm of clearance. Pulled out, the front
    leaves the frame at once, but the drawer is held until it has passed the carcass's extent along the slide."""
    carcass, _ = _carcass_and_drawer(depth=0.4)
    box = trimesh.creation.box(extents=(0.34, 0.42, 0.3))  # 3 cm clear of the walls (0.5 wide, 0.4 high inside)
    box.apply_translation((0.0, 0.0, 0.0))
    front = trimesh.creation.box(extents=(0.01, 0.5, 0.4))  # the front panel, flush on the carcass's front edges
    front.apply_translation((0.205, 0.0, 0.0))
    drawer = _part("drawer", trimesh.util.concatenate([box, front]))
    size = _size([carcass, drawer])
    preds = {"drawer": _pred("drawer", "carcass", "prismatic", (1, 0, 0), (0, 0, 0), (0.0, 0.3))}
    _limits_in_contact([carcass, drawer], preds, size)
    assert preds["drawer"].limits == (0.0, 0.3)
    preds = {"drawer": _pred("drawer", "carcass", "prismatic", (1, 0, 0), (0, 0, 0), (0.0, 0.9))}
    _limits_in_contact([carcass, drawer], preds, size)
    # out of the carcass once its back (x = -0.17) passes the carcass's front (x = 0.2): 0.37 m
    assert preds["drawer"].limits[1] == pytest.approx(0.37, abs=0.01)


def test_hinges_keep_their_limits_and_so_does_a_part_touching_nothing(monkeypatch):
    carcass, drawer = _carcass_and_drawer()
    size = _size([carcass, drawer])
    # the drawer as a flap hinged on its bottom front edge, which touches the carcass's floor: it keeps contact;
    # hinged on a line 10 cm in front of it, it swings away from the carcass
    on_edge = _pred("drawer", "carcass", "revolute", (0, 1, 0), (0.2, 0.0, -0.195), (-1.5, 0.0))
    off = _pred("drawer", "carcass", "revolute", (0, 1, 0), (0.3, 0.0, -0.195), (-1.5, 0.0))
    _limits_in_contact([carcass, drawer], {"drawer": off}, size)
    assert off.limits == (-1.5, 0.0)  # hinges are not in LIMIT_TYPES: their limits stay whatever they do
    monkeypatch.setattr(infer, "LIMIT_TYPES", ("prismatic", "revolute"))
    _limits_in_contact([carcass, drawer], {"drawer": on_edge}, size)
    assert on_edge.limits == (-1.5, 0.0)
    _limits_in_contact([carcass, drawer], {"drawer": off}, size)
    assert -1.2 < off.limits[0] < -0.1 and off.limits[1] == 0.0  # with hinges included, the off line is cut
    monkeypatch.undo()
    body, cap = _bottle_and_cap()
    cap = Part("cap", cap.vertices + np.array([0.0, 0.0, 0.1]), cap.faces, "cap")  # floating 10 cm above
    preds = {"cap": _pred("cap", "body", "prismatic", (0, 0, 1), (0, 0, 0.27), (0.0, 0.25))}
    _limits_in_contact([body, cap], preds, _size([body, cap]))
    assert preds["cap"].limits == (0.0, 0.25)


def test_contact_limit_crosses_the_gap_between_poses_on_either_side():
    ref = np.stack(np.meshgrid(np.linspace(-1, 1, 41), np.linspace(-1, 1, 41), [0.0]), -1).reshape(-1, 3)
    pts = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    # a slide along z leaves the plane at once: the gap grows 1:1 and crosses 0.1 at 0.1 (linear between poses)
    for limit in (0.8, -0.8):
        assert contact_limit(pts, ref, "prismatic", (0, 0, 1), (0, 0, 0), limit, 0.1) == pytest.approx(
            0.1 * np.sign(limit), abs=1e-9)
    # a slide within the plane never leaves it (up to the grid spacing, 0.05 < tol): the whole limit
    assert contact_limit(pts, ref, "prismatic", (1, 0, 0), (0, 0, 0), 0.5, 0.1) == 0.5
    # a turn about the x axis through the origin lifts the point at y = 0.5 by 0.5 sin(a): crosses 0.1 near 0.2 rad
    a = contact_limit(pts[1:], ref, "revolute", (1, 0, 0), (0, 0, 0), 1.5, 0.1)
    assert a == pytest.approx(np.arcsin(0.2), abs=0.02)
