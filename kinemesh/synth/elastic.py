"""Elastic soft bodies simulated with MuJoCo ``flexcomp dim="3"`` (linear-elastic tetrahedra).

Shapes (watertight surfaces from primitives): ``beam``, ``stem`` (a stalk with a bulb, pinned base),
``blob``, ``torus``, ``toy`` (a little animal from ellipsoids and cylinders), and the soft set ``plush``
(toy animals: the ``toy`` quadruped, a seated teddy, a long-eared bunny), ``beanbag`` (a lumpy sack with a flat
bottom), ``cylinder`` (upright or lying) and ``rod`` (a long capsule or bar). Actions: ``drop`` (fall onto the
floor, optional initial velocity), ``poke`` (impulse at a surface point), ``push`` (constant force on a region),
``twist`` (pinned base, torque on the top), ``wind`` (pinned base bent by a gusting lateral wind), and for the soft
set ``probe`` (a small rigid sphere driven into the body and back), ``squash`` (between the floor and a
descending plate, or under a dropped weight), ``press`` (a force on a patch pressing the body into the floor),
``hang`` (held by one point in the air and released) and ``bend`` (a cantilever rod clamped at one end, its tip
pushed). Material (Young's modulus E Pa, Poisson ratio, damping, density) is randomized; the soft set is softer
(E down to a few kPa) and its probe, squash and press are sized by a target strain of 5-45%, so its sequences
carry real shape change. The recorded mesh is the smooth input surface embedded in the simulated tetrahedral
cage (see ``tetra``).
"""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.data.sequence import KinematicSequence
from kinemesh.synth import shapes as S
from kinemesh.synth.flexsim import FlexRun, edge_strain, run_with_retries
from kinemesh.synth.mjcf import add_floor, flexcomp_spec, new_spec
from kinemesh.synth.tetra import build_cage

LEGACY_SHAPES = ("beam", "stem", "blob", "torus", "toy")  # the first data set: their random streams never change
SOFT_SHAPES = ("plush", "beanbag", "cylinder", "rod")  # the soft set: softer, with local and large shape change
SHAPES = LEGACY_SHAPES + SOFT_SHAPES
ACTIONS = {
    "beam": ("drop", "poke", "push", "twist", "wind"),
    "stem": ("poke", "push", "twist", "wind"),
    "blob": ("drop", "poke", "push"),
    "torus": ("drop", "poke", "push", "twist"),
    "toy": ("drop", "poke", "push", "twist"),
    "plush": ("drop", "poke", "probe", "squash", "hang", "twist"),  # no press: it buckles thin legs flat
    "beanbag": ("drop", "poke", "probe", "squash", "press", "hang"),
    "cylinder": ("drop", "probe", "squash", "press", "twist", "hang"),
    "rod": ("probe", "twist", "bend"),  # no hang (a thin rod gripped at a point folds and inverts); drops stay rigid
}
PINNED_ACTIONS = ("twist", "wind")
CLAMPED_SHAPES = ("beam", "rod")  # long shapes lying along x: twist and bend clamp their x-min end
# a soft-set sequence is dropped when its shape changes less than all of: peak strain (95th percentile of the edges),
# local strain (99th percentile: a dent) and non-rigid displacement relative to the size (a thin rod's bend)
MIN_SOFT_STRAIN, MIN_SOFT_LOCAL_STRAIN, MIN_SOFT_NONRIGID = 0.02, 0.05, 0.05


def _ellipsoid(radii, center, subdivisions: int = 3) -> trimesh.Trimesh:
    m = trimesh.creation.icosphere(subdivisions=subdivisions, radius=1.0)
    m.apply_scale(radii)
    m.apply_translation(center)
    return m


def _quadruped(rng: np.random.Generator) -> trimesh.Trimesh:
    """The ``toy``: a four-legged animal (body, head, legs, ears), 0.15-0.3 m long, standing on z = 0."""
    u = rng.uniform
    s = u(0.06, 0.1)
    body = _ellipsoid([s * u(1.2, 1.6), s * u(0.8, 1.0), s * u(0.7, 0.9)], [0, 0, 1.4 * s], 2)
    head = _ellipsoid([s * 0.6] * 3, [s * u(1.3, 1.7), 0, 2.1 * s], 2)
    legs = [
        S.cylinder(s * 0.22, [x * s, y * s, 0.0], [x * s, y * s, 1.2 * s], 12)
        for x in (-0.8, 0.8)
        for y in (-0.45, 0.45)
    ]
    ears = [_ellipsoid([s * 0.12, s * 0.15, s * 0.3], [s * 1.5, y * s * 0.35, 2.6 * s], 1) for y in (-1, 1)]
    return S.refine(S.union([body, head, *legs, *ears]), s * 0.4)


def _soft_set_shape(name: str, rng: np.random.Generator) -> trimesh.Trimesh:
    """A watertight surface of a soft-set shape (``SOFT_SHAPES``), metres, standing on z = 0."""
    u = rng.uniform
    if name == "plush":
        variant = str(rng.choice(["quadruped", "teddy", "bunny"]))
        if variant == "quadruped":
            return _quadruped(rng)
        s = u(0.05, 0.09)
        if variant == "teddy":  # seated: belly, head, round ears, arms and legs reaching forward (+x)
            parts = [
                _ellipsoid([s * u(0.8, 1.0), s * u(0.9, 1.1), s * u(1.1, 1.4)], [0, 0, 1.2 * s], 2),
                _ellipsoid([s * 0.7] * 3, [0, 0, 2.7 * s], 2),
                *[_ellipsoid([s * 0.1, s * 0.25, s * 0.25], [0, y * s * 0.5, 3.3 * s], 1) for y in (-1, 1)],
                *[S.capsule(s * 0.22, [0, y * s * 0.9, 1.9 * s], [s * 0.6, y * s * 1.1, 1.0 * s]) for y in (-1, 1)],
                *[S.capsule(s * 0.28, [0, y * s * 0.5, 0.4 * s], [s * 1.3, y * s * 0.6, 0.29 * s]) for y in (-1, 1)],
            ]
        else:  # bunny: a round body, a head with two long ears
            L = s * u(0.8, 1.4)
            parts = [
                _ellipsoid([s * u(1.0, 1.3), s * 0.9, s * 0.85], [0, 0, 0.85 * s], 2),
                _ellipsoid([s * 0.6] * 3, [s * 0.9, 0, 1.8 * s], 2),
                *[S.capsule(s * 0.13, [s * 0.8, y * s * 0.3, 2.2 * s], [s * 0.6, y * s * 0.5, 2.2 * s + L])
                  for y in (-1, 1)],
                _ellipsoid([s * 0.3] * 3, [-s * 1.15, 0, 0.8 * s], 1),  # tail
            ]
        m = S.refine(S.union(parts), s * 0.4)
    elif name == "beanbag":  # a lumpy sack: an ellipsoid with low-frequency bumps, flat where it rests
        a, b, c = u(0.05, 0.12), u(0.05, 0.12), u(0.03, 0.07)
        m = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
        n = m.vertices.copy()
        dirs = rng.normal(size=(4, 3))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        r = 1.0 + sum(u(0.03, 0.08) * np.cos(u(2.0, 4.0) * n @ d + u(0, 2 * np.pi)) for d in dirs)
        v = n * r[:, None] * [a, b, c]
        v[:, 2] = np.maximum(v[:, 2], -c * u(0.5, 0.8))  # the flattened bottom it sits on
        m = trimesh.Trimesh(v, m.faces, process=False)
    elif name == "cylinder":
        r = u(0.03, 0.08)
        h = u(max(0.08, r), 0.3)
        m = S.cylinder(r, [0, 0, 0], [0, 0, h], 24)
        if rng.random() < 0.4:  # lying on its side
            m.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 2, [0, 1, 0]))
        m = S.refine(m, max(r, h) / 5)
    else:  # rod: a capsule or a square bar along x
        L, r = u(0.2, 0.5), u(0.015, 0.045)
        if rng.random() < 0.6:
            m = S.capsule(r, [-L / 2, 0, 0], [L / 2, 0, 0])
        else:
            m = S.box([-L / 2, -r, -r], [L / 2, r, r])
        m = S.refine(m, L / 16)
    m.apply_translation([0, 0, -m.bounds[0][2]])
    return m


def soft_shape(name: str, rng: np.random.Generator) -> trimesh.Trimesh:
    """A random watertight surface of the named soft shape (metres, resting on z = 0, ~600-1500 vertices)."""
    u = rng.uniform
    if name == "beam":
        L, w, h = u(0.3, 0.7), u(0.04, 0.1), u(0.04, 0.1)
        m = S.refine(S.box([-L / 2, -w / 2, 0], [L / 2, w / 2, h]), max(L / 14, max(w, h) / 2.5))
    elif name == "stem":
        H, r = u(0.25, 0.5), u(0.012, 0.025)
        stalk = S.cylinder(r, [0, 0, 0], [0, 0, H], 12)
        bulb = _ellipsoid([u(2.0, 4.0) * r] * 2 + [u(2.0, 4.0) * r], [0, 0, H])
        m = S.union([stalk, bulb])
        m = S.refine(m, H / 8)
    elif name == "blob":
        m = _ellipsoid([u(0.05, 0.12), u(0.05, 0.12), u(0.04, 0.1)], [0, 0, 0])
        m.apply_translation([0, 0, -m.bounds[0][2]])
    elif name == "torus":
        R = u(0.07, 0.14)
        m = S.torus(R, R * u(0.25, 0.45), (0, 0, 0), (0, 0, 1) if rng.random() < 0.6 else (1, 0, 0), 28)
        m.apply_translation([0, 0, -m.bounds[0][2]])
    elif name == "toy":
        m = _quadruped(rng)
    elif name in SOFT_SHAPES:
        m = _soft_set_shape(name, rng)
    else:
        from kinemesh.errors import ConfigError

        raise ConfigError(f"unknown soft shape {name!r}; choose from {SHAPES}")
    return m


def elastic_sequence(
    shape: str,
    rng: np.random.Generator,
    action: str | None = None,
    mesh: trimesh.Trimesh | None = None,
    young: float | None = None,
    poisson: float | None = None,
    damping: float | None = None,
    duration: float = 1.2,
    n_frames: int = 24,
    resolution: int | None = None,
    timestep: float = 0.004,
) -> KinematicSequence:
    """Simulate a soft body and return its surface motion as a KinematicSequence.

    ``shape`` names the category (and the generated surface when ``mesh`` is None); ``action`` is one of
    ``ACTIONS[shape]`` (random when None). Material parameters are random when None: E in [1.5e4, 3e5] Pa
    (log-uniform), Poisson in [0.2, 0.45], damping in [2e-4, 5e-3] s (log-uniform), density 300-1200 kg/m^3;
    the soft set (``SOFT_SHAPES``) is softer, see ``soft_material``. ``resolution``: tetrahedral cage cells along
    the longest side (default 6, soft set 7). ``meta["measures"]`` holds the peak edge strain (``edge_strain``),
    the largest displacement relative to the size and the smallest height ratio. Raises SimulationDivergedError
    when the simulation diverges even with smaller steps and gentler actions, and KinemeshError when a soft-set
    run changes shape by less than ``MIN_SOFT_STRAIN``.
    """
    from kinemesh.errors import SimulationDivergedError

    if mesh is None:
        mesh = soft_shape(shape, rng)
    action = action or str(rng.choice(ACTIONS.get(shape, ("drop", "poke", "push"))))
    if shape in SOFT_SHAPES:
        density, E, nu, damp = soft_material(shape, action, mesh, rng, young, poisson, damping)
    else:
        E = float(young if young is not None else np.exp(rng.uniform(np.log(1.5e4), np.log(3e5))))
        nu = float(poisson if poisson is not None else rng.uniform(0.2, 0.45))
        damp = float(damping if damping is not None else np.exp(rng.uniform(np.log(2e-4), np.log(5e-3))))
        density = float(rng.uniform(300, 1200))
    cage = build_cage(mesh, resolution=resolution or (7 if shape in SOFT_SHAPES else 6))
    seed = int(rng.integers(1 << 31))
    errors = []
    # a diverged run is retried with a smaller step (inside), then with a gentler action; never written
    for strength in (1.0, 0.5, 0.25):
        try:
            return _simulate(
                shape,
                mesh,
                cage,
                action,
                E,
                nu,
                damp,
                density,
                np.random.default_rng(seed),
                strength,
                duration,
                n_frames,
                timestep,
            )
        except SimulationDivergedError as exc:
            errors.append(str(exc))
    raise SimulationDivergedError(f"{shape}/{action}: diverged at every strength: {errors[-1]}")


def soft_material(shape, action, mesh, rng, young=None, poisson=None, damping=None):
    """(density kg/m^3, E Pa, Poisson, damping s) of a soft-set body, random where None.

    Density (kg/m^3): plush 80-300 (stuffed), beanbag 200-700, cylinder 100-600 (foam), rod 300-1200. E is
    log-uniform from E0 = max(3 kPa, 12 rho g h), so the body sags by at most ~8% under its own weight on the floor
    (h: its height, m), to 3 E0 (poke), 5 E0 (drop) or 10 E0 (others); rods are stiffer (E0 = 20 kPa, up to
    12.5 E0) so a clamped rod bends visibly without flopping.
    ``hang`` derives E from a target self-weight strain of 5-20% (E = rho g h / strain, h: the largest extent).
    Poisson 0.2-0.4, damping 5e-4-5e-3 s (log-uniform).
    """
    u = rng.uniform
    ext = np.ptp(mesh.vertices, axis=0)
    rod = shape == "rod"
    density = float(u(*{"plush": (80, 300), "beanbag": (200, 700), "cylinder": (100, 600)}.get(shape, (300, 1200))))
    if action == "hang":
        E = density * 9.81 * float(ext.max()) / u(0.05, 0.2)
    else:
        lo = max(2e4 if rod else 3e3, 12 * density * 9.81 * float(ext[2]))
        # a free body poked or dropped shows its shape change only when soft: E within 3x / 5x of the floor
        hi = 12.5 * lo if rod else {"poke": 3.0, "drop": 5.0}.get(action, 10.0) * lo
        E = float(np.exp(u(np.log(lo), np.log(hi))))
    E = float(young if young is not None else E)
    nu = float(poisson if poisson is not None else u(0.2, 0.4))
    damp = float(damping if damping is not None else np.exp(u(np.log(5e-4), np.log(5e-3))))
    return density, E, nu, damp


def _squash_variant(shape: str, rng: np.random.Generator) -> str:
    """How a body is squashed: ``sides`` (two plates closing horizontally; always for a plush, whose ears a
    plate from above would crush), ``plate`` (from above) or ``weight`` (a box dropped on top)."""
    if shape == "plush":
        return "sides"
    return str(rng.choice(["sides", "plate", "weight"], p=[0.3, 0.4, 0.3]))


def _unit2(rng: np.random.Generator) -> np.ndarray:
    """A random horizontal unit vector (2,)."""
    a = float(rng.uniform(0, 2 * np.pi))
    return np.array([np.cos(a), np.sin(a)])


def _ramp(t: float, t0: float, t_on: float) -> float:
    """A half-sine pulse: 0 before ``t0``, peak 1 at ``t0 + t_on / 2``, 0 after ``t0 + t_on`` (s)."""
    return float(np.sin(np.pi * (t - t0) / t_on)) if t0 <= t < t0 + t_on else 0.0


def _trapezoid(t: float, t0: float, t_in: float, t_hold: float) -> float:
    """0 before ``t0``, rising linearly to 1 over ``t_in``, held ``t_hold``, falling back over ``t_in`` (s)."""
    a = (t - t0) / t_in
    return float(np.clip(min(a, 2.0 + t_hold / t_in - a), 0.0, 1.0))


def _solid(nodes: np.ndarray, cell: float, candidates: np.ndarray) -> np.ndarray:
    """The ``candidates`` (node indices) with at least 15 of their 26 grid neighbours in the cage: not on a
    feature one cell thin (an ear, a leg) that a probe or plate would crush flat and invert; all of them when
    none is."""
    from scipy.spatial import cKDTree

    count = np.array([len(n) for n in cKDTree(nodes).query_ball_point(nodes[candidates], 1.75 * cell)]) - 1
    return candidates[count >= 15] if (count >= 15).any() else candidates


def _simulate(shape, mesh, cage, action, E, nu, damp, density, rng, strength, duration, n_frames, timestep):
    nodes = cage.nodes.copy()
    cell = float(np.min(np.linalg.norm(nodes[cage.tets[:, 1]] - nodes[cage.tets[:, 0]], axis=1)))
    size = float(np.max(np.ptp(mesh.vertices, axis=0)))
    volume = float(abs(mesh.volume))
    mass = density * volume
    zmin = nodes[:, 2].min()
    lift = 0.0
    cond: dict = {"action": action, "strength": strength}
    pins = np.zeros(0, int)
    if action in PINNED_ACTIONS or (shape == "stem"):
        pins = np.where(nodes[:, 2] <= zmin + 1e-6)[0]
        if shape in CLAMPED_SHAPES and action in PINNED_ACTIONS:  # cantilever: clamp one end
            pins = np.where(nodes[:, 0] <= nodes[:, 0].min() + 1e-6)[0]
        cond["pinned_nodes"] = len(pins)
    if action == "hang":  # held by one point (a surface node, usually high up) in the air, then let go
        bnd = np.unique(cage.boundary_faces())
        top = bnd[nodes[bnd, 2] >= nodes[:, 2].max() - 0.3 * np.ptp(nodes[:, 2])]
        handle = int(rng.choice(_solid(nodes, cell, top if rng.random() < 0.7 else bnd)))
        reach = np.linalg.norm(nodes - nodes[handle], axis=1)
        pins = np.where(reach <= max(2.01 * cell, 0.12 * size))[0]  # a hand's grip, not a single node
        # high enough that the body, stretched by half its reach, still hangs clear of the floor
        lift = max(0.02, 1.5 * float(reach.max()) + 0.02 - float(nodes[handle, 2] - zmin))
        cond.update(pinned_nodes=len(pins), handle_node=handle, height=lift)
    elif action == "bend":  # a cantilever: the x-min end clamped in the air, free to sag down to vertical
        x = nodes[:, 0]
        pins = np.where(x <= x.min() + max(0.1 * np.ptp(x), 1.01 * cell))[0]
        lift = 1.05 * float(np.ptp(x)) + 0.02
        cond.update(pinned_nodes=len(pins), height=lift)
    if action == "drop":
        lift = float(rng.uniform(0.02, 0.2)) * strength * (2.0 if shape in SOFT_SHAPES else 1.0)  # soft: to 0.4 m
        cond["height"] = lift
        vel = np.r_[rng.normal(0, 0.4, 2), -rng.uniform(0, 1.0)] * strength
        cond["initial_velocity"] = vel.tolist()
    elif action not in ("hang", "bend"):
        lift = 0.003 if len(pins) == 0 else 0.0
    offset = np.array([0.0, 0.0, lift - min(zmin, 0.0)])
    nodes = nodes + offset
    rest_surface = cage.surface(nodes)
    centroid = nodes.mean(0)
    node_mass = mass / len(nodes)

    init_vel = None
    if action == "drop":
        init_vel = np.tile(np.asarray(cond["initial_velocity"]), (len(nodes), 1))
    force_fn = None
    mocaps: list[dict] = []  # rigid mocap bodies driven along a path: {"geom": attrs, "path": t -> pos, "quat"}
    weights: list[dict] = []  # free rigid bodies: {"geom": attrs, "pos"}
    if action == "poke":
        upper = np.where(nodes[:, 2] >= np.median(nodes[:, 2]))[0]
        tgt = nodes[int(rng.choice(upper))]
        d = np.linalg.norm(nodes - tgt, axis=1)
        reg = np.where(d < 0.4 * size)[0]
        direction = centroid - tgt
        direction[2] = rng.uniform(0.0, 0.6) * np.linalg.norm(direction[:2])
        direction /= max(np.linalg.norm(direction), 1e-9)
        # an impulse: a short, strong force pulse on the region (J = M * dv)
        dv = float(rng.uniform(0.8, 2.5)) * strength
        t_on = 0.06
        fvec = direction * dv / t_on * mass / len(reg)
        cond.update(point=tgt.tolist(), direction=direction.tolist(), impulse=float(dv * mass), duration=t_on)
        force_fn = lambda t, x: (reg, np.broadcast_to(fvec, (len(reg), 3))) if t < t_on else None
        if shape in SOFT_SHAPES:
            # a local poke, as a user's poke at a vertex: a region of the surface (solid, not a thin ear) starts
            # at 2-6 m/s, falling off from the poked point; the rest of the body starts at rest
            tgt = nodes[int(rng.choice(_solid(nodes, cell, upper)))]
            d = np.linalg.norm(nodes - tgt, axis=1)
            r = max(float(rng.uniform(0.15, 0.3)) * size, 2.5 * cell)
            horiz = (centroid - tgt)[:2]
            horiz = horiz / np.linalg.norm(horiz) if np.linalg.norm(horiz) > 1e-6 * size else _unit2(rng)
            elev = float(rng.uniform(-0.3, 1.0))  # rad below the horizon
            direction = np.r_[np.cos(elev) * horiz, -np.sin(elev)]
            init_vel = np.outer(np.clip(1 - d / r, 0, 1), direction * 2.5 * dv)  # 2-6 m/s at the point
            cond.update(point=tgt.tolist(), direction=direction.tolist(), speed=2.5 * dv, radius=r, duration=0.0)
            cond.pop("impulse")
            force_fn = None
    elif action == "push":
        tgt = nodes[int(rng.integers(len(nodes)))]
        d = np.linalg.norm(nodes - tgt, axis=1)
        reg = np.where(d < 0.3 * size)[0]
        direction = np.r_[rng.normal(0, 1, 2), rng.uniform(-0.5, 0.2)]
        direction /= np.linalg.norm(direction)
        accel = float(rng.uniform(4, 15)) * strength  # m/s^2 of the whole body, on the pushed region
        t_on = float(rng.uniform(0.2, 0.6))
        fvec = direction * accel * mass / len(reg)
        cond.update(
            point=tgt.tolist(), direction=direction.tolist(), force_per_node=fvec.tolist(), duration=t_on
        )
        force_fn = lambda t, x: (reg, np.broadcast_to(fvec, (len(reg), 3))) if t < t_on else None
    elif action == "twist":
        top = np.where(nodes[:, 2] >= nodes[:, 2].max() - 0.25 * np.ptp(nodes[:, 2]))[0]
        if shape in CLAMPED_SHAPES:
            top = np.where(nodes[:, 0] >= nodes[:, 0].max() - 0.2 * np.ptp(nodes[:, 0]))[0]
        axis = np.array([1.0, 0, 0]) if shape in CLAMPED_SHAPES else np.array([0, 0, 1.0])
        accel = float(rng.uniform(5, 25)) * (1 if rng.random() < 0.5 else -1) * strength
        accel *= 3.0 if shape in SOFT_SHAPES else 1.0  # 15-75 m/s^2: a soft body's twist shows
        t_on = float(rng.uniform(0.4, 1.0))
        cond.update(axis=axis.tolist(), tangential_accel=accel, duration=t_on)

        def force_fn(t, x, top=top, axis=axis, accel=accel, t_on=t_on):
            if t >= t_on:
                return None
            c = x[top].mean(0)
            r = x[top] - c
            tang = np.cross(axis, r)
            n = np.linalg.norm(tang, axis=1, keepdims=True)
            return top, tang / np.maximum(n, 1e-9) * (accel * mass / len(top)) * np.minimum(
                n / (0.3 * size), 1.0
            )
    elif action == "wind":
        wdir = np.r_[rng.normal(0, 1, 2), 0.0]
        wdir /= np.linalg.norm(wdir)
        accel = float(rng.uniform(3, 15)) * strength
        freq = float(rng.uniform(0.5, 2.0))
        cond.update(direction=wdir.tolist(), accel=accel, gust_frequency_hz=freq)
        allnodes = np.arange(len(nodes))

        def force_fn(t, x, wdir=wdir, accel=accel, freq=freq):
            g = 0.6 + 0.4 * np.sin(2 * np.pi * freq * t)
            h = np.clip((x[:, 2] - zmin) / max(np.ptp(nodes[:, 2]), 1e-6), 0, 1)  # stronger higher up
            return allnodes, (wdir * accel * node_mass * g)[None] * (0.3 + h[:, None])

    elif action in ("probe", "squash", "press"):
        top_z = float(nodes[:, 2].max())
        height = float(np.ptp(nodes[:, 2]))
        strain = float(rng.uniform(0.08, 0.35)) * strength  # target compression of the probed thickness
        t0 = float(rng.uniform(0.03, 0.15))
        t_hold = float(rng.uniform(0.1, 0.4))
        # the area the body stands on (m^2): a load sized by the patch alone would crush thin legs flat
        support = float(np.sum(nodes[:, 2] <= nodes[:, 2].min() + 0.5 * cell)) * cell**2
        cond.update(target_strain=strain, start=t0, hold=t_hold)
        if action == "probe":  # a small rigid sphere driven into the body, held, pulled back
            bnd = np.unique(cage.boundary_faces())
            upper = bnd[nodes[bnd, 2] >= np.median(nodes[:, 2])]
            tgt = nodes[int(rng.choice(_solid(nodes, cell, upper)))]
            horiz = np.r_[(centroid - tgt)[:2], 0.0]
            horiz /= max(np.linalg.norm(horiz), 1e-9)
            elev = float(rng.uniform(np.pi / 6, np.pi / 2))  # approach angle below the horizon
            direction = np.cos(elev) * horiz + np.sin(elev) * np.array([0.0, 0.0, -1.0])
            radius_p = max(float(rng.uniform(0.1, 0.25)) * size, 1.5 * cell)
            depth = strain * float(np.ptp(nodes @ direction))
            start = tgt - direction * (radius_p + 0.01)
            while np.linalg.norm(nodes - start, axis=1).min() < radius_p + 0.005:  # clear of the whole body
                start = start - direction * 0.005
            travel = float(np.linalg.norm(tgt - start)) - radius_p + depth
            speed = max(float(rng.uniform(0.2, 1.0)), travel / 0.5)
            cond.update(point=tgt.tolist(), direction=direction.tolist(), probe_radius=radius_p, depth=depth,
                        speed=speed)
            mocaps.append({"geom": {"type": "sphere", "size": [radius_p, 0, 0]}, "quat": [1, 0, 0, 0],
                           "path": lambda t, a=start, d=direction * travel, tt=travel / speed:
                           a + d * _trapezoid(t, t0, tt, t_hold)})
        elif action == "squash" and (squash := _squash_variant(shape, rng)) == "sides":
            # between two upright plates closing in along a horizontal axis (ears and limbs stay free)
            phi = float(rng.uniform(0, np.pi))
            axis = np.array([np.cos(phi), np.sin(phi), 0.0])
            proj = nodes @ axis
            half = [0.01, 0.6 * size + 0.02, 0.6 * height + 0.02]
            c = centroid - axis * (centroid @ axis)
            starts = [c + axis * (proj.max() + half[0] + 0.005), c + axis * (proj.min() - half[0] - 0.005)]
            for a in starts:
                a[2] = 0.5 * (top_z + nodes[:, 2].min())
            travel = 0.005 + 0.5 * strain * float(np.ptp(proj))
            speed = max(float(rng.uniform(0.15, 0.6)), travel / 0.45)
            quat = [np.cos(phi / 2), 0.0, 0.0, np.sin(phi / 2)]
            cond.update(squash="sides", axis=axis.tolist(), travel=travel, speed=speed)
            for a, sign in zip(starts, (-1.0, 1.0)):
                mocaps.append({"geom": {"type": "box", "size": half}, "quat": quat,
                               "path": lambda t, a=a, d=sign * axis * travel, tt=travel / speed:
                               a + d * _trapezoid(t, t0, tt, t_hold)})
        elif action == "squash" and squash == "weight":  # under a dropped weight: m g = strain E A
            ext = np.ptp(nodes, axis=0)
            area = min(0.5 * float(ext[0] * ext[1]), support)
            M = float(np.clip(strain * E * area / 9.81, 0.2 * mass, 50 * mass))
            half = [0.45 * float(ext[0]) + 0.01, 0.45 * float(ext[1]) + 0.01, 0.015]
            weights.append({"geom": {"type": "box", "size": half, "mass": M},
                            "pos": [centroid[0], centroid[1], top_z + half[2] + 0.003]})
            cond.update(squash="weight", weight_mass=M, weight_half_extents=half)
        elif action == "squash":  # between the floor and a (slightly tilted) plate that descends and rises
            ext = np.ptp(nodes, axis=0)
            half = [0.6 * float(ext[0]) + 0.02, 0.6 * float(ext[1]) + 0.02, 0.01]
            tilt = float(rng.uniform(0, 0.15))
            ax = rng.normal(size=2)
            ax /= np.linalg.norm(ax)
            quat = np.r_[np.cos(tilt / 2), np.sin(tilt / 2) * ax, 0.0]
            start = np.array([centroid[0], centroid[1], top_z + half[2] + 0.005])
            travel = 0.005 + strain * height
            speed = max(float(rng.uniform(0.15, 0.6)), travel / 0.45)
            cond.update(squash="plate", plate_tilt=tilt, travel=travel, speed=speed)
            mocaps.append({"geom": {"type": "box", "size": half}, "quat": quat.tolist(),
                           "path": lambda t, a=start, tt=travel / speed:
                           a - np.array([0, 0, travel]) * _trapezoid(t, t0, tt, t_hold)})
        else:  # press: a force on a patch of the top pressing the body into the floor, F = strain E pi r^2
            upper = np.where(nodes[:, 2] >= np.median(nodes[:, 2]))[0]
            tgt = nodes[int(rng.choice(_solid(nodes, cell, upper)))]
            r = float(rng.uniform(0.15, 0.35)) * size
            d = np.linalg.norm(nodes - tgt, axis=1)
            reg = np.argsort(d)[: max(4, int(np.sum(d < r)))]
            tilt = float(rng.uniform(0, 0.2))
            az = float(rng.uniform(0, 2 * np.pi))
            direction = np.array([np.sin(tilt) * np.cos(az), np.sin(tilt) * np.sin(az), -np.cos(tilt)])
            force = strain * E * min(np.pi * r**2, support)
            t_in = float(rng.uniform(0.1, 0.3))
            cond.update(point=tgt.tolist(), direction=direction.tolist(), radius=r, force=force, ramp=t_in)
            fvec = direction * force / len(reg)
            force_fn = lambda t, x: (reg, np.broadcast_to(fvec * _trapezoid(t, t0, t_in, t_hold), (len(reg), 3)))
    elif action == "bend":
        tip = np.where(nodes[:, 0] >= nodes[:, 0].max() - 0.15 * np.ptp(nodes[:, 0]))[0]
        phi = float(rng.uniform(0, 2 * np.pi))
        direction = np.array([0.0, np.cos(phi), np.sin(phi)])
        accel = float(rng.uniform(3, 20)) * strength  # m/s^2 of the whole body, on the tip
        t0, t_on = float(rng.uniform(0.05, 0.3)), float(rng.uniform(0.2, 0.6))
        cond.update(direction=direction.tolist(), tip_accel=accel, start=t0, duration=t_on)
        fvec = direction * accel * mass / len(tip)
        force_fn = lambda t, x: (tip, np.broadcast_to(fvec * _ramp(t, t0, t_on), (len(tip), 3)))

    radius = 0.15 * float(np.min(np.linalg.norm(nodes[cage.tets[:, 1]] - nodes[cage.tets[:, 0]], axis=1)))
    friction = float(rng.uniform(0.4, 1.0))
    children = {"elasticity": {"young": E, "poisson": nu, "damping": damp},
                "contact": {"selfcollide": "none", "condim": 3, "solref": [0.005, 1]}}
    if len(pins):
        children["pin"] = {"id": pins}

    def make_spec(dt: float):
        import mujoco

        spec = flexcomp_spec("soft", {"type": "direct", "dim": 3, "dof": "full", "radius": radius, "mass": mass,
                                      "point": nodes, "element": cage.tets}, children)
        add_floor(new_spec("soft", dt, "discrete", spec=spec), 10.0, friction=[friction, 0.005, 0.0001])
        for i, b in enumerate(mocaps + weights):
            body = spec.worldbody.add_body(name=f"rigid{i}", mocap=i < len(mocaps),
                                           pos=b["path"](0.0) if "path" in b else b["pos"], quat=b.get("quat", [1, 0, 0, 0]))
            if i >= len(mocaps):
                body.add_freejoint()
            body.add_geom(**{**b["geom"], "type": getattr(mujoco.mjtGeom, f"mjGEOM_{b['geom']['type'].upper()}")})
        return spec

    def controller(model, data, t, vert_body):
        if t == 0.0 and init_vel is not None:
            _set_vertex_velocity(model, data, vert_body, init_vel)
        for k, m in enumerate(mocaps):
            data.mocap_pos[k] = m["path"](t)
        if force_fn is None:
            return
        out = force_fn(t, data.flexvert_xpos)
        if out is None:
            return
        ids, f = out
        b = vert_body[ids]
        movable = b > 0
        np.add.at(data.xfrc_applied, (b[movable], slice(0, 3)), f[movable])

    run = FlexRun(make_spec, duration, n_frames, controller, size=size, tets=cage.tets)
    node_frames, times, dt_used = run_with_retries(run, timestep, retries=1)
    frames = cage.surface(node_frames).astype(np.float32)
    strain = edge_strain(rest_surface, frames, mesh.faces)
    measures = {
        "peak_strain": float(strain.max()),
        "peak_strain_time": float(times[int(np.argmax(strain))]),
        "peak_local_strain": float(edge_strain(rest_surface, frames, mesh.faces, q=99.0).max()),
        "max_nonrigid": _max_nonrigid(rest_surface, frames) / size,
        "max_displacement": float(np.linalg.norm(frames - rest_surface[None], axis=-1).max() / size),
        "min_height_ratio": float(np.ptp(frames[:, :, 2], axis=1).min() / np.ptp(rest_surface[:, 2])),
    }
    if (shape in SOFT_SHAPES and measures["peak_strain"] < MIN_SOFT_STRAIN
            and measures["peak_local_strain"] < MIN_SOFT_LOCAL_STRAIN and measures["max_nonrigid"] < MIN_SOFT_NONRIGID):
        from kinemesh.errors import KinemeshError

        raise KinemeshError(f"{shape}/{action}: too little shape change (peak strain {measures['peak_strain']:.3f}, "
                            f"local {measures['peak_local_strain']:.3f}, non-rigid {measures['max_nonrigid']:.3f})")
    meta = {
        "category": shape,
        "kind": "elastic",
        "source": "kinemesh.synth.mujoco_flex",
        "units": "m",
        "up": "z",
        "conditions": cond,
        "measures": measures,
        "material": {"young": E, "poisson": nu, "damping": damp, "density": density, "friction": friction},
        "simulation": {
            "engine": "mujoco",
            "integrator": "discrete",
            "timestep": dt_used,
            "tet_nodes": len(nodes),
            "tets": len(cage.tets),
            "max_inverted_fraction": float(run.extra.get("max_inverted_fraction", 0.0)),
            "mujoco_warnings": int(run.extra.get("mujoco_warnings", 0)),
        },
    }
    return KinematicSequence(
        rest_surface.astype(np.float32), np.asarray(mesh.faces), frames, times, None, meta
    )


def _max_nonrigid(rest: np.ndarray, frames: np.ndarray) -> float:
    """Largest distance (m) of a vertex from the best rigid fit of its frame to the rest pose (Kabsch)."""
    from kinemesh.geometry.procrustes import kabsch

    R, t = kabsch(np.broadcast_to(rest, frames.shape), frames)
    fit = np.einsum("tij,nj->tni", R, rest) + t[:, None]
    return float(np.linalg.norm(frames - fit, axis=-1).max())


def _set_vertex_velocity(model, data, vert_body, vel: np.ndarray) -> None:
    """Set the velocity of every free flex vertex (its body's 3 slide dofs) to ``vel`` (n, 3) m/s."""
    for i, b in enumerate(vert_body):
        if b <= 0:
            continue
        j = model.body_jntadr[b]
        n = model.body_jntnum[b]
        if n == 3 or n == 1 and model.jnt_type[j] == 0:
            da = model.jnt_dofadr[j]
            data.qvel[da : da + 3] = vel[i]
