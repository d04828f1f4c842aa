"""Random articulated assemblies: a random tree of primitive parts joined by physically valid joints.

Beyond the named categories, diversity is what lets a kinematic model generalize (issue 3). A root box gets
1-6 moving parts, attached one at a time to a random face of a random existing box part (so chains nest):

- ``flap``: a slab lying on the face, hinged on one of its edges, swinging outward (revolute);
- ``lever``: a capsule standing on the face, pivoting about an axis parallel to the face at the centre of
  its rounded foot (revolute);
- ``slider``: a block sliding along the face (prismatic);
- ``piston``: a block pulled out along the face normal (prismatic);
- ``knob``: a cylinder with a ridge turning about the face normal (continuous).

The extended kinds (``EXTENDED_KINDS``, off by default so the kinematic model's data stays as it was) widen
the joint layouts further for the articulation predictor:

- ``rotor``: a hub with 2-5 pitched blades radiating over the face, one part of several blades, turning
  about the face normal (continuous: fans, propellers, spinners);
- ``wheel``: a cylinder lying on the face with a spoke bar, turning about its own axis, parallel to the face
  (continuous: wheels, rollers, casters);
- ``row``: 2-6 flaps, levers or pistons side by side along the face, each on its own joint (keys, switches,
  banks of parallel hinges);

and ``p_tilt`` turns a newly attached part (mesh and joint) by 10-60 deg about the face normal through its
attachment point, so hinge lines and slides run obliquely across their parent's faces.

After each addition the object is checked for interpenetration over the joint ranges
(``validity.interpenetrations``); a part that collides is dropped and another is tried.
"""

from __future__ import annotations

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint
from kinemesh.errors import KinemeshError
from kinemesh.synth import shapes as S
from kinemesh.synth.categories import GAP, ObjectBuilder
from kinemesh.geometry.validity import is_valid

PART_KINDS = ("flap", "lever", "slider", "piston", "knob")
EXTENDED_KINDS = PART_KINDS + ("rotor", "wheel", "row")


def _unit(k: int, s: float = 1.0) -> np.ndarray:
    e = np.zeros(3)
    e[k] = s
    return e


def random_assembly(
    rng: np.random.Generator, n_moving: int | None = None, max_depth: int = 3, check: bool = True,
    kinds: tuple[str, ...] = PART_KINDS, p_tilt: float = 0.0,
) -> ArticulatedObject:
    """A random articulated assembly with ``n_moving`` (default random 1-6) moving parts of ``kinds``
    (``PART_KINDS`` or ``EXTENDED_KINDS``), each turned obliquely on its face with probability ``p_tilt``.

    Returns an ArticulatedObject of category ``assembly`` whose ``meta["params"]`` lists the part kinds.
    Fewer moving parts than asked are returned only when no valid placement is found after many tries.
    """
    n_moving = int(n_moving if n_moving is not None else rng.integers(1, 7))
    b = ObjectBuilder("assembly", rng)
    ext = rng.uniform(0.2, 0.8, 3)
    root_lo, root_hi = np.array([-ext[0] / 2, -ext[1] / 2, 0.0]), np.array([ext[0] / 2, ext[1] / 2, ext[2]])
    b.part("body", S.box(root_lo, root_hi), "body")
    boxes = {"body": (root_lo, root_hi, 0)}  # box parts children can attach to: (lo, hi, depth)
    allowed, kinds = tuple(kinds), []
    tries = 0
    while len(kinds) < n_moving and tries < 12 * n_moving:
        tries += 1
        names = list(boxes)
        weights = np.array([2.0 if n == "body" else 1.0 for n in names])
        parent = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        lo, hi, depth = boxes[parent]
        if depth >= max_depth:
            continue
        kind = str(rng.choice(allowed))
        a = int(rng.integers(3))
        s = float(rng.choice([-1.0, 1.0]))
        if parent == "body" and a == 2 and s < 0:
            s = 1.0  # the root stands on its bottom face
        name = f"{kind}_{len(kinds)}"
        n_parts, n_joints = len(b.parts), len(b.joints)
        try:
            if kind == "row":
                new_box = _add_row(b, rng, name, parent, lo, hi, a, s)
            else:
                new_box = _add_part(b, rng, kind, name, parent, lo, hi, a, s)
            if p_tilt > 0 and rng.random() < p_tilt:
                _tilt(b, rng, n_parts, n_joints, a, s, hi[a] if s > 0 else lo[a])
                new_box = None  # its box is no longer axis-aligned: nothing attaches to it
        except (KinemeshError, ValueError):  # degenerate sizes on a tiny face: try another placement
            del b.parts[n_parts:], b.joints[n_joints:]
            continue
        if check:
            trial = b.build(refine=False)
            if not is_valid(trial, seed=tries, n_samples=120):
                del b.parts[n_parts:], b.joints[n_joints:]
                continue
        kinds.append(kind)
        if new_box is not None:
            boxes[name] = (new_box[0], new_box[1], depth + 1)
    b.params = {"part_kinds": kinds, "root_extents": ext.tolist()}
    obj = b.build()
    obj.name = "assembly"
    return obj


def _tilt(b: ObjectBuilder, rng, n_parts: int, n_joints: int, a: int, s: float, f: float) -> None:
    """Turn the parts and joints added since (``n_parts``, ``n_joints``) by +-10-60 deg about the face normal
    (axis ``a``, side ``s``, at coordinate ``f``) through the centre of their footprint on the face."""
    from kinemesh.data.articulated import axis_angle_matrix

    verts = np.concatenate([np.asarray(m.vertices) for _, m, _ in b.parts[n_parts:]])
    c = 0.5 * (verts.min(0) + verts.max(0))
    c[a] = f
    R = axis_angle_matrix(_unit(a, s), float(rng.choice([-1.0, 1.0]) * rng.uniform(np.radians(10), np.radians(60))))
    for i in range(n_parts, len(b.parts)):
        name, mesh, label = b.parts[i]
        m = mesh.copy()
        m.vertices = (np.asarray(m.vertices) - c) @ R.T + c
        b.parts[i] = (name, m, label)
    for i in range(n_joints, len(b.joints)):
        j = b.joints[i]
        b.joints[i] = Joint(j.name, j.type, j.parent, j.child, R @ np.asarray(j.axis, float),
                            (np.asarray(j.origin, float) - c) @ R.T + c, j.limits)


def _add_row(b: ObjectBuilder, rng, name, parent, lo, hi, a, s):
    """2-6 parts of one kind (flap, lever or piston) side by side along a tangent of the face, each on its own
    joint of the same kind, so their hinge lines or slides are parallel (keys, switches)."""
    kind = str(rng.choice(["flap", "lever", "piston"]))
    t = int(rng.choice([k for k in range(3) if k != a]))
    n = int(rng.integers(2, 7))
    edges = np.linspace(lo[t], hi[t], n + 1)
    pitch = (hi[t] - lo[t]) / n
    if pitch < 0.02:
        raise ValueError("face too small for a row")
    seed = int(rng.integers(2**32))  # one generator state per copy: the same size and place in each cell
    for i in range(n):
        clo, chi = lo.copy(), hi.copy()
        clo[t], chi[t] = edges[i] + 0.1 * pitch, edges[i + 1] - 0.1 * pitch
        _add_part(b, np.random.default_rng(seed), kind, f"{name}_{i}", parent, clo, chi, a, s)
    return None


def _add_part(b: ObjectBuilder, rng, kind, name, parent, lo, hi, a, s):
    """Add one moving part of ``kind`` on face (axis ``a``, side ``s``) of ``parent``'s box; returns the new
    part's box (lo, hi) when children may attach to it, else None."""
    u = rng.uniform
    t1, t2 = [k for k in range(3) if k != a]
    if rng.random() < 0.5:
        t1, t2 = t2, t1
    f = hi[a] if s > 0 else lo[a]
    size1, size2 = hi[t1] - lo[t1], hi[t2] - lo[t2]
    n = _unit(a, s)

    def slab(a_lo, a_hi, c1, w1, c2, w2):
        blo, bhi = np.zeros(3), np.zeros(3)
        blo[a], bhi[a] = min(a_lo, a_hi), max(a_lo, a_hi)
        blo[t1], bhi[t1] = c1 - w1 / 2, c1 + w1 / 2
        blo[t2], bhi[t2] = c2 - w2 / 2, c2 + w2 / 2
        return blo, bhi

    if kind == "flap":
        th = float(u(0.01, 0.03))
        w1, w2 = float(u(0.4, 1.0)) * size1, float(u(0.4, 1.0)) * size2
        c1 = float(u(lo[t1] + w1 / 2, hi[t1] - w1 / 2 + 1e-9))
        c2 = float(u(lo[t2] + w2 / 2, hi[t2] - w2 / 2 + 1e-9))
        blo, bhi = slab(f + s * GAP, f + s * (GAP + th), c1, w1, c2, w2)
        b.part(name, S.box(blo, bhi), "flap")
        sigma = float(rng.choice([-1.0, 1.0]))  # which t1 edge carries the hinge
        origin = np.zeros(3)
        origin[a] = f + s * (GAP + th)
        origin[t1] = c1 + sigma * w1 / 2
        origin[t2] = c2
        axis = _unit(t2)
        r = _unit(t1, -sigma)  # from the hinge towards the slab
        if np.dot(np.cross(axis, r), n) < 0:
            axis = -axis
        b.joint("revolute", parent, name, axis, origin, (0.0, float(u(0.45, 0.85)) * np.pi))
        return blo, bhi
    if kind == "lever":
        r = float(u(0.01, 0.03))
        L = float(u(0.1, 0.4))
        c1 = float(u(lo[t1] + r, hi[t1] - r + 1e-9))
        c2 = float(u(lo[t2] + r, hi[t2] - r + 1e-9))
        foot = np.zeros(3)
        foot[a], foot[t1], foot[t2] = f + s * (GAP + r), c1, c2
        b.part(name, S.capsule(r, foot, foot + n * L), "lever")
        lim = float(u(0.4, 1.1))
        b.joint("revolute", parent, name, _unit(t2), foot, (-lim, lim))
        return None
    if kind == "slider":
        th = float(u(0.02, 0.06))
        w1, w2 = float(u(0.15, 0.4)) * size1, float(u(0.2, 0.8)) * size2
        side = float(rng.choice([-1.0, 1.0]))
        c1 = (lo[t1] + w1 / 2 + GAP) if side > 0 else (hi[t1] - w1 / 2 - GAP)
        c2 = float(u(lo[t2] + w2 / 2, hi[t2] - w2 / 2 + 1e-9))
        blo, bhi = slab(f + s * GAP, f + s * (GAP + th), c1, w1, c2, w2)
        b.part(name, S.box(blo, bhi), "slider")
        travel = (size1 - w1 - 2 * GAP) * float(u(0.5, 1.0))
        b.joint("prismatic", parent, name, _unit(t1, side), (blo + bhi) / 2, (0.0, travel))
        return blo, bhi
    if kind == "piston":
        th = float(u(0.03, 0.12))
        w1, w2 = float(u(0.15, 0.5)) * size1, float(u(0.15, 0.5)) * size2
        c1 = float(u(lo[t1] + w1 / 2, hi[t1] - w1 / 2 + 1e-9))
        c2 = float(u(lo[t2] + w2 / 2, hi[t2] - w2 / 2 + 1e-9))
        blo, bhi = slab(f + s * GAP, f + s * (GAP + th), c1, w1, c2, w2)
        b.part(name, S.box(blo, bhi), "piston")
        b.joint("prismatic", parent, name, n, (blo + bhi) / 2, (0.0, float(u(0.05, 0.3))))
        return blo, bhi
    if kind == "rotor":
        from kinemesh.data.articulated import axis_angle_matrix

        hub_r = float(u(0.01, 0.03))
        reach = 0.5 * min(size1, size2) * float(u(0.6, 1.0))  # blade tips inside the face's inscribed circle
        if reach < 2 * hub_r + 0.02:
            raise ValueError("face too small for a rotor")
        c1 = float(u(lo[t1] + reach, hi[t1] - reach + 1e-9))
        c2 = float(u(lo[t2] + reach, hi[t2] - reach + 1e-9))
        h = float(u(0.02, 0.06))
        p0 = np.zeros(3)
        p0[a], p0[t1], p0[t2] = f + s * GAP, c1, c2
        mid = p0 + n * (0.5 * h)
        meshes = [S.cylinder(hub_r, p0, p0 + n * h, 16)]
        nb = int(rng.integers(2, 6))
        bw, bt = float(u(0.15, 0.35)) * reach, float(u(0.004, 0.01))
        pitch, phase = float(u(0.0, 0.5)), float(u(0, 2 * np.pi))
        for k in range(nb):
            blade = S.box([hub_r * 0.5, -bw / 2, -bt / 2], [reach, bw / 2, bt / 2])  # along +x, flat in xy
            rot = axis_angle_matrix(np.array([1.0, 0, 0]), pitch)  # pitched about its own length
            frame = np.stack([_unit(t1), _unit(t2), n], axis=1)  # local x, y, z -> face tangents, normal
            spin = axis_angle_matrix(n, phase + 2 * np.pi * k / nb)
            blade.vertices = (np.asarray(blade.vertices) @ rot.T) @ frame.T @ spin.T + mid
            meshes.append(blade)
        b.part(name, S.union(meshes), "rotor")
        b.joint("continuous", parent, name, n, p0, None)
        return None
    if kind == "wheel":
        rad = float(u(0.03, 0.12))
        w = float(u(0.02, 0.06))
        if size2 < w + 0.02 or size1 < 2 * rad:
            raise ValueError("face too small for a wheel")
        c1 = float(u(lo[t1] + rad, hi[t1] - rad + 1e-9))
        c2 = float(u(lo[t2] + w / 2, hi[t2] - w / 2 + 1e-9))
        c = np.zeros(3)
        c[a], c[t1], c[t2] = f + s * (GAP + rad), c1, c2
        ax = _unit(t2)
        tyre = S.cylinder(rad, c - ax * (w / 2), c + ax * (w / 2), 24)
        slo, shi = c - 0.9 * rad, c + 0.9 * rad  # a spoke bar through the hub, across the wheel's face
        slo[t2], shi[t2] = c[t2] + w / 2 - 1e-3, c[t2] + w / 2 + 0.01
        slo[a], shi[a] = c[a] - 0.15 * rad, c[a] + 0.15 * rad
        b.part(name, S.union([tyre, S.box(slo, shi)]), "wheel")
        b.joint("continuous", parent, name, ax, c, None)
        return None
    # knob
    rad = float(u(0.015, 0.05))
    h = float(u(0.015, 0.05))
    c1 = float(u(lo[t1] + rad, hi[t1] - rad + 1e-9))
    c2 = float(u(lo[t2] + rad, hi[t2] - rad + 1e-9))
    p0 = np.zeros(3)
    p0[a], p0[t1], p0[t2] = f + s * GAP, c1, c2
    cyl = S.cylinder(rad, p0, p0 + n * h, 16)
    rlo, rhi = slab(f + s * (GAP + 0.5 * h), f + s * (GAP + 1.3 * h), c1, 0.25 * rad, c2, 1.8 * rad)
    b.part(name, S.union([cyl, S.box(rlo, rhi)]), "knob")
    b.joint("continuous", parent, name, n, p0, None)
    return None
