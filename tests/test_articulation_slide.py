"""Slides out of an enclosure (``kinemesh.articulation.infer.enclosure`` / ``slide_out`` / ``_slide_out``).
Tiny meshes built here: an open-front cabinet body with a drawer inside (walled on five faces, open at the
front), a window sash in its frame (both broad faces open), a button on a plate (nothing walls it in)."""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.articulation.infer import PartPrediction, _slide_out, enclosure, slide_out
from kinemesh.data.articulated import Part
from kinemesh.geometry.metrics import axis_angle_error_deg


def _part(name, *boxes) -> Part:
    """A part made of axis-aligned boxes given as (lo, hi) corner pairs (m)."""
    m = trimesh.util.concatenate([trimesh.creation.box(bounds=np.array([lo, hi], float)) for lo, hi in boxes])
    return Part(name, np.asarray(m.vertices), np.asarray(m.faces))


def _carcass() -> Part:
    """An open-front cabinet body (its front faces -X like PartNet-Mobility objects): x 0..0.5, y +-0.4,
    z 0..0.8, 2 cm walls."""
    t = 0.02
    return _part("body", ([0, -0.4, 0], [0.5, 0.4, t]), ([0, -0.4, 0.8 - t], [0.5, 0.4, 0.8]),
                 ([0, -0.4, 0], [0.5, -0.4 + t, 0.8]), ([0, 0.4 - t, 0], [0.5, 0.4, 0.8]),
                 ([0.5 - t, -0.4, 0], [0.5, 0.4, 0.8]))


def _drawer() -> Part:
    """A drawer as deep as it is wide (the box alone does not name its front), inside the body."""
    return _part("drawer", ([0.0, -0.37, 0.3], [0.46, 0.37, 0.5]))


def test_enclosure_of_a_drawer_and_its_slide_out_of_the_open_front():
    box, cover = enclosure(_drawer(), _carcass())
    k = int(np.argmax(np.abs(box.axes @ [1.0, 0.0, 0.0])))  # the box axis along the world x
    front = 0 if box.axes[k, 0] > 0 else 1  # the side of that axis facing -x
    assert cover[k, front] < 0.1  # the open front
    # top, bottom, both sides and back walled off (3000 samples of the whole body leave a few side cells empty)
    assert np.delete(cover.ravel(), 2 * k + front).min() > 0.75
    out = slide_out(_drawer(), _carcass())
    assert out is not None and axis_angle_error_deg(out, [-1.0, 0.0, 0.0]) < 1.0 and out[0] < 0


def test_no_slide_out_of_a_frame_open_on_both_faces_or_of_a_plate():
    t = 0.03
    frame = _part("frame", ([0, -0.5, 0], [0.05, 0.5, t]), ([0, -0.5, 1 - t], [0.05, 0.5, 1.0]),
                  ([0, -0.5, 0], [0.05, -0.5 + t, 1.0]), ([0, 0.5 - t, 0], [0.05, 0.5, 1.0]))
    sash = _part("sash", ([0.01, -0.47, t], [0.04, 0.0, 1 - t]))  # slides in its plane, along y
    assert slide_out(sash, frame) is None
    plate = _part("plate", ([0, -0.2, 0], [0.02, 0.2, 0.3]))
    button = _part("button", ([-0.01, -0.02, 0.1], [0.0, 0.02, 0.14]))
    assert slide_out(button, plate) is None


def _pred(name, type_, axis, travel, parent="body"):
    return PartPrediction(name, type_, np.asarray(axis, float), np.zeros(3), (0.0, 0.3), parent, 0.9, name,
                          {"slide_travel": travel})


def test_slide_out_refines_the_axis_and_the_type_of_a_solid_part_only():
    body, drawer = _carcass(), _drawer()
    door = _part("door", ([-0.02, -0.4, 0.0], [0.0, 0.4, 0.8]))
    # read sliding sideways: the slide goes out of the front, with the travel of 0.8 x its 46 cm depth
    preds = {"drawer": _pred("drawer", "prismatic", [0, 1, 0], 0.1)}
    _slide_out([body, drawer], preds)
    p = preds["drawer"]
    assert p.type == "prismatic" and axis_angle_error_deg(p.axis, [-1, 0, 0]) < 1.0 and p.axis[0] < 0
    assert p.limits[0] == 0.0 and abs(p.limits[1] - 0.8 * 0.46) < 1e-6
    assert np.allclose(p.origin, [0.23, 0.0, 0.4]) and p.info["slid_out"]["from"] == "prismatic"
    # read as turning: a solid box in an enclosure slides; the network's longer travel is kept
    preds = {"drawer": _pred("drawer", "revolute", [0, 0, 1], 0.5)}
    _slide_out([body, drawer], preds)
    assert preds["drawer"].type == "prismatic" and abs(preds["drawer"].limits[1] - 0.5) < 1e-9
    # a thin panel (a door) keeps its predicted turn, and a slide already out of the front stays as it is
    preds = {"door": _pred("door", "revolute", [0, 0, 1], 0.1)}
    _slide_out([body, door], preds)
    assert preds["door"].type == "revolute" and "slid_out" not in preds["door"].info
    preds = {"drawer": _pred("drawer", "prismatic", [-1, 0.05, 0], 0.1)}
    _slide_out([body, drawer], preds)
    assert "slid_out" not in preds["drawer"].info and preds["drawer"].limits == (0.0, 0.3)


def test_a_shallow_drawer_read_as_turning_slides_out_when_no_turn_sweeps_free(monkeypatch):
    """``STUCK_SLIDES``: a shallow drawer (12 cm tall, 46 x 74 cm: a panel by its box) in the carcass, read as
    turning, slides out of the open front when every turn the validity check swept collides (fold 1's cabinet
    45746: a wide drawer read as turning, its sweeps 46-93 % in collision). A turn that swept free keeps it
    turning (a door or a flap), as does a panel no sweep was tried for."""
    from kinemesh.articulation import infer


    body = _carcass()
    tray = _part("drawer", ([0.0, -0.37, 0.3], [0.46, 0.37, 0.42]))
    assert infer.panel_box(tray) is not None

    def read(swept):
        pr = _pred("drawer", "revolute", [0, 1, 0], 0.2)
        if swept is not None:
            pr.info["validity"] = [{"valid": v, "collision": 0.0 if v else 0.5} for v in swept]
        _slide_out([body, tray], {"drawer": pr})
        return pr

    pr = read([False, False, False])
    assert pr.type == "prismatic" and axis_angle_error_deg(pr.axis, [-1, 0, 0]) < 1.0 and pr.axis[0] < 0
    assert pr.info["slid_out"]["from"] == "revolute" and pr.type_from() == "shape: slides out"
    assert read([False, True]).type == "revolute"  # one turn sweeps free: it turns
    assert read(None).type == "revolute"  # nothing swept: the shape alone does not overrule a panel's turn
    monkeypatch.setattr(infer, "STUCK_SLIDES", False)
    assert read([False, False, False]).type == "revolute"


def test_a_panel_read_as_spinning_about_its_normal_in_an_enclosure_slides_out(monkeypatch):
    """``SPIN_SLIDES``: a flat part walled in on five faces (the shallow drawer above; a utility knife's blade
    in its handle, which fold 3's network read as spinning in its own plane, 89.7 deg off) read as turning
    about its own normal slides out of the open face even when that turn sweeps free: a door or lid turns
    about a line in its plane, never about its normal. Read as turning about a line in its plane, it keeps
    turning."""
    from kinemesh.articulation import infer

    body = _carcass()
    blade = _part("blade", ([0.0, -0.37, 0.3], [0.46, 0.37, 0.42]))  # normal: z

    def read(axis):
        pr = _pred("blade", "revolute", axis, 0.2)
        pr.info["validity"] = [{"valid": True, "collision": 0.0}]
        _slide_out([body, blade], {"blade": pr})
        return pr

    pr = read([0, 0, 1])
    assert pr.type == "prismatic" and axis_angle_error_deg(pr.axis, [-1, 0, 0]) < 1.0 and pr.axis[0] < 0
    assert pr.info["slid_out"]["from"] == "revolute"
    assert read([0, 0.4, 1]).type == "prismatic"  # within 30 deg of its normal
    assert read([0, 1, 0]).type == "revolute"  # a hinge line in its plane: a flap
    monkeypatch.setattr(infer, "SPIN_SLIDES", False)
    assert read([0, 0, 1]).type == "revolute"


def _table():
    """A desk (its front faces -X): a 1 m top at z 0.70-0.73, legs to the floor, a back and two side aprons
    under the top framing a drawer open in front and underneath."""
    t = 0.02
    return _part("body", ([0, -0.5, 0.70], [0.6, 0.5, 0.73]),  # top
                 ([0, -0.5, 0], [0.04, -0.46, 0.70]), ([0, 0.46, 0], [0.04, 0.5, 0.70]),  # front legs
                 ([0.56, -0.5, 0], [0.6, -0.46, 0.70]), ([0.56, 0.46, 0], [0.6, 0.5, 0.70]),  # back legs
                 ([0.0, -0.25 - t, 0.58], [0.6, -0.25, 0.70]), ([0.0, 0.25, 0.58], [0.6, 0.25 + t, 0.70]),
                 ([0.6 - t, -0.25, 0.58], [0.6, 0.25, 0.70]))


def test_a_table_drawer_open_in_front_and_underneath_slides_out_of_the_flush_front(monkeypatch):
    """``SLIDE_FRONT``: walled by the top, the back and two aprons, the drawer is open on two faces; the front
    is flush with the desk's outside, the bottom has the legs' 58 cm below it, so it slides out of the front.
    Without the whole object (or with both faces flush) the shape does not say."""
    from kinemesh.articulation import infer

    body = _table()
    drawer = _part("drawer", ([0.0, -0.24, 0.60], [0.56, 0.24, 0.69]))
    whole = np.concatenate([body.vertices, drawer.vertices])
    out = slide_out(drawer, body, whole=whole)
    assert out is not None and axis_angle_error_deg(out, [-1, 0, 0]) < 1.0 and out[0] < 0
    assert slide_out(drawer, body) is None  # two open faces and no object to tell the front
    flat = whole[whole[:, 2] > 0.5]  # legs cut off: the bottom is flush too, so neither face decides
    assert slide_out(drawer, body, whole=flat) is None
    # the decoding pass: a drawer read sliding down through its open bottom slides out of the front instead
    preds = {"drawer": _pred("drawer", "prismatic", [0, 0, -1], 0.1)}
    _slide_out([body, drawer], preds)
    p = preds["drawer"]
    assert axis_angle_error_deg(p.axis, [-1, 0, 0]) < 1.0 and p.axis[0] < 0 and p.info["slid_out"]
    monkeypatch.setattr(infer, "SLIDE_FRONT", 0.0)  # switched off: the two open faces leave it as read
    preds = {"drawer": _pred("drawer", "prismatic", [0, 0, -1], 0.1)}
    _slide_out([body, drawer], preds)
    assert "slid_out" not in preds["drawer"].info


def test_a_round_tray_walled_in_along_its_axis_turns(monkeypatch):
    """``TRAYS`` (``in_cavity``, ``_round_parts``): a flat disc on the floor of the cabinet, under its
    ceiling, read as lifting (sliding along its axis) spins about its axis without limits: the carcass blocks
    the slide both ways. The same disc on an open plate (nothing above it: a round button) keeps its slide,
    and so does the tray with the flag off."""
    import trimesh

    from kinemesh.articulation import infer

    disc = trimesh.creation.cylinder(radius=0.15, height=0.01, sections=48)
    disc.apply_translation([0.25, 0.0, 0.025])
    tray = Part("tray", np.asarray(disc.vertices), np.asarray(disc.faces))
    plate = _part("body", ([0.0, -0.4, 0.0], [0.5, 0.4, 0.02]))

    def read(parent):
        pr = _pred("tray", "prismatic", [0, 0, 1], 0.05)
        infer._round_parts([parent, tray], {"tray": pr})
        return pr

    assert infer.in_cavity(tray, _carcass(), [0, 0, 1]) and not infer.in_cavity(tray, plate, [0, 0, 1])
    monkeypatch.setattr(infer, "TRAYS", True)
    pr = read(_carcass())
    assert pr.type == "revolute" and axis_angle_error_deg(pr.axis, [0, 0, 1]) < 1.0
    assert pr.limits == (-np.pi, np.pi) and np.allclose(pr.origin[:2], [0.25, 0.0], atol=1e-3)
    assert pr.type_from() == "shape: tray"
    assert read(plate).type == "prismatic"
    monkeypatch.setattr(infer, "TRAYS", False)
    assert read(_carcass()).type == "prismatic"
