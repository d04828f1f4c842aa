"""Physics test cases (SOPHY): drop, throw, tilt, drag and wind, simulated in MuJoCo with per-part materials.

Rigid parts become MuJoCo bodies (material density, friction mu = tan(friction angle), contact damping ratio
from the coefficient of restitution), articulated parts keep their joints, elastic and elastoplastic parts
become ``flexcomp dim="3"`` soft bodies (Young's modulus, Poisson ratio, damping, von Mises yield stress) and
cloth parts ``flexcomp dim="2"`` shells. Granular materials run in a material point method
(``kinemesh.materials.mpm``). Every run is checked for divergence; a diverged run is retried with half the
time step and, failing that, reported and never written.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint
from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import ConfigError, SimulationDivergedError
from kinemesh.materials.assign import PartMaterial
from kinemesh.synth.mjcf import add_articulated, add_floor, flexcomp_spec, new_spec

CASES = ("drop", "throw", "tilt", "drag", "wind")
SOLIMP = (0.99, 0.99, 0.001)  # constant contact impedance: a linear, mass-independent contact
GRAVITY = 9.81  # m/s^2
CAGE_RESOLUTION = 10  # cells along the longest side of the tetrahedral cage of a non-star-shaped soft part


@dataclass
class CaseConfig:
    """Parameters of one test case (SI units)."""

    case: str = "drop"
    """One of drop, throw, tilt, drag, wind."""
    duration: float = 1.5
    """Simulated time, s."""
    fps: float = 30.0
    """Frames per second of the recorded sequence."""
    timestep: float = 5e-4
    """Physics time step, s (halved automatically on divergence)."""
    height: float = 0.3
    """Drop / throw: initial height of the object's lowest point above the floor, m."""
    velocity: tuple[float, float, float] = (1.0, 0.0, 1.5)
    """Throw: initial linear velocity, m/s."""
    angular_velocity: tuple[float, float, float] = (0.0, 3.0, 2.0)
    """Throw: initial angular velocity, rad/s (world frame)."""
    tilt_deg: float = 30.0
    """Tilt: angle of the supporting plane about the x axis, degrees."""
    drag_vertex: int | None = None
    """Drag: vertex index to pull (default: the top-most vertex)."""
    drag_direction: tuple[float, float, float] = (1.0, 0.0, 0.6)
    """Drag: direction the target point moves in."""
    drag_speed: float = 0.4
    """Drag: target speed, m/s; the target stops after ``drag_time``."""
    drag_time: float = 0.6
    """Drag: how long the target moves, s."""
    drag_stiffness: float | None = None
    """Drag: spring stiffness, N/m (default: 40 x weight / 1 m)."""
    wind_velocity: tuple[float, float, float] = (8.0, 0.0, 0.0)
    """Wind: air velocity, m/s, ramped in over 0.2 s."""
    air_density: float = 1.2
    """Wind: kg/m^3."""
    drag_coefficient: float = 1.2
    """Wind: pressure drag coefficient of a face."""
    rigid_above: float = 5e7
    """Parts whose Young's modulus exceeds this (Pa) are simulated as rigid bodies (their deformation is
    below 0.1 % in these tests, and an explicit flex would need a prohibitively small time step)."""
    max_retries: int = 2
    """Divergence retries, each halving the time step."""

    def validate(self) -> "CaseConfig":
        if self.case not in CASES:
            raise ConfigError(f"unknown test case '{self.case}'; choose one of {', '.join(CASES)}")
        for name in ("duration", "fps", "timestep", "air_density"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"case option '{name}' must be > 0, got {getattr(self, name)}")
        if not self.height >= 0:
            raise ConfigError(f"drop height must be >= 0 m, got {self.height}")
        if not 0 <= self.tilt_deg < 80:
            raise ConfigError(f"tilt angle must lie in [0, 80) degrees, got {self.tilt_deg}")
        if self.timestep > 0.5 / self.fps:
            raise ConfigError(f"timestep {self.timestep} s is too large for {self.fps} fps")
        return self


@dataclass
class PhysicsResult:
    """A finished, finite simulation: the sequence, the MJCF scene that produced it (self-contained: meshes
    inlined, flexes expanded by MuJoCo; ``scene_files`` is empty), a report of measured quantities."""

    sequence: KinematicSequence
    report: dict[str, Any]
    scene_xml: str
    scene_files: dict[str, bytes] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- helpers
def _contact_timeconst(timestep: float) -> float:
    """Contact time constant (s): ten time steps, stiff enough for centimetre objects and still stable."""
    return max(10.0 * timestep, 0.002)


@lru_cache(maxsize=16)
def _restitution_table(timeconst: float, timestep: float) -> tuple[np.ndarray, np.ndarray]:
    """Measured coefficient of restitution of MuJoCo's soft contact as a function of its damping ratio, for
    one (time constant, time step): a sphere hits the floor at 2 m/s without gravity. MuJoCo's contact is
    not an ideal spring-damper, so the analytic e = exp(-zeta pi / sqrt(1 - zeta^2)) is off by up to 3x;
    the measured table is what makes a material's restitution come out right."""
    import mujoco

    ratios = np.geomspace(0.05, 3.0, 28)
    measured = []
    for z in ratios:
        spec = new_spec("restitution", timestep, "implicitfast", 0.0)
        add_floor(spec, 1.0, friction=[1e-4, 0, 0])
        ball = spec.worldbody.add_body(pos=[0, 0, 0.0501])
        ball.add_freejoint()
        ball.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.05, 0, 0], density=1000, solref=[timeconst, z],
                      solimp=list(SOLIMP) + [0.5, 2.0], priority=1)
        model = spec.compile()
        data = mujoco.MjData(model)
        data.qvel[2] = -2.0
        for _ in range(int(0.2 / timestep)):
            mujoco.mj_step(model, data)
        measured.append(data.qvel[2] / 2.0)
    measured = np.asarray(measured)
    ok = measured < 0.98  # very light damping gains energy numerically at this step: never use it
    first = int(np.argmax(ok))
    return ratios[first:], np.minimum.accumulate(measured[first:])


def _damping_ratio(restitution: float, timeconst: float, timestep: float) -> float:
    """Contact damping ratio giving the coefficient of restitution ``restitution`` (calibrated)."""
    ratios, measured = _restitution_table(round(timeconst, 9), round(timestep, 9))
    e = float(np.clip(restitution, measured[-1], measured[0]))
    # measured decreases with the ratio: interpolate on the reversed arrays
    return float(np.interp(e, measured[::-1], ratios[::-1]))


def _behavior(pm: PartMaterial, cfg: CaseConfig) -> str:
    m = pm.material
    if m.behavior in ("elastic", "elastoplastic") and m.youngs_modulus > cfg.rigid_above:
        return "rigid"
    return m.behavior


def rotation_x(deg: float) -> np.ndarray:
    a = math.radians(deg)
    return np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])


def _quat_from_matrix(R: np.ndarray) -> np.ndarray:
    q = np.empty(4)
    import mujoco

    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=np.float64).ravel())
    return q


def _rotation_to(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation (3,3) taking unit vector ``a`` to unit vector ``b``."""
    v, c = np.cross(a, b), float(a @ b)
    if np.linalg.norm(v) < 1e-9:
        if c > 0:
            return np.eye(3)
        axis = np.cross(a, [1.0, 0, 0] if abs(a[0]) < 0.9 else [0, 1.0, 0])
        axis /= np.linalg.norm(axis)
        return 2 * np.outer(axis, axis) - np.eye(3)
    K = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + K + K @ K / (1 + c)


def _sheet_normal(vertices: np.ndarray) -> np.ndarray:
    centred = vertices - vertices.mean(0)
    return np.linalg.svd(centred, full_matrices=False)[2][-1]


def case_placement(vertices: np.ndarray, cfg: CaseConfig, hang: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Rotation (3,3) and translation (3,) placing the object for the case: lowest point ``height`` above
    the floor for drop/throw, resting 2 mm above the floor (or the tilted plane) otherwise; centred in xy.
    ``hang``: a cloth in the wind hangs like a flag, its sheet facing the wind, 5 cm above the floor."""
    R = rotation_x(cfg.tilt_deg) if cfg.case == "tilt" else np.eye(3)
    if hang:
        wind = np.asarray(cfg.wind_velocity, float)
        wind_h = np.array([wind[0], wind[1], 0.0])
        facing = wind_h / np.linalg.norm(wind_h) if np.linalg.norm(wind_h) > 1e-9 else np.array([1.0, 0, 0])
        R = _rotation_to(_sheet_normal(vertices), facing)
    rotated = vertices @ R.T
    normal = R @ np.array([0.0, 0.0, 1.0])  # the plane normal (the plane is rotated like the object)
    centre = 0.5 * (rotated.min(0) + rotated.max(0))
    t = -centre
    lowest = float(((rotated + t) @ normal).min())
    gap = cfg.height if cfg.case in ("drop", "throw") else (0.05 if hang else 0.002)
    t = t + normal * (gap - lowest)
    return R, t


# ---------------------------------------------------------------------------------------------- scene
def build_scene(obj: ArticulatedObject, assignment: dict[str, PartMaterial], cfg: CaseConfig):
    """The MuJoCo scene (an ``MjSpec``, :mod:`kinemesh.synth.mjcf`) of ``obj`` on a floor for the test case.

    Returns (spec, files, layout): ``files`` the mesh files a flex reads (already given to the spec as
    assets), ``layout`` how to read vertex positions back.
    """
    from kinemesh.synth.mjcf import add_floor

    cfg.validate()
    parts = [p for p in obj.parts if len(p.vertices)]
    missing = [p.name for p in parts if p.name not in assignment]
    if missing:
        raise ConfigError(f"part '{missing[0]}' has no material")
    behaviors = {p.name: _behavior(assignment[p.name], cfg) for p in parts}
    deformable = [n for n, b in behaviors.items() if b in ("elastic", "elastoplastic", "cloth")]
    if any(b == "granular" for b in behaviors.values()):
        raise ConfigError("granular parts are simulated with the material point method "
                          "(kinemesh.materials.mpm), not MuJoCo")
    if deformable and len(parts) > 1:
        raise ConfigError(
            f"part '{deformable[0]}' is deformable ({assignment[deformable[0]].material.name}) but the object "
            f"has {len(parts)} parts; deformable materials are simulated for single-part objects; assign a "
            f"rigid material to it or simulate the part on its own")
    all_vertices = np.concatenate([p.vertices for p in parts])
    hang = cfg.case == "wind" and len(parts) == 1 and behaviors[parts[0].name] == "cloth"
    R, t = case_placement(all_vertices, cfg, hang=hang)
    size = float(np.linalg.norm(all_vertices.max(0) - all_vertices.min(0)))
    files: dict[str, bytes] = {}
    if deformable:
        spec, layout = _flex_scene(parts[0], assignment[parts[0].name], behaviors[parts[0].name], R, t, cfg,
                                   files, size, pin_top=hang)
    else:
        spec, layout = _rigid_scene(obj, parts, assignment, R, t, cfg.timestep)
    new_spec("kinemesh_physics", cfg.timestep, "discrete" if deformable else "implicitfast", GRAVITY, spec)
    spec.visual.global_.offwidth, spec.visual.global_.offheight = 640, 480
    add_floor(spec, max(5.0, 20 * size), math.radians(cfg.tilt_deg) if cfg.case == "tilt" else 0.0,
              friction=[1e-4, 0, 0], contype=1, conaffinity=1, rgba=[0.8, 0.8, 0.8, 1])
    layout.update(rotation=R, translation=t, size=size, behaviors=behaviors)
    return spec, files, layout


def _contact_params(pm: PartMaterial, timestep: float) -> dict:
    """MuJoCo contact attributes of a part: Coulomb friction tan(friction angle), and a soft contact whose
    damping ratio reproduces the material's coefficient of restitution."""
    m = pm.material
    tc = _contact_timeconst(timestep)
    return {"friction": [m.friction, 0.005, 0.0001], "solref": [tc, _damping_ratio(m.restitution, tc, timestep)],
            "solimp": list(SOLIMP) + [0.5, 2.0], "priority": 1}


def _rigid_scene(obj, parts, assignment, R, t, timestep):
    import mujoco
    import trimesh

    from kinemesh.synth.real import thickened

    watertight = {}
    for p in parts:
        mesh = trimesh.Trimesh(p.vertices, p.faces, process=False)
        watertight[p.name] = mesh.is_watertight and mesh.volume > 1e-9

    def geom(part) -> dict:
        m = assignment[part.name].material
        # a shell's density is per unit area: the material density times a 5 mm wall
        return {"density": m.density if watertight[part.name] else m.density * 0.005, "contype": 2,
                "conaffinity": 1, **_contact_params(assignment[part.name], timestep)}

    def mesh(part) -> dict:
        exact = mujoco.mjtMeshInertia.mjMESH_INERTIA_EXACT
        return {"inertia": exact if watertight[part.name] else mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL}

    spec = mujoco.MjSpec()
    # MuJoCo refuses flat meshes (a cardboard box's flaps): they get a second, offset layer for the simulation
    # only; the recorded frames pose ``obj``'s own meshes
    add_articulated(spec, thickened(obj), ("b_", "g_", "m_"), geom=geom, mesh=mesh,
                    joint=lambda j, part: {"damping": 0.02, "armature": 0.001},
                    helper_mass=1e-4, helper_inertia=1e-8, root_pose=(t, _quat_from_matrix(R)))
    return spec, {"mode": "rigid", "parts": [p.name for p in parts]}


def _interior_point(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """A point well inside a closed mesh (the volume centroid if inside, else the deepest sample)."""
    import trimesh

    mesh = trimesh.Trimesh(vertices, faces, process=False)
    c = mesh.center_mass if mesh.is_watertight else vertices.mean(0)
    if mesh.contains(c[None])[0]:
        return np.asarray(c)
    rng = np.random.default_rng(0)
    pts = rng.uniform(vertices.min(0), vertices.max(0), size=(4000, 3))
    pts = pts[mesh.contains(pts)]
    if len(pts) == 0:
        raise ConfigError("cannot find a point inside the mesh to build tetrahedra from; is it closed?")
    depth = trimesh.proximity.signed_distance(mesh, pts)
    return pts[int(np.argmax(depth))]


def _flex_scene(part, pm: PartMaterial, behavior: str, R, t, cfg: CaseConfig, files, size, pin_top=False):
    import trimesh

    m = pm.material
    verts = part.vertices @ R.T + t  # flex vertices are created in world coordinates
    mesh = trimesh.Trimesh(verts, part.faces, process=False)
    files["part.obj"] = mesh.export(file_type="obj").encode()
    contact = {"condim": 3, **_contact_params(pm, cfg.timestep), "selfcollide": "none", "contype": 2,
               "conaffinity": 1}
    radius = max(1e-3, 0.005 * size)
    # the library's damping is a loss factor eta; MuJoCo's flex damping is stiffness-proportional (Rayleigh,
    # seconds): beta = eta / omega0 with omega0 = sqrt(E / rho) / L the body's fundamental frequency scale
    omega0 = math.sqrt(m.youngs_modulus / m.density) / max(size, 1e-3)
    beta = m.damping / omega0
    layout = {"mode": "flex", "parts": [part.name], "rest_world": verts}
    if behavior == "cloth":
        children = {"elasticity": {"young": m.youngs_modulus, "poisson": m.poisson_ratio, "thickness": m.thickness,
                                   "damping": beta}, "contact": contact, "edge": {"equality": "false"}}
        if pin_top:  # a flag: the top edge is held fixed
            children["pin"] = {"id": np.where(verts[:, 2] > verts[:, 2].max() - 0.02 * size)[0]}
        attrs = {"type": "mesh", "file": "part.obj", "dim": 2, "mass": m.density * m.thickness * float(mesh.area),
                 "radius": radius}
        return flexcomp_spec("part", attrs, children, files), layout
    if not mesh.is_watertight:
        raise ConfigError(f"part '{part.name}' is {m.name} ({behavior}) but its mesh is not closed; "
                          "a soft body needs a watertight mesh")
    origin = _interior_point(verts, part.faces)
    elastic = {"young": m.youngs_modulus, "poisson": min(m.poisson_ratio, 0.49), "damping": beta}
    if behavior == "elastoplastic":  # MuJoCo's flex yield is a von Mises yield *strain*: yield stress / E
        elastic["yield"] = m.yield_stress / m.youngs_modulus
    children = {"elasticity": elastic, "contact": contact, "edge": {"equality": "false"}}
    attrs = {"dim": 3, "mass": m.density * float(mesh.volume), "radius": radius}
    if _star_shaped(verts, part.faces, origin, size):
        return flexcomp_spec("part", {"type": "mesh", "file": "part.obj", **attrs, "origin": origin}, children,
                             files), layout
    # tetrahedra from the surface to one interior point would invert (MuJoCo drops them and the surface no
    # longer matches): simulate a tetrahedral cage and carry the surface on it instead
    from kinemesh.synth.tetra import build_cage

    cage = build_cage(mesh, resolution=CAGE_RESOLUTION)
    del files["part.obj"]
    spec = flexcomp_spec("part", {"type": "direct", **attrs, "point": cage.nodes, "element": cage.tets}, children)
    return spec, {**layout, "cage": cage}


def _star_shaped(vertices: np.ndarray, faces: np.ndarray, origin: np.ndarray, size: float) -> bool:
    """True if every face of the closed, outward-oriented surface sees ``origin`` from its inner side with a
    margin, i.e. the tetrahedra (face, origin) of ``flexcomp type="mesh" dim="3"`` are all well oriented."""
    tri = vertices[faces]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
    return bool((np.einsum("ij,ij->i", normal, tri[:, 0] - origin) > 1e-3 * size).all())


# ---------------------------------------------------------------------------------------------- running
class _Recorder:
    """Reads the object's vertex positions (n, 3) from MuJoCo data, in part order."""

    def __init__(self, model, data, obj: ArticulatedObject, layout: dict[str, Any]):
        import mujoco

        self.mode = layout["mode"]
        if self.mode == "rigid":
            self.items = []
            for name in layout["parts"]:
                bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"b_{name}")
                self.items.append((bid, obj.part(name).vertices))
        else:
            fv = np.asarray(data.flexvert_xpos).copy()
            self.cage = layout.get("cage")
            rest = self.cage.nodes if self.cage is not None else layout["rest_world"]
            from scipy.spatial import cKDTree

            dist, self.index = cKDTree(fv).query(rest)
            if dist.max() > 1e-4 * max(1.0, layout["size"]):
                raise SimulationDivergedError("flex vertices do not match the mesh vertices")
            node_bodies = np.asarray(model.flex_vertbodyid)[self.index]
            if self.cage is None:  # each surface vertex is a flex vertex
                self.vert_bodies, self.vert_weights = node_bodies[:, None], np.ones((len(rest), 1))
            else:  # each surface vertex is carried by the 4 nodes of its cage tetrahedron
                self.vert_bodies = node_bodies[self.cage.tets[self.cage.embed_tet]]
                self.vert_weights = self.cage.embed_bary

    def vertices(self, data) -> np.ndarray:
        if self.mode == "rigid":
            return np.concatenate([data.xpos[b] + v @ data.xmat[b].reshape(3, 3).T for b, v in self.items])
        x = np.asarray(data.flexvert_xpos)[self.index]
        return x if self.cage is None else self.cage.surface(x)

    def apply_vertex_forces(self, data, forces: np.ndarray, ids=slice(None)) -> None:
        """Add forces (k, 3) N acting on surface vertices ``ids`` to the flex bodies that carry them."""
        bodies, weights = self.vert_bodies[ids], self.vert_weights[ids]
        np.add.at(data.xfrc_applied[:, :3], bodies.ravel(),
                  (weights[..., None] * np.asarray(forces)[..., None, :]).reshape(-1, 3))


def _face_geometry(vertices, faces):
    """(centres, unit normals, areas) of the faces."""
    tri = vertices[faces]
    cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    area = 0.5 * np.linalg.norm(cross, axis=1)
    return tri.mean(1), cross / np.maximum(2 * area, 1e-12)[:, None], area


def _drag_magnitude(un, area, air_density, cd, two_sided):
    """Signed pressure-drag force along each face's normal (N) for the wind's normal component ``un``
    (m/s)."""
    if two_sided:
        return 0.5 * air_density * cd * area * np.abs(un) * un
    # one-sided: only faces whose outside faces the wind
    return -0.5 * air_density * cd * area * np.minimum(un, 0.0) ** 2


def _face_forces(vertices, faces, wind, air_density, cd, two_sided, vertex_velocity=None):
    """Pressure-drag force (n_faces, 3) N and face centres (n_faces, 3) for a wind ``wind`` (3,) m/s."""
    centres, normal, area = _face_geometry(vertices, faces)
    rel = np.broadcast_to(wind, centres.shape)
    if vertex_velocity is not None:
        rel = rel - vertex_velocity[faces].mean(1)
    un = np.einsum("ij,ij->i", normal, rel)
    return _drag_magnitude(un, area, air_density, cd, two_sided)[:, None] * normal, centres


class _RigidWind:
    """The wind load on rigid parts, from their own frames: a face's normal, area and centre are fixed in its
    body's frame, so a step needs only the wind in that frame, one product per body, instead of posing every
    face (the same load as ``_face_forces`` summed per body; a 27k-face pot's 1.5 s of wind took 65 s).

    ``rec``: the ``_Recorder`` (rigid mode: its items are (body id, vertices in the body's frame)); ``faces``:
    (m, 3) indices into the parts' vertices in that order."""

    def __init__(self, rec, faces: np.ndarray):
        owner = np.concatenate([np.full(len(v), i) for i, (_, v) in enumerate(rec.items)])
        centres, normal, area = _face_geometry(np.concatenate([v for _, v in rec.items]), faces)
        face_owner = owner[faces[:, 0]]
        self.bodies = [(b, normal[sel], area[sel], np.cross(centres[sel], normal[sel]))
                       for i, (b, _) in enumerate(rec.items) if (sel := face_owner == i).any()]

    def loads(self, xpos, xmat, wind, air_density: float, cd: float) -> list[tuple]:
        """Per body: (id, force (3,) N, torque (3,) N m about the body's origin), world frame, for bodies
        posed at ``xpos`` (nbody, 3) and ``xmat`` (nbody, 9) in a wind ``wind`` (3,) m/s."""
        out = []
        for b, n, a, cxn in self.bodies:
            R = np.asarray(xmat[b]).reshape(3, 3)
            mag = _drag_magnitude(n @ (R.T @ wind), a, air_density, cd, False)
            out.append((b, R @ (mag @ n), R @ (mag @ cxn)))  # sum of (R c) x (mag R n) = R sum mag (c x n)
        return out


def run_case(
    obj: ArticulatedObject,
    assignment: dict[str, PartMaterial],
    cfg: CaseConfig,
    progress: bool = False,
) -> PhysicsResult:
    """Run one test case; retry with half the time step on divergence. Raises SimulationDivergedError."""
    cfg.validate()
    last_error = None
    for attempt in range(cfg.max_retries + 1):
        try:
            return _simulate_once(obj, assignment, cfg, progress)
        except SimulationDivergedError as exc:
            last_error = exc
            cfg = CaseConfig(**{**asdict(cfg), "timestep": cfg.timestep / 2})
    raise SimulationDivergedError(
        f"{obj.name}: the {cfg.case} simulation diverged even at time step {cfg.timestep:.2g} s ({last_error}); "
        "nothing was written")


def _simulate_once(obj, assignment, cfg: CaseConfig, progress: bool) -> PhysicsResult:
    import mujoco
    from kinemesh.progress import tqdm

    spec, files, layout = build_scene(obj, assignment, cfg)
    try:
        model = spec.compile()
    except ValueError as exc:
        raise ConfigError(f"{obj.name}: MuJoCo rejected the scene: {str(exc).splitlines()[0]}") from None
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rec = _Recorder(model, data, obj, layout)
    rest_world = rec.vertices(data).copy()
    parts = [p for p in obj.parts if len(p.vertices)]
    faces = np.concatenate([p.faces + off for p, off in zip(parts, np.cumsum([0] + [len(p.vertices) for p in parts])[:-1])])
    size = layout["size"]
    flex = layout["mode"] == "flex"
    two_sided = flex and layout["behaviors"][parts[0].name] == "cloth"
    total_mass = float(model.body_mass.sum())

    # initial velocities (throw)
    if cfg.case == "throw":
        v0, w0 = np.asarray(cfg.velocity, float), np.asarray(cfg.angular_velocity, float)
        if flex:
            centre = rest_world.mean(0)
            fv = np.asarray(data.flexvert_xpos)
            for i, b in enumerate(model.flex_vertbodyid):
                adr = model.body_dofadr[b]
                if adr >= 0:
                    data.qvel[adr:adr + 3] = v0 + np.cross(w0, fv[i] - centre)
        else:
            data.qvel[0:3] = v0 + np.cross(w0, data.qpos[0:3] - rest_world.mean(0))
            data.qvel[3:6] = layout["rotation"].T @ w0  # free-joint angular velocity is in the body frame

    # drag set-up
    if cfg.case == "drag":
        idx = cfg.drag_vertex if cfg.drag_vertex is not None else int(np.argmax(rest_world[:, 2]))
        if not 0 <= idx < len(rest_world):
            raise ConfigError(f"drag vertex {idx} is out of range: the object has {len(rest_world)} vertices")
        direction = np.asarray(cfg.drag_direction, float)
        if np.linalg.norm(direction) < 1e-9:
            raise ConfigError("drag direction has zero length")
        direction = direction / np.linalg.norm(direction)
        k_drag = cfg.drag_stiffness or 40.0 * total_mass * GRAVITY
        c_drag = 2.0 * math.sqrt(k_drag * total_mass)
        anchor = rest_world[idx].copy()
        if not flex:
            owner = np.concatenate([np.full(len(v), i) for i, (_, v) in enumerate(rec.items)])[idx]
            drag_body = rec.items[owner][0]

    n_frames = int(round(cfg.duration * cfg.fps)) + 1
    steps_per_frame = max(1, int(round(1.0 / (cfg.fps * model.opt.timestep))))
    frames = [rest_world.astype(np.float32)]
    lowest, prev_x = [], rest_world.copy()
    limit = 50.0 * max(size, 1e-3) + abs(cfg.height) + 10 * np.linalg.norm(cfg.velocity)
    bad = mujoco.mjtWarning.mjWARN_BADQACC
    floor_normal = rotation_x(cfg.tilt_deg if cfg.case == "tilt" else 0.0)[:, 2]
    iterator = range(1, n_frames)
    if progress:
        iterator = tqdm(iterator, desc=f"{cfg.case} ({obj.name})", unit="frame", leave=False)
    rigid_wind = _RigidWind(rec, faces) if cfg.case == "wind" and not flex else None
    wind_velocity = np.asarray(cfg.wind_velocity, float)
    for _ in iterator:
        for _s in range(steps_per_frame):
            time = data.time
            wind = min(1.0, time / 0.2) * wind_velocity  # (wind case: it ramps up over 0.2 s)
            if rigid_wind is not None:
                data.qfrc_applied[:] = 0.0
                for b, force, torque in rigid_wind.loads(data.xpos, data.xmat, wind, cfg.air_density,
                                                         cfg.drag_coefficient):
                    mujoco.mj_applyFT(model, data, force, torque, data.xpos[b], b, data.qfrc_applied)
            elif cfg.case in ("drag", "wind"):
                data.xfrc_applied[:] = 0.0
                data.qfrc_applied[:] = 0.0
                x = rec.vertices(data)
                if cfg.case == "drag":
                    target = anchor + direction * cfg.drag_speed * min(time, cfg.drag_time)
                    vel = (x[idx] - prev_x[idx]) / model.opt.timestep
                    force = k_drag * (target - x[idx]) - c_drag * vel
                    if flex:
                        rec.apply_vertex_forces(data, force[None], [idx])
                    else:
                        mujoco.mj_applyFT(model, data, force, np.zeros(3), x[idx], drag_body, data.qfrc_applied)
                else:
                    vv = (x - prev_x) / model.opt.timestep  # (a flex: rigid parts' wind is ``rigid_wind``)
                    f_face, _ = _face_forces(x, faces, wind, cfg.air_density, cfg.drag_coefficient, two_sided,
                                             vv)
                    fv = np.zeros_like(x)
                    for c in range(3):
                        np.add.at(fv, faces[:, c], f_face / 3.0)
                    rec.apply_vertex_forces(data, fv)
                prev_x = x
            mujoco.mj_step(model, data)
            if cfg.case in ("drop", "throw"):
                lowest.append(float(rec.vertices(data)[:, 2].min()))
        x = rec.vertices(data)
        if data.warning[bad].number > 0 or not np.isfinite(x).all() or np.abs(x - rest_world).max() > limit:
            raise SimulationDivergedError(f"diverged at t = {data.time:.3f} s")
        if -float((x @ floor_normal).min()) > 0.25 * size + 0.01:
            raise SimulationDivergedError(f"diverged at t = {data.time:.3f} s: the object passed through the floor")
        frames.append(x.astype(np.float32))
    frames_arr = np.stack(frames)
    report = measure_case(frames_arr, rest_world, cfg, size, lowest)
    report.update(timestep=float(model.opt.timestep), total_mass_kg=total_mass,
                  simulator="mujoco " + mujoco.__version__,
                  behaviors=layout["behaviors"])
    kind = ("cloth" if two_sided else "elastic") if flex else ("articulated" if obj.movable_joints else "mixed")
    part_ids = np.concatenate([np.full(len(p.vertices), i, dtype=np.int32) for i, p in enumerate(parts)])
    meta = {
        "category": obj.category,
        "kind": kind,
        "source": "kinemesh physics (MuJoCo)",
        "name": obj.name,
        "case": asdict(cfg),
        "materials": {n: pm.material.to_dict() for n, pm in assignment.items()},
        "joints": [j.to_dict() for j in obj.joints],
        "report": report,
    }
    seq = KinematicSequence(frames_arr[0], faces, frames_arr, np.arange(len(frames_arr)) / cfg.fps, part_ids, meta)
    seq.validate(f"{obj.name} ({cfg.case})")
    return PhysicsResult(seq, report, spec.to_xml())


def _kabsch_residual(x: np.ndarray, rest: np.ndarray) -> float:
    """RMS distance (m) of ``x`` from the best rigid motion of ``rest``."""
    from kinemesh.geometry.procrustes import kabsch

    R, t = kabsch(rest, x)
    return float(np.sqrt(((rest @ R.T + t - x) ** 2).sum(1).mean()))


def measure_case(frames: np.ndarray, rest: np.ndarray, cfg: CaseConfig, size: float,
             lowest: list[float] | None = None) -> dict[str, Any]:
    """Measured quantities of a run: bounce height, peak deformation, displacement."""
    com = frames.mean(1)
    report: dict[str, Any] = {
        "frames": int(len(frames)),
        "object_size_m": size,
        "peak_deformation": max(_kabsch_residual(f, rest) for f in frames) / size,
        "final_displacement_m": float(np.linalg.norm(com[-1] - com[0])),
        "final_deformation": _kabsch_residual(frames[-1], rest) / size,
    }
    if cfg.case in ("drop", "throw") and lowest is not None:
        # bounce: how high the lowest point rises again after it first reaches the floor (z = 0);
        # measured on every physics step, not only on recorded frames
        low = np.asarray(lowest)
        touching = np.where(low < 0.01 * size + 2e-3)[0]
        if len(touching):
            after = low[touching[0]:]
            report["bounce_height_m"] = float(after.max() - after.min())
        else:
            report["bounce_height_m"] = 0.0
    if cfg.case == "tilt":
        R = rotation_x(cfg.tilt_deg)
        downhill = R @ np.array([0.0, -1.0, 0.0])
        report["slide_distance_m"] = float((com[-1] - com[0]) @ downhill)
    return report
