"""Procedural articulated object categories with randomized proportions and ground-truth joints.

``CATEGORIES`` maps a category name to ``builder(rng) -> ArticulatedObject``. Objects are in the kinemesh frame
(metres, +Z up, the front faces -Y, the object stands on z = 0). Every part is a watertight mesh built from
primitives (manifold3d booleans); moving parts keep a small gap (a few mm) to the body and their joint limits
keep them clear of the body over the whole range. Handles and knobs are their own parts (label ``handle`` /
``knob``), welded by fixed joints or turning on continuous joints. Joint value 0 is the rest pose (closed).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import trimesh

from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.synth import shapes as S

GAP = 0.004  # clearance between a moving part and its neighbours (m)
TARGET_VERTICES = (1000, 4000)  # vertex budget per object after refinement


class ObjectBuilder:
    """Accumulates parts and joints, then refines meshes to the vertex budget and returns the object."""

    def __init__(self, category: str, rng: np.random.Generator):
        self.category = category
        self.rng = rng
        self.parts: list[tuple[str, trimesh.Trimesh | None, str]] = []
        self.joints: list[Joint] = []
        self.params: dict = {}

    def u(self, lo: float, hi: float) -> float:
        v = float(self.rng.uniform(lo, hi))
        return v

    def part(self, name: str, mesh: trimesh.Trimesh | None, label: str) -> str:
        self.parts.append((name, mesh, label))
        return name

    def joint(self, type_: str, parent: str, child: str, axis, origin, limits=None) -> None:
        self.joints.append(
            Joint(f"joint_{len(self.joints)}_{child}", type_, parent, child, axis, origin, limits)
        )

    def fixed(self, parent: str, child: str) -> None:
        self.joint("fixed", parent, child, (0, 0, 1), (0, 0, 0))

    def build(self, refine: bool = True) -> ArticulatedObject:
        meshes = [m for _, m, _ in self.parts if m is not None]
        lo = np.min([m.bounds[0] for m in meshes], axis=0)
        hi = np.max([m.bounds[1] for m in meshes], axis=0)
        size = float(np.max(hi - lo))
        out = {name: m for name, m, _ in self.parts}
        if refine:
            edge = size / 12.0
            for _ in range(8):
                out = {n: (S.refine(m, edge) if m is not None else None) for n, m, _ in self.parts}
                total = sum(len(m.vertices) for m in out.values() if m is not None)
                if total <= TARGET_VERTICES[1]:
                    break
                edge *= 1.35
        parts = []
        for name, _, label in self.parts:
            m = out[name]
            if m is None:
                parts.append(Part(name, np.zeros((0, 3)), np.zeros((0, 3), int), label))
            else:
                parts.append(Part(name, np.asarray(m.vertices), np.asarray(m.faces), label))
        return ArticulatedObject(
            parts,
            list(self.joints),
            category=self.category,
            name=f"{self.category}",
            meta={"params": self.params},
        )


# ---------------------------------------------------------------------------------------------- pieces
def bar_handle(
    center, length: float, along: str, front_y: float, standoff: float = 0.025, thick: float = 0.012
) -> trimesh.Trimesh:
    """A bar handle on a face whose outward normal is -Y at ``front_y``: a bar plus two posts."""
    c = np.asarray(center, float)
    k = "xyz".index(along)
    half = np.zeros(3)
    half[k] = length / 2
    t = np.full(3, thick / 2)
    y_bar = front_y - standoff
    bar_lo, bar_hi = c - half - t, c + half + t
    bar_lo[1], bar_hi[1] = y_bar - thick, y_bar
    pieces = [S.box(bar_lo, bar_hi)]
    for s in (-1, 1):
        pc = c + s * half * 0.8
        plo, phi = pc - t * 0.8, pc + t * 0.8
        plo[1], phi[1] = y_bar - 0.001, front_y + 0.002  # posts sink 2 mm into the face
        pieces.append(S.box(plo, phi))
    return S.union(pieces)


def knob_mesh(center, radius: float, depth: float, front_y: float, axis=(0, -1, 0)) -> trimesh.Trimesh:
    """A round knob with a pointer ridge, protruding from a face at ``front_y`` along ``axis`` (-Y)."""
    c = np.asarray(center, float)
    p0 = np.array([c[0], front_y - GAP / 2, c[2]])
    p1 = p0 + np.asarray(axis, float) * depth
    cyl = S.cylinder(radius, p0, p1, sections=16)
    ridge = S.box(
        [c[0] - radius * 0.15, p1[1] - depth * 0.35, c[2]],
        [c[0] + radius * 0.15, p1[1] + 0.001, c[2] + radius * 1.25],
    )
    ridge_lo, ridge_hi = ridge.bounds
    return S.union([cyl, S.box([ridge_lo[0], min(p1[1] - 0.004, ridge_lo[1]), ridge_lo[2]], ridge_hi)])


def drawer_mesh(x0, x1, z0, z1, y_front, y_back, th, wall) -> trimesh.Trimesh:
    """A drawer: a front panel (x0..x1, z0..z1, thickness ``th`` in front of ``y_front``) and an open tray
    behind it reaching ``y_back``, inset by the carcass walls (``wall``)."""
    panel = S.box([x0, y_front - th, z0], [x1, y_front, z1])
    return panel


def door_part(
    b: ObjectBuilder,
    name: str,
    x0,
    x1,
    z0,
    z1,
    y_front,
    th,
    hinge: str,
    body: str,
    limit_hi: float,
    handle: bool = True,
    label: str = "door",
) -> str:
    """A door slab x0..x1, z0..z1 in front of the face ``y_front`` (gap ``GAP``) hinged on its ``hinge``
    edge ("left", "right", "bottom", "top"), opening outward (towards -Y)."""
    yf = y_front - GAP  # back face of the door
    mesh = S.box([x0, yf - th, z0], [x1, yf, z1])
    b.part(name, mesh, label)
    y_out = yf - th
    if hinge == "left":
        b.joint("revolute", body, name, (0, 0, -1), (x0, y_out, 0.5 * (z0 + z1)), (0.0, limit_hi))
        hc = (x1 - min(0.05, 0.15 * (x1 - x0)), 0, 0.5 * (z0 + z1))
        along, length = "z", min(0.3, 0.5 * (z1 - z0))
    elif hinge == "right":
        b.joint("revolute", body, name, (0, 0, 1), (x1, y_out, 0.5 * (z0 + z1)), (0.0, limit_hi))
        hc = (x0 + min(0.05, 0.15 * (x1 - x0)), 0, 0.5 * (z0 + z1))
        along, length = "z", min(0.3, 0.5 * (z1 - z0))
    elif hinge == "bottom":
        b.joint("revolute", body, name, (1, 0, 0), (0.5 * (x0 + x1), y_out, z0), (0.0, limit_hi))
        hc = (0.5 * (x0 + x1), 0, z1 - min(0.05, 0.15 * (z1 - z0)))
        along, length = "x", min(0.4, 0.6 * (x1 - x0))
    else:  # top
        b.joint("revolute", body, name, (-1, 0, 0), (0.5 * (x0 + x1), y_out, z1), (0.0, limit_hi))
        hc = (0.5 * (x0 + x1), 0, z0 + min(0.05, 0.15 * (z1 - z0)))
        along, length = "x", min(0.4, 0.6 * (x1 - x0))
    if handle:
        h = bar_handle(hc, length, along, y_out)
        hn = b.part(f"{name}_handle", h, "handle")
        b.fixed(name, hn)
    return name


def drawer_part(
    b: ObjectBuilder, name: str, x0, x1, z0, z1, cav, y_front, depth, th, body: str, handle_kind: str = "bar"
) -> str:
    """A drawer whose front panel covers x0..x1, z0..z1 and whose tray fits the cavity box ``cav``
    ((lo, hi) inner carcass bounds), sliding out along -Y."""
    yf = y_front - GAP
    panel = S.box([x0, yf - th, z0], [x1, yf, z1])
    (clo, chi) = cav
    tx0, tx1 = max(x0, clo[0]) + 2 * GAP, min(x1, chi[0]) - 2 * GAP
    tz0, tz1 = max(z0, clo[2]) + 2 * GAP, min(z1, chi[2]) - 3 * GAP
    ty1 = min(yf + depth, chi[1] - 2 * GAP)
    wall = min(0.012, 0.2 * (tz1 - tz0))
    tray = S.open_box([tx0, yf - 0.002, tz0], [tx1, ty1, tz1], wall, "+z")
    b.part(name, S.union([panel, tray]), "drawer")
    travel = 0.85 * (ty1 - yf)
    b.joint("prismatic", body, name, (0, -1, 0), (0.5 * (x0 + x1), yf - th, 0.5 * (z0 + z1)), (0.0, travel))
    yo = yf - th
    cx, cz = 0.5 * (x0 + x1), 0.5 * (z0 + z1)
    if handle_kind == "bar":
        h = bar_handle((cx, 0, cz), min(0.6 * (x1 - x0), 0.25), "x", yo)
    else:
        r = min(0.02, 0.2 * (z1 - z0))
        h = S.cylinder(r, [cx, yo + 0.002, cz], [cx, yo - 0.025, cz], sections=12)
    hn = b.part(f"{name}_handle", h, "handle")
    b.fixed(name, hn)
    return name


# ---------------------------------------------------------------------------------------------- categories
def cabinet(rng: np.random.Generator) -> ArticulatedObject:
    """Cabinet with one or two side-hinged doors and an optional shelf."""
    b = ObjectBuilder("cabinet", rng)
    W, D, H, t = b.u(0.4, 1.0), b.u(0.3, 0.6), b.u(0.4, 1.0), b.u(0.015, 0.03)
    body = S.open_box([-W / 2, -D / 2, 0], [W / 2, D / 2, H], t, "-y")
    if rng.random() < 0.6:
        zs = b.u(0.35, 0.65) * H
        body = S.union(
            [
                body,
                S.box(
                    [-W / 2 + t - 0.001, -D / 2 + 0.02, zs], [W / 2 - t + 0.001, D / 2 - t + 0.001, zs + t]
                ),
            ]
        )
    b.part("body", body, "body")
    th = b.u(0.015, 0.025)
    n = int(rng.integers(1, 3))
    hi = lambda: b.u(0.5, 0.8) * np.pi
    if n == 1:
        door_part(
            b, "door", -W / 2, W / 2, 0, H, -D / 2, th, str(rng.choice(["left", "right"])), "body", hi()
        )
    else:
        door_part(b, "door_left", -W / 2, -GAP / 2, 0, H, -D / 2, th, "left", "body", hi())
        door_part(b, "door_right", GAP / 2, W / 2, 0, H, -D / 2, th, "right", "body", hi())
    b.params = {"width": W, "depth": D, "height": H, "doors": n}
    return b.build()


def chest_of_drawers(rng: np.random.Generator) -> ArticulatedObject:
    """Chest of drawers with 2-6 sliding drawers (one or two columns)."""
    b = ObjectBuilder("chest_of_drawers", rng)
    n = int(rng.integers(2, 7))
    cols = 2 if (n >= 4 and n % 2 == 0 and rng.random() < 0.4) else 1
    rows = n // cols
    W, D, H, t = (
        b.u(0.5, 1.1) * (1.3 if cols == 2 else 1),
        b.u(0.35, 0.55),
        b.u(0.12, 0.22) * rows + 0.1,
        b.u(0.015, 0.025),
    )
    b.part("body", S.open_box([-W / 2, -D / 2, 0], [W / 2, D / 2, H], t, "-y"), "body")
    cav = (np.array([-W / 2 + t, -D / 2, t]), np.array([W / 2 - t, D / 2 - t, H - t]))
    th = b.u(0.015, 0.022)
    kind = str(rng.choice(["bar", "knob"]))
    for r in range(rows):
        z0, z1 = r * H / rows + GAP / 2, (r + 1) * H / rows - GAP / 2
        for c in range(cols):
            x0 = -W / 2 + c * W / cols + GAP / 2
            x1 = -W / 2 + (c + 1) * W / cols - GAP / 2
            drawer_part(b, f"drawer_{r}_{c}", x0, x1, z0, z1, cav, -D / 2, D, th, "body", kind)
    b.params = {"width": W, "depth": D, "height": H, "drawers": n, "columns": cols}
    return b.build()


def wardrobe(rng: np.random.Generator) -> ArticulatedObject:
    """Tall wardrobe with two doors and optionally one or two drawers below."""
    b = ObjectBuilder("wardrobe", rng)
    W, D, H, t = b.u(0.8, 1.4), b.u(0.45, 0.65), b.u(1.6, 2.2), b.u(0.018, 0.03)
    n_dr = int(rng.integers(0, 3))
    zd = 0.0 if n_dr == 0 else b.u(0.12, 0.2) * n_dr + 0.02
    body = S.open_box([-W / 2, -D / 2, 0], [W / 2, D / 2, H], t, "-y")
    if n_dr:
        body = S.union(
            [
                body,
                S.box(
                    [-W / 2 + t - 0.001, -D / 2 + 0.01, zd - t / 2],
                    [W / 2 - t + 0.001, D / 2 - t + 0.001, zd + t / 2],
                ),
            ]
        )
    b.part("body", body, "body")
    th = b.u(0.018, 0.028)
    door_part(
        b, "door_left", -W / 2, -GAP / 2, zd + GAP, H, -D / 2, th, "left", "body", b.u(0.5, 0.75) * np.pi
    )
    door_part(
        b, "door_right", GAP / 2, W / 2, zd + GAP, H, -D / 2, th, "right", "body", b.u(0.5, 0.75) * np.pi
    )
    for i in range(n_dr):
        z0, z1 = i * (zd - t / 2) / n_dr + GAP / 2, (i + 1) * (zd - t / 2) / n_dr - GAP / 2
        cav = (
            np.array([-W / 2 + t, -D / 2, t if i == 0 else z0]),
            np.array([W / 2 - t, D / 2 - t, zd - t / 2]),
        )
        drawer_part(b, f"drawer_{i}", -W / 2 + GAP, W / 2 - GAP, z0, z1, cav, -D / 2, D, th, "body")
    b.params = {"width": W, "depth": D, "height": H, "drawers": n_dr}
    return b.build()


def refrigerator(rng: np.random.Generator) -> ArticulatedObject:
    """Refrigerator with two stacked doors of different sizes hinged on the same side."""
    b = ObjectBuilder("refrigerator", rng)
    W, D, H, t = b.u(0.55, 0.9), b.u(0.6, 0.75), b.u(1.4, 1.9), b.u(0.03, 0.05)
    zs = H * (b.u(0.6, 0.72) if rng.random() < 0.6 else b.u(0.3, 0.4))
    body = S.open_box([-W / 2, -D / 2, 0], [W / 2, D / 2, H], t, "-y")
    body = S.union(
        [
            body,
            S.box(
                [-W / 2 + t - 0.001, -D / 2 + 0.005, zs - t / 2],
                [W / 2 - t + 0.001, D / 2 - t + 0.001, zs + t / 2],
            ),
        ]
    )
    b.part("body", body, "body")
    side = str(rng.choice(["left", "right"]))
    th = b.u(0.04, 0.07)
    door_part(
        b, "door_lower", -W / 2, W / 2, 0.0, zs - GAP / 2, -D / 2, th, side, "body", b.u(0.5, 0.7) * np.pi
    )
    door_part(
        b, "door_upper", -W / 2, W / 2, zs + GAP / 2, H, -D / 2, th, side, "body", b.u(0.5, 0.7) * np.pi
    )
    b.params = {"width": W, "depth": D, "height": H, "split": zs, "hinge": side}
    return b.build()


def microwave(rng: np.random.Generator) -> ArticulatedObject:
    """Microwave: side-hinged door over the cavity, a control panel with a continuous knob."""
    b = ObjectBuilder("microwave", rng)
    W, D, H, t = b.u(0.42, 0.6), b.u(0.3, 0.42), b.u(0.24, 0.35), b.u(0.015, 0.025)
    pw = b.u(0.1, 0.14)
    body = S.difference(
        S.box([-W / 2, -D / 2, 0], [W / 2, D / 2, H]),
        S.box([-W / 2 + t, -D / 2 - 0.1, t], [W / 2 - pw - t, D / 2 - t, H - t]),
    )
    b.part("body", body, "body")
    door_part(
        b,
        "door",
        -W / 2,
        W / 2 - pw - GAP,
        0.0,
        H,
        -D / 2,
        b.u(0.02, 0.035),
        "left",
        "body",
        b.u(0.48, 0.6) * np.pi,
    )
    kc = np.array([W / 2 - pw / 2, 0, H * b.u(0.3, 0.6)])
    b.part("knob", knob_mesh(kc, min(0.025, pw * 0.3), 0.02, -D / 2), "knob")
    b.joint("continuous", "body", "knob", (0, -1, 0), (kc[0], -D / 2, kc[2]))
    b.params = {"width": W, "depth": D, "height": H}
    return b.build()


def oven(rng: np.random.Generator) -> ArticulatedObject:
    """Oven: a bottom-hinged door and a control panel with 2-4 continuous knobs."""
    b = ObjectBuilder("oven", rng)
    W, D, H, t = b.u(0.5, 0.75), b.u(0.5, 0.65), b.u(0.7, 0.95), b.u(0.02, 0.035)
    zp = H * b.u(0.72, 0.8)
    body = S.difference(
        S.box([-W / 2, -D / 2, 0], [W / 2, D / 2, H]),
        S.box([-W / 2 + t, -D / 2 - 0.1, t + 0.04], [W / 2 - t, D / 2 - t, zp - t]),
    )
    b.part("body", body, "body")
    door_part(
        b,
        "door",
        -W / 2 + GAP,
        W / 2 - GAP,
        0.03,
        zp - GAP,
        -D / 2,
        b.u(0.03, 0.05),
        "bottom",
        "body",
        b.u(0.45, 0.5) * np.pi,
    )
    nk = int(rng.integers(2, 5))
    for i in range(nk):
        kc = np.array([-W / 2 + (i + 0.5) * W / nk, 0, 0.5 * (zp + H)])
        name = b.part(f"knob_{i}", knob_mesh(kc, min(0.025, 0.3 * (H - zp)), 0.025, -D / 2), "knob")
        b.joint("continuous", "body", name, (0, -1, 0), (kc[0], -D / 2, kc[2]))
    b.params = {"width": W, "depth": D, "height": H, "knobs": nk}
    return b.build()


def laptop(rng: np.random.Generator) -> ArticulatedObject:
    """Laptop: a base and a lid (screen) hinged on the back edge; rest pose closed."""
    b = ObjectBuilder("laptop", rng)
    W, D, hb, hl = b.u(0.28, 0.4), b.u(0.19, 0.28), b.u(0.012, 0.025), b.u(0.006, 0.012)
    base = S.difference(
        S.box([-W / 2, -D / 2, 0], [W / 2, D / 2, hb]),
        S.box([-W * 0.42, -D * 0.05, hb - 0.002], [W * 0.42, D * 0.42, hb + 0.01]),
    )
    b.part("base", base, "base")
    b.part("lid", S.box([-W / 2, -D / 2, hb + GAP], [W / 2, D / 2, hb + GAP + hl]), "screen")
    b.joint("revolute", "base", "lid", (-1, 0, 0), (0, D / 2, hb + GAP / 2), (0.0, b.u(1.8, 2.3)))
    b.params = {"width": W, "depth": D}
    return b.build()


def chest(rng: np.random.Generator) -> ArticulatedObject:
    """Storage chest with a lid hinged on the back top edge."""
    b = ObjectBuilder("chest", rng)
    W, D, H, t = b.u(0.5, 1.0), b.u(0.35, 0.6), b.u(0.3, 0.6), b.u(0.015, 0.03)
    b.part("body", S.open_box([-W / 2, -D / 2, 0], [W / 2, D / 2, H], t, "+z"), "body")
    ov, lt = b.u(0.0, 0.02), b.u(0.02, 0.04)
    lid = S.box([-W / 2 - ov, -D / 2 - ov, H + GAP], [W / 2 + ov, D / 2, H + GAP + lt])
    b.part("lid", lid, "lid")
    b.joint("revolute", "body", "lid", (-1, 0, 0), (0, D / 2, H + GAP / 2), (0.0, b.u(1.5, 2.0)))
    if rng.random() < 0.6:
        h = S.box(
            [-0.06, -D / 2 - ov - 0.02, H + GAP + 0.2 * lt], [0.06, -D / 2 - ov + 0.002, H + GAP + 0.8 * lt]
        )
        b.part("lid_handle", h, "handle")
        b.fixed("lid", "lid_handle")
    b.params = {"width": W, "depth": D, "height": H}
    return b.build()


def trash_can(rng: np.random.Generator) -> ArticulatedObject:
    """Trash can (round or square) with a lid hinged at the back."""
    b = ObjectBuilder("trash_can", rng)
    H, t = b.u(0.3, 0.6), b.u(0.006, 0.012)
    round_ = rng.random() < 0.7
    if round_:
        R = b.u(0.12, 0.2)
        body = S.difference(
            S.cylinder(R, [0, 0, 0], [0, 0, H], 24), S.cylinder(R - t, [0, 0, t], [0, 0, H + 0.1], 24)
        )
        lid = S.cylinder(R + 0.005, [0, 0, H + GAP], [0, 0, H + GAP + 0.02], 24)
        back = R + 0.005
    else:
        R = b.u(0.12, 0.2)
        body = S.open_box([-R, -R, 0], [R, R, H], t, "+z")
        lid = S.box([-R - 0.005, -R - 0.005, H + GAP], [R + 0.005, R + 0.005, H + GAP + 0.02])
        back = R + 0.005
    b.part("body", body, "body")
    b.part("lid", lid, "lid")
    b.joint("revolute", "body", "lid", (-1, 0, 0), (0, back, H + GAP / 2), (0.0, b.u(1.4, 1.9)))
    b.params = {"radius": R, "height": H, "round": round_}
    return b.build()


def washing_machine(rng: np.random.Generator) -> ArticulatedObject:
    """Front-loading washing machine: round side-hinged door, detergent drawer, program knob."""
    b = ObjectBuilder("washing_machine", rng)
    W, D, H = b.u(0.55, 0.65), b.u(0.5, 0.62), b.u(0.8, 0.9)
    r = b.u(0.16, 0.21)
    cz = H * b.u(0.4, 0.48)
    drum = S.cylinder(r, [0, -D / 2 - 0.1, cz], [0, D / 2 - 0.05, cz], 28)
    dw, dh, dz = W * 0.3, 0.06, H - 0.1
    slot = S.box([-W / 2 + 0.03, -D / 2 - 0.1, dz], [-W / 2 + 0.03 + dw, D * 0.1, dz + dh])
    b.part("body", S.difference(S.box([-W / 2, -D / 2, 0], [W / 2, D / 2, H]), drum, slot), "body")
    rd, th = r + b.u(0.02, 0.04), b.u(0.03, 0.05)
    yb = -D / 2 - GAP
    door = S.cylinder(rd, [0, yb, cz], [0, yb - th, cz], 28)
    b.part("door", door, "door")
    b.joint("revolute", "body", "door", (0, 0, -1), (-rd, yb - th, cz), (0.0, b.u(0.5, 0.65) * np.pi))
    cav = (np.array([-W / 2 + 0.03, -D / 2, dz]), np.array([-W / 2 + 0.03 + dw, D * 0.1, dz + dh]))
    drawer_part(
        b, "drawer", -W / 2 + 0.03, -W / 2 + 0.03 + dw, dz, dz + dh, cav, -D / 2, D, 0.012, "body", "knob"
    )
    kc = np.array([W / 2 - 0.08, 0, dz + dh / 2])
    b.part("knob", knob_mesh(kc, 0.03, 0.025, -D / 2), "knob")
    b.joint("continuous", "body", "knob", (0, -1, 0), (kc[0], -D / 2, kc[2]))
    b.params = {"width": W, "depth": D, "height": H, "door_radius": rd}
    return b.build()


def desk_lamp(rng: np.random.Generator) -> ArticulatedObject:
    """Desk lamp: base, optional yaw, then a chain of 2-3 revolute links (a kinematic hierarchy)."""
    b = ObjectBuilder("desk_lamp", rng)
    Rb, hb = b.u(0.07, 0.11), b.u(0.015, 0.03)
    b.part("base", S.cylinder(Rb, [0, 0, 0], [0, 0, hb], 24), "base")
    parent = "base"
    r = b.u(0.008, 0.013)
    dx = r * 2.2  # successive links sit side by side in x so they never collide
    p = np.array([0.0, 0.0, hb + GAP])
    if rng.random() < 0.5:
        tz = b.u(0.03, 0.06)
        b.part("turret", S.cylinder(r * 2.5, p, p + [0, 0, tz], 16), "base")
        b.joint("revolute", parent, "turret", (0, 0, 1), p, (-b.u(1.0, 2.5), b.u(1.0, 2.5)))
        parent = "turret"
        p = p + [0, 0, tz + GAP]
    n_links = int(rng.integers(2, 4))
    ang = b.u(-0.4, 0.4)
    for i in range(n_links):
        L = b.u(0.18, 0.32) if i < 2 else b.u(0.08, 0.14)
        d = np.array([0.0, np.sin(ang), np.cos(ang)])
        off = np.array([dx if i % 2 == 0 else -dx, 0, 0])
        name = f"arm_{i}" if i < n_links - 1 else "head"
        if name == "head":
            d = np.array([0.0, -np.sin(abs(ang) + 0.9), -np.cos(abs(ang) + 0.9)])
            rs = b.u(0.04, 0.06)
            L = max(L, 2 * rs + 4 * r)
            off = np.array([-dx + r + rs + 2 * GAP, 0, 0])  # the shade clears the last arm's slab
            stem = S.capsule(r, p + off + d * (r + GAP), p + off + d * (rs + 3 * r))
            shade = S.cylinder(rs, p + off + d * (rs + 3 * r), p + off + d * L, 20)
            mesh = S.union([stem, shade])
            label = "head"
        else:
            mesh = S.capsule(r, p + off + d * (r + GAP), p + off + d * (L - r))
            label = "arm"
        b.part(name, mesh, label)
        lim = (-b.u(0.4, 0.7), b.u(0.4, 0.7))
        b.joint("revolute", parent, name, (1, 0, 0), p, lim)
        parent = name
        p = p + d * L
        ang = ang + b.u(0.8, 1.8) * (1 if i % 2 == 0 else -1)
    b.params = {"links": n_links}
    return b.build()


def _prism(points_xy, z0: float, z1: float) -> trimesh.Trimesh:
    """Convex prism: the convex hull of a 2D polygon extruded from ``z0`` to ``z1``."""
    p = np.asarray(points_xy, float)
    pts = np.concatenate([np.c_[p, np.full(len(p), z0)], np.c_[p, np.full(len(p), z1)]])
    return trimesh.convex.convex_hull(pts)


def _blade_pair(b: ObjectBuilder, jaw: float, handle: float, width: float, thick: float, ring: bool) -> None:
    """Two stacked blades (z layers) crossing at a pivot at the origin; the upper one rotates about +Z."""
    for k, name in enumerate(("blade_lower", "blade_upper")):
        z0 = k * (thick + GAP)
        z1 = z0 + thick
        zc = 0.5 * (z0 + z1)
        s = 1 if k == 0 else -1
        jaw_m = _prism(
            [[0, -width / 2], [0, width / 2], [jaw, s * width * 0.1], [jaw, -s * width * 0.05]], z0, z1
        )
        hub = S.cylinder(width * 0.6, [0, 0, z0], [0, 0, z1], 16)
        ang = s * 0.25
        hend = np.array([-handle * np.cos(ang), -handle * np.sin(ang), zc])
        pieces = [jaw_m, hub]
        if ring:
            rr = b.u(0.015, 0.025)
            c = hend + [-rr * 0.8, -s * rr * 0.3, 0]
            pieces.append(S.torus(rr, thick * 0.5, c, (0, 0, 1), 16))
            pieces.append(S.capsule(thick * 0.5, [0, 0, zc], hend))
        else:
            pieces.append(S.capsule(thick * 0.5, [0, 0, zc], hend))
        b.part(name, S.union(pieces), "blade" if ring else "jaw")
    b.joint(
        "revolute", "blade_lower", "blade_upper", (0, 0, 1), (0, 0, thick + GAP / 2), (0.0, b.u(0.4, 0.7))
    )


def scissors(rng: np.random.Generator) -> ArticulatedObject:
    """Scissors: two blades with finger rings crossing at a pivot (revolute about the pivot)."""
    b = ObjectBuilder("scissors", rng)
    _blade_pair(b, b.u(0.07, 0.12), b.u(0.05, 0.08), b.u(0.012, 0.018), b.u(0.003, 0.005), ring=True)
    return b.build()


def pliers(rng: np.random.Generator) -> ArticulatedObject:
    """Pliers: short jaws and long handles crossing at a pivot (revolute about the pivot)."""
    b = ObjectBuilder("pliers", rng)
    _blade_pair(b, b.u(0.03, 0.05), b.u(0.1, 0.15), b.u(0.015, 0.022), b.u(0.005, 0.008), ring=False)
    return b.build()


def sliding_window(rng: np.random.Generator) -> ArticulatedObject:
    """Sliding window: a frame with two sashes on separate tracks sliding horizontally (or vertically)."""
    b = ObjectBuilder("sliding_window", rng)
    W, H, Dp, bo = b.u(0.6, 1.4), b.u(0.6, 1.2), b.u(0.06, 0.1), b.u(0.03, 0.06)
    b.part("frame", S.frame([-W / 2, -Dp / 2, 0], [W / 2, Dp / 2, H], bo, axis=1), "frame")
    vertical = rng.random() < 0.3
    sb = b.u(0.02, 0.035)
    tracks = [(GAP, Dp / 2 - GAP), (-Dp / 2 + GAP, -GAP)]
    if not vertical:
        Wi = W - 2 * bo
        ws = Wi / 2 + 0.02
        spans = [(-Wi / 2 + GAP, -Wi / 2 + ws), (Wi / 2 - ws, Wi / 2 - GAP)]
        axes = [(1, 0, 0), (-1, 0, 0)]
        for k in range(2):
            x0, x1 = spans[k]
            y0, y1 = tracks[k]
            sash = S.frame([x0, y0, bo + GAP], [x1, y1, H - bo - GAP], sb, axis=1)
            glass = S.box(
                [x0 + sb - 0.001, (y0 + y1) / 2 - 0.003, bo + GAP + sb - 0.001],
                [x1 - sb + 0.001, (y0 + y1) / 2 + 0.003, H - bo - GAP - sb + 0.001],
            )
            b.part(f"sash_{k}", S.union([sash, glass]), "sash")
            b.joint(
                "prismatic",
                "frame",
                f"sash_{k}",
                axes[k],
                ((x0 + x1) / 2, (y0 + y1) / 2, H / 2),
                (0.0, (Wi - ws - 2 * GAP) * b.u(0.8, 1.0)),
            )
    else:
        Hi = H - 2 * bo
        hs = Hi / 2 + 0.02
        spans = [(bo + GAP, bo + hs), (H - bo - hs, H - bo - GAP)]
        axes = [(0, 0, 1), (0, 0, -1)]
        for k in range(2):
            z0, z1 = spans[k]
            y0, y1 = tracks[k]
            sash = S.frame([-W / 2 + bo + GAP, y0, z0], [W / 2 - bo - GAP, y1, z1], sb, axis=1)
            glass = S.box(
                [-W / 2 + bo + sb, (y0 + y1) / 2 - 0.003, z0 + sb - 0.001],
                [W / 2 - bo - sb, (y0 + y1) / 2 + 0.003, z1 - sb + 0.001],
            )
            b.part(f"sash_{k}", S.union([sash, glass]), "sash")
            b.joint(
                "prismatic",
                "frame",
                f"sash_{k}",
                axes[k],
                (0, (y0 + y1) / 2, (z0 + z1) / 2),
                (0.0, (Hi - hs - 2 * GAP) * b.u(0.8, 1.0)),
            )
    b.params = {"width": W, "height": H, "vertical": vertical}
    return b.build()


def faucet(rng: np.random.Generator) -> ArticulatedObject:
    """Faucet: a swivelling spout (revolute about Z) and one or two handle knobs (continuous)."""
    b = ObjectBuilder("faucet", rng)
    Rb, Hb = b.u(0.025, 0.04), b.u(0.085, 0.14)
    plate = S.box([-0.12, -0.06, 0], [0.12, 0.06, 0.012])
    base = S.union([plate, S.cylinder(Rb, [0, 0, 0.011], [0, 0, Hb], 20)])
    b.part("body", base, "body")
    rs = b.u(0.012, 0.02)
    Hs, Ls = b.u(0.08, 0.2), b.u(0.12, 0.22)
    col = S.cylinder(rs, [0, 0, Hb + GAP], [0, 0, Hb + GAP + Hs], 16)
    arm = S.capsule(rs * 0.9, [0, 0, Hb + GAP + Hs], [0, -Ls, Hb + GAP + Hs - b.u(0.0, 0.05)])
    b.part("spout", S.union([col, arm]), "spout")
    b.joint("revolute", "body", "spout", (0, 0, 1), (0, 0, Hb + GAP), (-b.u(0.6, 1.4), b.u(0.6, 1.4)))
    n = int(rng.integers(1, 3))
    for i in range(n):
        s = 1 if (i == 0 and n == 2) or (n == 1 and rng.random() < 0.5) else -1
        c = np.array([s * (Rb + GAP), 0, Hb * 0.6])
        knob = S.union(
            [
                S.cylinder(0.018, c, c + [s * 0.03, 0, 0], 14),
                S.box(c + [min(s * 0.02, s * 0.03), -0.006, 0], c + [max(s * 0.02, s * 0.03), 0.006, 0.03]),
            ]
        )
        name = b.part(f"knob_{i}", knob, "knob")
        b.joint("continuous", "body", name, (s, 0, 0), c)
    b.params = {"knobs": n}
    return b.build()


CATEGORIES: dict[str, Callable[[np.random.Generator], ArticulatedObject]] = {
    "cabinet": cabinet,
    "chest_of_drawers": chest_of_drawers,
    "wardrobe": wardrobe,
    "refrigerator": refrigerator,
    "microwave": microwave,
    "oven": oven,
    "laptop": laptop,
    "chest": chest,
    "trash_can": trash_can,
    "washing_machine": washing_machine,
    "desk_lamp": desk_lamp,
    "scissors": scissors,
    "pliers": pliers,
    "sliding_window": sliding_window,
    "faucet": faucet,
}


def build(
    category: str, rng: np.random.Generator, check: bool = True, attempts: int = 8
) -> ArticulatedObject:
    """Build one random instance of ``category``; with ``check``, instances whose parts interpenetrate at
    some tested joint configuration are rejected and rebuilt (raises ConfigError for an unknown name)."""
    from kinemesh.errors import ConfigError, KinemeshError
    from kinemesh.geometry.validity import is_valid

    if category not in CATEGORIES:
        raise ConfigError(f"unknown category {category!r}; choose from {sorted(CATEGORIES)}")
    for attempt in range(attempts):
        obj = CATEGORIES[category](rng)
        if not check or is_valid(obj, seed=attempt, n_samples=150):
            obj.meta["attempts"] = attempt + 1
            return obj
    raise KinemeshError(f"{category}: no valid instance after {attempts} attempts")
