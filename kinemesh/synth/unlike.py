"""Held-out categories unlike the training ones, built by code independent of the procedural factory.

The articulation predictor is trained on ``kinemesh.synth.categories`` (cabinets, drawers, doors, lids, lamp
chains, pliers...) and the random box assemblies; the held-out categories of ``articulation.dataset`` come
from the same factory, so they share its part builders, its watertight boolean meshes and its joint layouts.
This module measures generalization instead (issue 16, item 5): ten categories whose shapes and joint
layouts occur in no training category (synthetic or real), built here from raw trimesh primitives and
surfaces of revolution, without booleans, so that, like real assets, a part is several overlapping
components and some components are open shells:

- ``globe``: a meridian ring turning about the post (continuous), the globe about a tilted axis inside it;
- ``ceiling_fan``: 3-5 pitched blades on one rotor turning about the hanging downrod (continuous);
- ``step_ladder``: rear legs folding about the top hinge, a pail shelf folding on them (revolute chain);
- ``toy_piano``: 7-12 keys pivoting at their back ends, a key cover and a top lid (many parallel hinges);
- ``toilet``: seat and lid on one shared hinge (the lid at rest upright), a flush lever (revolute);
- ``suitcase``: a telescoping handle (two prismatic joints in series), wheels (continuous), a welded handle;
- ``robot_arm``: waist, shoulder, elbow, a wrist rolling about the oblique forearm, two oblique finger slides;
- ``barn_door``: a door hung on a rail sliding along the wall, a latch hinged on it (prismatic -> revolute);
- ``telescope``: azimuth, altitude, an oblique focuser slide and a focus knob on a tripod;
- ``folding_fan``: 5-9 ribs all turning about one rivet, each with its own range.

Objects are in the kinemesh frame (metres, +Z up, front -Y, standing on z = 0); joint value 0 is the rest
pose; every dimension is drawn from the seeded generator, so an object is a pure function of (category, seed).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import trimesh

from kinemesh.data.articulated import ArticulatedObject, Joint, Part, axis_angle_matrix
from kinemesh.errors import ConfigError

X, Y, Z = np.eye(3)


def _unit(v) -> np.ndarray:
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def _pose(m: trimesh.Trimesh, R=None, t=(0, 0, 0)) -> trimesh.Trimesh:
    """``m`` rotated by ``R`` (3, 3) about the origin, then moved by ``t`` (3,) m."""
    T = np.eye(4)
    T[:3, :3] = np.eye(3) if R is None else R
    T[:3, 3] = t
    return m.copy().apply_transform(T)


def _along(d) -> np.ndarray:
    """A rotation (3, 3) taking +Z to the direction ``d``."""
    return trimesh.geometry.align_vectors(Z, _unit(d))[:3, :3]


def _box(center, size, R=None) -> trimesh.Trimesh:
    """A closed cuboid of ``size`` (3,) m in its own axes, rotated by ``R`` and centred at ``center``."""
    return _pose(trimesh.creation.box(extents=size), R, center)


def _rod(p0, p1, r: float, n: int = 12) -> trimesh.Trimesh:
    """A closed cylinder of radius ``r`` m from ``p0`` to ``p1``."""
    return trimesh.creation.cylinder(radius=r, segment=np.array([p0, p1], float), sections=n)


def _shell(profile, p0, d=Z, n: int = 24) -> trimesh.Trimesh:
    """A surface of revolution of the (radius, height) polyline ``profile`` about the line through ``p0``
    along ``d``; open (a shell) wherever the profile does not end on the axis."""
    return _pose(trimesh.creation.revolve(np.asarray(profile, float), sections=n), _along(d), p0)


def _sleeve(r_in: float, r_out: float, p0, p1, n: int = 16) -> trimesh.Trimesh:
    """A closed annular sleeve (tube with wall) between radii ``r_in`` and ``r_out`` from ``p0`` to ``p1``."""
    return trimesh.creation.annulus(r_in, r_out, segment=np.array([p0, p1], float), sections=n)


class _Kit:
    """Parts (each a list of mesh components, kept separate) and joints of one object."""

    def __init__(self, category: str, rng: np.random.Generator):
        self.category, self.rng = category, rng
        self.parts: list[Part] = []
        self.joints: list[Joint] = []

    def u(self, lo: float, hi: float) -> float:
        return float(self.rng.uniform(lo, hi))

    def part(self, name: str, label: str, *components: trimesh.Trimesh) -> str:
        m = trimesh.util.concatenate(list(components))
        self.parts.append(Part(name, m.vertices, m.faces, label))
        return name

    def joint(self, type_: str, parent: str, child: str, axis, origin, limits=None) -> None:
        self.joints.append(Joint(f"joint_{child}", type_, parent, child, axis, origin, limits))

    def done(self, **params) -> ArticulatedObject:
        """The object moved to stand on z = 0 (parts and joint origins)."""
        dz = -min(float(p.vertices[:, 2].min()) for p in self.parts)
        parts = [Part(p.name, p.vertices + [0, 0, dz], p.faces, p.label) for p in self.parts]
        joints = [Joint(j.name, j.type, j.parent, j.child, j.axis, j.origin + [0, 0, dz], j.limits)
                  for j in self.joints]
        return ArticulatedObject(parts, joints, self.category, self.category,
                                 {"params": params, "generator": "unlike"})


# ---------------------------------------------------------------------------------------------- categories
def globe(k: _Kit) -> ArticulatedObject:
    """Desk globe: base + post; a meridian ring turning about the post; the globe on a tilted axis."""
    R, tilt = k.u(0.10, 0.18), k.u(0.3, 0.5) * float(k.rng.choice([-1, 1]))  # Earth's axis: 0.41 rad
    rb, hb, rt = k.u(0.7, 1.0) * R, k.u(0.015, 0.03), k.u(0.004, 0.008)
    rho = R + 0.006 + rt  # centre line of the meridian ring
    top = hb + k.u(0.04, 0.15)
    c = np.array([0, 0, top + rt + rho])
    rp = 1.2 * rt
    k.part("stand", "base", _rod([0, 0, 0], [0, 0, hb], rb, 32), _rod([0, 0, hb - 0.002], [0, 0, top], rp),
           _box([0, 0, hb + 0.004], [0.5 * rb, 0.5 * rb, 0.008]))
    ring = _pose(trimesh.creation.torus(rho, rt, major_sections=48, minor_sections=8), _along(Y), c)
    k.part("meridian", "frame", ring, _sleeve(rp + 0.001, rp + 0.004, [0, 0, top - 0.02], [0, 0, top + rt]))
    k.joint("continuous", "stand", "meridian", Z, [0, 0, top])
    a = np.array([np.sin(tilt), 0, np.cos(tilt)])
    pins = [_rod(c + s * a * (R - 0.01), c + s * a * (rho + rt), 0.6 * rt, 8) for s in (-1, 1)]
    k.part("globe", "sphere", trimesh.creation.icosphere(3, R).apply_translation(c), *pins)
    k.joint("continuous", "meridian", "globe", a, c)
    return k.done(radius=R, tilt=tilt)


def ceiling_fan(k: _Kit) -> ArticulatedObject:
    """Ceiling fan: ceiling plate, canopy (open shell), downrod and motor; a rotor with 3-5 pitched blades."""
    rc, rr, L = k.u(0.06, 0.09), k.u(0.008, 0.014), k.u(0.2, 0.6)
    Rm, hs, hr = k.u(0.08, 0.12), k.u(0.03, 0.06), k.u(0.03, 0.05)
    z0 = 2.0
    zs = z0 - 0.08 - L  # stator top
    k.part("mount", "mount", _rod([0, 0, z0 - 0.01], [0, 0, z0], 1.1 * rc, 24),
           _shell([(1.6 * rr, z0 - 0.07), (0.8 * rc, z0 - 0.04), (rc, z0 - 0.01)], [0, 0, 0]),
           _rod([0, 0, z0 - 0.06], [0, 0, zs], rr), _rod([0, 0, zs - hs], [0, 0, zs], Rm, 32),
           _shell([(Rm + 0.004, zs - hs), (Rm + 0.004, zs - 0.4 * hs)], [0, 0, 0], n=32))
    zr = zs - hs - 0.004  # rotor top
    zb = zr - hr
    n = int(k.rng.integers(3, 6))
    Lb, wb, pitch, phi0 = k.u(0.35, 0.6), k.u(0.09, 0.15), k.u(0.1, 0.25), k.u(0, 2 * np.pi)
    comps = [_rod([0, 0, zb], [0, 0, zr], 0.97 * Rm, 32), _rod([0, 0, zb - 0.02], [0, 0, zb], 0.3 * Rm, 16)]
    for i in range(n):
        Rz = axis_angle_matrix(Z, phi0 + 2 * np.pi * i / n)
        r0 = Rm + 0.03
        iron = [r0 + 0.06 - 0.6 * Rm, 0.025, 0.008]  # the blade iron joins the rotor's underside to the blade
        comps.append(_box(Rz @ [0.5 * (0.6 * Rm + r0 + 0.06), 0, zb - 0.004], iron, Rz))
        blade = Rz @ axis_angle_matrix(X, pitch)
        comps.append(_box(Rz @ [r0 + Lb / 2, 0, zb - 0.0115], [Lb, wb, 0.008], blade))
    k.part("rotor", "blades", *comps)
    k.joint("continuous", "mount", "rotor", Z * float(k.rng.choice([-1, 1])), [0, 0, zr])
    return k.done(blades=n, blade_length=Lb)


def step_ladder(k: _Kit) -> ArticulatedObject:
    """Folding A-frame step ladder: front frame with steps and top cap; rear legs hinged at the top fold
    towards the front; a pail shelf hinged on the rear legs folds up."""
    W, H, al, be = k.u(0.38, 0.55), k.u(0.9, 1.6), k.u(0.18, 0.3), k.u(0.2, 0.32)
    t, dr, cap = 0.022, k.u(0.05, 0.08), 0.03
    zt = H - cap
    front = [_box([0, 0.02, H - cap / 2], [W + 0.08, k.u(0.14, 0.2), cap])]
    for s in (-1, 1):
        p0, p1 = np.array([s * W / 2, -zt * np.tan(al), 0]), np.array([s * W / 2, 0, zt])
        front.append(_box((p0 + p1) / 2, [t, dr, np.linalg.norm(p1 - p0)], axis_angle_matrix(X, -al)))
    n = max(2, int(H / 0.28))
    for i in range(n):
        h = (i + 1) * zt / (n + 1)
        front.append(_box([0, -(zt - h) * np.tan(al), h], [W - 0.5 * t, k.u(0.08, 0.11), 0.025]))
    k.part("front", "frame", *front)
    hinge = np.array([0, 0.03, zt - 0.012])
    xr = W / 2 + t + 0.004
    rear = []
    for s in (-1, 1):
        p0 = np.array([s * xr, hinge[1] + hinge[2] * np.tan(be), 0])
        p1 = np.array([s * xr, hinge[1], zt])
        rear.append(_box((p0 + p1) / 2, [t, dr, np.linalg.norm(p1 - p0)], axis_angle_matrix(X, be)))
        rear.append(_box([s * (W / 2 + t / 2 + 0.002), hinge[1], hinge[2]], [0.003, 0.03, 0.03]))  # hinge
    for f in (0.3, 0.6):
        zc = f * zt
        rear.append(_rod([-xr, hinge[1] + (hinge[2] - zc) * np.tan(be), zc],
                         [xr, hinge[1] + (hinge[2] - zc) * np.tan(be), zc], 0.008))
    k.part("rear_legs", "leg", *rear)
    k.joint("revolute", "front", "rear_legs", X, hinge, (-(al + be) * 0.75, 0.0))
    hs = k.u(0.45, 0.6) * zt
    ys = hinge[1] + (hinge[2] - hs) * np.tan(be)  # the rear legs' centre line at the shelf height
    gapf = ys + (zt - hs) * np.tan(al)  # free depth between the frames at that height
    Ls = k.u(0.6, 0.85) * (gapf - dr - 0.01)
    k.part("shelf", "shelf", _box([0, ys - dr / 2 - Ls / 2, hs], [2 * xr - t, Ls, 0.015]),
           *[_box([s * (xr - 0.7 * t), ys - dr / 2 - 0.01, hs], [0.4 * t, 0.03, 0.03]) for s in (-1, 1)])
    k.joint("revolute", "rear_legs", "shelf", X, [0, ys - dr / 2, hs + 0.0075],
            (-(np.pi / 2 - be) * 0.95, 0.0))
    return k.done(height=H, steps=n)


def toy_piano(k: _Kit) -> ArticulatedObject:
    """Toy upright piano: a case, 7-12 keys hinged at their back ends, a key cover and a top lid."""
    n, kw, cw = int(k.rng.integers(7, 13)), k.u(0.022, 0.045), k.u(0.03, 0.06)
    Lk, kz, D, Hu = k.u(0.1, 0.16), k.u(0.2, 0.55), k.u(0.15, 0.3), k.u(0.15, 0.35)
    W = n * kw + 2 * cw
    zt = kz + Hu
    case = [_box([0, D / 2, kz / 2], [W, D, kz]), _box([0, D / 2, kz + Hu / 2], [W, D, Hu]),
            _box([0, -Lk / 2 - 0.01, kz - 0.01], [W, Lk + 0.02, 0.02]),  # key bed
            _box([0, -0.006, kz + 0.006], [W - 2 * cw, 0.012, 0.012])]  # the rail the keys rest on
    case += [_box([s * (W - cw) / 2, -Lk / 2 - 0.01, kz + 0.03], [cw, Lk + 0.02, 0.06]) for s in (-1, 1)]
    for s in (-1, 1):  # legs: open tubes
        case += [_shell([(0.015, 0.0), (0.02, kz - 0.02)], [s * (W / 2 - 0.03), -Lk + 0.01, 0], n=12)]
    k.part("case", "body", *case)
    for i in range(n):
        x = -n * kw / 2 + (i + 0.5) * kw
        k.part(f"key_{i}", "key", _box([x, -0.002 - Lk / 2, kz + 0.012 + 0.011], [kw - 0.002, Lk, 0.022]))
        travel = float(np.arcsin(0.01 / Lk))  # the front drops 1 cm of its 1.2 cm clearance
        k.joint("revolute", "case", f"key_{i}", X, [x, -0.002, kz + 0.012], (0.0, travel))
    zc = kz + 0.06 + 0.004
    k.part("key_cover", "lid",
           _box([0, -(Lk + 0.02) / 2, zc + 0.006], [W - 2 * cw - 0.004, Lk + 0.02, 0.012]),
           _rod([-(W / 2 - cw - 0.01), -0.004, zc + 0.012], [W / 2 - cw - 0.01, -0.004, zc + 0.012], 0.004))
    k.joint("revolute", "case", "key_cover", X, [0, -0.004, zc + 0.012], (-np.pi / 2, 0.0))
    k.part("top_lid", "lid", _box([0, D / 2, zt + 0.008], [W, D, 0.012]),
           _box([0, D / 2 - D * 0.4, zt + 0.018], [0.08, 0.015, 0.008]))
    k.joint("revolute", "case", "top_lid", X, [0, D, zt], (-1.4, 0.0))
    return k.done(keys=n, key_length=Lk)


def toilet(k: _Kit) -> ArticulatedObject:
    """Toilet: bowl (open shell) on a pedestal and a tank; seat and lid on one shared hinge (the lid at rest
    stands open), a flush lever on the tank."""
    ey, zr, rb = k.u(1.15, 1.35), k.u(0.36, 0.42), k.u(0.16, 0.2)
    S = np.diag([1.0, ey, 1.0])
    yc = -k.u(0.2, 0.28)
    bowl = _shell([(0.3 * rb, zr - 0.25), (0.7 * rb, zr - 0.15), (0.95 * rb, zr - 0.04), (rb, zr)], [0, 0, 0])
    ped = _shell([(0, 0), (0.75 * rb, 0), (0.55 * rb, 0.1), (0.4 * rb, zr - 0.2), (0, zr - 0.2)], [0, 0, 0])
    bowl, ped = _pose(bowl, S, [0, yc, 0]), _pose(ped, S, [0, yc, 0])
    rim = _pose(trimesh.creation.torus(rb, 0.015, major_sections=40, minor_sections=8), S, [0, yc, zr])
    yb = yc + rb * ey  # back of the rim
    tw, td, th = k.u(0.35, 0.48), k.u(0.14, 0.2), k.u(0.28, 0.42)
    yt = yb + 0.045  # tank front face
    tank = [_box([0, yt + td / 2, zr - 0.05 + th / 2], [tw, td, th]),
            _box([0, yt + td / 2, zr - 0.05 + th + 0.01], [tw + 0.02, td + 0.02, 0.02]),
            _box([0, (yb + yt) / 2, zr - 0.1], [0.6 * tw, yt - yb + 0.04, 0.12])]
    hinge = np.array([0, yb + 0.02, zr + 0.015 + 0.02])
    pin = [_rod(hinge - [0.16, 0, 0], hinge + [0.16, 0, 0], 0.006)]  # through the seat's and the lid's blocks
    pin += [_box([s * 0.105, hinge[1], (zr - 0.045 + hinge[2]) / 2], [0.015, 0.015, hinge[2] - zr + 0.045])
            for s in (-1, 1)]
    k.part("base", "bowl", bowl, ped, rim, *tank, *pin)
    seat = _pose(trimesh.creation.annulus(0.65 * rb, rb + 0.005, height=0.02, sections=40), S,
                 [0, yc, zr + 0.026])
    yblk = (yb + hinge[1]) / 2 - 0.005
    blocks = [_box([s * 0.08, yblk, hinge[2] - 0.01], [0.03, hinge[1] - yb + 0.03, 0.02]) for s in (-1, 1)]
    k.part("seat", "seat", seat, *blocks)
    k.joint("revolute", "base", "seat", X, hinge, (-1.25, 0.0))
    lid = _pose(trimesh.creation.cylinder(rb + 0.01, 0.016, sections=40), S, [0, yc, zr + 0.047])
    lblocks = [_box([s * 0.13, (yb + hinge[1]) / 2, hinge[2] + 0.008], [0.03, hinge[1] - yb + 0.02, 0.016])
               for s in (-1, 1)]
    open_ = k.u(1.35, 1.45)  # the lid leans slightly forward of upright
    Rl = axis_angle_matrix(X, -open_)
    lid_parts = [_pose(_pose(m, None, -hinge), Rl, hinge) for m in (lid, *lblocks)]
    k.part("lid", "lid", *lid_parts)
    k.joint("revolute", "base", "lid", X, hinge, (0.0, open_))
    hub = np.array([-tw / 2 + 0.06, yt, zr - 0.05 + th - 0.06])
    k.part("lever", "handle", _rod(hub + [0, 0.002, 0], hub - [0, 0.02, 0], 0.01),
           _box(hub + [0.035, -0.016, 0], [0.07, 0.008, 0.012]))
    k.joint("revolute", "base", "lever", -Y, hub, (0.0, 0.6))
    return k.done(rim_radius=rb, lid_open=open_)


def suitcase(k: _Kit) -> ArticulatedObject:
    """Wheeled suitcase: two shell halves and a zip band; a telescoping handle (outer and inner stage, two
    prismatic joints in series) in sleeves on the back; two wheels; a welded side handle."""
    W, D, H, rw = k.u(0.35, 0.5), k.u(0.2, 0.3), k.u(0.45, 0.7), k.u(0.022, 0.035)
    zb = 2 * rw + 0.006
    zc = zb + H / 2
    body = [_box([0, -D / 4 - 0.001, zc], [W, D / 2, H]), _box([0, D / 4 + 0.001, zc], [W, D / 2, H]),
            _box([0, 0, zc], [W + 0.006, 0.012, H + 0.006])]
    body += [_box([s * (W / 2 - 0.05), -D / 2 + 0.04, zb / 2], [0.04, 0.04, zb]) for s in (-1, 1)]  # feet
    sx, r1 = k.u(0.2, 0.32) * W, k.u(0.008, 0.012)
    yh = D / 2 + r1 + 0.004
    for s in (-1, 1):
        for z in (zb + H - 0.03, zb + 0.15):  # sleeves guiding the outer stage
            body.append(_sleeve(r1 + 0.001, r1 + 0.005, [s * sx, yh, z], [s * sx, yh, z + 0.03]))
    xw = W / 2 - 0.05
    for s in (-1, 1):  # wheel brackets
        zc_b = (rw + zb) / 2 - 0.004
        body += [_box([s * xw + e * 0.02, D / 2 - rw - 0.01, zc_b], [0.008, 0.03, zb - rw + 0.008])
                 for e in (-1, 1)]
    k.part("body", "body", *body)
    L1 = H - 0.08
    k.part("handle_outer", "handle",
           *[_shell([(r1, 0), (r1, L1)], [s * sx, yh, zb + H + 0.01 - L1], n=12) for s in (-1, 1)])
    k.joint("prismatic", "body", "handle_outer", Z, [0, yh, zb + H - L1 / 2], (0.0, 0.7 * L1))
    r2, L2 = 0.75 * r1, L1 - 0.02
    top = zb + H + 0.02
    k.part("handle_inner", "handle",
           *[_rod([s * sx, yh, top - L2], [s * sx, yh, top], r2, 12) for s in (-1, 1)],
           _box([0, yh, top + 0.015], [2 * sx + 4 * r1, 0.03, 0.03]))
    k.joint("prismatic", "handle_outer", "handle_inner", Z, [0, yh, top - L2 / 2], (0.0, 0.75 * L2))
    for i, s in enumerate((-1, 1)):
        c = np.array([s * xw, D / 2 - rw - 0.01, rw])
        k.part(f"wheel_{i}", "wheel", _rod(c - [0.01, 0, 0], c + [0.01, 0, 0], rw, 20),
               _rod(c - [0.02, 0, 0], c + [0.02, 0, 0], 0.004, 8))
        k.joint("continuous", "body", f"wheel_{i}", X, c)
    hz = zb + H * k.u(0.45, 0.6)
    k.part("side_handle", "handle", _box([W / 2 + 0.03, 0, hz], [0.012, 0.03, 0.14]),
           *[_box([W / 2 + 0.015, 0, hz + e * 0.06], [0.03, 0.025, 0.02]) for e in (-1, 1)])
    k.joint("fixed", "body", "side_handle", Z, [W / 2, 0, hz])
    return k.done(width=W, depth=D, height=H)


def robot_arm(k: _Kit) -> ArticulatedObject:
    """Robot arm: waist (about Z), shoulder and elbow (about a horizontal axis at a random yaw), a wrist that
    rolls about the oblique forearm, and a two-finger gripper sliding along an oblique palm direction."""
    r0, h0, psi = k.u(0.08, 0.12), k.u(0.04, 0.07), k.u(-np.pi, np.pi)
    f, lat = np.array([np.cos(psi), np.sin(psi), 0]), np.array([-np.sin(psi), np.cos(psi), 0])
    bolts = [0.8 * r0 * np.array([np.cos(a), np.sin(a), 0]) for a in np.arange(4) * np.pi / 2 + 0.4]
    k.part("base", "base", _rod([0, 0, 0], [0, 0, h0], r0, 32),
           *[_rod(b + [0, 0, h0 - 0.002], b + [0, 0, h0 + 0.008], 0.006, 8) for b in bolts])
    ht, rj, wl = k.u(0.05, 0.1), k.u(0.03, 0.045), k.u(0.05, 0.07)
    S = np.array([0, 0, h0 + 0.004 + ht + rj])
    waist = [_rod([0, 0, h0 + 0.004], [0, 0, h0 + 0.004 + ht], 0.8 * r0, 32)]
    waist += [_box(S + lat * s * (wl / 2 + 0.012) - [0, 0, (rj + 0.01) / 2 - 0.005], [0.02, 0.02, rj + 0.02])
              for s in (-1, 1)]  # the shoulder brackets
    k.part("waist", "turret", *waist)
    k.joint("revolute", "base", "waist", Z, [0, 0, h0], (-2.5, 2.5))
    a1, L1 = k.u(0.2, 0.7), k.u(0.2, 0.35)
    d1 = np.cos(a1) * Z + np.sin(a1) * f
    E = S + d1 * L1
    k.part("upper_arm", "link", _rod(S - lat * wl / 2, S + lat * wl / 2, rj, 20),
           _box((S + E) / 2, [0.045, 0.045, L1 - 2 * rj], _along(d1)),
           _rod(E - lat * wl / 2, E, 0.8 * rj, 20))
    k.joint("revolute", "waist", "upper_arm", lat, S, (-0.6, 0.6))
    a2, L2 = k.u(1.2, 2.0), k.u(0.18, 0.3)
    d2 = np.cos(a1 + a2) * Z + np.sin(a1 + a2) * f
    E2 = E + lat * 0.0425  # the forearm sits beside the upper arm along the elbow axis
    Wp = E2 + d2 * L2
    k.part("forearm", "link", _rod(E + lat * 0.002, E2 + lat * 0.02, 0.8 * rj, 20),
           _box(E2 + d2 * L2 / 2, [0.035, 0.035, L2 - rj], _along(d2)), _rod(Wp - d2 * 0.02, Wp, 0.022, 16))
    k.joint("revolute", "upper_arm", "forearm", lat, E, (-0.8, 0.8))
    rho = k.u(0, np.pi)
    m = axis_angle_matrix(d2, rho) @ lat  # the palm's slide direction, oblique
    P = Wp + d2 * 0.004
    k.part("wrist", "wrist", _rod(P, P + d2 * 0.03, 0.022, 16),
           _box(P + d2 * 0.036, [0.09, 0.03, 0.012], np.column_stack([m, np.cross(d2, m), d2])))
    k.joint("revolute", "forearm", "wrist", d2, P, (-2.5, 2.5))
    for i, s in enumerate((-1, 1)):
        c = P + d2 * (0.042 + 0.025) + m * s * 0.025
        k.part(f"finger_{i}", "finger",
               _box(c, [0.012, 0.025, 0.05], np.column_stack([m, np.cross(d2, m), d2])))
        k.joint("prismatic", "wrist", f"finger_{i}", m * s, c, (0.0, 0.015))
    return k.done(yaw=psi, shoulder=a1, elbow=a2)


def barn_door(k: _Kit) -> ArticulatedObject:
    """Barn door: a wall with a doorway and a rail; the door hangs from rollers on the rail and slides along
    the wall (prismatic); a latch bar is hinged on the door (revolute, child of the door)."""
    Wd, Hd, tw = k.u(0.8, 1.1), k.u(1.9, 2.1), k.u(0.08, 0.12)
    Hw, side = Hd + k.u(0.3, 0.6), float(k.rng.choice([-1, 1]))
    xl, xr = sorted([-side * (Wd / 2 + 0.4), side * (1.5 * Wd + 0.3)])
    zrail = Hd + 0.12
    wall = [_box([(xl - Wd / 2) / 2, tw / 2, Hw / 2], [-Wd / 2 - xl, tw, Hw]),
            _box([(xr + Wd / 2) / 2, tw / 2, Hw / 2], [xr - Wd / 2, tw, Hw]),
            _box([0, tw / 2, (Hd + Hw) / 2], [Wd, tw, Hw - Hd]),  # above the doorway
            _box([(xl + xr) / 2, -0.04, zrail], [xr - xl - 0.1, 0.02, 0.02])]  # the rail
    wall += [_box([x, -0.015, zrail], [0.03, 0.03, 0.05]) for x in np.linspace(xl + 0.1, xr - 0.1, 4)]
    k.part("wall", "wall", *wall)
    td, Wdd, top = k.u(0.03, 0.05), Wd + 0.1, zrail - 0.08
    y0 = -0.062  # door back face
    rr = 0.03
    door = [_box([0, y0 - td / 2, (0.01 + top) / 2], [Wdd, td, top - 0.01])]
    door += [_box([0, y0 - td - 0.006, z], [Wdd - 0.04, 0.012, 0.12]) for z in (0.15, top - 0.15)]
    diag = np.array([Wdd - 0.1, 0, top - 0.45])
    door.append(_box([0, y0 - td - 0.006, (top + 0.3) / 2], [0.1, 0.012, np.linalg.norm(diag)], _along(diag)))
    for x in (-Wdd / 2 + 0.12, Wdd / 2 - 0.12):
        door.append(_box([x, y0 + 0.004, top + 0.02], [0.05, 0.008, 0.2]))  # strap, behind the door's top
        c = np.array([x, -0.04, zrail + 0.01 + rr + 0.002])
        door.append(_box([x, y0 + 0.004, (top + c[2]) / 2], [0.03, 0.008, c[2] - top]))
        door += [_rod(c + [0, -0.008, 0], c + [0, 0.008, 0], rr, 20),  # the roller and its axle
                 _rod(c + [0, -0.022, 0], c + [0, -0.008, 0], 0.006, 8)]
    hx = -side * (Wdd / 2 - 0.12)
    door += [_rod([hx, y0 - td - 0.04, 0.9], [hx, y0 - td - 0.04, 1.2], 0.012)]
    door += [_box([hx, y0 - td - 0.02, z], [0.02, 0.04, 0.02]) for z in (0.92, 1.18)]
    k.part("door", "door", *door)
    travel = Wd + 0.1
    k.joint("prismatic", "wall", "door", [side, 0, 0], [0, y0 - td / 2, top / 2], (0.0, travel))
    pv = np.array([side * (Wdd / 2 - 0.05), y0 - td - 0.02, 1.05])
    k.part("latch", "latch", _rod(pv + [0, 0.02, 0], pv - [0, 0.01, 0], 0.008),
           _box(pv + [-side * 0.06, -0.004, 0], [0.14, 0.01, 0.02]))
    k.joint("revolute", "door", "latch", [0, -side, 0], pv, (0.0, 1.2))
    return k.done(width=Wd, height=Hd, side=side)


def telescope(k: _Kit) -> ArticulatedObject:
    """Telescope on a tripod: azimuth (about Z), altitude (about a horizontal axis at a random yaw), a focuser
    drawtube sliding along the oblique optical axis, and a focus knob."""
    Ht, psi, el = k.u(0.9, 1.3), k.u(-np.pi, np.pi), k.u(0.3, 0.9)
    f, lat = np.array([np.cos(psi), np.sin(psi), 0]), np.array([-np.sin(psi), np.cos(psi), 0])
    legs = [_rod([0, 0, Ht - 0.03], [0.5 * Ht * np.cos(a), 0.5 * Ht * np.sin(a), 0], 0.012, 8)
            for a in psi + np.array([0.5, 2.6, 4.7])]
    k.part("tripod", "tripod", _rod([0, 0, Ht - 0.04], [0, 0, Ht], 0.05, 24), *legs,
           _rod([0, 0, 0.3 * Ht], [0, 0, Ht - 0.04], 0.01, 8))
    Rt, Lt = k.u(0.04, 0.07), k.u(0.45, 0.85)
    hf = Rt + 0.06
    P = np.array([0, 0, Ht + 0.004 + 0.02 + hf])
    fork = [_rod([0, 0, Ht + 0.004], [0, 0, Ht + 0.024], 0.05, 24)]
    fork += [_box([0, 0, Ht + 0.024 + (hf + 0.02) / 2] + lat * s * (Rt + 0.03), [0.03, 0.03, hf + 0.02],
                  np.column_stack([f, lat, Z])) for s in (-1, 1)]
    k.part("mount", "mount", *fork)
    k.joint("continuous", "tripod", "mount", Z, [0, 0, Ht + 0.002])
    t = np.cos(el) * f + np.sin(el) * Z
    back = P - t * 0.4 * Lt
    front = P + t * 0.6 * Lt
    Rf = 0.35 * Rt
    up = np.cross(lat, t)
    tube = [_shell([(Rt, 0), (Rt, Lt)], back, t, 32),  # open tube, dew shield, back ring, trunnion, finder
            _shell([(Rt + 0.006, 0), (Rt + 0.006, 0.12 * Lt)], front - t * 0.1 * Lt, t, 32),
            _sleeve(Rf + 0.003, Rt, back, back + t * 0.01, 24),
            _rod(P - lat * (Rt + 0.016), P + lat * (Rt + 0.016), 0.012),
            _rod(back + t * 0.2 * Lt + up * (Rt + 0.012), front - t * 0.3 * Lt + up * (Rt + 0.012), 0.01)]
    hc = back + t * 0.03 + np.cross(lat, t) * (Rf + 0.014)  # focuser housing
    tube += [_box(hc, [0.03, 0.025, 0.04], np.column_stack([lat, np.cross(t, lat), t]))]
    k.part("tube", "tube", *tube)
    k.joint("revolute", "mount", "tube", lat, P, (-el + 0.1, max(0.1, 0.9 - el)))
    k.part("focuser", "focuser", _shell([(Rf, -0.08), (Rf, 0.06)], back, -t, 16),
           _rod(back - t * 0.06, back - t * 0.1, 0.6 * Rf, 12))
    k.joint("prismatic", "tube", "focuser", -t, back - t * 0.02, (0.0, 0.04))
    kc = hc + lat * 0.015
    k.part("focus_knob", "knob", _rod(kc + lat * 0.001, kc + lat * 0.02, 0.014, 16))
    k.joint("continuous", "tube", "focus_knob", lat, kc)
    return k.done(elevation=el, tube_length=Lt)


def folding_fan(k: _Kit) -> ArticulatedObject:
    """Folding (brise) fan, shown open: 5-9 stacked ribs all turning about one rivet; rib i folds back onto
    the first guard through its own angle."""
    n, L, A = int(k.rng.integers(5, 10)), k.u(0.18, 0.28), k.u(1.8, 2.8)
    wt, th = k.u(0.015, 0.03), k.u(0.0015, 0.003)
    a0 = k.u(-np.pi, np.pi)
    for i in range(n):
        z0 = i * (th + 0.0005)
        pts = np.array([[0, -0.004], [0, 0.004], [L, wt / 2], [L, -wt / 2]])
        pts = np.c_[pts, np.zeros(4)]
        slab = trimesh.convex.convex_hull(np.r_[pts + [0, 0, z0], pts + [0, 0, z0 + th]])
        comps = [slab, _rod([0, 0, z0], [0, 0, z0 + th], 0.008, 16)]
        if i == 0:
            comps += [_rod([0, 0, -0.002], [0, 0, n * (th + 0.0005) + 0.002], 0.003, 8),
                      _pose(trimesh.creation.torus(0.01, 0.0015), None, [-0.014, 0, z0 + th / 2])]
        ang = a0 + A * i / (n - 1)
        inner = 0 < i < n - 1
        name = k.part(f"rib_{i}" if inner else f"guard_{min(i, 1)}", "rib" if inner else "guard",
                      *[_pose(c, axis_angle_matrix(Z, ang)) for c in comps])
        if i:
            k.joint("revolute", "guard_0", name, Z, [0, 0, z0], (-(A * i / (n - 1)), 0.0))
    return k.done(ribs=n, opening=A)


UNLIKE_CATEGORIES: dict[str, Callable[[_Kit], ArticulatedObject]] = {
    "globe": globe, "ceiling_fan": ceiling_fan, "step_ladder": step_ladder, "toy_piano": toy_piano,
    "toilet": toilet, "suitcase": suitcase, "robot_arm": robot_arm, "barn_door": barn_door,
    "telescope": telescope, "folding_fan": folding_fan,
}


def build_unlike(category: str, seed: int) -> ArticulatedObject:
    """One instance of an unlike held-out ``category`` (a key of ``UNLIKE_CATEGORIES``) for ``seed``.

    Raises ConfigError for an unknown category."""
    if category not in UNLIKE_CATEGORIES:
        raise ConfigError(f"unknown unlike category {category!r}; choose from {sorted(UNLIKE_CATEGORIES)}")
    obj = UNLIKE_CATEGORIES[category](_Kit(category, np.random.default_rng(seed)))
    obj.meta["seed"] = seed
    return obj
