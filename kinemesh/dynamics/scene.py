"""From a mesh, a decoder and an action to a simulated KinematicSequence (what ``kinemesh simulate`` runs).

``build_system`` chooses masses, stiffness, damping, barrier and pin springs from the object kind;
``initial_conditions`` turns the action (drag, poke, velocity) into (q0, qd0) by the boundary-condition solve
(NeuROK Sec. 5.3); ``simulate_mesh`` integrates and decodes the vertices of every frame.

Per-kind defaults (the potential energy is a modelling choice, NeuROK Sec. 5.2): a free hinge has no restoring force
(articulated: stiffness 0 Hz), an elastic body and cloth spring back (2 Hz and 1 Hz), and a cloth resists
stretching (a mass-spring energy on its sampled points, ``STRETCH_HZ``). The latent stiffness is
given as the natural frequency f of small oscillations about the rest state: k = (2 pi f)^2 m_bar with m_bar
the mean generalized mass trace(M(q_rest)) / k_q.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from kinemesh.dynamics.boundary import impulse_velocity, solve_positions, solve_velocities
from kinemesh.dynamics.eom import kinematics, mass_matrix, spd_solve
from kinemesh.dynamics.integrators import INTEGRATORS, Rollout, default_substeps, integrate
from kinemesh.dynamics.floating import FloatingDecoder, held_base
from kinemesh.dynamics.system import (Floor, PointForce, Spring, State, Stretch, System, Wind,
                                      make_handles, object_size, part_contacts, stretch_graph)
from kinemesh.errors import ConfigError
from kinemesh.geometry.kind import resolve_kind
from kinemesh.model.api import single_precision

log = logging.getLogger(__name__)

STRETCH_HZ = 100.0
"""The cloth's stretching energy (``system.Stretch`` on the ``STRETCH_NEIGHBOURS`` nearest sampled points) as the
fundamental frequency (Hz) of the sheet's stretch over the object size L: a membrane stiffness Y = rho_A (2 f L)^2
(N/m; sqrt(Y / rho_A) the speed of its stretch waves), k = Y A / sum_e L_e. Without it the latent sheet stretched
1.07-1.35x where MuJoCo's towel stays within 1.002x. Chosen on the 60 validation towels of ``kinemesh eval dynamics
--split val`` (mean Chamfer-L1 against MuJoCo at the cloth's 4 / s damping: 12 Hz 0.1234, 20 Hz 0.1204, 30 Hz
0.1192, 50 Hz 0.1185, 100 Hz 0.1182, better than 50 Hz on 50 of the 60 towels; the same run time; without the
energy 0.1337 at the former 8 / s). Until 2026-11-27 it was 12 Hz, held down by the demo cloth when it had no
rigid-body coordinates and hung only by stretching; docs/results/dynamics.md."""
STRETCH_NEIGHBOURS = 6

KIND_DEFAULTS = {
    # stiffness (Hz), damping alpha (1/s), density (kg/m^3, cloth: kg/m^2), barrier radius (prior std), stretching
    # energy (Hz, cloth only: STRETCH_HZ).
    # Articulated barrier at 2 std: with the calibrated prior the reduced coordinates are standardised training
    # motion, and a joint value spread evenly over its range has its limits at sqrt(3) = 1.7 std from the mean
    # (held-out validation doors, eval dynamics seeds 3-6: mean Chamfer-L1 0.024 at 2 std vs 0.035 at 3 std).
    "articulated": {"stiffness": 0.0, "damping": 0.5, "density": 300.0, "barrier": 2.0},
    "elastic": {"stiffness": 2.0, "damping": 1.0, "density": 1000.0, "barrier": 3.0},
    "cloth": {"stiffness": 1.0, "damping": 4.0, "density": 0.3, "barrier": 3.0, "stretch": STRETCH_HZ},
}
# Cloth latent damping 4 / s with the stretching energy (8 / s without it, was 1.5 before that): chosen on the
# validation towels of ``kinemesh eval dynamics --split val``. Without the stretching energy more damping was always
# closer to MuJoCo (3 towels: 0.157 at 1.5, 0.143 at 4, 0.137 at 8; 60 towels: 0.1337 at 8, 0.1248 at 24) by
# freezing the stretchy sheet, at the cost of the demo cloth's hang. With it (60 towels, 10 Hz: 0.1251 at 4,
# 0.1237 at 8) 4 / s let the stiffer 12 Hz sheet keep the demo's drop above 0.5 while the demo cloth had no
# rigid-body coordinates (8 / s at 10 Hz: 0.58, 4 / s at 12 Hz: 0.61; with them now 1.006). docs/results/dynamics.md.


LATENT_INERTIA = 1e-2
"""Latent inertia added to the mass matrix, as a fraction of the mean generalized mass."""
JOINT_LATENT_INERTIA = 1e-1
"""The same with the parts moved along their joints (``kinemesh.dynamics.joints.JointDecoder``): its k reduced
coordinates drive fewer joints, and the directions that move no joint carry only this inertia. At 1e-2, a
real pot (PartNet-Mobility 100033, lid sliding 3 cm) thrown up at 1 m/s handed the energy of the lid stopping
at its limit to those directions, which then moved thousands of std per second (10 frames: more than 10
minutes); at 1e-1, with the URDF's limits as stops, the same 10 frames take 1.3 s and the lid stops and
settles. A tenth of the mean generalized mass is about 1 % of the inertia of a one-joint object's moving
direction (the mean is over k = 8 coordinates); docs/results/real.md, "A lid thrown against its limit"."""


@dataclass
class SimulationSpec:
    """What to simulate. Vectors are (3,) in metres, m/s or N s in the mesh frame (Z up)."""

    kind: str = "auto"
    """articulated | elastic | cloth | auto (guessed from the mesh: open thin sheet -> cloth, three or more
    sizeable connected components -> articulated, else elastic)."""
    frames: int = 120
    """Output frames, including the first."""
    fps: float = 30.0
    """Output frame rate (1/s)."""
    substeps: int | None = None
    """Integrator steps per frame (more are taken automatically when a step is unstable); None: the integrator's
    default (``integrators.default_substeps``: 1 for ``distilled``, else 2)."""
    integrator: str = "auto"
    """auto (default): ``local`` for articulated objects (as close to MuJoCo on released doors, 0.0119 against
    0.0121 mean Chamfer-L1 in ``kinemesh eval dynamics``, and about 4x faster on real objects), ``distilled`` for
    elastic ones (validation beams 0.0257 against 0.0266 for ``midpoint``, 7x faster; ``kinemesh.dynamics.
    surrogate``), ``midpoint`` for cloth (``distilled`` not measured there); or midpoint (implicit,
    time-reversible), rk4, local, distilled (``kinemesh.dynamics.integrators``)."""
    gravity: bool = False
    """Apply gravity (0, 0, -9.81) m/s^2."""
    stiffness: float | None = None
    """Latent elastic stiffness as a natural frequency in Hz (0 = no restoring force); None = kind default."""
    damping: float | None = None
    """Rayleigh mass-proportional damping alpha in 1/s; None = kind default."""
    density: float | None = None
    """kg/m^3 (cloth: kg/m^2); None = kind default. Ignored when ``mass`` is given."""
    young: float | None = None
    """Young's modulus E (Pa) of an elastic object. When ``stiffness`` is None it sets the latent stiffness to
    the lowest free vibration of a body of that material and size, f = sqrt(E / rho) / (2 L) (the
    fundamental of a free-free bar of length L = the largest extent; rho from the mass and volume)."""
    mass: float | None = None
    """Total mass in kg (overrides density)."""
    pins: tuple = ()
    """Vertex ids held at their rest positions by stiff springs."""
    pin_frequency: float = 6.0
    """Natural frequency (Hz) of the whole object on its pin springs."""
    drag_vertex: int | None = None
    """Drag action: this vertex is moved to ``drag_to`` (boundary-condition solve), then released."""
    drag_to: tuple | None = None
    hold: bool = False
    """Drag action: keep holding the vertex at the target with a spring instead of releasing it."""
    lead_in: float = 0.5
    """Drag action: seconds of frames showing the drag (rest -> dragged pose) before the release."""
    poke_vertex: int | None = None
    """Poke action: an impulse ``impulse`` (N s) on this vertex at t = 0."""
    impulse: tuple | None = None
    poke_speed: float | None = None
    """Poke action: rescale the impulse so the poked vertex starts at this speed (m/s); None = as given."""
    vertex_names: dict | None = None
    """Vertex id -> the id messages name (the mesh file's, when the vertex ids index a merged working mesh)."""
    velocity: tuple | None = None
    """Initial velocity (m/s) of ``velocity_vertices`` (all vertices when empty), by least squares."""
    velocity_vertices: tuple = ()
    wind: tuple | None = None
    """Wind velocity (m/s); drag force on the surface (see ``Wind``)."""
    force_vertex: int | None = None
    """A constant force ``force`` (N) on this vertex during the whole simulation."""
    force: tuple | None = None
    barrier_radius: float | None = None
    """Soft barrier beyond this many prior standard deviations; None = kind default (articulated 2: about
    where the joint limits of the training data lie; elastic and cloth 3)."""
    rigid: bool | None = None
    """Give the object six rigid-body coordinates (a floating frame, ``kinemesh.dynamics.floating``) so it
    can translate and turn as a whole; None = yes for elastic and cloth objects (free bodies; their model
    holds deformation only), no for articulated ones (fixed base)."""
    floor: float | str | None = None
    """Height (m) of a floor the object's points cannot pass (penalty contact with friction); "auto" = at the
    mesh's lowest point (the object rests on it); None = no floor."""
    friction: float = 0.8
    """Floor friction coefficient mu."""
    fixed_base: bool | None = None
    """Articulated objects: the base part (the articulation's root part, else the part with the largest bounding
    box) stands still, as a cabinet on the floor (``kinemesh.dynamics.floating.BaseFrameDecoder``), so a drag
    moves the dragged part and not the whole object; None = yes for an articulated object with parts."""
    joints: bool = True
    """Articulated objects with an articulation (a URDF's joints, or joints predicted from the static shape,
    given to ``simulate_mesh``) move every part only along its joint
    (``kinemesh.dynamics.joints.JointDecoder``), so parts stay on their hinges; False = the parts move as the
    network decodes them (they may drift off their hinges)."""
    part_stops: bool = True
    """Articulated objects: parts that touch at rest cannot pass through each other's rest surfaces (a lid
    stops on its seat, a door in its frame; ``kinemesh.dynamics.system.PartContacts``)."""
    limit_stops: bool = False
    """Articulated objects moved along their joints: every joint limit is a stop
    (``kinemesh.dynamics.joints.JointStops`` with ``far``), as MuJoCo and PyBullet enforce a URDF's limits;
    for limits that are the object's own (``kinemesh simulate`` sets it for the joints of a URDF /
    PartNet-Mobility input). False: only the limits at which a part closes; predicted limits far from rest are
    guesses."""
    max_dq: float = 0.25
    """Latent CFL bound: substeps are added so that no reduced coordinate moves more than this many prior
    standard deviations per step (the decoder is nonlinear over a few std)."""
    seed: int = 0


def resolve_integrator(integrator: str, kind: str) -> str:
    """The integrator ``SimulationSpec.integrator`` means for an object of resolved ``kind``: "auto" is ``local``
    for articulated objects, ``distilled`` for elastic ones and ``midpoint`` for cloth; any other name is
    itself."""
    if integrator != "auto":
        return integrator
    return {"articulated": "local", "elastic": "distilled"}.get(kind, "midpoint")


STOP_DEPTH = 1e-2
"""Closed-joint stops (``kinemesh.dynamics.joints.JointStops``) carry a part's weight at this fraction of the
object's size of penetration. Demo cabinet, door pushed shut at about 2 rad/s: at 2e-4 (the part stops' value) the
stop is so stiff against 2 substeps per frame that the bounce threw the door open to 157 deg."""

LEAST_MOTION = 10.0
"""Drags solve for the state that reaches the target while moving the other parts least (``solve_positions``'
``least_motion``). Demo cabinet, door_left dragged 80 deg: its neighbour turned 51 -> 4.5 deg with the fine-tuned
checkpoint (dragged door 91.5 -> 95 deg, same residual); with the shipped one the neighbour stays at 10 deg and
its hinge drift drops 6.4 -> 4.6 cm (0.3, sessions before 31). 10 since session 31, chosen on the real validation
split's drag test: a box flap hinged on another flap reached its target with the parent flap turned too (0.75 of
the asked turn about its own hinge, the other branch of the two-hinge chain) and a table's caster 0.72; with 3 or
10 both follow (parts reaching 80 % of the asked motion 92.0 -> 93.8 % with predicted joints, 98.2 -> 100 % with
the URDF's), 10 with the other parts moving least (0.045 -> 0.006 % of the size; 3: 0.013 %); the dragged vertex
stays within 0.3 % of the size of its target (docs/results/real.md)."""


@contextlib.contextmanager
def torch_threads(n: int = 1):
    """Run the block with ``n`` torch threads (restored afterwards).

    The dynamics evaluate a small network on a handful of states many times; such tiny ops are several times
    faster on one thread than with intra-op parallelism (measured: 26 ms vs 99 ms per 19-state decode on the
    2-core machine while other jobs ran), so the simulation uses one thread.
    """
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _named(spec: SimulationSpec, vertex: int) -> int:
    """The id messages give ``vertex``: the mesh file's (``spec.vertex_names``) where the CLI mapped it."""
    return (spec.vertex_names or {}).get(vertex, vertex)


def _vec(v, name: str) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    if a.shape != (3,) or not np.isfinite(a).all():
        raise ConfigError(f"{name} must be three finite numbers X,Y,Z, got {v!r}")
    return a


def total_mass(vertices: np.ndarray, faces: np.ndarray, kind: str, density: float) -> float:
    """Mass (kg): density * volume (watertight, else convex hull) or areal density * area for cloth."""
    import trimesh

    m = trimesh.Trimesh(vertices, faces, process=False)
    if kind == "cloth":
        return float(density * m.area)
    try:
        vol = abs(float(m.volume)) if m.is_watertight else float(m.convex_hull.volume)
    except Exception:  # degenerate hull (flat mesh)
        vol = 0.0
    if not vol > 0:
        vol = float(m.area) * 0.01  # a 1 cm shell
    return float(density * vol)


def _point_normals_areas(decoder, vertices: np.ndarray, faces: np.ndarray):
    import trimesh
    from scipy.spatial import cKDTree

    m = trimesh.Trimesh(vertices, faces, process=False)
    pts = decoder.rest_points.detach().double().numpy()
    nearest = cKDTree(vertices).query(pts)[1]
    normals = np.asarray(m.vertex_normals)[nearest]
    areas = np.full(len(pts), float(m.area) / len(pts))
    return torch.as_tensor(normals, dtype=torch.float64), torch.as_tensor(areas, dtype=torch.float64)


def mean_generalized_mass(system: System, q=None) -> float:
    """Mean diagonal of M(q) over the latent coordinates at q (default q_rest), kg m^2 per unit q^2."""
    kin = kinematics(system, system.q_rest if q is None else q)
    p = system.latent
    return float((torch.diagonal(mass_matrix(system, kin.J)) * p).sum() / p.sum().clamp_min(1.0))


def rest_state(system: System, n_handles: int = 128, seed: int = 0) -> tuple[torch.Tensor, float]:
    """q (k,) whose decoded shape best matches the rest mesh, and the RMS vertex residual (m).

    The prior mean is a typical state, not necessarily the undeformed one, so the rest state is solved for; in
    a motion-probe basis (``kinemesh.reduce.active_subspace.fit_probes``) the origin q = 0 is the encoder's
    posterior of the rest pose itself and is kept (solving would push q out along the probes' weakest
    directions to fit details of the rest shape; the rest offset keeps those instead).
    """
    sub = getattr(system.decoder, "subspace", None)
    if getattr(sub, "method", None) == "probes" and system.dim == sub.k:
        q = torch.zeros(system.dim, dtype=torch.float64)
        kin = kinematics(system, q)
        r = kin.x - system.decoder.rest_points.detach().to(kin.x)
        return q, float(torch.sqrt((r * r).sum(-1).mean()))
    n = int(system.decoder.rest_vertices.shape[0])
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(n, size=min(n, n_handles), replace=False))
    h = make_handles(system.decoder, ids)
    return solve_positions(system, h, h.rest, q_init=torch.zeros(system.dim, dtype=torch.float64), n_starts=1,
                           iters=12, reg=1e-6, broyden=True)


def build_system(decoder, vertices: np.ndarray, faces: np.ndarray, spec: SimulationSpec,
                 derivatives: str = "fd", articulation=None, part_names=None) -> tuple[System, dict]:
    """A System for ``decoder`` bound to the mesh (vertices (n, 3) m, faces (m, 3)) and ``spec``.

    ``articulation`` (an ArticulatedObject) and ``part_names`` (the name of every part index of the decoder's
    ``point_groups``): an articulated object's parts then move along these joints (``spec.joints``).

    Returns (system, info) where info records the chosen kind, mass and parameters. Raises ConfigError for
    bad options (negative stiffness/damping/mass, unknown kind, bad vertex ids).
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    kind = resolve_kind(spec.kind, vertices, faces)
    if spec.integrator not in INTEGRATORS + ("auto",):
        raise ConfigError(f"integrator {spec.integrator!r}: choose one of {INTEGRATORS + ('auto',)}")
    d = KIND_DEFAULTS[kind]
    stiff_hz = d["stiffness"] if spec.stiffness is None else float(spec.stiffness)
    alpha = d["damping"] if spec.damping is None else float(spec.damping)
    barrier = d["barrier"] if spec.barrier_radius is None else float(spec.barrier_radius)
    if spec.young is not None and not (math.isfinite(spec.young) and spec.young > 0):
        raise ConfigError(f"young (Young's modulus) must be > 0 Pa, got {spec.young}")
    for name, v in (("stiffness", stiff_hz), ("damping", alpha), ("pin_frequency", spec.pin_frequency),
                    ("friction", spec.friction)):
        if not (math.isfinite(v) and v >= 0):
            raise ConfigError(f"{name} must be a finite number >= 0, got {v}")
    if spec.mass is not None:
        if not (math.isfinite(spec.mass) and spec.mass > 0):
            raise ConfigError(f"mass must be > 0 kg, got {spec.mass}")
        mtot = float(spec.mass)
    else:
        dens = d["density"] if spec.density is None else float(spec.density)
        if not (math.isfinite(dens) and dens > 0):
            raise ConfigError(f"density must be > 0, got {dens}")
        mtot = total_mass(vertices, faces, kind, dens)
    if spec.young is not None and spec.stiffness is None and kind == "elastic":
        rho = mtot / max(total_mass(vertices, faces, kind, 1.0), 1e-12)  # kg / m^3
        size = max(float(np.ptp(vertices, axis=0).max()), 1e-9)
        stiff_hz = math.sqrt(float(spec.young) / rho) / (2.0 * size)
    floor = spec.floor
    if isinstance(floor, str):
        if floor != "auto":
            raise ConfigError(f"floor must be a height in metres or 'auto', got {floor!r}")
        floor = float(vertices[:, 2].min())
    if floor is not None and not math.isfinite(float(floor)):
        raise ConfigError(f"floor height must be finite, got {floor}")
    rigid = (kind in ("elastic", "cloth")) if spec.rigid is None else bool(spec.rigid)
    groups = getattr(decoder, "point_groups", None)
    base = None
    joints = kind == "articulated" and spec.joints and articulation is not None and part_names is not None \
        and groups is not None and len(np.unique(groups)) > 1
    if joints:  # parts along their joints; the root part held unless --free-base
        from kinemesh.dynamics.joints import JointDecoder

        jd = JointDecoder(decoder, articulation, part_names, hold_base=spec.fixed_base is not False, direct=True)
        joints = bool(jd.active or jd.direct)  # no joint can move: the base-frame decoder below
    if joints:
        decoder = jd
        names = list(part_names)
        base = names.index(articulation.root) if spec.fixed_base is not False and articulation.root in names \
            else None
    elif kind == "articulated" and spec.fixed_base is not False and groups is not None and len(np.unique(groups)) > 1:
        # the articulation's root (a globe's stand, not its larger globe), else the largest bounding box
        root = list(part_names).index(articulation.root) if articulation is not None and part_names is not None \
            and articulation.root in part_names else None
        decoder, base = held_base(decoder, root)
    if rigid:
        decoder = FloatingDecoder(decoder)
    P = int(decoder.rest_points.shape[0])
    k = int(decoder.mu_cond.shape[-1])
    g = (0.0, 0.0, -9.81) if spec.gravity else (0.0, 0.0, 0.0)
    system = System(decoder, torch.full((P,), mtot / P, dtype=torch.float64), torch.zeros(k, dtype=torch.float64),
                    gravity=g, damping_mass=alpha, barrier_radius=barrier, derivatives=derivatives,
                    elastic_mask=decoder.elastic_mask if rigid else None)
    if joints and jd.direct:  # a joint's own coordinate has no prior (a wheel turns past the barrier radius)
        system.prior_mask[jd.k_network:jd.latent_dim] = False
    if floor is not None:
        rest_min = float(decoder.rest_points.detach()[:, 2].min())
        if rest_min < float(floor) - 1e-3 * max(float(np.ptp(vertices, axis=0).max()), 1e-9):
            log.warning("the mesh starts %.3g m below the floor; contact pushes it up", float(floor) - rest_min)
        # contact carries a point's weight at 0.2 % of the object's size: stiff enough that a narrow object
        # standing on its edge stays up (the rotational stiffness k w^2 / 12 of the contact patch must beat
        # the toppling torque g h of the centroid height) and soft enough for a few substeps per frame
        size = max(float(np.ptp(vertices, axis=0).max()), 1e-6)
        system.forces.append(Floor(float(floor), friction=float(spec.friction), depth=2e-3 * size))
    if rigid:  # the rest state has no rigid motion: solve the deformation alone, then append zeros
        inner = System(decoder.decoder, system.point_mass, torch.zeros(decoder.k_latent, dtype=torch.float64),
                       derivatives=derivatives)
        q_lat, rest_rms = rest_state(inner, seed=spec.seed)
        q_rest = torch.cat([q_lat, torch.zeros(k - decoder.k_latent, dtype=torch.float64)])
    else:
        q_rest, rest_rms = rest_state(system, seed=spec.seed)
    system.q_rest = q_rest
    mbar = mean_generalized_mass(system)
    # A small latent inertia (1 % of the mean generalized mass) on every reduced coordinate: directions that
    # move almost no mass (e.g. a handle's own token) otherwise make M nearly singular, and the implicit solve
    # stopped contracting on doors released under gravity (eval dynamics: 0 of 3 doors completed at 1e-6,
    # 3 of 3 at 1e-2). It enters T = 1/2 qd^T M qd consistently, so energy is still conserved.
    system.latent_inertia = (JOINT_LATENT_INERTIA if joints else LATENT_INERTIA) * mbar
    system.stiffness = (2 * math.pi * stiff_hz) ** 2 * mbar
    kin = kinematics(system, q_rest)
    g_force = float((torch.einsum("ipc,pc->i", kin.J, system.point_mass[:, None] * system.gravity).abs()
                     * system.latent).max())
    # the barrier (cubic) balances 4x the gravity force or a 3 Hz spring at 0.5 std inside it
    system.barrier_stiffness = max(4.0 * g_force, (2 * math.pi * 3.0) ** 2 * mbar * 0.5) / 0.25
    n_stops = 0
    if kind == "articulated" and spec.part_stops:
        stops = part_contacts(decoder, faces, vertices, base=base)
        jstops = None
        if joints:  # a part closing on its frame stops at its closed limit (``limit_stops``: at every limit)
            from kinemesh.dynamics.joints import JointStops

            jstops = JointStops(decoder, depth=STOP_DEPTH * float(np.ptp(vertices, axis=0).max()),
                                damping_ratio=1.0, far=spec.limit_stops)
            n_stops = len(jstops)
        if stops is not None and n_stops and spec.limit_stops:
            # the URDF's joints are the object's own motion and its limits stop each part: a part they stop
            # needs no contact with the base's rest surface, which on a real mesh blocked a microwave door
            # from opening (its hinge edge swings a few mm into the side wall's rest plane)
            stopped = np.concatenate([decoder._points_of[n].numpy() for n in set(jstops.parts)])
            held = np.isin(stops.i.numpy(), stopped)
            stops = stops.subset(~held)
        if stops is not None:
            system.forces.append(stops)
        if n_stops:
            system.forces.append(jstops)
    if "stretch" in d:  # a sheet that resists stretching; rest lengths of the decoded rest state (no force at rest)
        i, j = (torch.as_tensor(e) for e in stretch_graph(decoder.rest_points.detach().double().numpy(),
                                                           STRETCH_NEIGHBOURS))
        length = torch.linalg.norm(kin.x[i] - kin.x[j], dim=-1)
        size = float(np.ptp(vertices, axis=0).max())
        system.stretch = Stretch(i, j, length, mtot * (2.0 * d["stretch"] * size) ** 2 / float(length.sum()))
    if spec.pins:
        ph = make_handles(decoder, list(spec.pins))
        k_pin = (2 * math.pi * spec.pin_frequency) ** 2 * mtot / len(ph)
        system.springs.append(Spring(ph, ph.rest.clone(), k_pin))
    if spec.wind is not None:
        w = _vec(spec.wind, "wind")
        normals, areas = _point_normals_areas(decoder, vertices, faces)
        system.forces.append(Wind(torch.as_tensor(w), normals, areas, two_sided=(kind == "cloth")))
    if spec.force_vertex is not None:
        fh = make_handles(decoder, [spec.force_vertex])
        system.forces.append(PointForce(fh, torch.as_tensor(_vec(spec.force, "force"))[None]))
    info = {"kind": kind, "mass_kg": mtot, "stiffness_hz": stiff_hz, "damping_per_s": alpha,
            "latent_stiffness": system.stiffness, "mean_generalized_mass": mbar, "k_q": k - 6 * rigid,
            "rigid_body": rigid, "integrator": resolve_integrator(spec.integrator, kind), "fixed_base": base is not None, "joints": bool(joints), "floor": floor, "barrier_radius": barrier,
            "points": P, "rest_fit_rms_m": rest_rms, "gravity": list(g),
            # the joints the network's reduced coordinates move, and those moved by coordinates of their own
            "joints_network": [n for n in jd.active if n not in jd.direct] if joints else [],
            "joints_own": list(jd.direct) if joints else [], "joint_stops": n_stops}
    return system, info


def stiffen_barrier(system: System, state: State, depth: float = 0.5) -> None:
    """Raise the barrier stiffness so the state's total energy (kinetic plus any potential released later is
    bounded by the initial total here) is absorbed within ``depth`` std of penetration: k_b depth^3 / 3 >= 2 E."""
    from kinemesh.dynamics.eom import energies

    e = energies(system, state)
    need = 6.0 * max(e["kinetic"], e["total"], 0.0) / depth ** 3
    system.barrier_stiffness = max(system.barrier_stiffness, need)


STOP_STEPS = 16
"""Substeps per period of a stiffened joint stop (``stiffen_stops``): a contact shorter than a few steps is
not damped by the implicit midpoint steps and bounces back elastically. The demo cabinet's door pushed shut at
1 m/s against its stop stiffened for that speed, angle 2 s later: 69 deg at 2 substeps per frame, 40 deg at 8
steps per period, 4.2 / 7.0 / 5.7 deg at 16 / 24 / 32 (resolved: the critically damped stop barely bounces);
23 deg with the unstiffened stop (session 43)."""


def stiffen_stops(system: System, state: State, fps: float = 30.0) -> int:
    """Stiffen the joint stops (``kinemesh.dynamics.joints.JointStops``) so that a stop point reaching its
    stop at the speed v it starts with (a throw, a poke) is caught within the stop's depth: k >= v^2 / depth^2
    per kg (k p^2 / 2 = v^2 / 2 at p = depth). At the weight-carrying stiffness alone a real pot's lid thrown
    up at 3 m/s passed its 3 cm limit into the range the network no longer moves it in
    (docs/results/real.md). Returns the substeps per frame (at ``fps``) that resolve the stiffest stop's
    period in ``STOP_STEPS`` steps (1 when none was stiffened)."""
    from kinemesh.dynamics.eom import point_velocities
    from kinemesh.dynamics.joints import JointStops

    stops = [f for f in system.forces if isinstance(f, JointStops) and len(f)]
    for f in stops:  # (from the depth they were built with: a gentle rollout after a throw is not stiffened)
        f.depth = f.weight_depth
    if not stops or not float(state.qd.abs().max()) > 0:
        return 1
    xd = point_velocities(system, state.q.double(), state.qd.double())[1]
    n = 1
    for f in stops:
        v2 = float((xd[f.i] ** 2).sum(-1).max())
        if v2 > 9.81 * f.depth:  # faster than the weight-carrying stiffness catches within the depth
            f.depth = 9.81 * f.depth ** 2 / v2  # k = g / depth -> v^2 / depth^2
            n = max(n, math.ceil(STOP_STEPS * math.sqrt(f.stiffness) / (2.0 * math.pi * fps)))
    return n


def relax_stops(system: System, q) -> None:
    """Start the part stops (``PartContacts.relax``) at state q (k,): the released pose."""
    stops = [f for f in system.forces if hasattr(f, "relax")]  # PartContacts, JointStops
    if stops:
        x = kinematics(system, torch.as_tensor(q, dtype=torch.float64)).x
        for f in stops:
            f.relax(x)


def initial_conditions(system: System, spec: SimulationSpec, info: dict | None = None) -> tuple[State, np.ndarray]:
    """(initial State, lead-in q (L, k)) from the action in ``spec`` (boundary conditions, Sec. 5.3).

    drag: q0 puts the vertex at the target (least squares), released at rest (or held by a spring); the
    lead-in frames interpolate rest -> q0. poke: qd0 = M^-1 J^T p. velocity: least-squares qd0.
    Raises ConfigError for a zero-length drag, out-of-range vertex ids or non-finite vectors.
    """
    info = {} if info is None else info
    q0 = system.q_rest.clone()
    qd0 = torch.zeros_like(q0)
    lead = np.zeros((0, system.dim))
    rp = system.decoder.rest_points.detach().double()
    size = object_size(system.decoder)
    if spec.drag_vertex is not None:
        if spec.drag_to is None:
            raise ConfigError("drag needs a target: --to X,Y,Z")
        h = make_handles(system.decoder, [spec.drag_vertex])
        target = torch.as_tensor(_vec(spec.drag_to, "--to"))[None]
        if float(torch.linalg.norm(target - h.rest)) < 1e-4 * size:
            raise ConfigError(f"zero-length drag: the target of vertex {_named(spec, spec.drag_vertex)} is its rest "
                              f"position {tuple(np.round(h.rest[0].numpy(), 6))}")
        now = h.positions(kinematics(system, q0).x, rp)
        q0, rms = solve_positions(system, h, target, q_init=system.q_rest, seed=spec.seed,
                                  least_motion=LEAST_MOTION, polish=True)
        info["drag_residual_m"] = rms
        reached = h.positions(kinematics(system, q0).x, rp)
        moved = float(torch.linalg.norm(reached - now))
        info["drag_moved_m"] = moved
        short = rms > 0.25 * float(torch.linalg.norm(target - now))
        if short:
            log.warning("drag: vertex %d reaches only %.3g m of the requested %.3g m (the model allows no closer "
                        "plausible state); --hold keeps it there", _named(spec, spec.drag_vertex), moved,
                        float(torch.linalg.norm(target - now)))
        if spec.hold:  # a 4 Hz spring on the mass the vertex moves (its effective mass 3 / tr(J_h M^-1 J_h^T)):
            # on the whole object's mass a small part (a wheel) would ring far faster than the steps resolve
            kin0 = kinematics(system, q0)
            Jh = h.jacobian(kin0.J).reshape(system.dim, -1)  # (k, 3)
            M0 = mass_matrix(system, kin0.J)
            Minv_Jh = torch.stack([spd_solve(M0, Jh[:, c]) for c in range(3)], 1)
            mobility = float(torch.trace(Jh.T @ Minv_Jh))
            m_eff = min(system.total_mass, 3.0 / mobility) if mobility > 0 else system.total_mass
            k_hold = (2 * math.pi * 4.0) ** 2 * m_eff
            # short of the target, hold the vertex where the drag got to: a spring to a target beyond every
            # plausible state stores 1/2 k gap^2 that only presses q into the barrier, which stiffen_barrier then
            # makes too stiff to integrate (an unlike ceiling fan's rotor: 1,324 J, barrier x 28,000, diverged)
            system.springs.append(Spring(h, (reached if short else target).clone(), k_hold))
        n_lead = int(round(spec.lead_in * spec.fps))
        if n_lead > 0:
            s = np.linspace(0.0, 1.0, n_lead + 1)[:-1]
            s = s * s * (3 - 2 * s)  # smoothstep
            lead = system.q_rest.numpy()[None] + s[:, None] * (q0 - system.q_rest).numpy()[None]
    if spec.velocity is not None:
        v = _vec(spec.velocity, "--velocity")
        ids = list(spec.velocity_vertices) or list(np.random.default_rng(spec.seed).choice(
            int(system.decoder.rest_vertices.shape[0]), size=min(256, int(system.decoder.rest_vertices.shape[0])),
            replace=False))
        h = make_handles(system.decoder, ids)
        qd0, vrms = solve_velocities(system, h, q0, np.tile(v, (len(h), 1)))
        info["velocity_residual_m_s"] = vrms
    if spec.poke_vertex is not None:
        if spec.impulse is None:
            raise ConfigError("poke needs --impulse X,Y,Z (N s)")
        p = _vec(spec.impulse, "--impulse")
        if not np.linalg.norm(p) > 0:
            raise ConfigError("poke impulse is zero")
        h = make_handles(system.decoder, [spec.poke_vertex])
        dqd = impulse_velocity(system, h, q0, p[None])
        if spec.poke_speed is not None:
            vh = torch.einsum("ihc,i->hc", h.jacobian(kinematics(system, q0).J), dqd)
            speed = float(torch.linalg.norm(vh))
            if not speed > 0:
                raise ConfigError(f"poke: vertex {_named(spec, spec.poke_vertex)} cannot move in the model's state "
                                  "space")
            dqd = dqd * (float(spec.poke_speed) / speed)
            info["poke_impulse_scale"] = float(spec.poke_speed) / speed
        qd0 = qd0 + dqd
    return State(q0, qd0, 0.0), lead


@dataclass
class SimulationResult:
    """A simulated animation: the sequence (vertices per frame), the rollout (q, energies) incl. lead-in."""

    sequence: object  # KinematicSequence
    rollout: Rollout
    q: np.ndarray  # (T, k) all frames incl. lead-in
    info: dict = field(default_factory=dict)


def decode_vertices(decoder, q: np.ndarray, chunk: int = 128, rest_offset: np.ndarray | None = None,
                    max_vertices: int = 2_000_000) -> np.ndarray:
    """Vertices (T, N, 3) float32 of states q (T, k), decoded ``chunk`` frames at a time (fewer when
    chunk x N would exceed ``max_vertices``) without gradients into one preallocated array, so the peak
    memory is the output plus one bounded chunk (the decoder blocks the vertices itself). The network's cost per
    state falls with the batch (bench beam, float64: 0.59 ms at 8 states, 0.45 ms at 32, 0.41 ms at 120), and so
    does the fixed cost per call (the bench beam's 120 frames of 442 vertices, float32: 10.1 ms in 4 chunks of 32,
    6.7 ms in one).

    ``rest_offset`` (N, 3) is added to every frame (see ``run``'s rest correction).
    """
    dt = decoder.mu_cond.dtype
    n = int(decoder.rest_vertices.shape[0])
    chunk = max(1, min(int(chunk), int(max_vertices) // max(n, 1)))
    frames = np.empty((len(q), n, 3), dtype=np.float32)
    offset = None if rest_offset is None else torch.as_tensor(rest_offset)
    with torch.no_grad():
        for i in range(0, len(q), chunk):
            qi = torch.as_tensor(np.asarray(q[i:i + chunk]), dtype=dt)
            if offset is not None and isinstance(decoder, FloatingDecoder):  # the offset turns with the body
                v = decoder.vertices(qi, body_offset=offset)
            else:
                v = decoder.vertices(qi)
                if offset is not None:
                    v = v + offset.to(v)
            frames[i:i + len(qi)] = v.numpy()
    if not np.isfinite(frames).all():
        from kinemesh.errors import SimulationDivergedError

        raise SimulationDivergedError("decoded vertices are not finite")
    return frames


def rest_offset(decoder, q_rest) -> np.ndarray:
    """(N, 3) float64: rest mesh minus the decoded rest state (what the model cannot reproduce at rest)."""
    with torch.no_grad():
        dec = decoder.vertices(torch.as_tensor(q_rest).to(decoder.mu_cond.dtype)[None])[0].double().numpy()
    return decoder.rest_vertices.detach().double().numpy() - dec


def simulate_mesh(decoder, vertices: np.ndarray, faces: np.ndarray, spec: SimulationSpec, part_ids=None,
        progress: bool = True, derivatives: str = "fd", category: str = "unknown",
        rest_correction: bool = True, articulation=None, part_names=None) -> SimulationResult:
    """Build the system, solve the initial conditions, integrate and decode: a SimulationResult whose
    ``sequence`` is a KinematicSequence (kind, conditions and energies in ``meta``).

    With ``rest_correction`` the residual of the rest fit (rest mesh minus decoded rest state, per vertex) is
    added to every frame, so the animation starts exactly at the input mesh and the model contributes the
    motion; the correction's size is recorded as ``meta.simulation.rest_fit_rms_m``. ``articulation`` and
    ``part_names``: the joints an articulated object's parts move along (``build_system``).

    Raises ConfigError for bad options, SimulationDivergedError when unstable even with small steps.
    """
    from kinemesh.data.sequence import KinematicSequence

    if spec.frames < 1:
        raise ConfigError(f"frames must be >= 1, got {spec.frames}")
    if not (spec.fps > 0 and math.isfinite(spec.fps)):
        raise ConfigError(f"fps must be > 0, got {spec.fps}")
    # the network's token transforms of the states decoded more than once (the rest state's in the set-up, the
    # frames ``distilled`` checked in the output) are kept for the whole call
    cache = getattr(decoder, "token_cache", None)
    with torch_threads(1), contextlib.nullcontext() if cache is None else cache():
        t0 = time.perf_counter()
        system, info = build_system(decoder, vertices, faces, spec, derivatives=derivatives,
                                    articulation=articulation, part_names=part_names)
        state0, lead = initial_conditions(system, spec, info)
        relax_stops(system, state0.q)
        stiffen_barrier(system, state0)
        n_stop = stiffen_stops(system, state0, spec.fps)  # substeps that resolve a stiffened stop
        lead = lead[: max(0, spec.frames - 1)]
        n_dyn = spec.frames - len(lead)
        t1 = time.perf_counter()
        if n_stop > 1:
            substeps = max(spec.substeps or default_substeps(info["integrator"]), n_stop)
        else:
            substeps = spec.substeps
        roll = integrate(system, state0, n_dyn, fps=spec.fps, substeps=substeps,
                         integrator=info["integrator"], progress=progress, max_dq=spec.max_dq)
        t2 = time.perf_counter()
        q_all = np.concatenate([lead, roll.q]) if len(lead) else roll.q
        offset = rest_offset(system.decoder, system.q_rest) if rest_correction else None
        # float32 output vertices: the transformer in float32 too (``single_precision``), which also reuses the
        # token transforms of the frames ``distilled`` checked in that precision
        with single_precision(system.decoder):
            frames = decode_vertices(system.decoder, q_all, rest_offset=offset)
        t3 = time.perf_counter()
    info.update(rest_correction=bool(rest_correction), setup_s=t1 - t0, simulate_s=t2 - t1, decode_s=t3 - t2, energy_drift=roll.energy_drift,
                step_warnings=roll.warnings, substeps_final=int(roll.substeps[-1]) if len(roll.substeps) > 1
                else spec.substeps or default_substeps(info["integrator"]), lead_in_frames=int(len(lead)),
                anchors=roll.anchors,
                local_disagreement=roll.disagreement, exact_frames=roll.exact_frames)
    times = np.arange(spec.frames, dtype=np.float64) / spec.fps
    conditions = {k: (list(v) if isinstance(v, tuple) else v) for k, v in spec.__dict__.items()}
    meta = {"category": category, "kind": info["kind"], "source": "kinemesh.dynamics", "units": "m", "up": "z",
            "conditions": conditions, "simulation": {k: v for k, v in info.items() if k != "step_warnings"},
            "energy": {"kinetic": roll.kinetic.tolist(), "potential": roll.potential.tolist(),
                       "total": roll.total.tolist(), "start_frame": int(len(lead))}}
    rest = decoder.rest_vertices.detach().float().numpy()
    seq = KinematicSequence(rest, np.asarray(faces, dtype=np.int32), frames, times.astype(np.float32),
                            None if part_ids is None else np.asarray(part_ids, dtype=np.int32), meta)
    return SimulationResult(seq, roll, q_all, info)
