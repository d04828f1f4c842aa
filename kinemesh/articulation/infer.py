"""Articulation of a segmented static shape: the learned predictor (GEOPARD-like) and the heuristic baseline.

``articulate(obj)`` takes an :class:`ArticulatedObject` whose joints are ignored (only its parts are used)
and returns one :class:`PartPrediction` per part except the root. Steps:

1. root = the largest grounded part (or a part 10x bigger, a cart body); parent of every other part = its
   neighbour towards the root in the minimum spanning tree of part-to-part surface distances (parts touch
   their parent: a handle touches its door, a door its carcass), from surface samples dense enough on big
   parts (``TREE_SPACING``) that a button touching a panel finds the panel nearer than its neighbour button;
2. the network predicts type, axis, origin, limits and a confidence per part (batched; its outputs averaged
   over ``SAMPLINGS`` surface samplings of every part, test-time sampling); with the validity check, a lever
   (an elongated part touching its parent near one end, ``lever_length``) read as sliding across its length is
   decoded as turning (``lever_turns``), and so is a large upright panel read as sliding along its normal
   (``door_turns``: a door), about a line in its plane, and so is a panel read as sliding that touches its
   parent along one edge only (``flap_turns``: a box flap); a broad square-ish panel read as turning about its
   normal turns about a line in its plane too (``broad_panel``: a lid, ``LIDS_HINGE``); a button on the root
   (``button_axis``) read as fixed moves as its more probable movable type (``FIXED_BUTTONS``), and a flat
   button read as spinning about its normal (a dial) is pressed along it (``flat_button``,
   ``FLAT_BUTTONS``); a lever read as spinning about its own length turns across it, at the end touching its
   parent (``lever_spin``, ``LEVER_SPIN``), and a lever lying down read as turning about another line swings
   about that one too (``lever_swing``, ``LEVER_SWING``: towards or away from its parent);
3. optional validity check (``check_validity``): among the network's axis-class / sign alternatives the
   most probable one whose sweep (in either opening direction) neither collides nor detaches is kept
   (:mod:`kinemesh.geometry.validity`, swept per-sample test), one the part's shape allows first (a panel
   hinged on a long or upright side, ``hinge_sides``, among all the network's lines when every line it rates
   is ruled out; a lever pivoting across its length, ``lever_length``, and never twisting about it,
   ``LEVER_KEEP``);
4. with the validity check, revolute pivots are refined by the rest contact (``_snap_to_contact``): a
   revolute part that touches its parent only in a compact region (pliers blades at their rivet, lamp links,
   knobs) turns about an axis through that region, so a predicted line that misses it is moved (same
   direction) to pass through the region's centroid when that motion is still valid;
5. before that, revolute panels (doors, lids, flaps) whose shape names the hinge edge are moved onto it
   (``_hinge_panels`` / ``panel_hinge``): the edge along which the panel touches its parent (a flap stored
   open), else the edge opposite its handle, when that sweep is valid; then a panel's line that leans to an
   edge of the box face touching its parent is put exactly on that edge (``_snap_to_edges`` /
   ``hinge_edge``), when that sweep is valid;
   then a revolute panel's line moves across the panel to the middle of its own slab (``_snap_to_slab`` /
   ``slab_middle``: between its inner face and its outer face without the handle), when that sweep is valid;
6. also with ``check_validity``, a part its parent walls off on five faces and leaves open on one (a drawer
   in its carcass, a dishwasher rack in its tub, a blade in its handle) slides out of the open side
   (``_slide_out`` / ``slide_out``), whatever axis (or, for a part that is no panel, type) was predicted;
7. also with ``check_validity``, round parts (``_round_parts`` / ``round_axis``: a circular outline, neither
   flat nor long: caps, lids, knobs, round buttons; flat ones too when read as sliding) move along or about
   their axis of symmetry, with their predicted type; a round part covering its parent's top twists off a tall
   parent and lifts off a squat one (``_caps``: a bottle's cap, a pot's lid); small parts predicted to slide
   slide into their parent along their thinnest side (``_press_buttons`` / ``button_axis``: buttons are
   pressed, not slid along the surface);
   knobs (``_turn_knobs`` / ``knob_axis``: small parts on a fixed part with a circular outline about a box
   axis, standing out along it by a fifth of their diameter or more: oven knobs, dials, caps) turn without
   limits about that axis through the circle's centre, whatever their predicted type, axis and origin;
8. also with ``check_validity``, wheels (``_roll_wheels`` / ``wheel_axis``: small parts at the object's
   bottom with a circular outline about a horizontal axis) turn about that axis, whatever their predicted
   type;
9. last, with ``check_validity``, an axis within ``AXIS_SNAP`` deg of the object's own axes (Z up, the sides
   of its footprint's rectangle: ``object_frame``) turns onto them, a hinge about its point nearest the part's
   rest contact, unless one of the shape rules of 7-8 gave it (``_snap_axes``); then a slide's limits end where
   its part would leave its parent (``_limits_in_contact``, ``LIMIT_GAP``).

The heuristic baseline picks, among the *valid* box candidates, one by a fixed rule (no learning).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.errors import KinemeshError

CLASSES = ("fixed", "revolute", "prismatic")
ORIGIN_CELLS = 3  # decoding: origin cells per axis class tried by the validity check
CONTACT_TOL = 0.02  # pivot snap: contact = part samples within (closest approach + this x object size) of the parent
CONTACT_COMPACT = 0.5  # pivot snap: contact counts as compact when its extent across the axis is <= this x the part's
FLOAT_BIG = 0.5  # part tree: a part touching nothing weighs its distance to a small neighbour up to 1 + this more
TREE_SAMPLES = 400  # part tree: surface samples per part for the part-to-part distances (at least)
TREE_SPACING = 1.0  # ... more on big parts: one per (this x the contact tolerance)^2 of surface (0: off)
TREE_MAX_SAMPLES = 20000  # ... at most
ROOT_ABOVE_WHEELS = 10.0  # part tree: a part this many times the box volume of every grounded part is the root
PANEL_THIN = 0.35  # panel hinge: a part is a panel when its thinnest box side is <= this x its middle side
STRIP = (0.6, 0.3, 0.6)  # panel hinge: contact strip = extent along an edge >= [0], across <= [1], centroid >= [2]
HANDLE = (0.04, 0.6, 0.25)  # panel hinge: protrusion >= [0] x panel width; handle centroid >= [1], lead >= [2]
LONG_SIDE = 0.6  # panel hinge: a hinge edge is at least this x the panel's other in-plane side
UPRIGHT = 0.8  # panel hinge: ... unless it is upright (|z| of its direction >= this: a wide microwave door)
WHEEL = (0.05, 0.3)  # wheel: outline radius spread <= [0] x its mean (a circle), diameter <= [1] x object size
KNOB = (0.05, 0.2, 1.5, 0.02, 0.2)  # knob: outline spread <= [0], height / diameter in [[1], [2]], diameter /
# object size in [[3], [4]]
ROUND = (0.05, 0.15, 1.0)  # round part: outline spread <= [0] about a box axis, height / diameter in [[1], [2]]
BUTTON = (0.15, 0.8)  # button: largest box side <= [0] x object size, thinnest side <= [1] x the middle one
KNOBS = True  # small round parts turn about their axis of symmetry (``_turn_knobs``)
STEMS = True  # a compact part read as turning, held on one face only, turns about its normal (``stem_axis``)
STEM = (0.3, 0.1, 20.0)  # ... face covered >= [0], opposite <= [1], no other >= [0]; axes within [2] deg kept
EDGE = (10.0, 0.6, 0.5, 0.7)  # hinge edge: axis within [0] deg of a box axis; contact >= [1], line >= [2] / [3] to a side
DOUBLE = True  # a double door's leaves hinge on their far edges (``_double_doors``)
DOUBLE_HANDLE = True  # ... unless a leaf's handle put its hinge where it is (``panel_hinge``'s handle lines)
CORNER_HANDLE = True  # panel_hinge: a handle in a corner names the opposite edge across the predicted hinge
LEVERS = True  # validity picks a lever's pivot across its length first (``lever_length``)
LEVER_TURNS = True  # a lever read as sliding across its length turns instead (``lever_turns``)
DOORS_TURN = True  # an upright panel read as sliding along its normal turns instead (``door_turns``)
BUTTON_LIMITS = True  # a button already pressed inwards gets limits (0, travel) too (``_press_buttons``)
FIXED_BUTTONS = True  # a button on the root that the network reads as fixed moves (see ``articulate``)
FLAT_BUTTONS = True  # a flat button read as turning about its normal is pressed instead (``flat_button``)
LEVER_SPIN = True  # a lever read as spinning about its length turns across it (``lever_spin``)
LEVER_ALONG = True  # ... and so does one read as sliding along its length that its parent does not sheathe
LEVER_KEEP = True  # validity never turns a lever about its own length (``_choose_valid``)
LEVER_SWING = True  # ... and one read as turning about a line far from length x (towards its parent) too
HANDLE_PLANE = True  # panel_hinge: an upright panel's handle is sought above its tilted face (``_face_plane``)
FLAT = 0.2  # ... flat: thinnest box side <= this x its largest (a knob stands out more, ``KNOB[1]``)
DOOR_SIZE = 0.3  # door_turns: the panel's largest side is at least this x the object's largest side
SPIN_SLIDES = True  # _slide_out: a panel read as turning about its normal, enclosed, slides out too
STUCK_SLIDES = True  # _slide_out: a panel read as turning, enclosed, that no swept turn frees, slides out too
TRAYS = True  # _round_parts: a round part walled in along its axis by its parent turns about it (a turntable)
FLAT_LIFT = True  # _round_parts: a flat round part read as sliding slides along its axis too
CAPS = True  # a round part covering its parent's top twists off a tall parent, lifts off a squat one
CAPS_KEEP_HINGE = True  # ... but one read as hinged about a line across it keeps its hinge (a trash can's lid)
TALL_CAPS = True  # ... on a tall parent a round part at its top twists off, however narrow or sunk
CAP = (0.5, 1.3)  # ... its diameter >= [0] x the parent's width; tall: parent height >= [1] x its width
FLAPS_TURN = True  # a panel read as sliding that touches its parent along one edge turns (``flap_turns``)
LIDS_HINGE = True  # a broad square-ish panel read as turning about its normal turns about a line in its plane
BROAD = 0.35  # ... (``broad_panel``): its middle side is at least this x its largest one
ROUND_AXES = True  # a round part moves along or about its axis of symmetry (``round_axis``)
HINGE_SIDES = True  # validity picks a panel's hinge on a side its shape allows first (``hinge_sides``)
HINGE_ANY = True  # ... among all the network's lines when every line it rates is on a side the shape rules out
HINGE_VALID = True  # ... or when none it rates on an allowed side sweeps free
HINGE_FORCE = True  # ... and when none sweeps free either, an upright panel's allowed line that collides least
AXIS_SNAP = 35.0  # a movable axis within this many deg of the object's axes turns onto them (``_snap_axes``)
SNAP_ABOUT = "contact"  # ... a hinge about its point nearest the part's rest contact ("centre", "origin")
LIMIT_GAP = 0.015  # a predicted limit ends where its part's gap to its parent has grown by this x the object size
LIMIT_STEPS = 32  # ... poses tried on each side of the rest pose (``_limits_in_contact``)
LIMIT_TYPES = ("prismatic",)  # ... of these joints (not hinges: see ``_limits_in_contact``)
SAMPLINGS = 4  # the network's outputs averaged over this many surface samplings of each part
CONTACT_SLACK = 0.5  # validity of the lines the shape proposes (after ``_choose_valid``): a sample touching
# the rest at rest collides only this many voxels past what it touches (``ValidityConfig.contact_slack``)
SLACK_CHOOSE = False  # ... and of the network's own lines too (measured: their wrong hinge sides pass)
SLAB = True  # revolute panels' hinge lines move to the middle of their slab (``_snap_to_slab``)
SLIDE_OUT = (0.4, 0.5, 0.8)  # slide out: one box face covered by the parent on <= [0] of its footprint, the other
# five >= [1]; travel [2] x the part's depth along the slide
SLIDE_FRONT = 0.1  # ... or two open faces, one flush with the object's outside (the object reaches <= this x
# its size beyond it; beyond the other > this): a table's drawer, open in front and underneath


@dataclass
class PartPrediction:
    """Predicted joint of one part (world frame, metres / radians)."""

    name: str
    type: str  # fixed | revolute | prismatic (continuous: `kinemesh articulate`'s output, see full_turn)
    axis: np.ndarray  # (3,) unit
    origin: np.ndarray  # (3,) m, a point on the axis (prismatic: the part's box centre)
    limits: tuple[float, float] | None
    parent: str
    confidence: float
    label: str = ""
    info: dict = field(default_factory=dict)

    def type_from(self) -> str:
        """Where the motion type came from: "prompt" (a text prompt's verb), "shape: <rule>" when a decoding
        rule set it from the part's shape (a door, a lever, a button, a knob, a wheel, a cap or lid, a
        turntable, a part that slides out of its parent), else the predictor's ``info["source"]``
        ("observed motion", "heuristic"), else "network". ``confidence`` stays the predictor's own."""
        i = self.info
        if i.get("type_from_prompt"):
            return "prompt"
        for rule in ("wheel", "knob", "cap", "tray"):
            if i.get(rule):
                return f"shape: {rule}"
        if i.get("slid_out") and i["slid_out"].get("from") != self.type:
            return "shape: slides out"
        if i.get("type_from_shape"):
            return f"shape: {i['type_from_shape']}"
        return i.get("source", "network")

    def to_dict(self) -> dict:
        """The part entry of ``articulation.json`` (README, "articulate")."""
        return {"name": self.name, "type": self.type, "axis": [round(float(a), 6) for a in self.axis],
                "origin": [round(float(o), 6) for o in self.origin],
                "limits": None if self.limits is None else [round(float(x), 6) for x in self.limits],
                "parent": self.parent, "confidence": round(float(self.confidence), 4), "type_from": self.type_from()}


def geometric_parts(obj: ArticulatedObject) -> list[Part]:
    """Parts with geometry; raises KinemeshError for fewer than two parts or a degenerate part."""
    from kinemesh.articulation.candidates import check_part_geometry

    parts = [p for p in obj.parts if len(p.vertices)]
    for p in parts:
        check_part_geometry(p.vertices, p.faces, p.name)
    if len(parts) < 2:
        raise KinemeshError(
            f"{obj.name}: only {len(parts)} part with geometry; articulation needs at least two parts (give a "
            "segmented mesh: URDF/PartNet-Mobility folder, GLB nodes, OBJ groups, --labels per-face file, or "
            "separate connected components)")
    return parts


def object_extent(parts: list[Part]) -> tuple[float, float]:
    """(the object's largest side (m), the height of its bottom (m)) over all ``parts``' vertices."""
    allv = np.concatenate([p.vertices for p in parts])
    return float(np.max(np.ptp(allv, axis=0))), float(allv[:, 2].min())


def object_frame(parts: list[Part]) -> np.ndarray:
    """(3, 3) rows: the object's own axes. Z up (gravity), and the sides of the smallest rectangle about its
    footprint (the vertices seen from above) in the horizontal plane: a cabinet's front and side however it is
    turned about Z. A footprint without a clear rectangle (a disc) gives some pair of orthogonal horizontals."""
    import trimesh

    xy = np.concatenate([p.vertices for p in parts])[:, :2]
    try:
        T, _ = trimesh.bounds.oriented_bounds_2D(xy)
        u = np.asarray(T, float)[0, :2]  # the rectangle's first side, in world coordinates
    except Exception:  # noqa: BLE001 - a degenerate footprint (a line, a point): the world's axes
        u = np.array([1.0, 0.0])
    u = u / max(float(np.linalg.norm(u)), 1e-12)
    return np.array([[u[0], u[1], 0.0], [-u[1], u[0], 0.0], [0.0, 0.0, 1.0]])


SYMMETRY_RULES = ("tray", "round", "cap", "knob", "wheel", "caster", "button", "stem")  # axes from a part's shape


def _snap_axes(parts, preds, max_deg: float, size: float, seed: int = 0) -> None:
    """Turn a movable part's axis onto the nearest of the object's axes (:func:`object_frame`) when it is within
    ``max_deg`` (the sign kept), unless a shape rule gave the axis (``SYMMETRY_RULES``: a knob's, a wheel's or
    a button's own axis, which follows its face). A hinge line turns about its point nearest where the part
    touches its parent at rest (``SNAP_ABOUT = "contact"``: a joint sits where the parts meet); a slide, which
    has no line of its own, keeps its point.

    Why: man-made joints run along the object's axes. On data/real_train 436 of the 469 movable joints lie
    within 2 deg of them (426 within 0.5 deg), and every other one within 2 deg of its part's own box axes:
    knobs on control panels tilted 15-45 deg, an office chair's casters (the symmetry rules' parts), one
    faucet handle tilted 24 deg (snapped wrongly: fold 3's faucet 1280), a stapler's arms 6 deg, two knife
    blades 2-4 deg. The lines the decoding builds from contact (a contact strip, a lever's swing towards its
    parent's centre) or the network's box frame tilt with the part's shape: fold 3's eyeglass temples and
    faucet spouts read 11-30 deg off."""
    frame = object_frame(parts)
    by = {p.name: p for p in parts}
    cos = np.cos(np.radians(max_deg))
    for pr in preds.values():
        if (pr.type not in ("revolute", "prismatic") or pr.name not in by
                or any(k in pr.info for k in SYMMETRY_RULES)):
            continue
        a = np.asarray(pr.axis, float) / np.linalg.norm(pr.axis)
        d = frame @ a
        k = int(np.argmax(np.abs(d)))
        if cos <= abs(d[k]) < 1.0 - 1e-12:
            if pr.type == "revolute" and SNAP_ABOUT in ("centre", "contact"):  # a slide keeps its point
                c = by[pr.name].vertices.mean(0)
                if SNAP_ABOUT == "contact" and pr.parent in by:
                    C = _rest_contact(by[pr.name], by[pr.parent], size, seed)[2]
                    c = C.mean(0) if len(C) else c
                pr.origin = np.asarray(pr.origin, float) + float((c - pr.origin) @ a) * a
            pr.axis = frame[k] * np.sign(d[k])
            pr.info["axis_snapped_deg"] = float(np.degrees(np.arccos(min(1.0, abs(d[k])))))


def contact_limit(pts: np.ndarray, ref: np.ndarray, type_: str, axis, origin, limit: float, tol: float,
                  steps: int = LIMIT_STEPS) -> float:
    """How far (rad / m, same sign as ``limit``) a part with surface samples ``pts`` (n, 3) moves along its joint
    (``type_``, ``axis``, ``origin``) towards ``limit`` before its gap to its parent's samples ``ref`` (m, 3) has
    grown by ``tol`` m: ``limit`` itself when it never has, else the value where the gap crosses ``tol``
    (linear between the last pose within it and the first beyond; always between 0 and ``limit``)."""
    from scipy.spatial import cKDTree

    from kinemesh.data.articulated import joint_motion

    tree = cKDTree(ref)
    g0 = float(tree.query(pts)[0].min())
    values = limit * np.linspace(1.0 / steps, 1.0, steps)
    prev_v, prev_g = 0.0, 0.0
    for v in values:
        T = joint_motion(type_, np.asarray(axis, float), np.asarray(origin, float), float(v))
        g = float(tree.query(pts @ T[:3, :3].T + T[:3, 3])[0].min()) - g0
        if g > tol:
            return float(prev_v + (v - prev_v) * (tol - prev_g) / max(g - prev_g, 1e-12))
        prev_v, prev_g = float(v), g
    return float(limit)


def _limits_in_contact(parts, preds, size: float, seed: int = 0) -> None:
    """Shorten a predicted slide's limits to where its part would leave its parent: on each side of the rest pose,
    the slide ends once the part's surface gap to the parent has grown by ``LIMIT_GAP`` x the object size
    (:func:`contact_limit`) or, if later, once the part has passed the parent's extent along the slide (a drawer
    clear of its carcass's walls, touching only the front frame, is held until it has slid out), and never nearer
    rest than 1.5 x the dynamics' closed-stop distance (``kinemesh.dynamics.joints.CLOSED_LIMIT``). Parts that do
    not touch their parent at rest (closest approach beyond ``CONTACT_TOL`` x size) keep their limits, and so do
    joints of types not in ``LIMIT_TYPES``. (Collisions on the closing side are cut at export,
    :func:`kinemesh.articulation.export.collision_free_limits`; this step keeps parts on their parents.)

    Why: the network's travel, and the shape rules' (``SLIDE_OUT``), are guesses that can carry a part off its
    parent: on the real validation split 7 of the 112 predicted joints (6 slides, a hinge) left their parent by
    more than 2 % of the object's size at a limit (a travel mug's lid read as sliding 0.23 m up, a camera's
    buttons, an oven's tray), and ``kinemesh sample`` wrote the mug with its lid lifted clear in one sample of 8;
    the URDFs' own limits keep 103 of those 104 joints within 1.3 % (the other, a bottle cap lifting off, 2.2 %).
    Chosen on the real validation split (``kinemesh eval real --split val``): prior samples along the predicted
    joints attached 0.996 -> 1.000, samples of the reduced coordinates along them 0.985 -> 0.996, no drag changed;
    on all 158 objects of data/real_train 0.998 -> 1.000 and 0.984 -> 0.992, one drag 1.00 -> 0.92 of the asked
    motion. The gap alone (without the extent) cut real drawers, whose only contact is the front frame, to a few
    cm (a cabinet drawer's 0.33 m to 0.035 m), and their drags followed half as far (1.00 -> 0.50; training-split
    drawers). Hinges are left alone: a hinge that leaves its parent is a wrong line rather than a wrong swing, and
    cutting it (a dishwasher door's swing cut from 70 to 27 deg) made that door's drag follow less (0.96 -> 0.82)
    and move the rest of the object by 16 % of its size. The limits are exported (``kinemesh articulate``'s URDF)
    and bound the prior samples; drags are not stopped by predicted limits far from rest."""
    from kinemesh.dynamics.joints import CLOSED_LIMIT

    by = {p.name: p for p in parts}
    tol = LIMIT_GAP * size
    for pr in preds.values():
        if (pr.type not in LIMIT_TYPES or pr.limits is None or full_turn(pr)
                or pr.name not in by or pr.parent not in by):
            continue
        pts, ref, _, eps = _rest_contact(by[pr.name], by[pr.parent], size, seed)
        if eps > 2 * CONTACT_TOL * size:
            continue  # not touching its parent at rest (closest approach > CONTACT_TOL): nothing to stay on
        lo, hi = (float(x) for x in pr.limits)
        a = np.asarray(pr.axis, float) / np.linalg.norm(pr.axis)
        s, r = pts @ a, ref @ a
        # never shorter than 1.5 x the dynamics' closed-stop distance: a limit that near rest is a stop in drags
        # (``CLOSED_LIMIT``: a drawer at its back), and a shortened opening side must not become one (a small
        # pot's lid, cut to a few millimetres, would no longer lift when dragged)
        keep = 1.5 * CLOSED_LIMIT[0 if pr.type == "revolute" else 1]
        new = []
        for x in (lo, hi):
            if x == 0:
                new.append(0.0)
                continue
            reach = abs(contact_limit(pts, ref, pr.type, pr.axis, pr.origin, x, tol))
            if pr.type == "prismatic":  # held until it has passed its parent's extent along the slide (a drawer
                # inside its carcass, clear of the walls, until it has slid out of it)
                reach = max(reach, float(r.max() - s.min()) if x > 0 else float(s.max() - r.min()))
            new.append(float(np.sign(x)) * min(abs(x), max(reach, keep)))
        new = tuple(new)
        if new != (lo, hi):
            pr.info["limits_before_contact"] = [lo, hi]
            pr.limits = new


def part_tree(parts: list[Part], n_samples: int | None = None,
              seed: int = 0) -> tuple[str, dict[str, str], np.ndarray]:
    """Root part, parent of every other part, and the pairwise surface distance matrix (m).

    Root = largest box volume among the parts reaching the object's bottom, or a part ``ROOT_ABOVE_WHEELS`` x
    bigger than all of them (a cart's body on its wheels). Parents come from the minimum spanning tree of
    part-to-part distances (surface samples, k-d tree), oriented away from the root, with bigger neighbours
    preferred (for a part touching nothing, more: ``FLOAT_BIG``).
    """
    from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree
    from scipy.spatial import cKDTree

    from kinemesh.articulation.candidates import part_box
    from kinemesh.geometry.sampling import face_areas, sample_surface

    rng = np.random.default_rng(seed)
    n_samples = TREE_SAMPLES if n_samples is None else n_samples
    boxes = [part_box(p.vertices, p.name) for p in parts]
    vols = np.array([float(np.prod(b.extents)) for b in boxes])
    size, z0 = object_extent(parts)
    # the root stands on the ground: largest part among those reaching the object's bottom (2% of its size),
    # or a part ROOT_ABOVE_WHEELS x bigger than all of them (a cart's or table's body carried by its wheels)
    grounded = np.array([p.vertices[:, 2].min() <= z0 + 0.02 * size for p in parts])
    grounded |= vols >= ROOT_ABOVE_WHEELS * vols[grounded].max()
    root = int(np.argmax(np.where(grounded, vols, -1.0)))
    pts = []
    tol = 0.015 * size
    for p in parts:
        count = n_samples
        if TREE_SPACING:  # samples dense enough that a touching neighbour finds one within TREE_SPACING x tol
            area = float(face_areas(p.vertices, p.faces).sum()) if len(p.faces) else 0.0
            count = int(np.clip(area / (TREE_SPACING * tol) ** 2, n_samples, TREE_MAX_SAMPLES))
        try:
            s, _, _ = sample_surface(p.vertices, p.faces, count, seed=rng)
        except Exception:
            s = p.vertices
        pts.append(np.concatenate([s, p.vertices[:: max(1, len(p.vertices) // n_samples)]]))
    n = len(parts)
    D = np.zeros((n, n))
    trees = [cKDTree(x) for x in pts]
    for i in range(n):
        for j in range(i + 1, n):
            d = float(trees[j].query(pts[i], k=1)[0].min())
            D[i, j] = D[j, i] = d
    # Touching (within tol) counts as contact; among contacts prefer the bigger neighbour as the parent
    # (drawers touch each other and the carcass: the carcass wins; a handle touches only its door). A part
    # touching nothing (a real oven's knobs float a few cm off its panel, nearer each other than the body)
    # prefers the bigger neighbour more: its distances to smaller parts count up to 1 + FLOAT_BIG x longer.
    small = 1.0 - np.minimum(np.maximum(vols[:, None], vols[None, :]) / vols[root], 1.0)
    floating = np.sort(D, axis=1)[:, 1] > tol if n > 1 else np.zeros(n, bool)  # column 0: itself
    far = np.where(floating[:, None] | floating[None, :], 1.0 + FLOAT_BIG * small, 1.0)
    W = np.maximum(D, tol) * far + tol * small
    np.fill_diagonal(W, 0)
    mst = minimum_spanning_tree(W)
    mst = mst + mst.T
    order, pred = breadth_first_order(mst, root, directed=False, return_predecessors=True)
    parents = {parts[i].name: parts[pred[i]].name for i in range(n) if i != root and pred[i] >= 0}
    return parts[root].name, parents, D


def full_turn(pr: PartPrediction) -> bool:
    """A turning part free over a whole turn (the wheel, knob, turntable and twist-cap rules give it limits
    (-pi, pi)): exported as a continuous joint, without limits, as PartNet-Mobility annotates them (on
    data/real_train every part these rules turn is continuous: 31 wheels, 66 knobs, 5 caps, a turntable)."""
    turns = pr.type in ("revolute", "continuous")
    return turns and (pr.limits is None or pr.limits[1] - pr.limits[0] >= 2 * np.pi - 1e-9)


def _with_tree(parts: list[Part], root: str, parents: dict[str, str], preds: dict | None = None,
               name: str = "object", category: str = "unknown") -> ArticulatedObject:
    """An ArticulatedObject of ``parts`` with fixed joints along the tree (or predicted joints in ``preds``)."""
    joints = []
    for p in parts:
        if p.name == root:
            continue
        pr = (preds or {}).get(p.name)
        if pr is not None and full_turn(pr):  # a wheel, a knob, a turntable, a twist cap: no limits
            joints.append(Joint(f"joint_{p.name}", "continuous", pr.parent, p.name, pr.axis, pr.origin, None))
        elif pr is not None and pr.type != "fixed":
            joints.append(Joint(f"joint_{p.name}", pr.type, pr.parent, p.name, pr.axis, pr.origin, pr.limits))
        else:
            joints.append(Joint(f"joint_{p.name}", "fixed", parents[p.name], p.name, (0, 0, 1), (0, 0, 0)))
    return ArticulatedObject([Part(p.name, p.vertices, p.faces, p.label) for p in parts], joints, category, name)


def articulate(obj: ArticulatedObject, weights=None, net=None, check_validity: bool = True, seed: int = 0,
               device: str = "cpu", force_types: dict[str, str] | None = None) -> list[PartPrediction]:
    """Predict the articulation of every non-root part of ``obj`` (its joints are not used).

    ``weights``: a predictor folder (default: the shipped weights); ``net``: an already loaded network;
    ``force_types``: part name -> motion type overriding the type head (a text prompt's verb).
    Raises KinemeshError for a single-part object or degenerate parts.
    """
    import torch

    from kinemesh.articulation.predictor import PredictorConfig, decode, load_predictor, part_features

    parts = geometric_parts(obj)
    root, parents, _ = part_tree(parts, seed=seed)
    net = net if net is not None else load_predictor(weights, device)
    cfg: PredictorConfig = net.config
    rng = np.random.default_rng(seed)
    geo = [(p.vertices, p.faces) for p in parts]
    feats, points = [], []
    for k in range(max(1, SAMPLINGS)):  # test-time sampling: the outputs of SAMPLINGS surface samplings averaged
        for i, p in enumerate(parts):
            if p.name == root:
                continue
            pts, bf, box, (center, scale) = part_features(geo, i, rng, cfg, p.name)
            points.append(pts)
            if k == 0:  # the box and normalization do not depend on the sampling
                feats.append((p, pts, bf, box, center, scale))
    with torch.no_grad():
        n = len(feats)
        out = net(torch.as_tensor(np.stack(points)).to(device),
                  torch.as_tensor(np.stack([f[2] for f in feats] * (len(points) // n))).to(device))
        out = {k: v.view(len(points) // n, n, *v.shape[1:]).mean(0) for k, v in out.items()}
    from kinemesh.articulation.predictor import TYPES, alternatives

    preds = {}
    by = {p.name: p for p in parts}
    size = object_extent(parts)[0]
    for b, (p, _, _, box, center, scale) in enumerate(feats):
        forced = (force_types or {}).get(p.name)
        r = decode(out, b, box, center, scale, forced)
        # the shape overrules a slide the network reads (the type's confidence stays the network's)
        door = forced is None and DOORS_TURN and check_validity and door_turns(p, r, size)
        lever = (not door and forced is None and LEVER_TURNS and check_validity
                 and lever_turns(p, by[parents[p.name]], r, size, seed))
        flap = (not (door or lever) and forced is None and FLAPS_TURN and check_validity
                and flap_turns(p, by[parents[p.name]], r, size, seed))
        if door or lever or flap:
            forced = "revolute"
            r = decode(out, b, box, center, scale, forced)
        # a button on the root read as fixed moves: its more probable movable type (no real part is fixed)
        button = (forced is None and r.type == "fixed" and FIXED_BUTTONS and check_validity
                  and parents[p.name] == root and button_axis(p, by[root], size, seed) is not None)
        if button:
            turns = r.type_probs[TYPES.index("revolute")] >= r.type_probs[TYPES.index("prismatic")]
            forced = "revolute" if turns else "prismatic"
            r = decode(out, b, box, center, scale, forced)
        # a flat button read as spinning about its normal (a dial) is pressed along it (``_press_buttons``)
        pressed = (forced is None and r.type == "revolute" and FLAT_BUTTONS and check_validity
                   and flat_button(p, by[parents[p.name]], r.axis, size, seed))
        if pressed:
            forced = "prismatic"
            r = decode(out, b, box, center, scale, forced)
            button = True
        # movable alternatives of the predicted type (or a prompt's verb), scored P(type) x P(axis, sign) x P(cell)
        pt = 1.0 if forced else float(r.type_probs[TYPES.index(r.type)])
        lid = False
        alts = [] if r.type == "fixed" else [(pt * q, axis, origin, r.type, lim) for q, axis, origin, lim in
                                             alternatives(out, b, box, center, scale, r.type, cells=ORIGIN_CELLS)]
        # a door or a flap (read as sliding, now turning), and a broad square-ish panel read as turning (a
        # lid), turn about a line in their plane, never about their normal
        panel = (panel_box(p) if door or flap else broad_panel(p, size, seed)
                 if LIDS_HINGE and check_validity and r.type == "revolute" else None)
        if panel is not None:
            alts = [a for a in alts if in_panel_plane(panel, a[1])] or alts
            if not in_panel_plane(panel, r.axis):
                _, r.axis, r.origin, _, r.limits = alts[0]
                lid = not (door or flap)
        # a lever read as spinning about its own length turns across it, about length x (towards its parent)
        spin = (lever_spin(p, by[parents[p.name]], r.axis, size, seed) if (forced is None or lever) and LEVER_SPIN
                and check_validity and r.type == "revolute" else None)
        if spin is not None:
            length, r.axis, r.origin = spin
            alts = [a for a in alts if not along_length(a[1], length)]
        # a lying lever the network reads as turning about a line far from the one it swings about swings
        # about it, through the end that touches its parent: along the network's nearest lines (within 30 deg)
        # when it rates any, else along that line
        swing = (lever_swing(p, by[parents[p.name]], r.axis, size, seed)
                 if (forced is None or lever) and LEVER_SWING and check_validity and r.type == "revolute"
                 and spin is None else None)
        if swing is not None:
            near = [a for a in alts if abs(float(a[1] @ swing[1])) >= np.cos(np.radians(30.0))]
            if near:
                near = [(q, axis, swing[2], t, lim) for q, axis, _, t, lim in near]
                alts = [a for i, a in enumerate(near) if not any(b[1] @ a[1] > 0.999 for b in near[:i])]
                _, r.axis, r.origin, _, r.limits = near[0]
            else:
                r.axis, r.origin = swing[1], swing[2]
                alts = [a for a in alts if not along_length(a[1], swing[0])]
        slide = alternatives(out, b, box, center, scale, "prismatic")[0][3]  # the prismatic head's limits (m)
        preds[p.name] = PartPrediction(p.name, r.type, r.axis, r.origin, None if r.type == "fixed" else r.limits,
                                       parents[p.name], r.confidence, p.label,
                                       {"type_probs": [float(x) for x in r.type_probs], "scale": scale,
                                        "type_from_shape": ("door" if door else "lever" if lever
                                                            else "flap" if flap else "button" if button
                                                            else None),
                                        "type_from_prompt": p.name in (force_types or {}),
                                        "slide_travel": max(abs(slide[0]), abs(slide[1])),
                                        "hinged_in_plane": lid, "swung_as_lever": swing is not None,
                                        "alternatives": sorted(alts, key=lambda a: -a[0])})
    if check_validity:
        grid = _choose_valid(parts, root, parents, preds)
        if grid is not None:
            _slide_out(parts, preds, seed=seed)
            grid.config.contact_slack = CONTACT_SLACK  # the shape's lines: contact is not collision
            _hinge_panels(parts, parents, preds, grid, seed=seed)
            _snap_to_edges(parts, parents, preds, grid, seed=seed)
            if DOUBLE:
                _double_doors(parts, parents, preds, grid, seed=seed)
            if SLAB:
                _snap_to_slab(parts, parents, preds, grid, seed=seed)
            _snap_to_contact(parts, parents, preds, grid, seed=seed)
        if ROUND_AXES:
            _round_parts(parts, preds, seed=seed)
        if CAPS:
            _caps(parts, preds, seed=seed)
        _press_buttons(parts, preds, seed=seed)
        if KNOBS:
            _turn_knobs(parts, preds, seed=seed)
        if STEMS:
            _turn_on_stems(parts, preds, seed=seed)
        _roll_wheels(parts, root, preds, seed=seed)
        if AXIS_SNAP > 0:
            _snap_axes(parts, preds, AXIS_SNAP, size, seed)
        if LIMIT_GAP > 0:
            _limits_in_contact(parts, preds, size, seed)
    for pr in preds.values():
        pr.info.pop("alternatives", None)
    return [preds[p.name] for p in parts if p.name in preds]


def _choose_valid(parts, root, parents, preds, min_prob: float = 0.05) -> None:
    """Simulator-filtered decoding (GEOPARD's simulator filter applied at inference). The network's
    alternatives of the predicted type (axis class x sign x its ``ORIGIN_CELLS`` most probable origin cells,
    each with its own limits, scored P(type) x P(axis, sign) x P(cell)) are swept in their predicted opening
    direction and in the opposite one (same score, limits mirrored, so a wrong opening sign never costs a
    right axis line); the best-scoring sweep that neither collides nor detaches
    (:mod:`kinemesh.geometry.validity`) is kept, the network's own answer first on ties. When no sweep is
    valid the network's top choice stays. ``ORIGIN_CELLS`` and the equal score of both directions were chosen
    on synthetic validation objects (training categories, seeds 90000+, canonical and realism-augmented), not
    on the test sets.

    The sweep uses the per-sample swept collision measure (``ValidityConfig.swept``), which keeps its margin
    on open, zero-thickness shells. With ``HINGE_FORCE`` an upright panel (a door) none of whose lines on the
    sides its shape allows (``hinge_sides``) sweeps free keeps the one that stays in contact and collides least
    rather than a free line on a side the shape rules out: a real inset door scrapes its frame when it turns
    about its true hinge (fold 1's cabinets 49182 and 45305, read hinged on their short edge; limited to
    upright panels since a drawer front lying flat lost its right line in fold 2). With ``LEVER_KEEP`` a lever
    (``lever_length``) is never turned about its own length: when only such a line sweeps free, the network's
    line stays, moved to the lever's rest contact (fold 3's folding knife 101054). Validity never changes the
    type: on real assets the true slide of a drawer often passes through the carcass mesh (PartNet-Mobility
    bodies are rarely cut out behind drawer fronts), so it must not overrule the type head (a variant that
    tried the other movable type when no line of the read type swept free made the synthetic validation
    sets' types worse: docs/results/articulation.md, session 41)."""
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig, check_candidates, subtree

    movable = [p for p in preds.values() if p.type != "fixed"]
    if not movable:
        return None
    grid = OccupancyGrid(_with_tree(parts, root, parents),
                         ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02,
                                        contact_slack=CONTACT_SLACK if SLACK_CHOOSE else 0.0))
    by = {p.name: p for p in parts}
    for pr in movable:
        alts = [a for a in pr.info["alternatives"] if a[0] >= min_prob and a[3] == pr.type]
        panel = panel_box(by[pr.name]) if HINGE_SIDES and pr.type == "revolute" else None
        if (HINGE_ANY and panel is not None and in_panel_plane(panel, pr.axis)
                and not any(admissible_hinge(panel, a[1]) for a in alts + [(0, pr.axis)])):
            # every line the network rates hinges the panel on a side its shape rules out (a tall door on its
            # top or bottom edge): its lines on the sides the shape allows are tried too, however improbable
            alts += [a for a in pr.info["alternatives"] if a[0] < min_prob and a[3] == pr.type
                     and in_panel_plane(panel, a[1]) and admissible_hinge(panel, a[1])]
        top = (max([a[0] for a in alts], default=1.0), pr.axis, pr.origin, pr.type, pr.limits)
        sweeps = _sweeps([top] + [a for a in alts if not (a[3] == pr.type and a[1] @ pr.axis > 0.999
                                                         and np.allclose(a[2], pr.origin))])
        if not sweeps:
            continue
        check_candidates(grid, subtree(parents, pr.name), [w[3] for w in sweeps])
        sweeps.sort(key=lambda w: -w[0])  # stable: the network's own answer wins ties
        pr.info["validity"] = _sweep_records(sweeps)
        pick = next((w for w in sweeps if w[3].valid), None)
        length = None
        if pick is not None and pr.type == "revolute" and (HINGE_SIDES or LEVERS):
            # a valid line the part's shape allows comes first: a panel's hinge on a long or upright side, a
            # lever's pivot across its length
            if LEVERS and pr.parent in by:
                length = lever_length(by[pr.name], by[pr.parent], grid.size)

            def fits(a):
                across = length is None or abs(a @ length) <= 0.9 * np.linalg.norm(a)
                return across and admissible_hinge(panel, a)

            pick = next((w for w in sweeps if w[3].valid and fits(w[1][1])), pick)
            if (HINGE_VALID and panel is not None and in_panel_plane(panel, pr.axis)
                    and not (pick[3].valid and fits(pick[1][1]))):
                # no line the network rates hinges the panel on a side its shape allows and sweeps free: its
                # lines on those sides are tried too, however improbable (as HINGE_ANY, after the sweep)
                tried = {id(a) for a in alts}
                more = _sweeps([a for a in pr.info["alternatives"] if id(a) not in tried and a[3] == pr.type
                                and in_panel_plane(panel, a[1]) and fits(a[1])])
                if more:
                    check_candidates(grid, subtree(parents, pr.name), [w[3] for w in more])
                    more.sort(key=lambda w: -w[0])
                    pr.info["validity"] += _sweep_records(more)
                    pick = next((w for w in more if w[3].valid), pick)
                if HINGE_FORCE and not fits(pick[1][1]) and upright(panel[0].axes[panel[1]]):
                    # nor any of those: an upright panel (a door) keeps the allowed line that scrapes least (an
                    # inset door's true hinge scrapes its frame), not a hinge its shape rules out
                    ok = [w for w in sweeps + more if in_panel_plane(panel, w[1][1]) and fits(w[1][1])]
                    if ok:
                        pick = min(ok, key=lambda w: (w[3].info.get("gap", 0.0) > 0,
                                                      w[3].info.get("collision", 1.0)))
        if LEVER_KEEP and length is not None and pick is not None and along_length(pick[1][1], length):
            # no lever on data/real_train turns about its own length (``lever_spin``): when no line across
            # it sweeps free (a folding blade's true turn passes through its uncut handle), the network's line
            # stays, moved to the end the lever touches its parent at
            C = _rest_contact(by[pr.name], by[pr.parent], grid.size)[2]
            pr.origin = C.mean(0) if len(C) else pr.origin
            pr.info["kept_across_lever"] = True
            continue
        if pick is None or (pick[1] is top and not pick[2]):
            continue
        _, axis, origin, type_, limits = pick[1]
        if pick[2] and limits is not None:
            limits = (-limits[1], -limits[0])
        pr.type, pr.axis, pr.origin, pr.limits = type_, axis, origin, limits
        pr.info["changed_by_validity"] = True
    return grid


def _sweeps(alternatives) -> list:
    """(score, alternative, opposite?, Candidate) of each alternative (probability, axis, origin, type, limits)
    swept over its reach (a revolute part at most 90 deg) in its own opening direction and in the opposite one."""
    from kinemesh.articulation.candidates import Candidate

    sweeps = []
    for alt in alternatives:
        prob, axis, origin, type_, limits = alt
        lo, hi = limits or (0.0, 0.5 * np.pi)
        reach = max(abs(lo), abs(hi))
        if type_ == "revolute":
            reach = float(min(reach, 0.5 * np.pi))
        if reach < 1e-6:
            continue
        s = 1.0 if abs(hi) >= abs(lo) else -1.0  # limits are along the alternative's own axis
        sweeps.append((prob, alt, False, Candidate(type_, axis, origin, (0.0, s * reach), 0, 1)))
        sweeps.append((prob, alt, True, Candidate(type_, axis, origin, (0.0, -s * reach), 0, 1)))
    return sweeps


def _sweep_records(sweeps) -> list[dict]:
    """``info["validity"]`` entries of checked :func:`_sweeps`: the sweep's validity measures, score, type and
    direction."""
    return [dict(w[3].info, valid=w[3].valid, score=w[0], type=w[1][3], opposite=w[2]) for w in sweeps]


def _rest_contact(part: Part, parent: Part, size: float, seed: int = 0, tol: float = CONTACT_TOL):
    """Surface samples of ``part`` (1500, 3) and ``parent`` (3000, 3) and the part's samples in rest contact
    with the parent: within the parts' closest approach + ``tol`` x ``size`` of a parent sample. Also returns
    that tolerance ``eps`` (m)."""
    from scipy.spatial import cKDTree

    from kinemesh.geometry.sampling import sample_surface

    rng = np.random.default_rng(seed)
    pts = sample_surface(part.vertices, part.faces, 1500, seed=rng)[0]
    ref = sample_surface(parent.vertices, parent.faces, 3000, seed=rng)[0]
    d = cKDTree(ref).query(pts, k=1)[0]  # each part sample's distance to the parent's surface samples
    eps = float(d.min()) + tol * size
    return pts, ref, pts[d <= eps], eps


def enclosure(part: Part, parent: Part, seed: int = 0, grid: int = 8, tol: float = 0.02, box=None):
    """How ``parent`` covers each face of ``part``'s oriented box: (box, cover (3, 2)) with ``cover[k, s]`` the
    fraction of the part's footprint seen along box axis k, towards side s (0: -, 1: +), that has parent
    surface beyond the part's own surface there (within ``tol`` x the part's largest side): 1 = walled off,
    0 = open. The footprint is a ``grid`` x ``grid`` raster of the part's extent across k (surface samples,
    1500 of the part, 3000 of the parent); a cell counts when the part has samples in it. ``box``: the part's
    ``part_box`` when the caller has it."""
    from kinemesh.articulation.candidates import part_box
    from kinemesh.geometry.sampling import sample_surface

    box = part_box(part.vertices, part.name) if box is None else box
    rng = np.random.default_rng(seed)
    P = box.to_box(sample_surface(part.vertices, part.faces, 1500, seed=rng)[0])
    Q = box.to_box(sample_surface(parent.vertices, parent.faces, 3000, seed=rng)[0])
    cover = np.zeros((3, 2))
    for k in range(3):
        uw = [i for i in range(3) if i != k]
        lo, span = P[:, uw].min(0), np.maximum(np.ptp(P[:, uw], 0), 1e-12)

        def cells(X):
            c = np.floor((X[:, uw] - lo) / span * grid).astype(int)
            inside = ((c >= 0) & (c <= grid)).all(1)
            c = np.minimum(c, grid - 1)
            return c[:, 0] * grid + c[:, 1], inside

        cp, _ = cells(P)
        cq, inside = cells(Q)
        cq = np.clip(cq, 0, grid * grid - 1)
        for si, s in enumerate((-1.0, 1.0)):
            top = np.full(grid * grid, -np.inf)
            np.maximum.at(top, cp, s * P[:, k])  # the part's surface facing side s, per cell
            beyond = np.zeros(grid * grid, bool)
            beyond[cq[inside & (s * Q[:, k] > top[cq] - tol * float(box.extents.max()))]] = True
            has = np.isfinite(top)
            cover[k, si] = float((beyond & has).sum() / has.sum())
    return box, cover


def slide_out(part: Part, parent: Part, seed: int = 0, box=None,
              whole: np.ndarray | None = None) -> np.ndarray | None:
    """The direction (3,) a part slides out of its parent, or None when the shape does not say: when the
    parent walls off five faces of the part's box (:func:`enclosure` cover >= ``SLIDE_OUT[1]``) and leaves the
    sixth open (cover <= ``SLIDE_OUT[0]``), that face's outward normal. A drawer in its carcass, a dishwasher
    rack in its tub, a blade in a utility knife's handle; not a window sash, whose frame leaves both broad
    faces open. Measured on the real training and validation objects (data/real_train): 33 movable parts are
    enclosed this way; 29 of the 30 prismatic ones slide out of the open face (the other slides sideways),
    and 3 turn (a stapler arm; a microwave's door and turntable, both thin panels). ``box``: as
    :func:`enclosure`.

    ``whole``: the whole object's vertices; with them a part walled on four faces and open on two slides out
    of the open face flush with the object's outside (``SLIDE_FRONT``) when the other is not: a table's drawer
    hangs under the top, open in front and underneath. On data/real_train 8 movable parts are enclosed this
    way, all drawers: in 6 the front is flush (the object reaches <= 0.012 x its size beyond it) and the
    bottom is not (>= 0.30), in 2 neither face decides (both flush; both >= 0.21) and nothing is said."""
    box, cover = enclosure(part, parent, seed, box=box)
    c = cover.ravel()
    open_ = np.flatnonzero(c <= SLIDE_OUT[0])
    most = 2 if whole is not None else 1  # open faces
    if np.delete(c, open_).min(initial=1.0) < SLIDE_OUT[1] or not 1 <= len(open_) <= most:
        return None
    faces = [(1.0 if i % 2 else -1.0) * box.axes[i // 2] for i in open_]
    if len(faces) == 1:
        return faces[0]
    size = float(np.linalg.norm(np.ptp(whole, axis=0)))
    gaps = [float((whole @ d).max() - (part.vertices @ d).max()) / size for d in faces]  # object beyond each
    flush = [d for d, g in zip(faces, gaps) if g <= SLIDE_FRONT]
    return flush[0] if len(flush) == 1 else None


def _stuck(pr: PartPrediction) -> bool:
    """Whether every turn :func:`_choose_valid` swept for ``pr`` collides or detaches (and it swept some)."""
    swept = pr.info.get("validity") or []
    return bool(swept) and not any(w["valid"] for w in swept)


def _slide_out(parts, preds, seed: int = 0) -> None:
    """Decoding refinement: a predicted prismatic part, or a predicted revolute one that is no panel (thinnest
    box side > ``PANEL_THIN`` x its middle one: a door or lid is one) or is a panel that no turn frees
    (``STUCK_SLIDES``: every turn :func:`_choose_valid` swept collides or detaches: a shallow drawer, walled
    in, read as turning) or a panel read as turning about its own normal (``SPIN_SLIDES``, within 30 deg: no
    door turns so; a utility knife's blade in its handle, read so by fold 3's network), that its parent
    encloses with one face open (:func:`slide_out`) slides out of that face: axis its outward normal, origin
    the box centre, limits (0, travel), travel ``SLIDE_OUT[2]`` x the part's depth along the axis or the
    network's prismatic travel if longer (the limits of the 30 enclosed real training slides are 0.84 x the
    depth at the median, 0.72 at the lower quartile). Physical reason: the parent's walls stop every other
    slide, and the network reads drawers as sliding sideways, or as turning, where the box alone does not name
    the front (a drawer as deep as it is wide)."""
    from kinemesh.articulation.candidates import part_box

    by = {p.name: p for p in parts}
    whole = np.concatenate([p.vertices for p in parts])
    for pr in preds.values():
        if pr.type not in ("prismatic", "revolute") or pr.parent not in by:
            continue
        part = by[pr.name]
        box = part_box(part.vertices, part.name)
        e = np.sort(box.extents)
        normal = box.axes[int(np.argmin(box.extents))]  # a panel read as spinning about it is no door
        spins = SPIN_SLIDES and abs(float(np.asarray(pr.axis, float) @ normal)) >= np.cos(np.radians(30.0))
        if (pr.type == "revolute" and e[0] <= PANEL_THIN * e[1] and not (STUCK_SLIDES and _stuck(pr))
                and not spins):
            continue
        out = slide_out(part, by[pr.parent], seed, box=box, whole=whole if SLIDE_FRONT else None)
        if out is None or (pr.type == "prismatic" and float(np.asarray(pr.axis) @ out) > np.cos(np.radians(10.0))):
            continue
        travel = max(pr.info["slide_travel"], SLIDE_OUT[2] * float(np.ptp(part.vertices @ out)))
        pr.info["slid_out"] = {"from": pr.type, "axis": np.asarray(pr.axis, float).tolist()}
        pr.type, pr.axis, pr.limits = "prismatic", out, (0.0, float(travel))
        pr.origin = box.center.copy()


def contact_pivot(part: Part, parent: Part, axis: np.ndarray, origin: np.ndarray, size: float, seed: int = 0,
                  compact: float = CONTACT_COMPACT, tol: float = CONTACT_TOL) -> np.ndarray | None:
    """A point for the revolute axis line (``axis``, ``origin``) of ``part`` on ``parent`` from their rest
    contact, or None when the line should stay.

    A revolute joint's axis passes through both parts (a hinge pin, a rivet). When the given line misses the
    parent (no parent surface sample within the contact tolerance of it: the parts' closest approach plus
    ``tol`` x ``size``, ``size`` = the object's largest side) and the part touches the parent only in a
    compact region (its samples within the same tolerance of the parent; extent across the axis at most
    ``compact`` x the part's own extent across the axis: a rivet, a lamp link's end, a knob's foot; not a
    door's rim or a lid resting on its body), the part turns about an axis through that region, and the point of least motion of the contact
    under a turn is its centroid. Returns that centroid (moved along the axis to the foot of ``origin``);
    None otherwise."""
    a = np.asarray(axis, float)
    a = a / np.linalg.norm(a)
    o = np.asarray(origin, float)
    pts, ref, C, eps = _rest_contact(part, parent, size, seed, tol)
    P = np.eye(3) - np.outer(a, a)
    if float(np.linalg.norm((ref - o) @ P, axis=1).min()) <= eps:
        return None  # the line passes through (or along) the parent
    if len(C) < 8:
        return None
    ext_part = float(np.ptp(pts @ P, axis=0).max())
    ext_c = float(np.ptp(C @ P, axis=0).max())
    if ext_part <= 0 or ext_c > compact * ext_part:
        return None
    c = C.mean(0)
    return c + a * float((o - c) @ a)


def hinge_edge(part: Part, parent: Part, axis: np.ndarray, origin: np.ndarray, size: float,
               seed: int = 0) -> np.ndarray | None:
    """A point putting a predicted revolute line (``axis`` (3,), a point ``origin`` (3,) m) of a panel
    ``part`` on the box edge it stands for (m, the edge's midpoint; the direction is kept), or None when the
    line should stay. ``size``: the object's largest side (m).

    A door, lid or flap turns about an edge of its oriented box where it meets its parent (86 of the 140
    limited revolute joints of data/real_train lie along an edge of the box face touching the parent, 0.012 x
    the object's size away on average; most others are edges of zero-thickness flaps or pivots of knives,
    eyeglasses and faucets). For a panel (thinnest box side <= ``PANEL_THIN`` x its middle one) whose ``axis`` lies
    in its plane within ``EDGE[0]`` deg of a box axis k, and whose rest contact with the parent
    (:func:`_rest_contact`) leans to one face across k (centroid >= ``EDGE[1]`` of the half-side towards it:
    a door's back, the edge strip of a flap stored open): the line goes to that face's edge on the side the
    prediction leans to along the face (>= ``EDGE[2]`` of the half-side; a line near the middle is no edge
    line and stays). When the face is one of the panel's two broad faces and the prediction clearly sits at
    the other one (>= ``EDGE[3]`` of the half-thickness: synthetic doors turn about their outer face, real
    ones mostly about the inner one), the prediction's face is kept."""
    from kinemesh.articulation.candidates import part_box, perpendicular_axes

    box = part_box(part.vertices, part.name)
    thin = int(np.argmin(box.extents))
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    cos = np.abs(box.axes @ a)
    k = int(np.argmax(cos))
    if (box.extents[thin] > PANEL_THIN * float(np.median(box.extents)) or k == thin
            or cos[k] < np.cos(np.radians(EDGE[0]))):
        return None
    C = _rest_contact(part, parent, size, seed)[2]
    if len(C) < 8:
        return None
    half = 0.5 * box.extents
    c = box.to_box(C).mean(0) / half
    o = np.asarray(origin, float)
    p = box.to_box((o + ((box.center - o) @ a) * a)[None])[0] / half
    u, w = perpendicular_axes(k)
    n, e = (u, w) if abs(c[u]) >= abs(c[w]) else (w, u)
    if abs(c[n]) < EDGE[1] or abs(p[e]) < EDGE[2]:
        return None
    rel = np.zeros(3)
    rel[n] = np.sign(p[n]) if n == thin and abs(p[n]) >= EDGE[3] else np.sign(c[n])
    rel[e] = np.sign(p[e])
    return box.relative_point(rel)


def panel_box(part: Part):
    """(its oriented box, the index of the box's thin axis) when ``part`` is a panel (thinnest box side <=
    ``PANEL_THIN`` x its middle one: a door, a lid, a flap), else None."""
    from kinemesh.articulation.candidates import part_box

    box = part_box(part.vertices, part.name)
    n = int(np.argmin(box.extents))
    return None if box.extents[n] > PANEL_THIN * float(np.median(box.extents)) else (box, n)


def hinge_sides(box, n: int) -> list[tuple[int, int]]:
    """The hinge orientations a panel allows (``box`` its oriented box, ``n`` its thin axis): (k, o) pairs of
    box axes, the hinge along k on an edge across o, where k is a long side (``LONG_SIDE`` x the other
    in-plane side or more) or upright (``UPRIGHT``: a wide microwave door). On data/real_train every one of
    the 112 revolute panels hinged in their plane (doors, lids, flaps) is hinged so."""
    from kinemesh.articulation.candidates import perpendicular_axes

    u, v = perpendicular_axes(n)
    e = box.extents
    return [(k, o) for k, o in ((v, u), (u, v)) if e[k] >= LONG_SIDE * e[o] or abs(box.axes[k][2]) >= UPRIGHT]


def in_panel_plane(panel, axis: np.ndarray) -> bool:
    """Whether ``axis`` (3,) lies in the plane of a panel (``panel``: its :func:`panel_box`): a hinge's
    direction, not the panel's normal (a knob or blade turning in its plane); within 60 deg of the plane."""
    box, n = panel
    return abs(np.asarray(axis, float) @ box.axes[n]) <= 0.5 * float(np.linalg.norm(axis))


def lever_length(part: Part, parent: Part, size: float, seed: int = 0) -> np.ndarray | None:
    """The direction of a lever's length: ``part``'s longest box axis (3,) unit when the part is elongated
    (its longest side >= 2 x its middle one) and touches ``parent`` only near one end of it (rest contact
    centroid in the outer 40 % of the half-length, spread over at most half the length): an eyeglass temple,
    a knife blade, a stapler's arm, a faucet lever. Else None. On data/real_train all 20 such parts turn
    about an axis across their length, none about it (a part twisting about its length is round: a cap)."""
    from kinemesh.articulation.candidates import part_box

    box = part_box(part.vertices, part.name)
    L = int(np.argmax(box.extents))
    if box.extents[L] < 2.0 * float(np.median(box.extents)):
        return None
    C = _rest_contact(part, parent, size, seed)[2]
    if len(C) < 8:
        return None
    t = box.to_box(C)[:, L]
    end = abs(t.mean()) >= 0.6 * 0.5 * box.extents[L] and np.ptp(t) <= 0.5 * box.extents[L]
    return box.axes[L].copy() if end else None


def along_length(axis: np.ndarray, length: np.ndarray) -> bool:
    """Whether ``axis`` (3,) runs along a lever's ``length`` (3,) unit, within 30 deg (the lever rules')."""
    return abs(float(np.asarray(axis, float) @ length)) >= np.cos(np.radians(30.0))


def upright(normal: np.ndarray) -> bool:
    """Whether a panel with unit ``normal`` (3,) stands upright (within 17 deg of horizontal: a door)."""
    return abs(float(normal[2])) <= 0.3


def lever_turns(part: Part, parent: Part, raw, size: float, seed: int = 0) -> bool:
    """Whether a part the network reads as sliding (``raw``: its :func:`decode` answer) is a lever that turns
    instead: a :func:`lever_length` part whose predicted slide is not along its length (within 30 deg; a
    telescoping rod slides along its length), or with ``LEVER_ALONG`` is along it but the parent does not
    sheathe it (one of the four faces along its length covered on less than ``SLIDE_OUT[1]`` of its footprint,
    :func:`enclosure`: a stapler's arm touching its base at its hinge, which the network trained without
    staplers slid out along its length). On data/real_train all 21 lever-shaped parts turn, and on the
    synthetic validation objects (seeds 90000+) 31 of 32 do; the one that slides slides along its length."""
    if raw.type != "prismatic":
        return False
    length = lever_length(part, parent, size, seed)
    if length is None:
        return False
    if not along_length(raw.axis, length):
        return True
    if not LEVER_ALONG:
        return False
    box, cover = enclosure(part, parent, seed)
    k = int(np.argmax(np.abs(box.axes @ length)))
    sides = np.delete(cover, k, axis=0)  # the four faces along the lever's length
    return bool(sides.min() < SLIDE_OUT[1])  # not sheathed by its parent: no telescoping rod


def lever_spin(part: Part, parent: Part, axis: np.ndarray, size: float, seed: int = 0):
    """(length (3,), axis (3,) unit, origin (3,) m) for a lever (:func:`lever_length`) read as turning about
    ``axis`` (within 30 deg of its length): it turns about the axis across its length and across the
    direction from its centre to its parent's centre (length x that direction), through the centroid of its
    rest contact with the parent (the end it is hinged at). Else None (also when the parent lies along the
    lever's length, so that the cross product names no axis).

    Physical reason: a lever hinged at one end swings its free end towards or away from what holds it (an
    eyeglass temple folds onto the frame, a stapler's arm closes onto its base, a folding knife's blade into
    its handle). On data/real_train none of the 20 levers turns about its length, and 16 turn within 31 deg of
    that axis (eyeglass temples, stapler arms, knife blades, three faucet handles); the other 4 are faucet
    handles. The network trained without eyeglasses (fold 3) read their temples as spinning about their length,
    90 deg off."""
    length = lever_length(part, parent, size, seed)
    if length is None or not along_length(axis, length):
        return None
    line = swing_line(part, parent, length, size, seed)
    return None if line is None else (length, *line)


def swing_line(part: Part, parent: Part, length: np.ndarray, size: float, seed: int = 0):
    """(axis (3,) unit, origin (3,) m) a lever with unit ``length`` (3,) swings about: length x the direction
    from its centre to its parent's centre, through the centroid of its rest contact with the parent; None
    when the parent lies along the lever's length (the cross product names no axis)."""
    d = parent.vertices.mean(0) - part.vertices.mean(0)
    a = np.cross(length, d / max(float(np.linalg.norm(d)), 1e-12))
    if np.linalg.norm(a) < 0.3:
        return None
    C = _rest_contact(part, parent, size, seed)[2]
    return a / np.linalg.norm(a), C.mean(0)


def lever_swing(part: Part, parent: Part, axis: np.ndarray, size: float, seed: int = 0):
    """(length (3,), axis (3,) unit, origin (3,) m) for a lever (:func:`lever_length`) lying down (its length
    within 64 deg of horizontal) read as turning about ``axis`` across its length but more than 45 deg from
    the line it swings about (:func:`swing_line`: length x the direction to its parent's centre): it swings
    about that line, through its rest contact. Else None.

    Physical reason as :func:`lever_spin`: a lever hinged at one end swings its free end towards or away from
    what holds it (an eyeglass temple folds onto the frame, a stapler's arm onto its base, a folding knife's
    blade into its handle). On data/real_train 16 of the 18 lying levers turn within 30 deg of that line (the
    others: a temple at 30 deg, a faucet handle that swings sideways, 78 deg); the three upright ones, faucet
    switches, tilt sideways (67 and 90 deg), so an upright lever is left alone. Session 40's version, without
    that exception and always along the exact line, was withdrawn (docs/results/articulation.md)."""
    length = lever_length(part, parent, size, seed)
    if length is None or along_length(axis, length) or abs(float(length[2])) > 0.9:
        return None
    line = swing_line(part, parent, length, size, seed)
    if line is None or abs(float(np.asarray(axis, float) @ line[0])) >= np.cos(np.radians(45.0)):
        return None
    return (length, *line)


def door_turns(part: Part, raw, size: float) -> bool:
    """Whether a part the network reads as sliding (``raw``: its :func:`decode` answer) is a door that turns
    instead: an upright panel (:func:`panel_box`, its normal within 17 deg of horizontal) whose largest side is
    ``DOOR_SIZE`` x ``size`` (the object's largest side, m) or more, read as sliding along its normal (within
    30 deg). On data/real_train the panels that slide along their normal are buttons, caps and pot lids: small or
    lying flat; one upright camera part of half the camera's size is the exception."""
    if raw.type != "prismatic":
        return False
    panel = panel_box(part)
    if panel is None:
        return False
    box, n = panel
    normal = box.axes[n]
    return (upright(normal) and float(box.extents.max()) >= DOOR_SIZE * size
            and abs(np.asarray(raw.axis, float) @ normal) >= np.cos(np.radians(30.0)))


def broad_panel(part: Part, size: float, seed: int = 0):
    """``part``'s :func:`panel_box` when it is a broad panel that does not spin in its plane: its largest side
    ``DOOR_SIZE`` x ``size`` (the object's largest side, m) or more, its middle side ``BROAD`` x the largest
    or more (not a blade), and its outline about its normal not a circle (:func:`outline_spreads` >
    ``ROUND[0]``: not a cap, a wheel or a turntable). Else None.

    On data/real_train such parts are doors, lids and flaps: all 92 that turn, turn about a line in their
    plane (outline spread 0.089 or more); the 17 broad panels that turn about their normal are round (spread
    0.027 or less: caps, wheels, microwave turntables) and the four long thin ones are knife and scissor
    blades."""
    panel = panel_box(part)
    if panel is None:
        return None
    e = np.sort(panel[0].extents)
    if e[2] < DOOR_SIZE * size or e[1] < BROAD * e[2]:
        return None
    return panel if outline_spreads(part, seed)[1][panel[1]] > ROUND[0] else None


def admissible_hinge(panel, axis: np.ndarray) -> bool:
    """Whether a revolute ``axis`` (3,) suits a part whose :func:`panel_box` is ``panel``: True for no panel
    or an axis across the panel (a knob or blade turning in its plane), else whether the in-plane box axis
    nearest to it is one of :func:`hinge_sides`."""
    if panel is None or not in_panel_plane(panel, axis):
        return True
    box, n = panel
    k = max((i for i in range(3) if i != n), key=lambda i: abs(np.asarray(axis, float) @ box.axes[i]))
    return any(k == kk for kk, _ in hinge_sides(box, n))


def outer_heights(coords: np.ndarray, extents: np.ndarray, n: int, outer: float, grid: int = 8) -> np.ndarray:
    """Height map of a panel's outer surface: ``coords`` (m, 3) surface samples in its box frame (metres from the
    box centre), ``extents`` (3,) its box sides, ``n`` its thin axis, ``outer`` (+1 / -1) the side of axis ``n``
    facing away from its parent. Returns (grid * grid,) the largest ``outer * coords[:, n]`` per cell of a ``grid``
    x ``grid`` raster of the panel's plane (cells in increasing order of the two in-plane axes; -inf where no
    sample falls). Its median over filled cells is the panel's own outer face (a handle covers few cells)."""
    u, v = (k for k in range(3) if k != n)
    cells = [np.clip(((coords[:, k] / extents[k] + 0.5) * grid).astype(int), 0, grid - 1) for k in (u, v)]
    height = np.full(grid * grid, -np.inf)
    np.maximum.at(height, cells[0] * grid + cells[1], outer * coords[:, n])
    return height


def slab_middle(part: Part, parent: Part, size: float, seed: int = 0, panel=None) -> float | None:
    """Where a revolute panel's hinge lies across its thickness: the middle of the panel's own slab, from its
    inner face (towards ``parent``) to its outer face without what protrudes from it (the median of
    :func:`outer_heights`: a handle is not part of the slab), as a coordinate along its box's thin axis (metres
    from the box centre); None when the part is no panel. Real hinges sit there: on data/real_train 92 % of door
    and lid hinges lie within 0.03 x the object's size of the inner face, and the slab's middle stays within
    the door even when a handle makes the box 24 cm thick (a dishwasher's). ``panel``: :func:`panel_box` of
    ``part`` when the caller has it."""
    panel = panel_box(part) if panel is None else panel
    if panel is None:
        return None
    box, n = panel
    pts, ref, _, _ = _rest_contact(part, parent, size, seed)
    outer = 1.0 if (box.center - ref.mean(0)) @ box.axes[n] >= 0 else -1.0
    height = outer_heights(box.to_box(pts), box.extents, n, outer)
    face = float(np.median(height[np.isfinite(height)]))
    return outer * 0.5 * (face - 0.5 * box.extents[n])


def handle_centroid(coords: np.ndarray, extents: np.ndarray, n: int, outer: float, grid: int = 8,
                    tilted: bool = False):
    """Where a panel's handle sits: ``coords`` (m, 3) surface samples of the panel and what is attached to it
    in its box frame (metres from the box centre), ``extents`` (3,) its box sides, ``n`` its thin axis,
    ``outer`` (+1 / -1) the side of axis ``n`` facing away from its parent. Height map of the outer surface
    on a ``grid`` x ``grid`` raster of the panel's plane; cells rising more than ``HANDLE[0]`` x the panel's
    smaller in-plane side above the median cell are the handle (fewer than 40 % of the cells). Returns its
    protrusion-weighted centroid (2,) in half-side units (-1 .. 1) along the two in-plane box axes (in
    increasing order), or None when nothing protrudes. With ``tilted``, when nothing protrudes so but the face
    is a plane (half its cells within 0.1 x that threshold of the fitted plane, :func:`_face_plane`) that rises
    across the raster by more than the threshold (the minimum-volume box of a door with a long handle bar can
    tilt a few degrees off its face, fold 4's refrigerator 12252: 0.08 m across a 1.07 m door, more than its
    handle stands out), heights are measured again from that plane."""
    u, v = (k for k in range(3) if k != n)
    height = outer_heights(coords, extents, n, outer, grid)
    filled = np.isfinite(height)
    thr = HANDLE[0] * min(extents[u], extents[v])
    rise = np.where(filled, height - np.median(height[filled]), 0.0)
    sel = rise > thr
    if (not sel.any() or sel.mean() >= 0.4) and tilted and filled.sum() >= 8:
        plane = _face_plane(height, filled, grid)
        r = height[filled] - plane[filled]
        r = r - np.median(r)
        # the face is a plane (half its cells within 0.1 x the threshold of it), tilted in the box frame by more
        # than a handle rises
        if np.ptp(plane[filled]) > thr and np.median(np.abs(r)) <= 0.1 * thr:
            rise = np.zeros(grid * grid)
            rise[filled] = r
            sel = rise > thr
    if not sel.any() or sel.mean() >= 0.4:
        return None
    centre = (np.arange(grid) + 0.5) / grid * 2 - 1
    w = rise[sel] / rise[sel].sum()
    return np.array([centre[np.flatnonzero(sel) // grid] @ w, centre[np.flatnonzero(sel) % grid] @ w])


def _face_plane(height: np.ndarray, filled: np.ndarray, grid: int) -> np.ndarray:
    """The plane (grid * grid,) of a panel's outer face in a height map (:func:`outer_heights`; ``filled``: its
    cells with samples): least squares on the cells, three times dropping the quarter of the cells highest
    above the last fit (a handle rises above the face, a recess does not matter)."""
    c = (np.arange(grid) + 0.5) / grid * 2 - 1
    cu, cv = np.repeat(c, grid), np.tile(c, grid)
    A = np.stack([np.ones(grid * grid), cu, cv], 1)
    keep = filled.copy()
    for _ in range(3):  # trimmed least squares: a handle rises above the face, so drop the highest residuals
        coef = np.linalg.lstsq(A[keep], height[keep], rcond=None)[0]
        r = height - A @ coef
        keep = filled & (r <= np.quantile(r[filled], 0.75))
    return A @ coef


def contact_strips(panel, C: np.ndarray) -> list[tuple[int, int]]:
    """The (k, o) box-axis pairs of a panel (``panel``: its :func:`panel_box`) along whose edge its rest
    contact ``C`` (m, 3) with its parent lies as a strip (``STRIP``): the contact spans ``STRIP[0]`` of the
    panel along axis k or more, ``STRIP[1]`` of it across (axis o) or less, off centre across by ``STRIP[2]``
    of the half-side or more (a box flap, a laptop lid, a partly open door). [] for fewer than 8 contact
    samples."""
    from kinemesh.articulation.candidates import perpendicular_axes

    box, n = panel
    if len(C) < 8:
        return []
    e, Cb = box.extents, box.to_box(C)
    u, v = perpendicular_axes(n)
    return [(k, o) for k, o in ((u, v), (v, u)) if np.ptp(Cb[:, k]) >= STRIP[0] * e[k]
            and np.ptp(Cb[:, o]) <= STRIP[1] * e[o] and abs(Cb[:, o].mean()) >= STRIP[2] * 0.5 * e[o]]


def flap_turns(part: Part, parent: Part, raw, size: float, seed: int = 0) -> bool:
    """Whether a part the network reads as sliding (``raw``: its :func:`decode` answer) is a flap that turns
    instead: a panel (:func:`panel_box`) whose rest contact with ``parent`` is a strip along one edge
    (:func:`contact_strips`). On data/real_train 26 of the 29 movable panels touching their parent so turn
    about that edge (box flaps, laptop lids, partly open doors); two knife blades turn about their normal and
    one table part slides."""
    if raw.type != "prismatic":
        return False
    panel = panel_box(part)
    return panel is not None and bool(contact_strips(panel, _rest_contact(part, parent, size, seed)[2]))


def panel_hinge(part: Part, parent: Part, attached: list[Part], axis: np.ndarray, origin: np.ndarray,
                size: float, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """Hinge lines of a revolute panel (door, lid, flap: thinnest box side <= ``PANEL_THIN`` x its middle
    side) from its shape, most plausible first; [] when the shape gives no cue or the part is no panel.
    ``attached``: parts hanging off it (a handle); ``size``: the object's largest side (m). Each line is
    (axis (3,), a point (3,) m, reason):

    1. "contact strip": the rest contact with the parent (:func:`_rest_contact`) is a strip along one edge
       (``STRIP``: a box flap stored open, a laptop lid, a partly open door): the hinge runs along it,
       through the strip's centroid; when ``axis`` is the panel's normal (a blade or knob turning in its
       plane about a pivot at one end), only a strip along the panel's long side counts;
    2. "handle": a protrusion (:func:`handle_centroid`, the part's own and ``attached`` geometry) clearly
       nearer one edge (``HANDLE``): the hinge is the opposite edge (a dishwasher door with its handle on
       top turns about its bottom edge, a cabinet door about the side away from its handle), unless that
       edge is the short side of a long panel (``LONG_SIDE``: a tall cabinet door with its handle on top
       is hinged on a long side) and not upright (``UPRIGHT``: a wide microwave door turns about its upright
       short side; on data/real_train's 140 revolute parts it took the rule from 53 right / 3 wrong to
       58 / 2: an oven and an eyeglass temple); when the panel's shape allows only one hinge orientation (a
       tall door: a long side), the handle's offset across it decides alone (a handle low in a door's free
       corner); when both are allowed and the handle sits in a corner (``CORNER_HANDLE``: as far out along
       both), it names the edge opposite it across the predicted hinge's orientation (fold 1's wide cabinet
       door 46744, before hinged on its knob's side; with ``DOUBLE_HANDLE`` in :func:`double_doors` these two
       rules changed nothing else on the real validation split, folds 1-4 and the synthetic validation sets);
       only when ``axis`` lies in the panel's plane.

    Edge lines keep the predicted line's depth across the panel; a handle's edge is then offered again at the
    middle of the panel's slab (:func:`slab_middle`) and on the slab's outer face (the handle left out): an
    oven door flush with the front below it sweeps into that front when it turns down about its inner face
    or its handle's tip, not about its outer edge."""
    from kinemesh.articulation.candidates import perpendicular_axes
    from kinemesh.geometry.sampling import sample_surface

    panel = panel_box(part)
    if panel is None:
        return []
    box, n = panel
    e = box.extents
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    in_plane = in_panel_plane(panel, a)
    u, v = perpendicular_axes(n)
    pts, ref, C, _ = _rest_contact(part, parent, size, seed)
    for k, o in contact_strips(panel, C):
        if in_plane or e[k] >= e[o]:
            return [(box.axes[k].copy(), C.mean(0), "contact strip")]
    if not in_plane:
        return []
    outer = 1.0 if (box.center - ref.mean(0)) @ box.axes[n] >= 0 else -1.0
    rng = np.random.default_rng(seed + 1)
    extra = [sample_surface(p.vertices, p.faces, 300, seed=rng)[0] for p in attached if len(p.faces)]
    # a door's box tilted off its face hides its handle (``HANDLE_PLANE``; upright panels: doors)
    h = handle_centroid(box.to_box(np.concatenate([pts, *extra])), e, n, outer,
                        tilted=HANDLE_PLANE and upright(box.axes[n]))
    hc = dict(zip((u, v), h)) if h is not None else {u: 0.0, v: 0.0}

    # depth of the hinge across the panel: the predicted line's (synthetic doors turn about their outer face,
    # real ones mostly about the inner one)
    o_pred = np.asarray(origin, float)
    o_pred = o_pred + ((box.center - o_pred) @ a) * a
    depth = float(np.clip(box.to_box(o_pred[None])[0, n] / (0.5 * e[n]), -1.0, 1.0))

    def edge(k, o, side, why, at=depth):  # hinge along box axis k, edge at side (+-1) of axis o, at depth
        rel = np.zeros(3)
        rel[o], rel[n] = side, at
        return box.axes[k].copy(), box.relative_point(rel), why

    if h is not None:
        # hinge orientations a panel of this shape allows: along k, on an edge across o, with k the long side
        # (or nearly); a handle far enough out along o (and, when both orientations are allowed, clearly further
        # out than along k) names the opposite edge across o
        allowed = hinge_sides(box, n)
        if len(allowed) == 2:
            lead = [(k, o) for k, o in allowed if abs(hc[o]) - abs(hc[k]) >= HANDLE[2]]
            # a handle in a corner (far out along both) names the edge opposite it across the predicted
            # hinge's orientation
            corner = [(k, o) for k, o in allowed if CORNER_HANDLE and min(abs(hc[k]), abs(hc[o])) >= HANDLE[1]
                      and abs(box.axes[k] @ a) >= np.cos(np.radians(EDGE[0]))]
            allowed = lead or corner
        for k, o in allowed:
            if abs(hc[o]) >= HANDLE[1]:
                lines, depths = [edge(k, o, -np.sign(hc[o]), "handle")], [depth]
                mid = slab_middle(part, parent, size, seed, panel=panel) / (0.5 * e[n])
                for at, why in ((mid, "handle, slab middle"), (2 * mid + outer, "handle, slab's outer face")):
                    if all(abs(at - d) > 0.05 for d in depths):
                        lines.append(edge(k, o, -np.sign(hc[o]), why, at=at))
                        depths.append(at)
                return lines
    return []


def _hinge_panels(parts, parents, preds, grid, seed: int = 0) -> None:
    """Decoding refinement: each predicted revolute panel whose shape names its hinge edge
    (:func:`panel_hinge`) gets the first of those lines whose sweep (either opening direction, reach of the
    predicted limits up to 90 deg) passes the validity check of ``_choose_valid``; limits keep their span
    and open in the valid direction. Lines within 10 deg and 0.05 x the object's size of the prediction
    leave it as it is."""
    from kinemesh.articulation.candidates import Candidate
    from kinemesh.geometry.metrics import axis_angle_error_deg, axis_line_distance
    from kinemesh.geometry.validity import check_candidates, subtree

    by = {p.name: p for p in parts}
    for pr in preds.values():
        if pr.type != "revolute" or pr.parent not in by:
            continue
        moving = subtree(parents, pr.name)
        lines = panel_hinge(by[pr.name], by[pr.parent], [by[c] for c in moving if c != pr.name], pr.axis,
                            pr.origin, grid.size, seed=seed)
        lo, hi = pr.limits or (0.0, 0.5 * np.pi)
        span = max(abs(lo), abs(hi))
        reach = float(min(span, 0.5 * np.pi))
        for axis, point, why in lines:
            if (axis_angle_error_deg(axis, pr.axis) < 10.0
                    and axis_line_distance(point, axis, pr.origin, pr.axis) < 0.05 * grid.size):
                pr.info["panel_edge_kept"] = why
                break
            sweeps = [Candidate("revolute", axis, point, (0.0, s * reach), 0, 1) for s in (1.0, -1.0)]
            check_candidates(grid, moving, sweeps)
            pr.info.setdefault("panel_hinge", []).append({"reason": why, "axis": axis.tolist(),
                                                          "origin": point.tolist(), "valid": [c.valid for c in sweeps]})
            if any(c.valid for c in sweeps):
                pr.axis, pr.origin = axis, point
                pr.limits = (0.0, span) if sweeps[0].valid else (-span, 0.0)
                pr.info["moved_to_panel_edge"] = why
                break


def wheel_axis(part: Part, z0: float, size: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
    """The rolling axis of a wheel: (axis (3,) unit, a point (3,) m on it: the circle's centre) when ``part``
    reaches the object's bottom (``z0`` + 0.02 x ``size``, ``size`` = the object's largest side, m, as in
    :func:`part_tree`) and its outline about a horizontal box axis (``|z|`` <= 0.3) is a circle: the largest
    radius in each of 24 sectors around that axis (surface samples) spreads by <= ``WHEEL[0]`` x its mean; the
    diameter is at most ``WHEEL[1]`` x ``size`` (a wheel is small beside what it carries; a camera's lens cap is
    not). Else None. Physical reason: a round part the object stands on rolls about its axis, whatever the
    network reads (small wheels were typed prismatic; measured on data/real_train, outlines of wheels spread
    <= 0.03, of doors, drawers and casters >= 0.117)."""
    from kinemesh.articulation.candidates import perpendicular_axes

    if part.vertices[:, 2].min() > z0 + 0.02 * size:
        return None
    box, spread = outline_spreads(part, seed)
    best = None
    for k in range(3):
        u, v = perpendicular_axes(k)
        if abs(box.axes[k][2]) > 0.3 or max(box.extents[u], box.extents[v]) > WHEEL[1] * size:
            continue
        if spread[k] <= WHEEL[0] and (best is None or spread[k] < best[0]):
            best = (spread[k], k)
    return None if best is None else (box.axes[best[1]].copy(), box.center.copy())


def outline_spreads(part: Part, seed: int = 0, sectors: int = 24):
    """How far ``part``'s outline about each of its box axes is from a circle about the box centre: the part's
    box (:func:`~kinemesh.articulation.candidates.part_box`) and (3,) the spread (std / mean) of the largest
    radius in each of ``sectors`` sectors around box axis k (2000 surface samples); 0 for a disc or cylinder
    about that axis, ~0.1 for a square outline."""
    from kinemesh.articulation.candidates import part_box, perpendicular_axes
    from kinemesh.geometry.sampling import sample_surface

    box = part_box(part.vertices, part.name)
    q = box.to_box(sample_surface(part.vertices, part.faces, 2000, seed=np.random.default_rng(seed))[0])
    spread = np.zeros(3)
    for k in range(3):
        u, v = perpendicular_axes(k)
        r = np.hypot(q[:, u], q[:, v])
        sector = ((np.arctan2(q[:, v], q[:, u]) + np.pi) / (2 * np.pi) * sectors).astype(int) % sectors
        rmax = np.zeros(sectors)
        np.maximum.at(rmax, sector, r)
        spread[k] = float(rmax.std() / max(rmax.mean(), 1e-12))
    return box, spread


def knob_axis(part: Part, size: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
    """The axis a knob turns about: (axis (3,) unit, its point (3,) m: the circle's centre) when ``part``'s
    outline about a box axis is a circle (:func:`outline_spreads` <= ``KNOB[0]``), the part stands out along
    that axis by ``KNOB[1]``..``KNOB[2]`` x its diameter and the diameter is ``KNOB[3]``..``KNOB[4]`` x
    ``size`` (the object's largest side, m); the roundest such axis. Else None.

    Physical reason: a small round part that protrudes far enough and is large enough to be gripped turns
    about its axis of symmetry (oven knobs, dials, caps, small wheels); flatter (height / diameter < 0.2) or
    tinier ones are mostly push buttons. Thresholds chosen on the real training objects (data/real_train):
    the rule finds 125 parts that turn about that axis and 3 round camera buttons that slide along it; the
    lower diameter bound left out 9 buttons and no knob."""
    from kinemesh.articulation.candidates import perpendicular_axes

    box, spread = outline_spreads(part, seed)
    best = None
    for k in range(3):
        u, v = perpendicular_axes(k)
        d = max(box.extents[u], box.extents[v])
        if not KNOB[3] * size <= d <= KNOB[4] * size or not KNOB[1] <= box.extents[k] / d <= KNOB[2]:
            continue
        if spread[k] <= KNOB[0] and (best is None or spread[k] < best[0]):
            best = (spread[k], k)
    return None if best is None else (box.axes[best[1]].copy(), box.center.copy())


def round_axis(part: Part, seed: int = 0, flat: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """(axis (3,) unit, the circle's centre (3,) m) when ``part``'s outline about a box axis is a circle
    (:func:`outline_spreads` <= ``ROUND[0]``) and the part is neither flat nor long along that axis (height /
    diameter in ``ROUND[1]``..``ROUND[2]``): a cap, a lid, a knob, a round button, a wheel. Else None. With
    ``flat`` flat parts count too (height / diameter from 0 to ``ROUND[2]``: a disc-shaped cap, a turntable).

    On data/real_train all 210 such movable parts slide along or turn about their axis of symmetry (caps and
    jar lids turn, pot lids lift, buttons are pressed, knobs and wheels turn); of all 245 round ones only two
    long faucet rods do not. Among the synthetic validation objects the round parts that move otherwise are
    flat (a washing machine's porthole door, a trash can's lid: hinged) or long (lamp arms and heads, levers)."""
    from kinemesh.articulation.candidates import perpendicular_axes

    box, spread = outline_spreads(part, seed)
    k = int(np.argmin(spread))
    u, v = perpendicular_axes(k)
    d = max(box.extents[u], box.extents[v])
    if spread[k] > ROUND[0] or not (0.0 if flat else ROUND[1]) <= box.extents[k] / max(d, 1e-12) <= ROUND[2]:
        return None
    return box.axes[k].copy(), box.center.copy()


def in_cavity(part: Part, parent: Part, axis: np.ndarray, seed: int = 0) -> bool:
    """Whether ``parent`` covers both faces of ``part``'s box across ``axis`` (:func:`enclosure` cover >=
    ``SLIDE_OUT[1]`` towards both sides of the box axis nearest ``axis``): the part sits in a cavity of its
    parent, which blocks a slide along the axis either way (a microwave's turntable under the oven's
    ceiling)."""
    box, cover = enclosure(part, parent, seed)
    k = int(np.argmax(np.abs(box.axes @ np.asarray(axis, float))))
    return bool(cover[k].min() >= SLIDE_OUT[1])


def _round_parts(parts, preds, seed: int = 0) -> None:
    """Decoding rule: a movable part that :func:`round_axis` finds round moves along or about its axis of
    symmetry, with its predicted type and limits: a turning one about the axis through the circle's centre, a
    sliding one along it, away from its parent (a lid lifts off; ``_press_buttons`` then presses small ones
    in). The network, on bottles and pots it never saw, turned caps and lifted lids about or along a line
    across them. With ``FLAT_LIFT`` a flat round part (height / diameter below ``ROUND[1]``) read as sliding
    slides along its axis too: on data/real_train all 30 flat round movable parts move along or about their
    axis (bottle caps, oven knobs, microwave turntables); a flat one read as turning keeps its line (the
    synthetic porthole doors and trash-can lids are hinged).

    With ``TRAYS`` a round part read as sliding that sits in a cavity of its parent (:func:`in_cavity`) turns
    about its axis without limits instead: a slide along the axis is blocked both ways, and a circle turning
    about its own axis sweeps no new space. On data/real_train exactly two round movable parts are walled in
    so, both microwave turntables, both turning (a camera's round buttons have nothing above them); the
    network that never saw a microwave (fold 1) reads both as sliding."""
    by = {p.name: p for p in parts}
    for pr in preds.values():
        if pr.type == "fixed" or pr.parent not in by:
            continue
        found = round_axis(by[pr.name], seed)
        if found is None and FLAT_LIFT and pr.type == "prismatic":
            found = round_axis(by[pr.name], seed, flat=True)  # a flat round part slides along its axis too
        if found is None:
            continue
        a, centre = found
        if TRAYS and pr.type == "prismatic" and in_cavity(by[pr.name], by[pr.parent], a, seed):
            # walled in along its axis on both faces it can neither lift off nor be pressed out: it spins
            pr.info["tray"] = {"from": pr.type, "axis": np.asarray(pr.axis, float).tolist()}
            pr.type, pr.axis, pr.origin, pr.limits = "revolute", a, centre, (-np.pi, np.pi)
            continue
        if abs(float(a @ pr.axis)) >= np.cos(np.radians(10.0)):
            continue  # already about or along it
        if pr.type == "prismatic":
            if float((centre - by[pr.parent].vertices.mean(0)) @ a) < 0:
                a = -a
        elif float(a @ pr.axis) < 0:
            a = -a
        pr.info["round"] = {"axis": np.asarray(pr.axis, float).tolist()}
        pr.axis, pr.origin = a, centre


def _caps(parts, preds, seed: int = 0) -> None:
    """Decoding rule: a movable round part (:func:`round_axis`, flat ones too) with an upright axis that sits
    on top of its parent and covers it (diameter ``CAP[0]`` x the parent's width or more) is a cap or a lid:
    on a tall parent (height ``CAP[1]`` x its width or more: a bottle, a jar) it twists off, turning without
    limits about its axis; on a squat one (a pot, a tub) it lifts off along its axis. On data/real_train all
    16 such parts move so (11 bottle caps twist on parents 1.39-3.50 times as tall as wide; two bottle lids
    and four pot lids lift off parents 0.39-1.25 times); the network, on bottles and pots it never saw (fold
    4), reads caps as lifting and pot lids as turning. With ``CAPS_KEEP_HINGE`` a part the network reads as
    turning about a line across its axis keeps that hinge: round hinged lids are common (trash cans, toilet
    seats), and on 20 synthetic validation trash cans, washing machines and chests each (seeds 90000+) the
    rule without it turned a rightly hinged lid into a lifting one (types 0.977 -> 0.962); fold 4 then keeps
    one flat cap read as hinged (axis 5.36 -> 6.73 deg).

    ``TALL_CAPS``: on a tall parent, a round upright part whose top is at or above the parent's twists off
    however narrow it is or however deep it sits over the neck: on data/real_train 9 more bottle caps
    (0.24-0.46 x the bottle's width, or sunk 0.42-0.94 of their height below the bottle's top), all
    twisting; no round upright part of another category sits at the top of a tall parent."""
    by = {p.name: p for p in parts}
    for pr in preds.values():
        if pr.type == "fixed" or pr.parent not in by:
            continue
        part, parent = by[pr.name], by[pr.parent]
        found = round_axis(part, seed, flat=True)
        if found is None or abs(found[0][2]) < 0.9:
            continue
        if CAPS_KEEP_HINGE and pr.type == "revolute" and abs(float(found[0] @ pr.axis)) < np.cos(np.radians(10.0)):
            continue  # read as hinged about a line across it (a trash can's lid): the hinge stays
        lo, hi = part.vertices.min(0), part.vertices.max(0)
        plo, phi = parent.vertices.min(0), parent.vertices.max(0)
        width = float(max(phi[:2] - plo[:2]))
        tall = phi[2] - plo[2] >= CAP[1] * width
        neck = TALL_CAPS and tall and hi[2] >= phi[2]  # at the top of a tall parent: a cap on a bottle's neck
        if not neck and (lo[2] < phi[2] - 0.3 * (hi[2] - lo[2]) or max(hi[:2] - lo[:2]) < CAP[0] * width):
            continue
        pr.info["cap"] = {"from": pr.type, "axis": [float(x) for x in pr.axis]}
        axis = np.array([0.0, 0.0, 1.0])
        if tall:
            pr.type, pr.limits = "revolute", (-np.pi, np.pi)
        elif pr.type != "prismatic" or pr.limits is None or float(np.asarray(pr.axis) @ axis) < 0.99:
            travel = max(pr.info.get("slide_travel", 0.0), float(hi[2] - lo[2]))
            pr.type, pr.limits = "prismatic", (0.0, travel)
        pr.axis, pr.origin = axis, found[1]


def button_axis(part: Part, parent: Part, size: float, seed: int = 0) -> np.ndarray | None:
    """The direction a button is pressed in: ``part``'s thinnest box axis (3,) unit, pointing into ``parent``
    (towards its rest contact with the parent, else the parent's centre), when the part is small (largest box
    side <= ``BUTTON[0]`` x ``size``, the object's largest side) and that axis is clearly its thinnest (<=
    ``BUTTON[1]`` x the middle side); else None. On data/real_train all 84 small sliding parts (camera,
    microwave and oven buttons) slide along their thinnest box axis, into their parent."""
    from kinemesh.articulation.candidates import part_box

    box = part_box(part.vertices, part.name)
    e = box.extents
    n = int(np.argmin(e))
    if e.max() > BUTTON[0] * size or e[n] > BUTTON[1] * float(np.median(e)):
        return None
    C = _rest_contact(part, parent, size, seed)[2]
    target = C.mean(0) if len(C) else parent.vertices.mean(0)
    a = box.axes[n].copy()
    return a if (target - box.center) @ a >= 0 else -a


def flat_button(part: Part, parent: Part, axis: np.ndarray, size: float, seed: int = 0) -> bool:
    """Whether ``part``, read as turning about ``axis`` (3,), is a flat push button instead of a dial: a button
    (:func:`button_axis`) whose thinnest box side is at most ``FLAT`` x its largest, with ``axis`` within 10
    deg of that thinnest side (spinning flat in its own plane).

    Physical reason: a dial is gripped, so it stands out from its parent (a knob, :func:`knob_axis`: at least
    0.2 of its diameter); a part that small and that flat is pressed. On data/real_train, of the 85 small flat
    movable parts moving along or about their thinnest side, 68 are pressed (microwave, camera and oven
    buttons), 8 are wheels (which ``_roll_wheels`` turns whatever was read) and 9 turn (7 flat knobs of one
    oven, 2 camera dials). The network trained without cameras (fold 3) read 18 camera buttons as dials."""
    a = button_axis(part, parent, size, seed)
    if a is None or abs(float(a @ axis)) < np.cos(np.radians(10.0)) * float(np.linalg.norm(axis)):
        return False
    from kinemesh.articulation.candidates import part_box

    e = part_box(part.vertices, part.name).extents
    return bool(e.min() <= FLAT * e.max())


def _press_buttons(parts, preds, seed: int = 0) -> None:
    """Decoding rule: a predicted prismatic part that :func:`button_axis` finds to be a button slides into its
    parent along its thinnest box axis (axis replaced, limits (0, the predicted travel)); the network, on
    categories it never saw, slid buttons along the surface they sit in. A button already read as pressed
    inwards keeps its axis, and with ``BUTTON_LIMITS`` limits that would pull it out become (0, travel). No
    validity check: a pressed button goes into its parent's mesh, which real assets rarely hollow out."""
    by = {p.name: p for p in parts}
    size = object_extent(parts)[0]
    for pr in preds.values():
        if pr.type != "prismatic" or pr.parent not in by or pr.info.get("slid_out"):
            continue
        a = button_axis(by[pr.name], by[pr.parent], size, seed)
        if a is None:
            continue
        travel = max(abs(x) for x in (pr.limits or (0.0, 0.0))) or 0.01 * size
        if float(a @ pr.axis) >= np.cos(np.radians(10.0)):  # already pressed inwards: never pulled out
            if BUTTON_LIMITS and pr.limits is not None and pr.limits[0] < 0.0:
                pr.info["button"] = {"limits": [float(x) for x in pr.limits]}
                pr.limits = (0.0, travel)
            continue
        pr.info["button"] = {"axis": [float(x) for x in pr.axis]}
        pr.axis, pr.limits = a, (0.0, travel)


def knob_holder(part: Part, axis: np.ndarray, centre: np.ndarray, others: list[Part],
                indexes: dict | None = None) -> str | None:
    """Name of the part in ``others`` that holds a knob (``part`` turning about ``axis`` (3,) unit through
    ``centre`` (3,) m): the one nearest (exact surface distance) to the centre of either end face of the knob
    along its axis, i.e. what lies behind it, not merely the nearest part (an oven door just below its
    knobs); None when ``others`` is empty. ``indexes``: part name -> its surface search structure, filled
    as they are built (an oven's knobs share them)."""
    from kinemesh.geometry.metrics import surface_index

    if not others:
        return None
    indexes = {} if indexes is None else indexes
    t = (part.vertices - centre) @ axis
    ends = centre + np.outer([t.min(), t.max()], axis)
    d = []
    for q in others:
        if q.name not in indexes:
            indexes[q.name] = surface_index(q.vertices, q.faces)
        d.append(float(indexes[q.name].sqdist(ends).min()))
    return others[int(np.argmin(d))].name


def hangs_off(name: str, ancestor: str, preds) -> bool:
    """Whether part ``name`` hangs (directly or further down) off part ``ancestor`` in the predicted tree
    (``preds``: part name -> PartPrediction; the root has none). A part cannot get such a part as its new
    parent: the tree would become a cycle."""
    seen = set()
    while name in preds and name not in seen:
        seen.add(name)
        name = preds[name].parent
        if name == ancestor:
            return True
    return False


def _turn_knobs(parts, preds, seed: int = 0) -> None:
    """Decoding rule: each predicted part that :func:`knob_axis` finds to be a knob turns without limits about
    that axis through its centre (type, axis, origin and limits replaced; a circle turning about its own
    axis sweeps no new space, so no validity check is needed). The knob's parent becomes the part that holds
    it (:func:`knob_holder`), and only knobs held by the root or by a fixed part turn: a round pull on a
    door or a drawer is fixed to it (on data/real_train every round part the rule finds on a moving part is
    a wheel on a swivel caster, which :func:`_roll_wheels` handles). On the second
    category-held-out fold the network, which never saw an oven, read oven knobs as buttons (prismatic) or as
    fixed."""
    size = object_extent(parts)[0]
    indexes = {}
    for p in parts:
        pr = preds.get(p.name)
        k = None if pr is None else knob_axis(p, size, seed)
        if k is None:
            continue
        others = [q for q in parts if q.name != p.name and len(q.faces)]
        holder = knob_holder(p, k[0], k[1], others, indexes) or pr.parent
        if hangs_off(holder, p.name, preds):  # a part hanging off the knob (its cap) cannot hold it
            holder = pr.parent
        if holder in preds and preds[holder].type != "fixed":
            continue  # a round part on a door or drawer is its pull, fixed to it
        pr.parent = holder
        pr.info["knob"] = {"from": pr.type, "axis": [float(x) for x in pr.axis]}
        pr.type, pr.axis, pr.origin, pr.limits = "revolute", k[0], k[1], (-np.pi, np.pi)


def stem_axis(part: Part, parent: Part, size: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
    """The stem a compact part turns on: (axis (3,) unit, pointing from the parent into the part; a point (3,)
    m: the centroid of its rest contact) when ``part`` is no panel (:func:`panel_box`), not round
    (:func:`round_axis`, flat too), not elongated (longest box side < 2 x the middle one: levers, stapler arms
    and eyeglass temples turn across their length) and its parent covers one box face of it, not the opposite
    one and no other (:func:`enclosure`, ``STEM``): a faucet's cross handle or lever on its valve, a camera's
    dial, a caster's swivel. Else None.

    On data/real_train (its joints, the parts' rest shapes) 20 movable parts pass these tests, all turning: 19
    turn about that face's normal (six oven dials, a camera dial, four faucet handles, three bottle caps the
    round test misses, five chair casters' swivels), one across it (a stapler's arm lying on its base along
    its whole length). A part held on two faces (a synthetic faucet's knob in the corner of its body and deck)
    has no one stem."""
    from kinemesh.articulation.candidates import part_box

    if panel_box(part) is not None or round_axis(part, seed, flat=True) is not None:
        return None
    box = part_box(part.vertices, part.name)
    e = np.sort(box.extents)
    if e[2] >= 2.0 * e[1]:
        return None
    box, cover = enclosure(part, parent, seed, box=box)
    k, s = np.unravel_index(int(np.argmax(cover)), cover.shape)
    if cover[k, s] < STEM[0] or cover[k, 1 - s] > STEM[1] or np.sort(cover.ravel())[-2] >= STEM[0]:
        return None  # held on no face, through it, or on two faces (a knob in a corner: no one stem)
    C = _rest_contact(part, parent, size, seed)[2]
    if len(C) < 8:
        return None
    axis = box.axes[k] * (1.0 if s == 0 else -1.0)  # the parent lies on side s: the stem points away from it
    return axis, C.mean(0)


def _turn_on_stems(parts, preds, seed: int = 0) -> None:
    """Decoding rule: a part read as turning whose shape puts it on a stem (:func:`stem_axis`) turns about the
    stem, through its rest contact, with its predicted limits, when the predicted axis is more than
    ``STEM[2]`` deg off it. The network trained without faucets (fold 3) turned faucet handles about lines
    across their valves. No sweep check, as for knobs: the swept validity check blocked fold 3's faucet 167,
    whose handle does turn so, and changed nothing else on the validation sets."""
    by = {p.name: p for p in parts}
    size = object_extent(parts)[0]
    for pr in preds.values():
        if pr.type != "revolute" or pr.parent not in by or "knob" in pr.info:
            continue
        found = stem_axis(by[pr.name], by[pr.parent], size, seed)
        if found is None:
            continue
        axis, point = found
        if abs(float(axis @ pr.axis)) / float(np.linalg.norm(pr.axis)) >= np.cos(np.radians(STEM[2])):
            continue
        pr.info["stem"] = {"axis": [float(x) for x in pr.axis]}
        pr.axis, pr.origin = axis, point


def axle_holder(axis: np.ndarray, centre: np.ndarray, radius: float, others: list[Part], seed: int = 0) -> int | None:
    """Index in ``others`` of the part that holds a wheel's axle (the wheel's ``axis`` (3,) unit through
    ``centre`` (3,) m, ``radius`` m): the one with the most surface samples (of 1000) within 0.35 x ``radius``
    of the axle line and 2 x ``radius`` along it from the centre (a fork's arms, a cart's axle); None when
    fewer than 5 samples of any part are there."""
    from kinemesh.geometry.sampling import sample_surface

    rng = np.random.default_rng(seed)
    best, best_n = None, 4
    for i, p in enumerate(others):
        q = sample_surface(p.vertices, p.faces, 1000, seed=rng)[0] - centre
        t = q @ axis
        n = int(np.sum((np.linalg.norm(q - np.outer(t, axis), axis=1) <= 0.35 * radius) & (np.abs(t) <= 2 * radius)))
        if n > best_n:
            best, best_n = i, n
    return best


def _roll_wheels(parts, root: str, preds, seed: int = 0) -> None:
    """Decoding rule: each predicted part that :func:`wheel_axis` finds to be a wheel turns without limits
    about its rolling axis through its centre (type, axis, origin and limits replaced; the sweep of a circle
    about its own axis needs no validity check), and its parent becomes the part holding its axle
    (:func:`axle_holder`). An axle holder other than the root (and no wheel) is a swivel caster: it turns
    without limits about the vertical through its rest contact with its own parent (on data/real_train every
    wheel held by a part other than the root is on such a caster)."""
    size, z0 = object_extent(parts)
    wheels = {}
    for p in parts:
        w = None if p.name not in preds else wheel_axis(p, z0, size, seed)
        if w is not None:
            wheels[p.name] = w
    by = {p.name: p for p in parts}
    for name, (axis, centre) in wheels.items():
        pr = preds[name]
        pr.type, pr.axis, pr.origin, pr.limits = "revolute", axis, centre, (-np.pi, np.pi)
        pr.info["wheel"] = True
        others = [p for p in parts if p.name not in wheels]
        radius = 0.5 * float(np.ptp((by[name].vertices - centre) @ np.cross(axis, [0.0, 0.0, 1.0])))
        h = axle_holder(axis, centre, radius, others, seed)
        if h is None or hangs_off(others[h].name, name, preds):
            continue
        pr.parent = others[h].name
        caster = preds.get(pr.parent)
        if pr.parent == root or caster is None or caster.info.get("caster") or caster.parent not in by:
            continue
        C = _rest_contact(by[caster.name], by[caster.parent], size, seed)[2]
        c = C.mean(0) if len(C) else by[caster.name].vertices.mean(0)
        caster.type, caster.axis, caster.origin, caster.limits = "revolute", np.array([0.0, 0.0, 1.0]), c, (-np.pi, np.pi)
        caster.info["caster"] = True


def _move_lines(parts, parents, preds, grid, propose, flag: str, seed: int = 0) -> None:
    """Decoding refinement: each predicted revolute part for which ``propose(part, parent, axis, origin,
    size, seed)`` returns a new line (axis (3,), point (3,)) gets it (limits kept), when the moved sweep
    passes the same validity check as ``_choose_valid`` (in the predicted opening direction or the opposite
    one, limits mirrored then); ``pr.info[flag]`` marks a move."""
    from kinemesh.articulation.candidates import Candidate
    from kinemesh.geometry.validity import check_candidates, subtree

    by = {p.name: p for p in parts}
    for pr in preds.values():
        if pr.type != "revolute" or pr.parent not in by:
            continue
        new = propose(by[pr.name], by[pr.parent], pr.axis, pr.origin, grid.size, seed)
        if new is None:
            continue
        lo, hi = pr.limits or (0.0, 0.5 * np.pi)
        reach = float(min(max(abs(lo), abs(hi)), 0.5 * np.pi))
        if reach < 1e-6:
            continue
        s = 1.0 if abs(hi) >= abs(lo) else -1.0
        sweeps = [Candidate("revolute", new[0], new[1], (0.0, s * reach), 0, 1),
                  Candidate("revolute", new[0], new[1], (0.0, -s * reach), 0, 1)]
        check_candidates(grid, subtree(parents, pr.name), sweeps)
        pr.info[flag + "_tried"] = {"axis": new[0].tolist(), "origin": new[1].tolist(),
                                    "valid": [c.valid for c in sweeps]}
        if not any(c.valid for c in sweeps):
            continue
        if not sweeps[0].valid and pr.limits is not None:
            pr.limits = (-pr.limits[1], -pr.limits[0])
        pr.axis, pr.origin = new
        pr.info[flag] = True


def _snap_to_contact(parts, parents, preds, grid, seed: int = 0) -> None:
    """Decoding refinement: each predicted revolute part whose axis line misses a compact rest contact with
    its parent (``contact_pivot``) gets its line moved (same direction and limits) through the contact's
    centroid, when that sweep is valid (:func:`_move_lines`)."""
    def propose(part, parent, axis, origin, size, seed):
        c = contact_pivot(part, parent, axis, origin, size, seed=seed)
        return None if c is None else (np.asarray(axis, float), c)

    _move_lines(parts, parents, preds, grid, propose, "moved_to_contact", seed)


def _snap_to_slab(parts, parents, preds, grid, seed: int = 0) -> None:
    """Decoding refinement: each predicted revolute panel whose axis lies in its plane (a door, a lid) gets its
    line moved across the panel (same direction) to the middle of its slab (:func:`slab_middle`), when that sweep
    is valid (:func:`_move_lines`). The network places a hinge at a box face, often the outer one, and a handle
    makes that face its tip: chosen on the real validation split and on a category-held-out check (a network
    trained without the real storage furniture, dishwashers and microwaves, run on them), docs/results/
    articulation.md."""
    def propose(part, parent, axis, origin, size, seed):
        panel = panel_box(part)
        if panel is None:
            return None
        box, n = panel
        a = np.asarray(axis, float) / np.linalg.norm(axis)
        if not in_panel_plane(panel, a):
            return None
        mid = slab_middle(part, parent, size, seed, panel=panel)
        shift = mid - float(box.to_box(np.asarray(origin, float)[None])[0, n])
        if abs(shift) < 1e-3 * size:
            return None  # already there
        return a, np.asarray(origin, float) + shift * box.axes[n]

    _move_lines(parts, parents, preds, grid, propose, "moved_to_slab", seed)


def double_doors(parts, preds, size: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Predicted revolute panels that stand side by side with a sibling (same parent, coplanar, their boxes within
    0.02 x ``size`` of each other across a seam, both hinges in plane, upright and parallel to the seam) and whose
    hinge line lies on the seam's half of the door: {name: (axis, the line mirrored to the far half)}. Double
    doors open away from each other: on data/real_train 19 of 20 such doors turn about their far edge."""
    by = {p.name: p for p in parts}
    panels = {}
    for pr in preds.values():
        panel = panel_box(by[pr.name]) if pr.type == "revolute" and pr.name in by else None
        if panel is None:
            continue
        if in_panel_plane(panel, pr.axis):
            panels[pr.name] = (*panel, np.asarray(pr.axis, float) / np.linalg.norm(pr.axis), pr)
    out = {}
    names = sorted(panels)
    for i, n1 in enumerate(names):
        for n2 in names[i + 1:]:
            (b1, k1, a1, p1), (b2, k2, a2, p2) = panels[n1], panels[n2]
            nrm = b1.axes[k1]
            if p1.parent != p2.parent or abs(nrm @ b2.axes[k2]) < 0.95 or abs(a1 @ a2) < 0.95:
                continue
            if abs((b2.center - b1.center) @ nrm) > 0.5 * max(b1.extents[k1], b2.extents[k2]) + 0.01 * size:
                continue  # not in one plane
            d = b2.center - b1.center
            d = d - (d @ nrm) * nrm
            u = d / max(float(np.linalg.norm(d)), 1e-12)
            if abs(a1 @ u) > 0.3 or abs(a1[2]) < UPRIGHT:
                continue  # side by side on upright hinges only: stacked oven doors both turn about their bottom
            gap = float(np.linalg.norm(d)) - 0.5 * float(np.abs(b1.axes @ u) @ b1.extents) \
                - 0.5 * float(np.abs(b2.axes @ u) @ b2.extents)
            if gap > 0.02 * size:
                continue
            for b, a, pr, s in ((b1, a1, p1, 1.0), (b2, a2, p2, -1.0)):
                if DOUBLE_HANDLE and by_handle(pr):
                    continue  # a leaf whose handle named its hinge side keeps it (single doors side by side)
                off = float((np.asarray(pr.origin, float) - b.center) @ u)
                if s * off > 0:  # on the seam's half
                    out[pr.name] = (a, np.asarray(pr.origin, float) - 2.0 * off * u)
    return out


def by_handle(pr: PartPrediction) -> bool:
    """Whether a revolute panel's line is the edge its handle names (``_hinge_panels`` moved it there, or
    found it there already)."""
    why = pr.info.get("moved_to_panel_edge") or pr.info.get("panel_edge_kept") or ""
    return why.startswith("handle")


def _double_doors(parts, parents, preds, grid, seed: int = 0) -> None:
    """Decoding refinement: a door of a double door hinged on its seam's half (:func:`double_doors`) gets the
    mirrored line on its far half, when that sweep is valid (:func:`_move_lines`)."""
    lines = double_doors(parts, preds, grid.size)

    def propose(part, parent, axis, origin, size, seed):
        return lines.get(part.name)

    if lines:
        _move_lines(parts, parents, preds, grid, propose, "moved_to_far_edge", seed)


def _snap_to_edges(parts, parents, preds, grid, seed: int = 0) -> None:
    """Decoding refinement: each predicted revolute line that stands for a box edge on the parent's side
    (:func:`hinge_edge`) is put on that edge, when that sweep is valid (:func:`_move_lines`)."""
    def propose(part, parent, axis, origin, size, seed):
        from kinemesh.geometry.metrics import axis_line_distance

        new = hinge_edge(part, parent, axis, origin, size, seed=seed)
        if new is None or axis_line_distance(new, axis, origin, axis) < 1e-3 * size:
            return None  # already on it
        return np.asarray(axis, float), new

    _move_lines(parts, parents, preds, grid, propose, "moved_to_edge", seed)


def heuristic_articulate(obj: ArticulatedObject, seed: int = 0) -> list[PartPrediction]:
    """Baseline: the best *valid* box candidate by a fixed rule.

    Rule: no valid candidate -> fixed; only prismatic candidates valid -> the first valid prismatic one;
    otherwise revolute, preferring a box-edge line (hinge-like) about the box's longest side, then face-centre
    lines, then the centre line.
    """
    from kinemesh.articulation.candidates import candidate_motions, part_box
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig, check_candidates, subtree

    parts = geometric_parts(obj)
    root, parents, _ = part_tree(parts, seed=seed)
    grid = OccupancyGrid(_with_tree(parts, root, parents), ValidityConfig(n_points=400, steps=6, seed=seed))
    out = []
    for p in parts:
        if p.name == root:
            continue
        box = part_box(p.vertices, p.name)
        cands = check_candidates(grid, subtree(parents, p.name), candidate_motions(box))
        valid = [c for c in cands if c.valid]
        rev = [c for c in valid if c.type == "revolute"]
        pri = [c for c in valid if c.type == "prismatic"]
        if not valid:
            out.append(PartPrediction(p.name, "fixed", np.array([0, 0, 1.0]), box.center, None, parents[p.name],
                                      1.0, p.label, {"source": "heuristic"}))
            continue
        if pri and not rev:
            c = pri[0]
        else:
            longest = int(np.argmax(box.extents))

            def score(c):
                edge = int(abs(c.grid[0]) == 1 and abs(c.grid[1]) == 1)
                face = int(abs(c.grid[0]) + abs(c.grid[1]) == 1)
                return (-edge, -face, -int(c.box_axis == longest), c.info.get("collision", 0.0))

            c = sorted(rev, key=score)[0]
        out.append(PartPrediction(p.name, c.type, c.axis, c.origin, c.limits, parents[p.name],
                                  1.0 / len(valid), p.label, {"source": "heuristic"}))
    return out


def to_articulated(obj: ArticulatedObject, preds: list[PartPrediction]) -> ArticulatedObject:
    """``obj``'s parts with the predicted joints (root = the part no prediction names)."""
    parts = [p for p in obj.parts if len(p.vertices)]
    named = {p.name for p in preds}
    roots = [p.name for p in parts if p.name not in named]
    by = {p.name: p for p in preds}
    parents = {p.name: p.parent for p in preds}
    out = _with_tree(parts, roots[0], parents, by, obj.name, obj.category)
    out.meta["source"] = "kinemesh articulate"
    return out
