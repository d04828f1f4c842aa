"""Cloth simulated with MuJoCo ``flexcomp dim="2"`` (triangle membranes), recorded as a fixed-topology sheet.

Scenes: ``flag`` (pinned along one edge, in a gusting wind), ``tablecloth`` (dropped onto a box or a sphere
table and draping), ``curtain`` (pinned along the top, pushed in its middle), ``towel`` (hanging from two
corners, released from horizontal). Material (Young's modulus, thickness, damping, areal density) is randomized
within a range that keeps edge stretch small (tests check < 15%).
"""

from __future__ import annotations

import numpy as np

from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import ConfigError
from kinemesh.synth.flexsim import FlexRun, run_with_retries
from kinemesh.synth.mjcf import add_floor, flexcomp_spec, new_spec

SCENES = ("flag", "tablecloth", "curtain", "towel")


def grid_sheet(nx: int, ny: int, width: float, height: float) -> tuple[np.ndarray, np.ndarray]:
    """A flat sheet in the x-y plane: vertices (nx*ny, 3) (vertex i*ny + j at (i, j)) and triangles (m, 3)
    with normals along +Z; the sheet spans [0, width] x [0, height]."""
    ii, jj = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    v = np.stack([ii.ravel() * width / (nx - 1), jj.ravel() * height / (ny - 1), np.zeros(nx * ny)], -1)
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a, b = (i * ny + j).ravel(), ((i + 1) * ny + j).ravel()
    c, d = ((i + 1) * ny + j + 1).ravel(), (i * ny + j + 1).ravel()
    # alternate the diagonal so the sheet has no preferred fold direction
    flip = ((i + j) % 2 == 1).ravel()
    t1 = np.where(flip[:, None], np.stack([a, b, d], 1), np.stack([a, b, c], 1))
    t2 = np.where(flip[:, None], np.stack([b, c, d], 1), np.stack([a, c, d], 1))
    return v, np.concatenate([t1, t2]).astype(np.int64)


def edges_of(faces: np.ndarray) -> np.ndarray:
    """Unique undirected edges (e, 2) of a triangle mesh."""
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    return np.unique(np.sort(e, axis=1), axis=0)


def max_edge_stretch(rest: np.ndarray, frames: np.ndarray, faces: np.ndarray) -> float:
    """Largest relative edge-length increase over all frames (0.1 = 10% longer than at rest)."""
    e = edges_of(faces)
    L0 = np.linalg.norm(rest[e[:, 0]] - rest[e[:, 1]], axis=-1)
    L = np.linalg.norm(frames[:, e[:, 0]] - frames[:, e[:, 1]], axis=-1)
    return float((L / L0).max() - 1.0)


def simulate_cloth(
    scene: str,
    rng: np.random.Generator,
    resolution: int | None = None,
    young: float | None = None,
    duration: float = 1.6,
    n_frames: int = 24,
    timestep: float = 0.004,
) -> KinematicSequence:
    """Simulate one cloth ``scene`` (see ``SCENES``) and return the sheet's motion.

    Material parameters are random when None: E log-uniform in [2e6, 1e7] Pa at thickness 1 mm, areal density
    0.1-0.4 kg/m^2. Raises ConfigError for an unknown scene and SimulationDivergedError when the simulation
    diverges even with smaller steps.
    """
    if scene not in SCENES:
        raise ConfigError(f"unknown cloth scene {scene!r}; choose from {SCENES}")
    u = rng.uniform
    W, H = float(u(0.4, 0.9)), float(u(0.4, 0.9))
    if scene == "flag":
        W, H = float(u(0.5, 0.9)), float(u(0.3, 0.55))
    res = resolution or int(rng.integers(18, 27))
    nx = max(4, int(round(res * W / max(W, H))))
    ny = max(4, int(round(res * H / max(W, H))))
    v, faces = grid_sheet(nx, ny, W, H)
    E = float(young if young is not None else np.exp(u(np.log(2e6), np.log(1e7))))
    thick = 1e-3
    areal = float(u(0.1, 0.4))
    mass = areal * W * H
    damp = float(np.exp(u(np.log(2e-4), np.log(3e-3))))
    bend = "both" if rng.random() < 0.2 else "stretch"
    friction = float(u(0.3, 1.0))
    cond: dict = {"scene": scene}
    obstacles: list[dict] = []  # geom attributes (MjSpec) of the scene's fixed obstacles
    pins = np.zeros(0, int)
    force_fn = None
    idx = np.arange(nx * ny).reshape(nx, ny)
    if scene == "flag":
        # vertical sheet in the x-z plane, pinned along its x=0 edge (the pole)
        v = np.stack([v[:, 0], np.zeros(len(v)), 1.2 + v[:, 1]], -1)
        pins = idx[0, :]
        wdir = np.array([1.0, u(-0.3, 0.3), 0.0])
        wdir /= np.linalg.norm(wdir)
        accel = float(u(8, 25))
        freq = float(u(0.5, 2.5))
        cond.update(wind_direction=wdir.tolist(), wind_accel=accel, gust_frequency_hz=freq)
        obstacles = [{"type": "cylinder", "size": [0.01, 0.6 + H / 2, 0], "pos": [-0.015, 0, 0.6 + H / 2],
                      "contype": 0, "conaffinity": 0}]  # the pole

        def force_fn(t, x, n, node_mass):
            g = 0.65 + 0.35 * np.sin(2 * np.pi * freq * t) + 0.1 * np.sin(2 * np.pi * 3.1 * freq * t)
            f = wdir * accel * node_mass * g
            flutter = np.sin(6.0 * x[:, 0] / max(W, 1e-6) - 2 * np.pi * 1.7 * freq * t)
            return np.arange(n), f[None] + np.outer(flutter, [0, 0.4 * accel * node_mass, 0])
    elif scene == "tablecloth":
        top = float(u(0.4, 0.7))
        v = v - [W / 2, H / 2, 0] + [float(u(-0.08, 0.08)), float(u(-0.08, 0.08)), top + float(u(0.02, 0.15))]
        if rng.random() < 0.5:
            hx, hy = float(u(0.1, 0.25)), float(u(0.1, 0.25))
            obstacles = [{"type": "box", "size": [hx, hy, top / 2], "pos": [0, 0, top / 2]}]
            cond.update(table="box", table_half_extents=[hx, hy, top / 2])
        else:
            r = float(u(0.1, 0.22))
            obstacles = [{"type": "sphere", "size": [r, 0, 0], "pos": [0, 0, top - r]}]
            cond.update(table="sphere", table_radius=r, table_center=[0, 0, top - r])
        cond["drop_height"] = float(v[:, 2].max() - top)
    elif scene == "curtain":
        v = np.stack([v[:, 0] - W / 2, np.zeros(len(v)), 0.3 + v[:, 1]], -1)
        pins = idx[:, -1]
        center = np.array([float(u(-0.3, 0.3)) * W, 0, 0.3 + float(u(0.2, 0.6)) * H])
        direction = np.array([u(-0.4, 0.4), 1.0 if rng.random() < 0.5 else -1.0, 0.0])
        direction /= np.linalg.norm(direction)
        accel = float(u(10, 40))
        t_on = float(u(0.2, 0.6))
        radius = 0.25 * max(W, H)
        cond.update(
            push_center=center.tolist(),
            push_direction=direction.tolist(),
            push_accel=accel,
            push_duration=t_on,
            push_radius=radius,
        )

        def force_fn(t, x, n, node_mass):
            if t >= t_on:
                return None
            d = np.linalg.norm(v - center, axis=1)
            sel = np.where(d < radius)[0]
            w = (1 - d[sel] / radius)[:, None]
            return sel, w * direction[None] * accel * node_mass
    else:  # towel
        v = v - [W / 2, 0, 0] + [0, 0, 1.0]
        pins = np.array([idx[0, -1], idx[-1, -1]])
        cond.update(pinned_corners=pins.tolist(), initial="horizontal")
    rest = v.copy()
    size = float(max(W, H))
    spacing = min(W / (nx - 1), H / (ny - 1))
    node_mass = mass / len(v)

    children = {"elasticity": {"young": E, "poisson": 0.3, "thickness": thick, "damping": damp, "elastic2d": bend},
                "contact": {"selfcollide": "none", "condim": 3, "friction": friction}}
    if len(pins):
        children["pin"] = {"id": pins}

    def make_spec(dt: float):
        import mujoco

        spec = flexcomp_spec("cloth", {"type": "direct", "dim": 2, "dof": "full", "radius": 0.15 * spacing,
                                       "mass": mass, "point": v, "element": faces}, children)
        add_floor(new_spec("cloth", dt, "discrete", spec=spec), 10.0, friction=[friction, 0.005, 0.0001])
        for g in obstacles:
            spec.worldbody.add_geom(**{**g, "type": getattr(mujoco.mjtGeom, f"mjGEOM_{g['type'].upper()}")})
        return spec

    def controller(model, data, t, vert_body):
        if force_fn is None:
            return
        out = force_fn(t, data.flexvert_xpos, len(v), node_mass)
        if out is None:
            return
        ids, f = out
        b = vert_body[ids]
        movable = b > 0
        np.add.at(data.xfrc_applied, (b[movable], slice(0, 3)), f[movable])

    run = FlexRun(make_spec, duration, n_frames, controller, size=size)
    frames, times, dt_used = run_with_retries(run, timestep, retries=2)
    stretch = max_edge_stretch(rest, frames, faces)
    meta = {
        "category": scene,
        "kind": "cloth",
        "source": "kinemesh.synth.mujoco_flex",
        "units": "m",
        "up": "z",
        "conditions": cond,
        "material": {
            "young": E,
            "thickness": thick,
            "poisson": 0.3,
            "areal_density": areal,
            "damping": damp,
            "elastic2d": bend,
            "friction": friction,
        },
        "simulation": {
            "engine": "mujoco",
            "integrator": "discrete",
            "timestep": dt_used,
            "grid": [nx, ny],
            "max_edge_stretch": stretch,
        },
    }
    return KinematicSequence(rest.astype(np.float32), faces, frames.astype(np.float32), times, None, meta)
