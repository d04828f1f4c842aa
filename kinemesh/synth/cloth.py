"""Cloth simulated with MuJoCo ``flexcomp dim="2"`` (triangle membranes), recorded as a fixed-topology sheet.

Scenes: ``flag`` (pinned along one edge, in a gusting wind), ``tablecloth`` (dropped onto a box or a sphere
table and draping), ``curtain`` (pinned along the top, pushed in its middle), ``towel`` (hanging from two
corners, released from horizontal), and the hanging set (sizes 0.3-1 m, aspect ratios 1:2-2:1, 2 s so that the
hanging states fill most frames): ``hang`` (pinned along one edge, released from horizontal or another angle, it
falls to hang; ``meta["measures"]["free_edge_drop"]``), ``corners`` (held by two adjacent or diagonal corners,
or one), ``drape`` (falling over a table edge, a rail, a sphere or a box), ``windblown`` (laundry held by its
two top corners in a gusting wind whose pressure follows the sheet's normals) and ``dropped`` (falling flat or
tilted onto the floor). Material (Young's modulus, thickness, damping, areal density) is randomized within a
range that keeps edge stretch small (tests check < 15%).
"""

from __future__ import annotations

import numpy as np

from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import ConfigError
from kinemesh.synth.flexsim import FlexRun, edge_ratios, edges_of, run_with_retries  # noqa: F401 (edges_of: public here)
from kinemesh.synth.mjcf import add_floor, flexcomp_spec, new_spec

LEGACY_SCENES = ("flag", "tablecloth", "curtain", "towel")  # the first data set: their random streams never change
HANGING_SCENES = ("hang", "corners", "drape", "windblown", "dropped")
SCENES = LEGACY_SCENES + HANGING_SCENES
DURATION = {"hang": 2.0, "corners": 2.0, "drape": 2.0, "windblown": 2.0, "dropped": 1.6}  # s; others 1.6
MAX_STRETCH = 0.2  # a hanging-set run whose edges stretch more than this (not cloth-like) is dropped


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


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix (3, 3) by ``angle`` rad about the unit ``axis`` (Rodrigues)."""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _quat_mul(a, b) -> np.ndarray:
    """Hamilton product of quaternions (w, x, y, z)."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _vertex_area_vectors(x: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Per-vertex area vectors (n, 3) m^2: a third of the adjacent triangles' area times their unit normals."""
    c = np.cross(x[faces[:, 1]] - x[faces[:, 0]], x[faces[:, 2]] - x[faces[:, 0]]) / 6.0
    out = np.zeros_like(x)
    for k in range(3):
        np.add.at(out, faces[:, k], c)
    return out


def _breeze(rng: np.random.Generator, cond: dict):
    """A light gusting horizontal wind (1-5 m/s^2 on every node) for ``hang``; records it in ``cond``."""
    wdir = np.r_[rng.normal(size=2), 0.0]
    wdir /= np.linalg.norm(wdir)
    accel, freq = float(rng.uniform(1, 5)), float(rng.uniform(0.3, 1.5))
    cond.update(wind_direction=wdir.tolist(), wind_accel=accel, gust_frequency_hz=freq)

    def force_fn(t, x, n, node_mass):
        w = np.asarray(cond["wind_direction"])  # turned with the scene's yaw
        return np.arange(n), np.broadcast_to(w * accel * node_mass * (0.7 + 0.3 * np.sin(2 * np.pi * freq * t)), (n, 3))

    return force_fn


def max_edge_stretch(rest: np.ndarray, frames: np.ndarray, faces: np.ndarray) -> float:
    """Largest relative edge-length increase over all frames (0.1 = 10% longer than at rest)."""
    return float(edge_ratios(rest, frames, faces).max() - 1.0)


def cloth_sequence(
    scene: str,
    rng: np.random.Generator,
    resolution: int | None = None,
    young: float | None = None,
    duration: float | None = None,
    n_frames: int = 24,
    timestep: float = 0.004,
) -> KinematicSequence:
    """Simulate one cloth ``scene`` (see ``SCENES``) and return the sheet's motion.

    Material parameters are random when None: E log-uniform in [2e6, 1e7] Pa at thickness 1 mm, areal density
    0.1-0.4 kg/m^2. ``duration`` (s) defaults to ``DURATION[scene]`` (1.6 for the first four scenes).
    ``meta["measures"]``: largest displacement relative to the size and, for ``hang``, the drop of the free edge
    (mean z, relative to the hanging length) at the last frame and at its largest. Raises ConfigError for an
    unknown scene, SimulationDivergedError when the simulation diverges even with smaller steps, and KinemeshError
    when a hanging-set run stretches more than ``MAX_STRETCH``.
    """
    if scene not in SCENES:
        raise ConfigError(f"unknown cloth scene {scene!r}; choose from {SCENES}")
    duration = float(duration if duration is not None else DURATION.get(scene, 1.6))
    u = rng.uniform
    W, H = float(u(0.4, 0.9)), float(u(0.4, 0.9))
    if scene == "flag":
        W, H = float(u(0.5, 0.9)), float(u(0.3, 0.55))
    elif scene in HANGING_SCENES:  # sizes 0.3-1 m, aspect ratios 1:2-2:1
        W = float(u(0.3, 1.0))
        H = float(np.clip(W * np.exp(u(np.log(0.5), np.log(2.0))), 0.25, 1.2))
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
    elif scene == "towel":
        v = v - [W / 2, 0, 0] + [0, 0, 1.0]
        pins = np.array([idx[0, -1], idx[-1, -1]])
        cond.update(pinned_corners=pins.tolist(), initial="horizontal")
    elif scene == "hang":
        # pinned along its x = 0 edge, the sheet (W long) starts at ``angle`` above the horizontal and falls to hang
        angle = 0.0 if rng.random() < 0.4 else float(u(-np.pi / 4, 5 * np.pi / 12))
        pin_z = W * float(u(0.8, 1.5)) + 0.03  # below W the hanging sheet reaches the floor
        v = np.stack([v[:, 0] * np.cos(angle), v[:, 1] - H / 2, pin_z + v[:, 0] * np.sin(angle)], -1)
        pins = idx[0, :]
        cond.update(angle=angle, pin_height=pin_z, hanging_length=W, free_edge=idx[-1, :].tolist())
        if rng.random() < 0.3:  # a light breeze
            force_fn = _breeze(rng, cond)
    elif scene == "corners":
        variant = str(rng.choice(["adjacent", "diagonal", "single"], p=[0.45, 0.4, 0.15]))
        tilt = 0.0 if rng.random() < 0.5 else float(u(-0.5, 0.5))
        v = v - [W / 2, H / 2, 0]
        v = np.stack([v[:, 0], v[:, 1] * np.cos(tilt), v[:, 1] * np.sin(tilt)], -1) + [0, 0, 1.05 * np.hypot(W, H) + 0.05]
        pins = {"adjacent": np.array([idx[0, -1], idx[-1, -1]]), "diagonal": np.array([idx[0, 0], idx[-1, -1]]),
                "single": np.array([idx[0, -1]])}[variant]
        cond.update(pinned_corners=pins.tolist(), variant=variant, tilt=tilt)
    elif scene == "drape":
        variant = str(rng.choice(["table_edge", "rail", "sphere", "box"]))
        if variant == "table_edge":  # a big table whose edge is x = 0; a fraction of the sheet overhangs it
            top, over = float(u(0.4, 0.8)), float(u(0.3, 0.7))
            v = v - [W * (1 - over), H / 2, 0] + [0, 0, top + float(u(0.01, 0.08))]
            obstacles = [{"type": "box", "size": [1.5, 1.5, top / 2], "pos": [-1.5, 0, top / 2]}]
            cond.update(table_top=top, overhang=over)
        elif variant == "rail":  # a towel rail along y: the sheet folds over it and hangs on both sides
            r, zr = float(u(0.02, 0.05)), max(float(u(0.5, 1.0)), W / 2 + 0.1)
            v = v - [W / 2 + float(u(-0.15, 0.15)) * W, H / 2, 0] + [0, 0, zr + r + float(u(0.01, 0.05))]
            obstacles = [{"type": "cylinder", "size": [r, H / 2 + 0.1, 0], "pos": [0, 0, zr],
                          "quat": [np.cos(np.pi / 4), np.sin(np.pi / 4), 0, 0]}]
            cond.update(rail_radius=r, rail_height=zr)
        elif variant == "sphere":
            r = float(u(0.1, 0.25))
            c = np.array([0.0, 0.0, r + float(u(0.0, 0.4))])
            v = v - [W / 2, H / 2, 0] + [*(u(-0.3, 0.3, 2) * r), c[2] + r + float(u(0.02, 0.1))]
            obstacles = [{"type": "sphere", "size": [r, 0, 0], "pos": c.tolist()}]
            cond.update(sphere_radius=r, sphere_center=c.tolist())
        else:
            half = [float(u(0.08, 0.2)), float(u(0.08, 0.2)), float(u(0.1, 0.3))]
            v = v - [W / 2, H / 2, 0] + [*(u(-0.5, 0.5, 2) * half[:2]), 2 * half[2] + float(u(0.02, 0.1))]
            obstacles = [{"type": "box", "size": half, "pos": [0, 0, half[2]]}]
            cond.update(box_half_extents=half)
        cond["variant"] = variant
    elif scene == "windblown":
        # laundry: a vertical sheet (x-z plane) held by its two top corners, in a gusting wind whose pressure
        # 0.6 s^2 Pa (s: wind speed, m/s) acts along the sheet's normals
        v = np.stack([v[:, 0] - W / 2, np.zeros(len(v)), float(u(0.3, 0.8)) + v[:, 1]], -1)
        pins = np.array([idx[0, -1], idx[-1, -1]])
        yaw = float(u(-0.6, 0.6))
        wdir = np.array([np.sin(yaw), np.cos(yaw) * (1 if rng.random() < 0.5 else -1), float(u(-0.1, 0.3))])
        wdir /= np.linalg.norm(wdir)
        speed, freq = float(u(1.5, 5.0)), float(u(0.3, 1.5))
        cond.update(pinned_corners=pins.tolist(), wind_direction=wdir.tolist(), wind_speed=speed,
                    gust_frequency_hz=freq)

        def force_fn(t, x, n, node_mass):
            gust = speed * (0.7 + 0.3 * np.sin(2 * np.pi * freq * t))
            area = _vertex_area_vectors(x, faces)  # (n, 3): area-weighted normals, m^2
            mag = np.linalg.norm(area, axis=1, keepdims=True)
            return np.arange(n), 0.6 * gust**2 * (area @ wdir)[:, None] * area / np.maximum(mag, 1e-12)
    else:  # dropped: flat or tilted, onto the floor
        tilt, yaw = float(u(0.0, 0.7)), float(u(0, 2 * np.pi))
        v = v - [W / 2, H / 2, 0]
        axis = np.array([np.cos(yaw), np.sin(yaw), 0.0])
        v = v @ _rotation(axis, tilt).T
        v[:, 2] += float(u(0.05, 0.5)) - v[:, 2].min()
        cond.update(tilt=tilt, tilt_axis=axis.tolist(), drop_height=float(v[:, 2].min()))
    if scene in HANGING_SCENES:  # any horizontal direction (the obstacles turn with the sheet)
        yaw = float(u(0, 2 * np.pi))
        Rz = _rotation(np.array([0.0, 0.0, 1.0]), yaw)
        v = v @ Rz.T
        for g in obstacles:
            g["pos"] = (Rz @ np.asarray(g["pos"], float)).tolist()
            q = np.asarray(g.get("quat", [1.0, 0, 0, 0]), float)
            g["quat"] = _quat_mul([np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)], q).tolist()
        cond["yaw"] = yaw
        if "wind_direction" in cond:
            cond["wind_direction"] = (Rz @ np.asarray(cond["wind_direction"])).tolist()
            wdir = np.asarray(cond["wind_direction"])
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
    if scene in HANGING_SCENES and stretch > MAX_STRETCH:
        from kinemesh.errors import KinemeshError

        raise KinemeshError(f"cloth {scene}: edges stretch {stretch:.2f} > {MAX_STRETCH} (not cloth-like)")
    measures = {"max_displacement": float(np.linalg.norm(frames - rest[None], axis=-1).max() / size)}
    if scene == "hang":
        drop = (rest[cond["free_edge"], 2].mean() - frames[:, cond["free_edge"], 2].mean(1)) / W
        measures.update(free_edge_drop=float(drop[-1]), free_edge_drop_max=float(drop.max()))
    meta = {
        "category": scene,
        "kind": "cloth",
        "source": "kinemesh.synth.mujoco_flex",
        "units": "m",
        "up": "z",
        "conditions": cond,
        "measures": measures,
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
