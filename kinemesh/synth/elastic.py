"""Elastic soft bodies simulated with MuJoCo ``flexcomp dim="3"`` (linear-elastic tetrahedra).

Shapes (watertight surfaces from primitives): ``beam``, ``stem`` (a stalk with a bulb, pinned base),
``blob``, ``torus``, ``toy`` (a little animal from ellipsoids and cylinders). Actions: ``drop`` (fall onto the
floor, optional initial velocity), ``poke`` (impulse at a surface point), ``push`` (constant force on a region),
``twist`` (pinned base, torque on the top), ``wind`` (pinned base bent by a gusting lateral wind). Material
(Young's modulus E Pa, Poisson ratio, damping, density) is randomized. The recorded mesh is the smooth input
surface embedded in the simulated tetrahedral cage (see ``tetra``).
"""

from __future__ import annotations

import numpy as np
import trimesh

from kinemesh.data.sequence import KinematicSequence
from kinemesh.synth import shapes as S
from kinemesh.synth.flexsim import FlexRun, run_with_retries
from kinemesh.synth.mjcf import add_floor, flexcomp_spec, new_spec
from kinemesh.synth.tetra import build_cage

SHAPES = ("beam", "stem", "blob", "torus", "toy")
ACTIONS = {
    "beam": ("drop", "poke", "push", "twist", "wind"),
    "stem": ("poke", "push", "twist", "wind"),
    "blob": ("drop", "poke", "push"),
    "torus": ("drop", "poke", "push", "twist"),
    "toy": ("drop", "poke", "push", "twist"),
}
PINNED_ACTIONS = ("twist", "wind")


def _ellipsoid(radii, center, subdivisions: int = 3) -> trimesh.Trimesh:
    m = trimesh.creation.icosphere(subdivisions=subdivisions, radius=1.0)
    m.apply_scale(radii)
    m.apply_translation(center)
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
        s = u(0.06, 0.1)
        body = _ellipsoid([s * u(1.2, 1.6), s * u(0.8, 1.0), s * u(0.7, 0.9)], [0, 0, 1.4 * s], 2)
        head = _ellipsoid([s * 0.6] * 3, [s * u(1.3, 1.7), 0, 2.1 * s], 2)
        legs = [
            S.cylinder(s * 0.22, [x * s, y * s, 0.0], [x * s, y * s, 1.2 * s], 12)
            for x in (-0.8, 0.8)
            for y in (-0.45, 0.45)
        ]
        ears = [
            _ellipsoid([s * 0.12, s * 0.15, s * 0.3], [s * 1.5, y * s * 0.35, 2.6 * s], 1) for y in (-1, 1)
        ]
        m = S.union([body, head, *legs, *ears])
        m = S.refine(m, s * 0.4)
    else:
        from kinemesh.errors import ConfigError

        raise ConfigError(f"unknown soft shape {name!r}; choose from {SHAPES}")
    return m


def simulate_elastic(
    shape: str,
    rng: np.random.Generator,
    action: str | None = None,
    mesh: trimesh.Trimesh | None = None,
    young: float | None = None,
    poisson: float | None = None,
    damping: float | None = None,
    duration: float = 1.2,
    n_frames: int = 24,
    resolution: int = 6,
    timestep: float = 0.004,
) -> KinematicSequence:
    """Simulate a soft body and return its surface motion as a KinematicSequence.

    ``shape`` names the category (and the generated surface when ``mesh`` is None); ``action`` is one of
    ``ACTIONS[shape]`` (random when None). Material parameters are random when None: E in [1.5e4, 3e5] Pa
    (log-uniform), Poisson in [0.2, 0.45], damping in [2e-4, 5e-3] s (log-uniform). Raises SimulationDivergedError when the
    simulation diverges even with smaller steps.
    """
    from kinemesh.errors import SimulationDivergedError

    if mesh is None:
        mesh = soft_shape(shape, rng)
    action = action or str(rng.choice(ACTIONS.get(shape, ("drop", "poke", "push"))))
    E = float(young if young is not None else np.exp(rng.uniform(np.log(1.5e4), np.log(3e5))))
    nu = float(poisson if poisson is not None else rng.uniform(0.2, 0.45))
    damp = float(damping if damping is not None else np.exp(rng.uniform(np.log(2e-4), np.log(5e-3))))
    density = float(rng.uniform(300, 1200))
    cage = build_cage(mesh, resolution=resolution)
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


def _simulate(shape, mesh, cage, action, E, nu, damp, density, rng, strength, duration, n_frames, timestep):
    nodes = cage.nodes.copy()
    size = float(np.max(np.ptp(mesh.vertices, axis=0)))
    volume = float(abs(mesh.volume))
    mass = density * volume
    zmin = nodes[:, 2].min()
    lift = 0.0
    cond: dict = {"action": action, "strength": strength}
    pins = np.zeros(0, int)
    if action in PINNED_ACTIONS or (shape == "stem"):
        pins = np.where(nodes[:, 2] <= zmin + 1e-6)[0]
        if shape == "beam" and action in PINNED_ACTIONS:  # cantilever: clamp one end
            pins = np.where(nodes[:, 0] <= nodes[:, 0].min() + 1e-6)[0]
        cond["pinned_nodes"] = len(pins)
    if action == "drop":
        lift = float(rng.uniform(0.02, 0.2)) * strength
        cond["height"] = lift
        vel = np.r_[rng.normal(0, 0.4, 2), -rng.uniform(0, 1.0)] * strength
        cond["initial_velocity"] = vel.tolist()
    else:
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
        if shape == "beam":
            top = np.where(nodes[:, 0] >= nodes[:, 0].max() - 0.2 * np.ptp(nodes[:, 0]))[0]
        axis = np.array([1.0, 0, 0]) if shape == "beam" else np.array([0, 0, 1.0])
        accel = float(rng.uniform(5, 25)) * (1 if rng.random() < 0.5 else -1) * strength
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

    radius = 0.15 * float(np.min(np.linalg.norm(nodes[cage.tets[:, 1]] - nodes[cage.tets[:, 0]], axis=1)))
    friction = float(rng.uniform(0.4, 1.0))
    children = {"elasticity": {"young": E, "poisson": nu, "damping": damp},
                "contact": {"selfcollide": "none", "condim": 3, "solref": [0.005, 1]}}
    if len(pins):
        children["pin"] = {"id": pins}

    def make_spec(dt: float):
        spec = flexcomp_spec("soft", {"type": "direct", "dim": 3, "dof": "full", "radius": radius, "mass": mass,
                                      "point": nodes, "element": cage.tets}, children)
        add_floor(new_spec("soft", dt, "discrete", spec=spec), 10.0, friction=[friction, 0.005, 0.0001])
        return spec

    def controller(model, data, t, vert_body):
        if t == 0.0 and init_vel is not None:
            _set_vertex_velocity(model, data, vert_body, init_vel)
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
    meta = {
        "category": shape,
        "kind": "elastic",
        "source": "kinemesh.synth.mujoco_flex",
        "units": "m",
        "up": "z",
        "conditions": cond,
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
