"""Hinge edge of revolute panels from their shape (``kinemesh.articulation.infer.panel_hinge`` /
``_hinge_panels``) and the part-tree root of objects on wheels (``part_tree``). Tiny meshes built here: a
cabinet whose front flap has its handle on top (hinged along the bottom edge), a door with its handle on a
side, a box flap stored open (hinged along the edge touching the box), a knife blade (no in-plane hinge)."""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.articulation.infer import (
    PartPrediction, _double_doors, _hinge_panels, _snap_to_slab, _with_tree, double_doors, handle_centroid,
    panel_hinge, part_tree, slab_middle,
)
from kinemesh.data.articulated import Part
from kinemesh.geometry.metrics import axis_angle_error_deg, axis_line_distance


def _part(name, *boxes) -> Part:
    """A part made of axis-aligned boxes given as (lo, hi) corner pairs (m)."""
    m = trimesh.util.concatenate([trimesh.creation.box(bounds=np.array([lo, hi], float)) for lo, hi in boxes])
    return Part(name, np.asarray(m.vertices), np.asarray(m.faces))


def _carcass() -> Part:
    """An open-front cabinet body (fronts face -X like PartNet-Mobility objects): x 0..0.5, y +-0.4, z 0..0.8."""
    t = 0.02
    return _part("body", ([0, -0.4, 0], [0.5, 0.4, t]), ([0, -0.4, 0.8 - t], [0.5, 0.4, 0.8]),
                 ([0, -0.4, 0], [0.5, -0.4 + t, 0.8]), ([0, 0.4 - t, 0], [0.5, 0.4, 0.8]),
                 ([0.5 - t, -0.4, 0], [0.5, 0.4, 0.8]))


def _door(handle_lo, handle_hi, y=(-0.4, 0.4)) -> Part:
    """A 2 cm door closing the cabinet's front with a handle bar (lo, hi corners) merged into its mesh."""
    return _part("door", ([-0.02, y[0], 0.0], [0.0, y[1], 0.8]), (handle_lo, handle_hi))


def _stand_in(type_logits, k: int | None = None):
    """A stand-in predictor (the real network's other heads, seed 0) whose type head reads ``type_logits``
    (fixed, revolute, prismatic) and whose axis head reads the part's box axis ``k`` (None: the network's; a
    list: the three box axes' logits, each axis's line through the middle of the part's box)."""
    import torch

    from kinemesh.articulation.predictor import ArticulationNet, PredictorConfig

    cfg = PredictorConfig()
    torch.manual_seed(0)
    inner = ArticulationNet(cfg).eval()

    class StandIn(torch.nn.Module):
        config = cfg

        def forward(self, points, box_feat):
            out = dict(inner(points, box_feat))
            out["type"] = torch.tensor([list(type_logits)]).expand(len(points), 3)
            if isinstance(k, (list, tuple)):
                out["axis_cls"] = torch.tensor([list(k)]).expand(len(points), 3)
                cells = torch.zeros_like(out["origin_cls"])
                cells[..., cells.shape[-1] // 2] = 10.0  # every axis's line through the box's middle
                out["origin_cls"] = cells
            elif k is not None:
                logits = torch.full((len(points), 3), 5.0)
                logits[:, k] = 10.0
                out["axis_cls"] = logits
            out["axis_res"] = torch.zeros_like(out["axis_res"])
            return out

    return StandIn()


def test_handle_on_top_gives_bottom_hinge():
    body = _carcass()
    door = _door([-0.06, -0.2, 0.72], [-0.02, 0.2, 0.75])  # bar along the top edge: a drop-down flap
    wrong_axis = np.array([0.0, 0.0, 1.0])  # read as a side-hinged door (the real-object failure)
    lines = panel_hinge(door, body, [], wrong_axis, np.array([0.0, 0.4, 0.4]), 0.8)
    assert [w for _, _, w in lines] == ["handle", "handle, slab middle", "handle, slab's outer face"]
    for axis, point, _ in lines:
        assert axis_angle_error_deg(axis, [0, 1, 0]) < 1.0  # horizontal, along the flap's width
        assert abs(point[2] - 0.0) < 1e-6  # on the bottom edge, away from the handle
    # first at the predicted line's depth across the panel (here the door's inner face, x = 0), then in the
    # middle of the door's own slab (x = -0.01), then on the slab's outer face, the handle left out (x = -0.02)
    assert np.allclose([p[0] for _, p, _ in lines], [0.0, -0.01, -0.02], atol=2e-3)


def test_a_bottom_hinge_that_sweeps_into_the_front_below_moves_into_the_door_slab():
    """An oven: a 3 cm door above a kick panel flush with it, its handle bar on top, read as side-hinged with
    the line on its inner face. The handle names the bottom edge, but a door turning down about its inner face
    sweeps its lower outer edge into the kick panel; in the middle of its slab it clears it."""
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig

    t = 0.02
    body = _part("body", ([0, -0.4, 0], [0.5, 0.4, t]), ([0, -0.4, 0.8 - t], [0.5, 0.4, 0.8]),
                 ([0, -0.4, 0], [0.5, -0.4 + t, 0.8]), ([0, 0.4 - t, 0], [0.5, 0.4, 0.8]),
                 ([0.5 - t, -0.4, 0], [0.5, 0.4, 0.8]), ([-0.03, -0.4, 0.0], [0.0, 0.4, 0.15]))
    door = _part("door", ([-0.03, -0.4, 0.15], [0.0, 0.4, 0.8]), ([-0.07, -0.3, 0.72], [-0.03, 0.3, 0.75]))
    parts, parents = [body, door], {"door": "body"}
    grid = OccupancyGrid(_with_tree(parts, "body", parents),
                         ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02))
    pr = PartPrediction("door", "revolute", np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.4, 0.4]), (0.0, 1.5),
                        "body", 0.9)
    _hinge_panels(parts, parents, {"door": pr}, grid)
    tried = pr.info["panel_hinge"]
    assert tried[0]["reason"] == "handle" and not any(tried[0]["valid"])  # the inner face collides
    assert pr.info["moved_to_panel_edge"] == "handle, slab middle"
    assert axis_line_distance(pr.origin, pr.axis, [-0.015, 0.0, 0.15], [0, 1, 0]) < 2e-3


def test_handle_on_side_and_as_attached_part():
    body = _carcass()
    door = _part("door", ([-0.02, -0.4, 0.0], [0.0, 0.4, 0.8]))
    handle = _part("handle", ([-0.06, -0.37, 0.3], [-0.02, -0.34, 0.5]))  # vertical bar near the -y edge
    from kinemesh.geometry.sampling import sample_surface

    plain = sample_surface(door.vertices, door.faces, 2000, seed=0)[0] - [-0.01, 0.0, 0.4]  # box frame
    assert handle_centroid(plain, np.array([0.02, 0.8, 0.8]), 0, -1.0) is None
    knob = sample_surface(handle.vertices, handle.faces, 300, seed=0)[0] - [-0.01, 0.0, 0.4]
    h = handle_centroid(np.concatenate([plain, knob]), np.array([0.02, 0.8, 0.8]), 0, -1.0)
    assert h is not None and h[0] < -0.8 and abs(h[1]) < 0.2  # near the -y edge, mid-height
    lines = panel_hinge(door, body, [handle], np.array([0.0, 1.0, 0.0]), np.array([-0.01, 0.0, 0.0]), 0.8)
    assert lines[0][2] == "handle" and all(w.startswith("handle,") for _, _, w in lines[1:])  # other depths
    axis, point, _ = lines[0]
    assert axis_angle_error_deg(axis, [0, 0, 1]) < 1.0 and abs(point[1] - 0.4) < 1e-6  # the far side edge
    # without the handle the plain door gives no cue (its contact with the body is the whole rim)
    assert panel_hinge(door, body, [], np.array([0.0, 1.0, 0.0]), np.array([-0.01, 0.0, 0.0]), 0.8) == []


def test_tall_narrow_door_not_hinged_on_its_short_side():
    body = _carcass()
    # a 20 cm wide, 80 cm tall door with its knob on top: hinged on a long side in practice, so no cue
    door = _door([-0.05, -0.02, 0.72], [-0.02, 0.02, 0.76], y=(-0.1, 0.1))
    assert panel_hinge(door, body, [], np.array([0.0, 0.0, 1.0]), np.array([-0.01, 0.1, 0.4]), 0.8) == []


def test_tall_door_with_its_handle_low_in_a_corner_hinges_on_the_far_long_side():
    """A 40 x 80 cm door whose knob sits low near its -y edge (as far out along the height as across): only a
    long side can carry its hinge, so the knob's side decides alone."""
    body = _carcass()
    door = _door([-0.05, -0.17, 0.1], [-0.02, -0.13, 0.14], y=(-0.2, 0.2))
    lines = panel_hinge(door, body, [], np.array([0.0, 0.0, 1.0]), np.array([-0.01, -0.2, 0.4]), 0.8)
    assert lines[0][2] == "handle" and all(w.startswith("handle,") for _, _, w in lines[1:])  # other depths
    axis, point, _ = lines[0]
    assert axis_angle_error_deg(axis, [0, 0, 1]) < 1.0 and abs(point[1] - 0.2) < 1e-6  # the far long edge


def test_wide_door_with_its_handle_at_one_end_hinges_on_the_upright_far_side(monkeypatch):
    """An 80 cm wide, 40 cm tall door (a microwave's) with its handle bar near its -y end: its upright short
    side carries the hinge, so the handle names the far upright edge. Without the upright exemption the long
    sides alone were allowed and the handle, mid-height, gave no cue (train-split microwaves 90 deg off)."""
    import kinemesh.articulation.infer as infer

    t = 0.02
    body = _part("body", ([0, -0.4, 0], [0.5, 0.4, t]), ([0, -0.4, 0.4 - t], [0.5, 0.4, 0.4]),
                 ([0, -0.4, 0], [0.5, -0.4 + t, 0.4]), ([0, 0.4 - t, 0], [0.5, 0.4, 0.4]),
                 ([0.5 - t, -0.4, 0], [0.5, 0.4, 0.4]))
    door = _part("door", ([-0.02, -0.4, 0.0], [0.0, 0.4, 0.4]), ([-0.06, -0.37, 0.1], [-0.02, -0.34, 0.3]))
    lines = panel_hinge(door, body, [], np.array([0.0, 1.0, 0.0]), np.array([-0.01, 0.0, 0.0]), 0.8)
    assert lines[0][2] == "handle" and all(w.startswith("handle,") for _, _, w in lines[1:])  # other depths
    axis, point, _ = lines[0]
    assert axis_angle_error_deg(axis, [0, 0, 1]) < 1.0 and abs(point[1] - 0.4) < 1e-6
    # the same door lying flat (a lid: no side is upright) keeps the long-side rule: no cue
    flat = Part("lid", door.vertices[:, [2, 1, 0]], door.faces[:, ::-1])
    lid_body = Part("body", body.vertices[:, [2, 1, 0]], body.faces[:, ::-1])
    assert panel_hinge(flat, lid_body, [], np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, -0.01]), 0.8) == []
    monkeypatch.setattr(infer, "UPRIGHT", 2.0)  # no exemption: the old rule
    assert panel_hinge(door, body, [], np.array([0.0, 1.0, 0.0]), np.array([-0.01, 0.0, 0.0]), 0.8) == []


def test_a_hinge_at_the_handle_tip_moves_into_the_door_slab():
    """A 4 cm door whose 6 cm handle bar makes its box 10 cm thick, its hinge line predicted on the box's outer
    face (the handle's tip plane, 8 cm in front of the door's middle: it would leave the carcass when it turns):
    ``_snap_to_slab`` moves the line, same direction and in-plane position, to the middle of the door's own slab
    (``slab_middle``: inner face to the outer face without the handle), where the sweep is valid."""
    from kinemesh.articulation.candidates import part_box
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig

    body = _carcass()
    door = _part("door", ([-0.04, -0.4, 0.0], [0.0, 0.4, 0.8]), ([-0.10, -0.37, 0.3], [-0.04, -0.34, 0.5]))
    box = part_box(door.vertices)
    mid = box.from_box(np.array([[slab_middle(door, body, 0.8), 0.0, 0.0]]))[0]
    assert abs(mid[0] - (-0.02)) < 0.004  # the slab's middle, not the box's (-0.05)
    parts, parents = [body, door], {"door": "body"}
    grid = OccupancyGrid(_with_tree(parts, "body", parents),
                         ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02))
    pr = PartPrediction("door", "revolute", np.array([0.0, 0.0, 1.0]), np.array([-0.10, 0.4, 0.4]), (0.0, 1.5),
                        "body", 0.9)
    _snap_to_slab(parts, parents, {"door": pr}, grid)
    assert pr.info.get("moved_to_slab") and axis_angle_error_deg(pr.axis, [0, 0, 1]) < 1e-6
    assert axis_line_distance(pr.origin, pr.axis, [-0.02, 0.4, 0.4], [0, 0, 1]) < 0.004
    assert pr.limits == (-1.5, 0.0)  # opening outwards (towards -x) about +z
    # a lid's line along its hinge but lying in its plane's normal (a knob's turn) is left alone
    knob = PartPrediction("door", "revolute", np.array([1.0, 0.0, 0.0]), np.array([-0.10, 0.0, 0.4]), (0.0, 1.5),
                          "body", 0.9)
    _snap_to_slab(parts, parents, {"door": knob}, grid)
    assert "moved_to_slab" not in knob.info and np.allclose(knob.origin, [-0.10, 0.0, 0.4])


def test_double_doors_hinged_at_their_seam_move_to_their_far_edges():
    """Two 40 cm doors side by side on one carcass, both read as hinged at the seam between them (they would turn
    into each other): ``_double_doors`` mirrors each line to its door's far edge, where both sweeps are valid;
    a door already hinged on its far edge, and two flaps one above the other (stacked oven doors both turn about
    their bottom edge), are left alone."""
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig

    body = _carcass()
    left = _part("left", ([-0.02, -0.4, 0.0], [0.0, -0.002, 0.8]))
    right = _part("right", ([-0.02, 0.002, 0.0], [0.0, 0.4, 0.8]))
    parts, parents = [body, left, right], {"left": "body", "right": "body"}
    grid = OccupancyGrid(_with_tree(parts, "body", parents),
                         ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02))
    z = np.array([0.0, 0.0, 1.0])
    preds = {"left": PartPrediction("left", "revolute", z, np.array([-0.01, -0.002, 0.4]), (0.0, 1.5), "body", 0.9),
             "right": PartPrediction("right", "revolute", z, np.array([-0.01, 0.002, 0.4]), (0.0, 1.5), "body", 0.9)}
    assert set(double_doors(parts, preds, 0.8)) == {"left", "right"}
    _double_doors(parts, parents, preds, grid)
    for name, y in (("left", -0.4), ("right", 0.4)):
        assert preds[name].info.get("moved_to_far_edge")
        assert axis_line_distance(preds[name].origin, preds[name].axis, [-0.01, y, 0.4], z) < 0.005
    # already on the far edges: nothing to move
    assert double_doors(parts, preds, 0.8) == {}
    # flaps one above the other, hinged along their width at the seam: not a double door
    low = _part("low", ([-0.02, -0.4, 0.0], [0.0, 0.4, 0.398]))
    high = _part("high", ([-0.02, -0.4, 0.402], [0.0, 0.4, 0.8]))
    y = np.array([0.0, 1.0, 0.0])
    flaps = {"low": PartPrediction("low", "revolute", y, np.array([-0.01, 0.0, 0.398]), (0.0, 1.5), "body", 0.9),
             "high": PartPrediction("high", "revolute", y, np.array([-0.01, 0.0, 0.402]), (0.0, 1.5), "body", 0.9)}
    assert double_doors([body, low, high], flaps, 0.8) == {}


def _open_box():
    """An open-top box (x +-0.3, y +-0.2, z 0..0.3, 1 cm walls) and a zero-thickness flap hinged on its
    +y top edge, stored 45 degrees open (two triangles)."""
    t = 0.01
    body = _part("body", ([-0.3, -0.2, 0], [0.3, 0.2, t]), ([-0.3, -0.2, 0], [-0.3 + t, 0.2, 0.3]),
                 ([0.3 - t, -0.2, 0], [0.3, 0.2, 0.3]), ([-0.3, -0.2, 0], [0.3, -0.2 + t, 0.3]),
                 ([-0.3, 0.2 - t, 0], [0.3, 0.2, 0.3]))
    r = 0.2 / np.sqrt(2)
    v = np.array([[-0.3, 0.2, 0.3], [0.3, 0.2, 0.3], [0.3, 0.2 + r, 0.3 + r], [-0.3, 0.2 + r, 0.3 + r]])
    flap = Part("flap", v, np.array([[0, 1, 2], [0, 2, 3]]))
    return body, flap


def test_open_flap_hinged_on_contact_edge():
    body, flap = _open_box()
    normal = np.array([0.0, -1.0, 1.0]) / np.sqrt(2)  # the real failure: the flap read as turning in its plane
    centre = flap.vertices.mean(0)
    lines = panel_hinge(flap, body, [], normal, centre, 0.6)
    assert len(lines) == 1 and lines[0][2] == "contact strip"
    axis, point, _ = lines[0]
    assert axis_angle_error_deg(axis, [1, 0, 0]) < 1.0
    assert axis_line_distance(point, axis, [0, 0.2, 0.3], [1, 0, 0]) < 0.02

    # end to end: the decoding refinement moves the prediction onto that edge (the sweep is valid)
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig

    parts, parents = [body, flap], {"flap": "body"}
    grid = OccupancyGrid(_with_tree(parts, "body", parents),
                         ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02))
    pr = PartPrediction("flap", "revolute", normal, centre, (0.0, 1.5), "body", 0.9)
    _hinge_panels(parts, parents, {"flap": pr}, grid)
    assert pr.info.get("moved_to_panel_edge") == "contact strip"
    assert axis_angle_error_deg(pr.axis, [1, 0, 0]) < 1.0
    assert axis_line_distance(pr.origin, pr.axis, [0, 0.2, 0.3], [1, 0, 0]) < 0.02
    assert pr.limits in ((0.0, 1.5), (-1.5, 0.0))
    # a prediction already on that line is left as it is
    pr2 = PartPrediction("flap", "revolute", np.array([1.0, 0, 0]), np.array([0, 0.2, 0.3]), (0.0, 1.5), "body", 0.9)
    _hinge_panels(parts, parents, {"flap": pr2}, grid)
    assert "moved_to_panel_edge" not in pr2.info and np.allclose(pr2.origin, [0, 0.2, 0.3])


def test_eyeglass_temple_hinged_on_the_strip_at_its_end():
    """A temple (a 50 x 10 cm plate, 4 mm thick) touching the frame's side in a strip at its front end over 0.65
    of its height (the frame's 5.5 cm and the 1 cm contact tolerance) (a real validation pair read it turning about its length, 82 deg off): the hinge runs along
    that strip, vertically."""
    frame = _part("frame", ([-0.02, -0.3, 0.0], [0.0, 0.0, 0.055]))
    temple = _part("temple", ([0.0, -0.3, 0.0], [0.5, -0.296, 0.1]))
    along_length = np.array([1.0, 0.0, 0.0])  # the network's reading
    lines = panel_hinge(temple, frame, [], along_length, np.array([0.25, -0.298, 0.05]), 0.5)
    assert len(lines) == 1 and lines[0][2] == "contact strip"
    axis, point, _ = lines[0]
    assert axis_angle_error_deg(axis, [0, 0, 1]) < 1.0 and abs(point[0]) < 0.01  # at the front end


def test_blade_turning_in_its_plane_kept():
    # a folding knife: a flat blade touching its handle along the blade's short end; it turns about its
    # normal, so a strip across the short side is no hinge cue
    handle = _part("handle", ([-0.3, -0.03, -0.01], [0.0, 0.03, 0.01]))
    blade = _part("blade", ([0.0, -0.03, -0.0025], [0.4, 0.03, 0.0025]))
    assert panel_hinge(blade, handle, [], np.array([0.0, 0.0, 1.0]), np.array([0.01, 0.0, 0.0]), 0.7) == []


def test_root_of_a_cart_is_its_body():
    # a trolley: the body rides 10 cm above the ground on four wheels; only the wheels reach the ground
    body = _part("body", ([-0.4, -0.25, 0.1], [0.4, 0.25, 0.6]))
    wheels = [_part(f"wheel_{i}", ([x - 0.05, y - 0.02, 0.0], [x + 0.05, y + 0.02, 0.1]))
              for i, (x, y) in enumerate([(-0.3, -0.2), (-0.3, 0.2), (0.3, -0.2), (0.3, 0.2)])]
    root, parents, _ = part_tree([wheels[0], body, *wheels[1:]])
    assert root == "body"
    assert all(parents[w.name] == "body" for w in wheels)
    # a lamp-like object keeps its grounded base as the root when the part above is not 10x bigger
    base = _part("base", ([-0.1, -0.1, 0.0], [0.1, 0.1, 0.05]))
    shade = _part("shade", ([-0.15, -0.15, 0.05], [0.15, 0.15, 0.25]))
    assert part_tree([shade, base])[0] == "base"


def test_a_row_of_buttons_on_a_big_body_hangs_from_the_body_whatever_the_sampling(monkeypatch):
    """Eight 2.5 cm buttons side by side on the front of a 50 cm body (a microwave's panel). With a fixed number
    of surface samples per part the body's samples lie centimetres apart, a button's nearest body sample is
    farther than its neighbour button, and buttons chained to each other for some seeds (a real microwave's
    buttons in fold 1). ``TREE_SPACING`` samples big parts densely enough that a touching part finds one within
    the contact tolerance: every button hangs from the body for every seed."""
    from kinemesh.articulation import infer

    m = trimesh.creation.box(bounds=np.array([[0, 0, 0], [0.5, 0.4, 0.3]], float)).subdivide()
    body = Part("body", np.asarray(m.vertices), np.asarray(m.faces))
    buttons = [_part(f"b{i}", ([-0.01, 0.05 + 0.03 * i, 0.1], [0.0, 0.075 + 0.03 * i, 0.125])) for i in range(8)]
    parts = buttons[:4] + [body] + buttons[4:]
    for seed in range(6):
        root, parents, _ = part_tree(parts, seed=seed)
        assert root == "body" and all(parents[b.name] == "body" for b in buttons), seed
    monkeypatch.setattr(infer, "TREE_SPACING", 0.0)  # without it: a fixed 400 samples per part
    chained = [sum(part_tree(parts, seed=seed)[1][b.name] != "body" for b in buttons) for seed in range(6)]
    assert sum(chained) > 0


def test_floating_knobs_hang_from_the_body_a_floating_handle_from_its_door():
    """A real oven's knobs float a few cm off its front, nearer each other (3.5 cm) than the body (6 cm): each hangs
    from the body, not from the knob beside it (``FLOAT_BIG``); a handle 1.5 cm off its door (4 cm from the
    body) still hangs from the door."""
    body = _part("body", ([0.0, -0.4, 0.0], [0.5, 0.4, 0.8]))
    knobs = [_part(f"knob_{i}", ([-0.1, y - 0.03, 0.65], [-0.06, y + 0.03, 0.71]))
             for i, y in enumerate((-0.15, -0.055, 0.04, 0.135))]
    root, parents, _ = part_tree([body, *knobs])
    assert root == "body" and all(parents[k.name] == "body" for k in knobs)
    door = _part("door", ([-0.025, -0.4, 0.0], [-0.005, 0.4, 0.6]))
    handle = _part("handle", ([-0.08, -0.2, 0.5], [-0.04, 0.2, 0.52]))
    root, parents, _ = part_tree([body, door, handle])
    assert parents == {"door": "body", "handle": "door"}


def _tall_door():
    """An open-front carcass (0.5 x 0.4 x 1.0 m, 2 cm walls, front at x = 0) and its tall narrow door in front."""
    t = 0.02
    body = _part("body", ([0, -0.2, 0], [0.5, 0.2, t]), ([0, -0.2, 1.0 - t], [0.5, 0.2, 1.0]),
                 ([0, -0.2, 0], [0.5, -0.2 + t, 1.0]), ([0, 0.2 - t, 0], [0.5, 0.2, 1.0]),
                 ([0.5 - t, -0.2, 0], [0.5, 0.2, 1.0]))
    return body, _part("door", ([-0.02, -0.2, 0.0], [0.0, 0.2, 1.0]))


def _decode_lines(parts, lines):
    """``_choose_valid`` of the door ``parts[1]`` on ``parts[0]``, read as turning about ``lines[0]``, with
    ``lines`` (probability, axis, point) as the network's alternatives, each opening 1.5 rad."""
    from kinemesh.articulation.infer import _choose_valid

    alts = [(p, a, o, "revolute", (0.0, 1.5)) for p, a, o in lines]
    pr = PartPrediction("door", "revolute", lines[0][1].copy(), lines[0][2].copy(), (0.0, 1.5), "body",
                        lines[0][0], "", {"alternatives": alts})
    _choose_valid(list(parts), "body", {"door": "body"}, {"door": pr})
    return pr


def _decode_two(parts, first, second, probs=(0.6, 0.3)):
    """The validity decoding (``_choose_valid``) of ``parts[1]`` (parent ``parts[0]``) predicted revolute about
    ``first`` (axis, point) with probability ``probs[0]``, ``second`` its alternative with ``probs[1]``, both
    opening 1.5 rad."""
    from kinemesh.articulation.infer import _choose_valid

    root, name = parts[0].name, parts[1].name
    alts = [(probs[0], *first, "revolute", (0.0, 1.5)), (probs[1], *second, "revolute", (0.0, 1.5))]
    pr = PartPrediction(name, "revolute", first[0].copy(), first[1].copy(), (0.0, 1.5), root, probs[0], "",
                        {"alternatives": alts})
    _choose_valid(parts, root, {name: root}, {name: pr})
    return pr


def test_validity_picks_a_hinge_on_a_side_the_panel_allows(monkeypatch):
    """A tall narrow door (0.4 x 1.0 m) read as a flap hinged along its bottom (short) edge; the network's second
    alternative hinges it on a long side. Both sweeps are free; the long side is taken (on data/real_train no
    panel turns about a short side that is not upright). ``hinge_sides`` / ``admissible_hinge`` decide."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import admissible_hinge, hinge_sides, panel_box

    body, door = _tall_door()
    panel = panel_box(door)
    box, n = panel
    assert [abs(box.axes[k][2]) > 0.9 for k, _ in hinge_sides(box, n)] == [True]  # only the upright long side
    assert admissible_hinge(panel, [0, 0, 1]) and not admissible_hinge(panel, [0, 1, 0])
    assert admissible_hinge(panel, [1, 0, 0])  # across the panel: a knob's turn, not a hinge
    flap = (np.array([0.0, 1.0, 0.0]), np.array([-0.02, 0.0, 0.0]))  # bottom edge, outer face
    side = (np.array([0.0, 0.0, 1.0]), np.array([-0.02, -0.2, 0.5]))  # left long edge

    def decode():
        return _decode_two([body, door], flap, side)

    pr = decode()
    assert sum(v["valid"] for v in pr.info["validity"]) >= 2  # both orientations sweep freely
    assert axis_angle_error_deg(pr.axis, [0, 0, 1]) < 1e-6
    assert axis_line_distance(pr.origin, pr.axis, side[1], side[0]) < 1e-6
    monkeypatch.setattr(infer, "HINGE_SIDES", False)
    assert axis_angle_error_deg(decode().axis, [0, 1, 0]) < 1e-6  # without the rule the flap stays
    monkeypatch.setattr(infer, "HINGE_SIDES", True)

    # the long side rated improbable (0.02, below the decoding's 0.05): every line the network rates is ruled out
    # by the shape, so its lines on the allowed sides are tried too (``HINGE_ANY``; a tall cabinet door in fold 1)
    pr = _decode_two([body, door], flap, side, probs=(0.6, 0.02))
    assert axis_angle_error_deg(pr.axis, [0, 0, 1]) < 1e-6
    monkeypatch.setattr(infer, "HINGE_ANY", False)  # HINGE_VALID, after the sweep, still finds the long side
    assert axis_angle_error_deg(_decode_two([body, door], flap, side, probs=(0.6, 0.02)).axis, [0, 0, 1]) < 1e-6
    monkeypatch.setattr(infer, "HINGE_VALID", False)
    assert axis_angle_error_deg(_decode_two([body, door], flap, side, probs=(0.6, 0.02)).axis, [0, 1, 0]) < 1e-6


def test_validity_tries_improbable_hinges_on_allowed_sides_when_none_rated_sweeps_free(monkeypatch):
    """The tall narrow door of the test above, read as a flap hinged along its bottom edge (0.6, sweeps free);
    the network's one line on a long side runs down the door's middle (0.3: half the door sweeps into the
    carcass), and its line on the left long edge is improbable (0.02). No line it rates hinges the panel on an
    allowed side and sweeps free, so its improbable lines on those sides are swept too (``HINGE_VALID``; two
    cabinet doors of fold 1): the left edge is taken. Without the rule the flap stays."""
    from kinemesh.articulation import infer

    body, door = _tall_door()
    up = np.array([0.0, 0.0, 1.0])
    lines = [(0.6, np.array([0.0, 1.0, 0.0]), np.array([-0.02, 0.0, 0.0])),  # bottom edge: a flap
             (0.3, up, np.array([-0.01, 0.0, 0.5])),  # the door's middle
             (0.02, up, np.array([-0.02, -0.2, 0.5]))]  # its left long edge

    def decode():
        return _decode_lines([body, door], lines)

    pr = decode()
    assert axis_angle_error_deg(pr.axis, up) < 1e-6
    assert axis_line_distance(pr.origin, pr.axis, lines[2][2], up) < 1e-6
    middle = [v for v in pr.info["validity"] if abs(v["score"] - 0.3) < 1e-9]
    assert middle and not any(v["valid"] for v in middle)  # the middle line collides both ways
    edge = [v for v in pr.info["validity"] if abs(v["score"] - 0.02) < 1e-9]
    assert edge and any(v["valid"] for v in edge)  # the improbable sweeps are recorded with the rated ones
    monkeypatch.setattr(infer, "HINGE_VALID", False)
    pr = decode()
    assert axis_angle_error_deg(pr.axis, [0, 1, 0]) < 1e-6  # the flap stays


def test_validity_picks_a_lever_pivot_across_its_length(monkeypatch):
    """An eyeglass temple: a 14 cm bar touching the frame only at its front end, read as twisting about its own
    length (the failure on a category the network never saw); the network's second alternative pivots it about
    the vertical through that end. Both sweeps are free; the pivot across the length is taken (on data/real_train
    every elongated part touching its parent at one end turns across its length). ``lever_length`` decides."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import lever_length

    frame = _part("frame", ([-0.1, 0.0, 0.0], [0.1, 0.01, 0.04]))
    temple = _part("temple", ([0.095, 0.01, 0.015], [0.1, 0.15, 0.025]))
    assert axis_angle_error_deg(lever_length(temple, frame, 0.2), [0, 1, 0]) < 1e-6
    brow = _part("brow", ([-0.1, 0.0, 0.04], [0.1, 0.01, 0.045]))  # a bar lying along the frame's whole top
    assert lever_length(brow, frame, 0.2) is None  # touching along its length, not at one end
    twist = (np.array([0.0, 1.0, 0.0]), np.array([0.0975, 0.01, 0.02]))
    pivot = (np.array([0.0, 0.0, 1.0]), np.array([0.1, 0.01, 0.02]))

    def decode():
        return _decode_two([frame, temple], twist, pivot)

    pr = decode()
    assert axis_angle_error_deg(pr.axis, [0, 0, 1]) < 1e-6
    assert axis_line_distance(pr.origin, pr.axis, pivot[1], pivot[0]) < 1e-6
    monkeypatch.setattr(infer, "LEVERS", False)
    assert axis_angle_error_deg(decode().axis, [0, 1, 0]) < 1e-6  # without the rule the twist stays


def test_a_lever_read_as_sliding_across_its_length_turns_instead():
    """The type rule of ``articulate`` (``lever_turns``): a stapler arm or eyeglass temple that the network, on
    a category it never saw, reads as sliding across its length turns instead (on data/real_train all 21
    lever-shaped parts turn), and so does one read as sliding along its length (``LEVER_ALONG``) unless its
    parent sheathes it (a telescoping rod in its tube keeps sliding); a bar touching its parent along its length
    keeps sliding too."""
    from kinemesh.articulation.infer import lever_turns
    from kinemesh.articulation.predictor import RawPrediction

    frame = _part("frame", ([-0.1, 0.0, 0.0], [0.1, 0.01, 0.04]))
    temple = _part("temple", ([0.095, 0.01, 0.015], [0.1, 0.15, 0.025]))  # 14 cm along +Y, front end on the frame
    brow = _part("brow", ([-0.1, 0.0, 0.04], [0.1, 0.01, 0.045]))

    def raw(type_, axis):
        return RawPrediction(type_, np.array([0.0, 0.1, 0.9]), np.asarray(axis, float), np.zeros(3), (0.0, 0.05),
                             0.9, 0, 1)

    assert lever_turns(temple, frame, raw("prismatic", [0, 0, 1]), 0.2)  # slid across its length: a lever
    assert lever_turns(temple, frame, raw("prismatic", [1, 0, 0]), 0.2)
    assert lever_turns(temple, frame, raw("prismatic", [0, 1, 0]), 0.2)  # along its length, not sheathed
    # a tube's four walls, 1 cm clear of a 2 cm rod, over 20 cm; the rod stands on the tube's bottom
    tube = _part("tube", ([-0.025, -0.025, -0.01], [0.025, 0.025, 0.0]),
                 ([-0.025, -0.025, 0], [-0.02, 0.025, 0.2]), ([0.02, -0.025, 0], [0.025, 0.025, 0.2]),
                 ([-0.02, -0.025, 0], [0.02, -0.02, 0.2]), ([-0.02, 0.02, 0], [0.02, 0.025, 0.2]))
    rod = _part("rod", ([-0.01, -0.01, 0.0], [0.01, 0.01, 0.3]))
    assert not lever_turns(rod, tube, raw("prismatic", [0, 0, 1]), 0.3)  # telescoping: keeps sliding
    assert not lever_turns(temple, frame, raw("revolute", [0, 0, 1]), 0.2)  # already turns
    assert not lever_turns(brow, frame, raw("prismatic", [0, 0, 1]), 0.2)  # no lever: touches along its length


def test_a_door_read_as_sliding_along_its_normal_turns_about_a_line_in_its_plane(monkeypatch):
    """The type rule of ``articulate`` (``door_turns``): a cabinet door that the network, on a category it never
    saw, reads as sliding out along its normal (a microwave door in fold 1) turns instead, about a line in its
    plane (its hinge), not about its normal. A sliding door (along its plane), a small button and a lid lying flat
    keep sliding. The network here is a stand-in whose type and axis heads say "slide along the normal"."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import articulate, door_turns
    from kinemesh.articulation.predictor import PredictorConfig, RawPrediction, part_features
    from kinemesh.data.articulated import ArticulatedObject, Joint

    body, door = _carcass(), _door([-0.06, 0.3, 0.2], [-0.02, 0.34, 0.6])  # handle near the +Y edge

    def raw(axis):
        return RawPrediction("prismatic", np.array([0.0, 0.1, 0.9]), np.asarray(axis, float), np.zeros(3),
                             (0.0, 0.1), 0.9, 0, 1)

    assert door_turns(door, raw([-1, 0, 0]), 0.8)
    assert not door_turns(door, raw([0, 1, 0]), 0.8)  # sliding in its plane: a sliding door
    button = _part("button", ([-0.01, 0.0, 0.4], [0.0, 0.05, 0.45]))
    assert not door_turns(button, raw([-1, 0, 0]), 0.8)  # small: a push button
    lid = _part("lid", ([0.0, -0.4, 0.8], [0.5, 0.4, 0.82]))
    assert not door_turns(lid, raw([0, 0, 1]), 0.8)  # lying flat: a pot lid lifts

    cfg = PredictorConfig()
    box = part_features([(body.vertices, body.faces), (door.vertices, door.faces)], 1, np.random.default_rng(0),
                        cfg, "door")[2]
    k = int(np.argmax(np.abs(box.axes @ [1.0, 0.0, 0.0])))  # the door's normal among its box axes
    slides = _stand_in([0.0, 0.0, 10.0], k)  # the heads read "prismatic, along the box axis k (the normal)"

    obj = ArticulatedObject([body, door], [Joint("j", "fixed", "body", "door", np.array([0.0, 0.0, 1.0]), np.zeros(3))], "cabinet", "cabinet")
    pr = {p.name: p for p in articulate(obj, net=slides, seed=0)}["door"]
    assert pr.type == "revolute" and abs(pr.axis @ [1.0, 0.0, 0.0]) < 1e-6  # a hinge in the door's plane
    assert pr.info["type_from_shape"] == "door" and pr.to_dict()["type_from"] == "shape: door"
    monkeypatch.setattr(infer, "DOORS_TURN", False)
    pr = {p.name: p for p in articulate(obj, net=slides, seed=0)}["door"]
    assert pr.type == "prismatic" and abs(pr.axis @ [1.0, 0.0, 0.0]) > 0.99  # without the rule it slides out
    assert pr.type_from() == "network"
    pr = {p.name: p for p in articulate(obj, net=slides, seed=0, force_types={"door": "revolute"})}["door"]
    assert pr.type == "revolute" and pr.type_from() == "prompt"  # a prompt's verb


def test_round_parts_move_along_or_about_their_axis_of_symmetry():
    """``round_axis`` / ``_round_parts``: a jar's lid (a cylinder 8 cm across, 3 cm tall, on a 10 cm jar) read as
    turning about a line across it turns about its axis of symmetry, through its centre; read as sliding across
    it, it lifts off along that axis, away from the jar. A flat round door (a porthole) and a long rod are not
    round parts; a turning part already about its axis is left as it is."""
    import trimesh

    from kinemesh.articulation.infer import _round_parts, round_axis

    jar = _part("jar", ([-0.05, -0.05, 0.0], [0.05, 0.05, 0.1]))
    m = trimesh.creation.cylinder(radius=0.04, height=0.03, sections=48)
    m.apply_translation([0.0, 0.0, 0.115])
    lid = Part("lid", np.asarray(m.vertices), np.asarray(m.faces))
    axis, centre = round_axis(lid)
    assert abs(axis[2]) > 1 - 1e-6 and np.allclose(centre, [0, 0, 0.115], atol=1e-3)
    flat = trimesh.creation.cylinder(radius=0.2, height=0.02, sections=48)  # a porthole door: flat
    rod = trimesh.creation.cylinder(radius=0.01, height=0.2, sections=48)  # a rod: long
    assert round_axis(Part("door", np.asarray(flat.vertices), np.asarray(flat.faces))) is None
    assert round_axis(Part("rod", np.asarray(rod.vertices), np.asarray(rod.faces))) is None

    def decoded(type_, axis, origin):
        pr = PartPrediction("lid", type_, np.asarray(axis, float), np.asarray(origin, float), (0.0, 1.0), "jar",
                            0.9, "", {})
        _round_parts([jar, lid], {"lid": pr})
        return pr

    pr = decoded("revolute", [1.0, 0.0, 0.0], [0.0, 0.04, 0.1])  # turning about a line across the lid
    assert abs(pr.axis[2]) > 1 - 1e-6 and np.allclose(pr.origin[:2], 0.0, atol=1e-3)
    pr = decoded("prismatic", [0.0, 1.0, 0.0], [0.0, 0.0, 0.115])  # sliding sideways off the jar
    assert pr.axis[2] > 1 - 1e-6 and pr.type == "prismatic"  # lifts off, away from the jar
    pr = decoded("revolute", [0.0, 0.0, -1.0], [0.01, 0.0, 0.1])
    assert np.allclose(pr.axis, [0, 0, -1]) and np.allclose(pr.origin, [0.01, 0.0, 0.1])  # already about it


def test_a_button_on_the_body_read_as_fixed_moves_a_knob_on_a_door_stays_fixed(monkeypatch):
    """The type rule of ``articulate`` (``FIXED_BUTTONS``): a button (small, clearly thinnest along one side,
    ``button_axis``) hanging from the root that the network reads as fixed moves as its more probable movable
    type, here pressed into the body. No separately segmented part of data/real_train is fixed (folds 2-3: oven
    and camera buttons read fixed at 0.9). A knob-like handle on a door (the synthetic generator's fixed drawer
    and wardrobe knobs, none of them on the root) stays fixed. The stand-in network reads every part "fixed",
    then "prismatic", then "revolute" (its axis head is the untrained network's)."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import articulate
    from kinemesh.data.articulated import ArticulatedObject, Joint

    body, door = _carcass(), _door([-0.06, 0.3, 0.2], [-0.02, 0.34, 0.6])
    button = _part("button", ([0.2, 0.4, 0.5], [0.24, 0.41, 0.54]))  # 4 x 4 x 1 cm on the right side wall
    knob = _part("knob", ([-0.035, -0.3, 0.38], [-0.02, -0.26, 0.42]))  # on the door's front, away from its handle
    fixed = _stand_in([10.0, 3.0, 5.0])  # reads every part "fixed", then "prismatic", then "revolute"

    joints = [Joint(f"j_{n}", "fixed", "body", n, np.array([0.0, 0.0, 1.0]), np.zeros(3))
              for n in ("door", "button", "knob")]
    obj = ArticulatedObject([body, door, button, knob], joints, "cabinet", "cabinet")

    def read():
        return {p.name: p for p in articulate(obj, net=fixed, seed=0)}

    pr = read()
    assert pr["button"].parent == "body" and pr["knob"].parent == "door"
    assert pr["button"].type == "prismatic" and pr["button"].type_from() == "shape: button"
    assert axis_angle_error_deg(pr["button"].axis, [0, 1, 0]) < 1.0  # pressed into the side wall
    assert pr["button"].axis @ [0.0, -1.0, 0.0] > 0.99
    assert pr["knob"].type == "fixed" and pr["knob"].type_from() == "network"
    assert pr["door"].type == "fixed"  # a door is no button
    monkeypatch.setattr(infer, "FIXED_BUTTONS", False)
    assert read()["button"].type == "fixed"


def test_a_square_lid_read_as_turning_about_its_normal_turns_about_a_line_in_its_plane(monkeypatch):
    """The axis rule of ``articulate`` (``LIDS_HINGE``, ``broad_panel``): a chest's square lid that the
    network, on a category it never saw, reads as turning about its normal (spinning flat on the box, fold 1's
    dishwasher 12414) turns about a line in its plane, a hinge. A round lid (a turntable, a cap) keeps turning
    about its normal; a long thin blade and a small square button are no broad panels. The network here is a
    stand-in whose type and axis heads say "turn about the box axis nearest z"."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.candidates import part_box
    from kinemesh.articulation.infer import articulate, broad_panel
    from kinemesh.data.articulated import ArticulatedObject, Joint

    t = 0.02
    chest = _part("chest", ([0, -0.4, 0], [0.5, 0.4, t]), ([0, -0.4, 0], [t, 0.4, 0.5]),
                  ([0.5 - t, -0.4, 0], [0.5, 0.4, 0.5]), ([0, -0.4, 0], [0.5, -0.4 + t, 0.5]),
                  ([0, 0.4 - t, 0], [0.5, 0.4, 0.5]))
    lid = _part("lid", ([0.0, -0.4, 0.5], [0.5, 0.4, 0.52]))
    disc = trimesh.creation.cylinder(radius=0.24, height=0.02, sections=64)
    disc.apply_translation([0.25, 0.0, 0.51])
    round_lid = Part("lid", np.asarray(disc.vertices), np.asarray(disc.faces))
    assert broad_panel(lid, 0.8) is not None
    assert broad_panel(round_lid, 0.8) is None  # round: may spin in its plane
    assert broad_panel(_part("blade", ([0, 0, 0.5], [0.6, 0.05, 0.505])), 0.8) is None  # long and thin
    assert broad_panel(_part("button", ([0, 0, 0.5], [0.05, 0.05, 0.51])), 0.8) is None  # small
    monkeypatch.setattr(infer, "CAPS", False)  # (a round lid on a squat chest would lift off: ``_caps``)

    def read(top):
        k = int(np.argmax(np.abs(part_box(top.vertices, top.name).axes @ [0.0, 0.0, 1.0])))
        spins = _stand_in([0.0, 10.0, 0.0], k)  # the heads read "revolute, about the box axis k (the normal)"
        obj = ArticulatedObject([chest, top], [Joint("j", "fixed", "chest", "lid", np.array([0.0, 0.0, 1.0]),
                                                     np.zeros(3))], "chest", "chest")
        return {p.name: p for p in articulate(obj, net=spins, seed=0)}["lid"]

    pr = read(lid)
    assert pr.type == "revolute" and abs(pr.axis[2]) < 1e-6  # a hinge in the lid's plane
    assert pr.info["hinged_in_plane"]
    pr = read(round_lid)
    assert pr.type == "revolute" and abs(pr.axis[2]) > 0.99 and not pr.info["hinged_in_plane"]  # a turntable
    monkeypatch.setattr(infer, "LIDS_HINGE", False)
    assert abs(read(lid).axis[2]) > 0.99  # without the rule the lid spins flat


def test_a_flat_round_part_read_as_sliding_sideways_lifts_along_its_axis_a_hinged_one_stays(monkeypatch):
    """``FLAT_LIFT``: a flat round part (a bottle's disc-shaped cap, 8 cm across, 8 mm thick: too flat for
    ``round_axis``'s round parts) read as sliding across its face slides along its axis instead, away from the
    bottle (fold 4: three bottle caps read as sliding sideways). Read as turning about a line across it (a
    hinged porthole door or trash-can lid, as the synthetic objects have), it keeps its predicted line."""
    import trimesh

    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import _round_parts, round_axis

    bottle = _part("bottle", ([-0.04, -0.04, 0.0], [0.04, 0.04, 0.2]))
    m = trimesh.creation.cylinder(radius=0.04, height=0.008, sections=48)
    m.apply_translation([0.0, 0.0, 0.204])
    cap = Part("cap", np.asarray(m.vertices), np.asarray(m.faces))
    assert round_axis(cap) is None and round_axis(cap, flat=True) is not None

    def decoded(type_, axis):
        pr = PartPrediction("cap", type_, np.asarray(axis, float), np.array([0.0, 0.04, 0.2]), (0.0, 0.05),
                            "bottle", 0.9, "", {})
        _round_parts([bottle, cap], {"cap": pr})
        return pr

    pr = decoded("prismatic", [0.0, 1.0, 0.0])
    assert pr.axis[2] > 1 - 1e-6 and np.allclose(pr.origin, [0.0, 0.0, 0.204], atol=1e-3)  # lifts off
    pr = decoded("revolute", [1.0, 0.0, 0.0])
    assert np.allclose(pr.axis, [1.0, 0.0, 0.0]) and np.allclose(pr.origin, [0.0, 0.04, 0.2])  # a hinge stays
    monkeypatch.setattr(infer, "FLAT_LIFT", False)
    assert np.allclose(decoded("prismatic", [0.0, 1.0, 0.0]).axis, [0.0, 1.0, 0.0])


def test_a_cap_twists_off_a_tall_bottle_and_a_lid_lifts_off_a_squat_pot():
    """``CAPS`` / ``_caps``: a round part with an upright axis covering its parent's top twists off a parent
    at least 1.3 times as tall as wide (a bottle's cap, read as lifting: it turns without limits about its
    axis) and lifts off a squat one (a pot's lid, read as turning about its axis, slides up along it). A lid
    read as hinged about a line across it keeps its hinge (``CAPS_KEEP_HINGE``: a trash can's lid). A small
    round button on the pot's lid is no cap (it covers less than half the width of what it sits on)."""
    import trimesh

    from kinemesh.articulation.infer import _caps

    def disc(name, r, h, z):
        m = trimesh.creation.cylinder(radius=r, height=h, sections=48)
        m.apply_translation([0.0, 0.0, z + h / 2])
        return Part(name, np.asarray(m.vertices), np.asarray(m.faces))

    def read(parent, top, type_, axis):
        pr = PartPrediction(top.name, type_, np.asarray(axis, float), np.zeros(3), (0.0, 0.02), parent.name,
        0.9,
                            "", {"slide_travel": 0.01})
        _caps([parent, top], {top.name: pr})
        return pr

    bottle, cap = disc("bottle", 0.04, 0.25, 0.0), disc("cap", 0.035, 0.02, 0.25)
    pr = read(bottle, cap, "prismatic", [0.0, 0.0, 1.0])  # read as lifting off
    assert pr.type == "revolute" and abs(pr.axis[2]) > 1 - 1e-9 and pr.limits == (-np.pi, np.pi)
    assert np.allclose(pr.origin, [0.0, 0.0, 0.26], atol=1e-3) and pr.type_from() == "shape: cap"
    pot, lid = disc("pot", 0.15, 0.15, 0.0), disc("lid", 0.14, 0.01, 0.15)
    pr = read(pot, lid, "revolute", [0.0, 0.0, 1.0])  # read as turning
    assert pr.type == "prismatic" and pr.axis[2] > 1 - 1e-9 and np.allclose(pr.limits, (0.0, 0.01))
    knob = disc("knob", 0.015, 0.01, 0.16)
    assert read(lid, knob, "revolute", [1.0, 0.0, 0.0]).type_from() == "network"
    pr = read(pot, lid, "revolute", [1.0, 0.0, 0.0])  # read as hinged about a line across it: a trash can's lid
    assert pr.type == "revolute" and np.allclose(pr.axis, [1.0, 0.0, 0.0]) and pr.type_from() == "network"


def test_a_narrow_cap_over_a_bottles_neck_twists_off_too(monkeypatch):
    """``TALL_CAPS``: on a tall bottle a round cap at the top twists off however narrow it is (a third of the
    bottle's width) or however deep it sits over the neck (its rim 80 % of its height below the neck's top);
    without the flag both fail ``CAP``'s width and sitting-on-top checks and stay as the network read them. A
    round part at the top of a squat parent still needs those checks (a small knob on a pot stays)."""
    import trimesh

    from kinemesh.articulation import infer

    def cyl(r, h, z):
        m = trimesh.creation.cylinder(radius=r, height=h, sections=48)
        m.apply_translation([0.0, 0.0, z + h / 2])
        return m

    def part(name, *meshes):
        m = trimesh.util.concatenate(list(meshes))
        return Part(name, np.asarray(m.vertices), np.asarray(m.faces))

    def read(parent, top):
        pr = PartPrediction(top.name, "prismatic", np.array([0.0, 0.0, 1.0]), np.zeros(3), (0.0, 0.02),
                            parent.name, 0.9, "", {"slide_travel": 0.01})
        infer._caps([parent, top], {top.name: pr})
        return pr

    bottle = part("bottle", cyl(0.045, 0.22, 0.0), cyl(0.012, 0.03, 0.22))  # neck top 0.25
    narrow = part("cap", cyl(0.015, 0.02, 0.25))  # a third of the bottle's width
    deep = part("cap", cyl(0.016, 0.025, 0.23))  # over the neck: 0.02 of its 0.025 below the neck's top
    for cap in (narrow, deep):
        pr = read(bottle, cap)
        assert pr.type == "revolute" and pr.limits == (-np.pi, np.pi) and pr.type_from() == "shape: cap"
    pot = part("pot", cyl(0.15, 0.15, 0.0))
    assert "cap" not in read(pot, part("knob", cyl(0.015, 0.01, 0.15))).info  # a knob on a squat pot: no cap
    monkeypatch.setattr(infer, "TALL_CAPS", False)
    for cap in (narrow, deep):
        assert "cap" not in read(bottle, cap).info


def test_a_flap_read_as_sliding_turns_about_the_edge_it_touches_its_parent_along(monkeypatch):
    """The type rule of ``articulate`` (``FLAPS_TURN``, ``flap_turns``): a box's flap stored open, touching
    the box along one edge only, that the network reads as sliding in its plane (fold 2's cardboard boxes)
    turns, and the hinge goes on that edge (``panel_hinge``'s contact strip). A panel touching its parent
    elsewhere than along an edge (a drawer front's whole back) is no flap. The network is a stand-in whose
    heads read "slide along the box axis nearest x" (along the flap's edge)."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.candidates import part_box
    from kinemesh.articulation.infer import articulate, flap_turns
    from kinemesh.articulation.predictor import RawPrediction
    from kinemesh.data.articulated import ArticulatedObject, Joint

    body, flap = _open_box()
    raw = RawPrediction("prismatic", np.array([0.0, 0.1, 0.9]), np.array([1.0, 0.0, 0.0]), np.zeros(3),
                        (0.0, 0.1), 0.9, 0, 1)
    assert flap_turns(flap, body, raw, 0.6)
    front = _part("front", ([-0.25, -0.22, 0.05], [0.25, -0.2, 0.25]))  # flat against the box's -y wall
    assert not flap_turns(front, body, raw, 0.6)

    k = int(np.argmax(np.abs(part_box(flap.vertices, flap.name).axes @ [1.0, 0.0, 0.0])))
    obj = ArticulatedObject([body, flap], [Joint("j", "fixed", "body", "flap", np.array([0.0, 0.0, 1.0]),
                                                 np.zeros(3))], "box", "box")

    def read():
        return {p.name: p for p in articulate(obj, net=_stand_in([0.0, 0.0, 10.0], k), seed=0)}["flap"]

    pr = read()
    assert pr.type == "revolute" and pr.type_from() == "shape: flap"
    assert axis_angle_error_deg(pr.axis, [1, 0, 0]) < 1.0
    assert axis_line_distance(pr.origin, pr.axis, [0, 0.2, 0.3], [1, 0, 0]) < 0.02  # on the edge it touches
    monkeypatch.setattr(infer, "FLAPS_TURN", False)
    assert read().type == "prismatic"


def test_a_flat_button_read_as_a_dial_is_pressed_a_knob_keeps_turning(monkeypatch):
    """The type rule of ``articulate`` (``FLAT_BUTTONS``, ``flat_button``): a small flat button on a camera's
    top (3 x 2 cm, 5 mm thick) that the network reads as spinning about its normal, like a dial, is pressed
    into the body along its normal instead (fold 3: the network trained without cameras read 18 camera
    buttons so). A knob beside it (2.4 cm across, 1.2 cm tall: it stands out, it can be gripped) keeps
    turning. The stand-in network reads every part "revolute, about the box axis nearest z"."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import articulate, flat_button
    from kinemesh.data.articulated import ArticulatedObject, Joint

    body = _part("body", ([0.0, 0.0, 0.0], [0.3, 0.1, 0.2]))
    button = _part("button", ([0.05, 0.03, 0.2], [0.08, 0.05, 0.205]))
    m = trimesh.creation.cylinder(radius=0.012, height=0.012, sections=48)
    m.apply_translation([0.2, 0.05, 0.206])
    knob = Part("knob", np.asarray(m.vertices), np.asarray(m.faces))
    assert flat_button(button, body, np.array([0.0, 0.0, 1.0]), 0.3)
    assert not flat_button(button, body, np.array([1.0, 0.0, 0.0]), 0.3)  # turning across it: not a dial
    assert not flat_button(knob, body, np.array([0.0, 0.0, 1.0]), 0.3)  # not flat
    joints = [Joint(f"j_{n}", "fixed", "body", n, np.array([0.0, 0.0, 1.0]), np.zeros(3))
              for n in ("button", "knob")]
    obj = ArticulatedObject([body, button, knob], joints, "camera", "camera")

    def read():
        return {p.name: p for p in articulate(obj, net=_stand_in([0.0, 10.0, 0.0], 2), seed=0)}

    pr = read()
    assert pr["button"].type == "prismatic" and pr["button"].type_from() == "shape: button"
    assert pr["button"].axis @ [0.0, 0.0, -1.0] > 0.99  # pressed down into the body
    assert pr["button"].limits[0] == 0.0 and pr["button"].limits[1] > 0.0
    assert pr["knob"].type == "revolute" and abs(pr["knob"].axis[2]) > 0.99
    monkeypatch.setattr(infer, "FLAT_BUTTONS", False)
    assert read()["button"].type == "revolute"


def _glasses():
    """(frame, temple, object): an eyeglass frame and one temple (a 14 cm bar along +X, 2 cm tall, 1 cm thick:
    no panel), touching the frame at its front end, joined by a fixed joint (a static shape)."""
    from kinemesh.data.articulated import ArticulatedObject, Joint

    frame = _part("frame", ([0.0, -0.07, 0.0], [0.02, 0.07, 0.04]))
    temple = _part("temple", ([0.02, 0.055, 0.01], [0.16, 0.065, 0.03]))
    joint = Joint("j", "fixed", "frame", "temple", np.array([0.0, 0.0, 1.0]), np.zeros(3))
    return frame, temple, ArticulatedObject([frame, temple], [joint], "eyeglasses", "eyeglasses")


def test_a_lever_read_as_spinning_about_its_length_turns_across_it_at_its_end(monkeypatch):
    """The axis rule of ``articulate`` (``LEVER_SPIN``, ``lever_spin``): an eyeglass temple (a 14 cm bar, 2 cm
    tall, 1 cm thick, touching the frame at its front end) that the network reads as spinning about its own
    length (fold 3's temples) turns about the axis across its length and the direction to the frame (here the
    vertical), through its contact with the frame. The stand-in network reads every part "revolute, about the
    box axis nearest x" (the temple's length)."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import articulate, lever_spin

    frame, temple, obj = _glasses()
    assert lever_spin(temple, frame, np.array([0.0, 0.0, 1.0]), 0.16) is None  # already across its length

    def read():
        return {p.name: p for p in articulate(obj, net=_stand_in([0.0, 10.0, 0.0], 0), seed=0)}["temple"]

    pr = read()
    assert pr.type == "revolute" and abs(pr.axis[2]) > 0.99  # the hinge is vertical
    assert abs(pr.origin[0] - 0.02) < 0.01 and abs(pr.origin[1] - 0.06) < 0.01  # at the front end
    monkeypatch.setattr(infer, "LEVER_SPIN", False)
    assert abs(read().axis[0]) > 0.99  # without the rule it spins about its length


def test_a_lying_lever_read_as_turning_about_another_line_swings_towards_its_parent(monkeypatch):
    """The axis rule of ``articulate`` (``LEVER_SWING``, ``lever_swing``): the eyeglass temple of the test
    above, read as turning about the horizontal across its length (it would swing up and down: fold 3's
    temples 101287 and 101326), swings about the line across its length and the direction to the frame (the
    vertical) through its contact: the network's nearest line when it rates one (here its third box axis). An
    upright lever (a faucet's joystick switch) is left alone."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import articulate, lever_swing

    frame, temple, obj = _glasses()
    assert lever_swing(temple, frame, np.array([0.0, 0.0, 1.0]), 0.16) is None  # already about that line
    assert lever_swing(temple, frame, np.array([1.0, 0.0, 0.0]), 0.16) is None  # about its length: lever_spin
    length, axis, origin = lever_swing(temple, frame, np.array([0.0, 1.0, 0.0]), 0.16)
    assert abs(length[0]) > 0.99 and abs(axis[2]) > 0.99 and abs(origin[0] - 0.02) < 0.01

    def read(type_logits=(0.0, 10.0, 0.0)):
        return {p.name: p for p in articulate(obj, net=_stand_in(type_logits, 1), seed=0)}["temple"]

    pr = read()
    assert pr.type == "revolute" and abs(pr.axis[2]) > 0.99 and pr.info["swung_as_lever"]
    assert abs(pr.origin[0] - 0.02) < 0.01 and abs(pr.origin[1] - 0.06) < 0.01  # at the front end
    monkeypatch.setattr(infer, "LEVER_SWING", False)
    pr = read()
    assert abs(pr.axis[1]) > 0.99 and not pr.info["swung_as_lever"]  # without the rule it swings up and down
    body = _part("body", ([-0.05, -0.05, 0.0], [0.05, 0.05, 0.1]))
    stick = _part("stick", ([0.03, -0.005, 0.1], [0.04, 0.005, 0.2]))  # standing on the body's edge
    assert infer.lever_length(stick, body, 0.2) is not None  # a lever, with a swing line (y)
    assert infer.swing_line(stick, body, np.array([0.0, 0.0, 1.0]), 0.2) is not None
    assert lever_swing(stick, body, np.array([1.0, 0.0, 0.0]), 0.2) is None  # upright: left alone


def test_validity_never_turns_a_lever_about_its_length_when_no_line_across_it_sweeps_free(monkeypatch):
    """``LEVER_KEEP``: the eyeglass temple of the tests above, read as turning about the vertical (its true
    hinge), the twist about its own length 38 % probable. When every sweep across its length collides (as a
    folding knife's blade's true turn passes through its handle's uncut mesh, fold 3's knife 101054) and only
    the twist sweeps free, the network's line stays, moved to the end the temple touches the frame at: no
    lever on data/real_train twists about its length. Without the rule the validity check took the twist. The
    sweeps' collisions are stood in for (only lines along x sweep free)."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import articulate
    from kinemesh.geometry import validity

    real = validity.check_candidates

    def only_twists_free(grid, moving, candidates):
        real(grid, moving, candidates)
        for c in candidates:
            c.valid = bool(abs(c.axis[0]) > 0.9)
        return candidates

    monkeypatch.setattr(validity, "check_candidates", only_twists_free)
    _, _, obj = _glasses()

    def read():
        net = _stand_in([0.0, 10.0, 0.0], [10.0, 0.0, 10.5])  # z, then the length (x) 38 % probable
        return {p.name: p for p in articulate(obj, net=net, seed=0)}["temple"]

    pr = read()
    assert pr.type == "revolute" and abs(pr.axis[2]) > 0.99 and pr.info.get("kept_across_lever")
    assert abs(pr.origin[0] - 0.02) < 0.01 and abs(pr.origin[1] - 0.06) < 0.01  # at the front end
    assert any(v["valid"] for v in pr.info["validity"])  # the twist swept free
    monkeypatch.setattr(infer, "LEVER_KEEP", False)
    assert abs(read().axis[0]) > 0.99  # the twist


def test_a_handle_is_found_on_a_panel_whose_box_is_tilted():
    """``handle_centroid`` with ``HANDLE_PLANE``: the minimum-volume box of a door with a long handle bar along
    one edge can tilt a few degrees off the door's face (fold 4's refrigerator 12252: its outer face rises 0.08 m
    across the 1.07 m door in the box frame). Measured from the median cell, the bar along the low edge then
    rises less than a handle must (0.04 x the door's 1 m width) and nothing is found; measured from the plane
    fitted to the face (``tilted``, which ``panel_hinge`` sets for upright panels with ``HANDLE_PLANE``), the
    bar is found along that edge (the hinge goes on the opposite one)."""
    rng = np.random.default_rng(0)
    e = np.array([0.2, 1.0, 1.3])  # thin axis 0; in-plane u = axis 1, v = axis 2
    uv = (rng.random((4000, 2)) - 0.5) * e[1:]
    face = 0.05 - 0.07 * uv[:, 0]  # the outer face, tilted in the box frame: 7 cm higher at -u than at +u
    bar = uv[:, 0] > 0.45  # a handle bar along the +u edge, 6 cm proud of the face
    pts = np.column_stack([face + 0.06 * bar, uv])
    h = handle_centroid(pts, e, 0, 1.0, tilted=True)
    assert h is not None and h[0] > 0.8 and abs(h[1]) < 0.2  # at the +u edge, along its whole height
    flat = np.column_stack([0.05 + 0.06 * bar, uv])  # the same door, its box not tilted: found as before
    assert handle_centroid(flat, e, 0, 1.0, tilted=True)[0] > 0.8
    assert handle_centroid(pts, e, 0, 1.0) is None  # measured from the median cell, the tilt hides the bar


def test_panel_hinge_finds_the_handle_of_an_upright_door_whose_face_is_tilted_in_its_box(monkeypatch):
    """``panel_hinge`` with ``HANDLE_PLANE`` on a whole mesh: a door in front of the cabinet whose outer face
    slopes 7 cm across its 80 cm width in its box (a wedge, as refrigerator 12252's face is tilted in its
    tilted box), its handle bar along the thin edge. Measured from the median cell the bar is hidden and the
    shape names no hinge; ``panel_hinge`` measures upright panels from their fitted face, finds the bar and
    hinges the door on the far edge. A lid of the same shape (not upright) keeps the median-cell measure."""
    from kinemesh.articulation import infer

    corners = np.array([[x, y, z] for y in (-0.4, 0.4) for z in (0.0, 0.8)
                        for x in (0.0, -0.09 if y < 0 else -0.02)])
    bar = trimesh.creation.box(bounds=np.array([[-0.08, 0.33, 0.1], [-0.02, 0.39, 0.7]]))
    m = trimesh.util.concatenate([trimesh.convex.convex_hull(corners), bar])
    door = Part("door", np.asarray(m.vertices), np.asarray(m.faces))
    body = _carcass()
    side_hinge = (np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.4, 0.4]))  # read hinged on the handle's edge
    lines = panel_hinge(door, body, [], *side_hinge, 0.8)
    assert lines and lines[0][2] == "handle"
    assert axis_angle_error_deg(lines[0][0], [0, 0, 1]) < 1.0 and abs(lines[0][1][1] + 0.4) < 1e-6  # far edge
    monkeypatch.setattr(infer, "HANDLE_PLANE", False)
    assert panel_hinge(door, body, [], *side_hinge, 0.8) == []
    monkeypatch.setattr(infer, "HANDLE_PLANE", True)
    turn = trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0])[:3, :3]  # the door laid flat on top
    lid = Part("lid", np.asarray(m.vertices) @ turn.T + [0.0, 0.0, 0.9], np.asarray(m.faces))
    assert panel_hinge(lid, body, [], np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.4, 0.9]), 0.9) == []


def test_a_lever_read_as_sliding_along_its_length_turns_unless_sheathed(monkeypatch):
    """``lever_turns`` with ``LEVER_ALONG``: a stapler's arm standing on its base (a 20 cm bar touching the
    base only at its lower end) that the network reads as sliding out along its length turns instead (fold 3:
    the network trained without staplers slid a stapler arm out so); its parent does not sheathe it. The
    stand-in network reads every part "prismatic, along the box axis nearest z" (the arm's length)."""
    from kinemesh.articulation import infer
    from kinemesh.articulation.infer import articulate
    from kinemesh.data.articulated import ArticulatedObject, Joint

    base = _part("base", ([0.0, -0.03, 0.0], [0.3, 0.03, 0.02]))
    arm = _part("arm", ([0.0, -0.015, 0.02], [0.03, 0.015, 0.22]))
    obj = ArticulatedObject([base, arm], [Joint("j", "fixed", "base", "arm", np.array([0.0, 0.0, 1.0]),
                                                np.zeros(3))], "stapler", "stapler")

    def read():
        return {p.name: p for p in articulate(obj, net=_stand_in([0.0, 0.0, 10.0], 2), seed=0)}["arm"]

    pr = read()
    assert pr.type == "revolute" and pr.type_from() == "shape: lever"
    assert abs(pr.axis[2]) < 0.5  # about an axis across its length
    monkeypatch.setattr(infer, "LEVER_ALONG", False)
    assert read().type == "prismatic"


def test_a_square_door_with_its_handle_in_a_corner_hinges_opposite_it_across_the_predicted_hinge(monkeypatch):
    """An 80 x 80 cm door whose knob sits in its lower -y corner: both hinge orientations are allowed and the
    knob is as far out along one as along the other, so it names no orientation; it names the edge opposite it
    across the predicted one (upright: the +y edge; along the width: the top edge). Fold 1's wide cabinet door
    46744 (knob low in a corner) was hinged on its knob's side before (``CORNER_HANDLE``)."""
    import kinemesh.articulation.infer as infer

    body = _carcass()
    door = _door([-0.06, -0.38, 0.02], [-0.02, -0.34, 0.08])
    # (predicted axis, predicted point: the knob's side) -> the line expected through the opposite edge
    for axis, origin, point in (([0.0, 0.0, 1.0], [-0.01, -0.4, 0.4], [-0.01, 0.4, 0.4]),
                                ([0.0, 1.0, 0.0], [-0.01, 0.0, 0.0], [-0.01, 0.0, 0.8])):
        lines = panel_hinge(door, body, [], np.array(axis), np.array(origin), 0.8)
        assert lines and lines[0][2] == "handle"
        assert axis_angle_error_deg(lines[0][0], axis) < 1.0
        assert axis_line_distance(lines[0][1], lines[0][0], point, axis) < 1e-6
    monkeypatch.setattr(infer, "CORNER_HANDLE", False)
    assert panel_hinge(door, body, [], np.array([0.0, 0.0, 1.0]), np.array([-0.01, -0.4, 0.4]), 0.8) == []


def test_two_single_doors_side_by_side_keep_the_hinges_their_handles_name(monkeypatch):
    """Two 40 cm doors side by side, each with its handle bar near its +y edge (two single doors hinged on
    their -y edges, fold 1's cabinet 48381): the right door's handle names the seam edge, and the double-door
    rule no longer mirrors that line to the far edge (``DOUBLE_HANDLE``); a leaf whose line no handle named
    still is."""
    import kinemesh.articulation.infer as infer
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig

    body = _carcass()
    left = _part("left", ([-0.02, -0.4, 0.0], [0.0, -0.002, 0.8]),
                 ([-0.06, -0.05, 0.35], [-0.02, -0.03, 0.45]))
    right = _part("right", ([-0.02, 0.002, 0.0], [0.0, 0.4, 0.8]), ([-0.06, 0.35, 0.35], [-0.02, 0.37, 0.45]))
    parts, parents = [body, left, right], {"left": "body", "right": "body"}
    grid = OccupancyGrid(_with_tree(parts, "body", parents),
                         ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02))
    z = np.array([0.0, 0.0, 1.0])

    def preds():  # both read as hinged at the seam
        return {n: PartPrediction(n, "revolute", z, np.array([-0.01, y, 0.4]), (0.0, 1.5), "body", 0.9)
                for n, y in (("left", -0.002), ("right", 0.002))}

    def hinge_y(flag):
        monkeypatch.setattr(infer, "DOUBLE_HANDLE", flag)
        pr = preds()
        _hinge_panels(parts, parents, pr, grid)
        _double_doors(parts, parents, pr, grid)
        return {n: float(p.origin[1]) for n, p in pr.items()}, pr

    ys, pr = hinge_y(True)
    assert pr["right"].info.get("panel_edge_kept") == "handle" and "moved_to_far_edge" not in pr["right"].info
    assert abs(ys["right"] - 0.002) < 0.01
    assert abs(ys["left"] + 0.4) < 0.01  # the left door: the edge away from its handle
    ys, pr = hinge_y(False)
    assert pr["right"].info.get("moved_to_far_edge") and abs(ys["right"] - 0.4) < 0.01  # the old rule
    # no handle: the double-door rule still mirrors seam hinges
    bare = [body, _part("left", ([-0.02, -0.4, 0.0], [0.0, -0.002, 0.8])),
            _part("right", ([-0.02, 0.002, 0.0], [0.0, 0.4, 0.8]))]
    monkeypatch.setattr(infer, "DOUBLE_HANDLE", True)
    pr = preds()
    _hinge_panels(bare, parents, pr, grid)
    assert set(double_doors(bare, pr, 0.8)) == {"left", "right"}


def test_a_compact_handle_held_on_one_face_turns_about_that_face_s_normal():
    """A faucet-like body with a cross handle (a 6 x 12 x 22 cm blade) standing on its +y face: the handle is
    no panel, not round and not elongated, and the body covers only its -y face, so it turns on a stem along
    +y through its contact (``stem_axis``); a prediction about a line across the stem moves there
    (``_turn_on_stems``), one already within 20 deg stays; an elongated arm lying on the body (a stapler's), a
    part held through the body and a knob held in a corner have no stem."""
    from kinemesh.articulation.infer import _turn_on_stems, stem_axis

    body = _part("body", ([0.0, -0.2, 0.0], [0.5, 0.2, 0.5]))
    handle = _part("handle", ([0.2, 0.2, 0.3], [0.26, 0.32, 0.52]))
    found = stem_axis(handle, body, 0.6)
    assert found is not None
    axis, point = found
    assert axis_angle_error_deg(axis, [0, 1, 0]) < 1.0 and axis[1] > 0  # from the body into the handle
    assert abs(point[1] - 0.2) < 0.02 and 0.2 <= point[0] <= 0.26 and 0.3 <= point[2] <= 0.52
    parts = [body, handle]

    def pred(ax):
        return {"handle": PartPrediction("handle", "revolute", np.array(ax, float),
                                         np.array([0.23, 0.26, 0.3]), (0.0, 1.5), "body", 0.9)}

    preds = pred([1.0, 0.0, 0.0])  # hinged across the stem
    _turn_on_stems(parts, preds)
    assert "stem" in preds["handle"].info and axis_angle_error_deg(preds["handle"].axis, [0, 1, 0]) < 1.0
    # through the middle of the contact patch (x 0.2..0.26, z 0.3..0.52)
    assert axis_line_distance(preds["handle"].origin, preds["handle"].axis, [0.23, 0.2, 0.41], axis) < 0.01
    near = pred([0.0, 0.98, 0.2])  # 11 deg off the stem: left alone
    _turn_on_stems(parts, near)
    assert "stem" not in near["handle"].info and np.allclose(near["handle"].axis, [0.0, 0.98, 0.2])
    arm = _part("arm", ([0.0, -0.03, 0.5], [0.5, 0.03, 0.56]))  # 50 cm long, lying on the body's top
    assert stem_axis(arm, body, 0.6) is None
    # a handle the body holds on two opposite faces (sunk through it) has no stem either
    through = _part("through", ([0.2, -0.3, 0.3], [0.26, 0.3, 0.42]), ([0.2, -0.06, 0.42], [0.26, 0.06, 0.6]))
    assert stem_axis(through, body, 0.6) is None
    # nor one in a corner, held on two faces (on the deck and against a wall)
    deck = _part("deck", ([0.0, -0.2, 0.0], [0.5, 0.2, 0.5]), ([0.5, -0.2, 0.0], [0.6, 0.2, 0.8]))
    corner = _part("corner", ([0.44, -0.03, 0.5], [0.5, 0.03, 0.57]))
    assert stem_axis(corner, deck, 0.8) is None
    on_top = stem_axis(corner, body, 0.8)  # the same knob without the wall: a stem straight up
    assert on_top is not None and axis_angle_error_deg(on_top[0], [0, 0, 1]) < 1.0 and on_top[0][2] > 0


def test_validity_keeps_an_upright_door_on_its_long_side_when_no_line_there_sweeps_free(monkeypatch):
    """``HINGE_FORCE``: the tall narrow door read as a flap hinged along its bottom edge (0.6, sweeps free);
    the network's two lines on a long side both scrape the carcass (its middle, 0.3: half the door sweeps into
    the carcass; a line 3 cm in from the left edge, 0.2: a strip of the door sweeps through the side wall).
    Nothing on an allowed side sweeps free, so the allowed line that collides least is kept (fold 1's cabinet
    49182: an inset door whose true hinge scrapes its frame, read hinged on its short top edge). A panel lying
    flat (a drawer's front read as turning) is left to the sweep; so is the door with the flag off."""
    from kinemesh.articulation import infer

    body, door = _tall_door()
    up = np.array([0.0, 0.0, 1.0])
    lines = [(0.6, np.array([0.0, 1.0, 0.0]), np.array([-0.02, 0.0, 0.0])),  # bottom edge: a flap
             (0.3, up, np.array([-0.01, 0.0, 0.5])),  # the door's middle
             (0.2, up, np.array([-0.01, -0.17, 0.5]))]  # 3 cm in from its left long edge

    def decode(parts=(body, door), lines=lines):
        return _decode_lines(parts, lines)

    pr = decode()
    swept = {round(v["score"], 3): v for v in pr.info["validity"]}
    assert not any(v["valid"] for s, v in swept.items() if s < 0.5)  # no line on the long side sweeps free
    assert axis_angle_error_deg(pr.axis, up) < 1e-6  # ... the one that scrapes least is kept
    assert axis_line_distance(pr.origin, pr.axis, lines[2][2], up) < 1e-6
    monkeypatch.setattr(infer, "HINGE_FORCE", False)
    assert axis_angle_error_deg(decode().axis, [0, 1, 0]) < 1e-6  # the flap stays
    monkeypatch.setattr(infer, "HINGE_FORCE", True)
    # the same box and lines turned to lie flat (its normal up, a drawer's front): the flap stays
    turn = np.array([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # x -> z, z -> -x: a quarter turn about y
    flat = [Part(p.name, p.vertices @ turn.T, p.faces) for p in (body, door)]
    flat_lines = [(p, a @ turn.T, o @ turn.T) for p, a, o in lines]
    pr = decode(flat, flat_lines)
    assert axis_angle_error_deg(pr.axis, flat_lines[0][1]) < 1e-6
