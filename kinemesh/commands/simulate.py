"""``kinemesh simulate``: 4D generation from one static mesh under an action, a force or an initial velocity.

The mesh is bound to the kinematic model, its latent space reduced to k_q active coordinates, and the
latent Euler-Lagrange equations (NeuROK Sec. 5) are integrated from initial conditions solved from the
action (Sec. 5.3). Writes an animated GLB (one morph target per frame) and optionally a video, the
KinematicSequence ``.npz`` and an energy plot.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def _triple(text: str) -> tuple[float, float, float]:
    import argparse

    import math

    try:
        vals = tuple(float(x) for x in str(text).replace(" ", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected X,Y,Z numbers, got {text!r}") from None
    if len(vals) != 3 or not all(map(math.isfinite, vals)):
        raise argparse.ArgumentTypeError(f"expected three comma-separated numbers X,Y,Z, got {text!r}")
    return vals


def _ids(text: str) -> tuple[int, ...]:
    import argparse

    try:
        return tuple(int(x) for x in str(text).replace(" ", "").split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated vertex ids, got {text!r}") from None


def _floor(text: str):
    """--floor: a height in metres or "auto" (resolved against the mesh later)."""
    import argparse
    import math

    if text.strip().lower() == "auto":
        return "auto"
    try:
        z = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a height in metres or auto, got {text!r}") from None
    if not math.isfinite(z):
        raise argparse.ArgumentTypeError(f"floor height must be finite, got {text!r}")
    return z


def add_simulation_arguments(p) -> None:
    """Options shared by ``simulate`` (and reused by scripts): physics and integration."""
    from kinemesh.checks import number

    nonneg, positive = number(float, 0), number(float, 0, lo_open=True)
    g = p.add_argument_group("physics")
    g.add_argument("--kind", default="auto", choices=["auto", "articulated", "elastic", "cloth"],
                   help="object kind; sets stiffness/damping/density defaults (default: guessed from the mesh)")
    g.add_argument("--gravity", action="store_true", help="apply gravity (0, 0, -9.81) m/s^2 (Z up)")
    g.add_argument("--stiffness", type=nonneg, default=None, metavar="HZ",
                   help="latent elastic stiffness as the natural frequency of small oscillations in Hz "
                        "(0 = no restoring force, e.g. a free hinge; default per kind: articulated 0, "
                        "elastic 2, cloth 1)")
    g.add_argument("--damping", type=nonneg, default=None, metavar="C",
                   help="Rayleigh mass-proportional damping in 1/s (default per kind: 0.5 / 1.0 / 4.0)")
    g.add_argument("--mass", type=positive, default=None, help="total mass in kg (default: density x volume)")
    g.add_argument("--density", type=positive, default=None,
                   help="kg/m^3 (cloth kg/m^2); default per kind: 300 / 1000 / 0.3")
    g.add_argument("--young", type=positive, default=None, metavar="PA",
                   help="Young's modulus of an elastic object; sets the default stiffness to sqrt(E/rho)/(2 L)")
    g.add_argument("--floor", type=_floor, default=None, metavar="Z|auto",
                   help="a floor at height Z m (auto: under the mesh's lowest point) with penalty contact "
                        "and friction")
    g.add_argument("--friction", type=nonneg, default=0.8, help="floor friction coefficient (default 0.8)")
    g.add_argument("--no-rigid", action="store_true",
                   help="no rigid-body coordinates (by default elastic and cloth objects can also translate and "
                        "turn as a whole; articulated objects keep a fixed base)")
    g.add_argument("--barrier-radius", type=positive, default=None, metavar="STD",
                   help="soft barrier on each reduced coordinate beyond this many prior standard deviations "
                        "of the calibrated prior (default per kind: articulated 2, about the training joint limits; "
                        "elastic and cloth 3)")
    g.add_argument("--pin", type=_ids, default=(), metavar="IDS", help="vertex ids held in place, e.g. 0,5,9")
    t = p.add_argument_group("integration")
    t.add_argument("--frames", type=number(int, 1, 100000), default=120, help="output frames (default 120)")
    t.add_argument("--fps", type=number(float, 0, 1000, lo_open=True), default=30.0, help="output frame rate (default 30)")
    t.add_argument("--substeps", type=number(int, 1, 10000), default=None,
                   help="integrator steps per frame (default 2, 1 for distilled; more are "
                   "taken automatically, with a warning, when a step is unstable)")
    t.add_argument("--integrator", default="auto", choices=["auto", "midpoint", "rk4", "local", "distilled"],
                   help="auto (default): local for articulated objects, distilled for elastic ones, midpoint for "
                   "cloth; implicit midpoint "
                   "(time-reversible), classical RK4, or local: implicit midpoint on a local Taylor model of the "
                   "network refreshed per frame segment (several times faster), or distilled: local on a "
                   "polynomial surrogate of the network checked against it at every frame (elastic bodies)")


def register(sub) -> None:
    from kinemesh.checks import add_part_arguments, number

    p = sub.add_parser("simulate", help="generate a 4D animation of a mesh under an action, force or velocity",
                       description=__doc__.strip().splitlines()[0])
    p.add_argument("mesh", help="input mesh (OBJ, PLY, STL, GLB, OFF; metres, Z up), URDF or PartNet-Mobility "
                                "folder")
    add_part_arguments(p)
    p.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="model checkpoint folder (default: the shipped default checkpoint)")
    a = p.add_argument_group("actions (vertex ids index the mesh file's vertices)")
    a.add_argument("--action", choices=["drag", "none"], default=None,
                   help="drag: move --vertex to --to, then release (or --hold)")
    a.add_argument("--vertex", type=_ids, default=(), metavar="ID",
                   help="the dragged vertex (drag) or the vertices given --velocity (default all)")
    a.add_argument("--to", type=_triple, default=None, metavar="X,Y,Z", help="drag target position (m); write --to=-0.1,0,0.5 when X is negative")
    a.add_argument("--hold", action="store_true",
                   help="drag: hold the vertex at the target with a spring (short of it: where the drag got)")
    a.add_argument("--lead-in", type=number(float, 0), default=0.5, metavar="S",
                   help="drag: seconds of frames showing the drag before the release (default 0.5)")
    a.add_argument("--poke", type=int, default=None, metavar="ID", help="vertex receiving an impulse at t = 0")
    a.add_argument("--impulse", type=_triple, default=None, metavar="X,Y,Z", help="poke impulse (N s)")
    a.add_argument("--poke-speed", type=number(float, 0, lo_open=True), default=None, metavar="M/S",
                   help="rescale the poke impulse so the poked vertex starts at this speed")
    a.add_argument("--velocity", type=_triple, default=None, metavar="VX,VY,VZ",
                   help="initial velocity (m/s) of --vertex (or of the whole object)")
    a.add_argument("--wind", type=_triple, default=None, metavar="X,Y,Z", help="wind velocity (m/s)")
    a.add_argument("--free-base", action="store_true",
                   help="articulated: do not hold the base part (the root link, else the largest) at rest; by default it stands fixed")
    a.add_argument("--free-parts", action="store_true",
                   help="articulated: move the parts as the network decodes them instead of along their joints "
                        "(the URDF's, else predicted from the static shape); they may then drift off their hinges")
    add_simulation_arguments(p)
    m = p.add_argument_group("model")
    m.add_argument("--k-q", type=int, default=8, help="reduced coordinates k_q (active subspace; default 8)")
    m.add_argument("--basis", choices=("auto", "probes", "prior"), default="auto",
                   help="what spans the reduced coordinates: the encoder's posteriors of motion probes (an "
                        "articulated object's parts moved along its joints: the URDF's, else predicted from the "
                        "shape; an elastic body squashed, bent, twisted, dented; a cloth folded and hung) or the "
                        "active subspace of prior samples (NeuROK Sec. 4.3); auto (default): probes for "
                        "articulated objects and cloth, the prior for elastic bodies")
    m.add_argument("--points", type=int, default=1024, help="surface points carrying the mass (default 1024)")
    m.add_argument("--device", default="cpu", choices=["cpu"],
                   help="cpu (the latent dynamics are small dense problems; no GPU path yet)")
    m.add_argument("--seed", type=int, default=0)
    o = p.add_argument_group("outputs")
    o.add_argument("--out", required=True, help="animated GLB to write (morph targets)")
    o.add_argument("--video", default=None, help="also render an .mp4 / .gif")
    o.add_argument("--npz", default=None, help="also write the KinematicSequence .npz")
    o.add_argument("--plot-energy", default=None, metavar="PNG", help="kinetic/potential/total energy plot")
    o.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.set_defaults(func=run)


def spec_from_args(args):
    """SimulationSpec from parsed arguments. Raises ConfigError for inconsistent actions."""
    from kinemesh.dynamics.scene import SimulationSpec
    from kinemesh.errors import ConfigError

    drag_vertex = drag_to = None
    vertices = tuple(args.vertex or ())
    if args.action == "drag":
        if len(vertices) != 1:
            raise ConfigError("--action drag needs exactly one --vertex ID")
        if args.to is None:
            raise ConfigError("--action drag needs --to X,Y,Z")
        drag_vertex, drag_to = vertices[0], args.to
    elif args.to is not None:
        raise ConfigError("--to is only used with --action drag")
    if (args.poke is None) != (args.impulse is None):
        raise ConfigError("--poke ID and --impulse X,Y,Z go together")
    return SimulationSpec(
        kind=args.kind, frames=args.frames, fps=args.fps, substeps=args.substeps, integrator=args.integrator,
        gravity=args.gravity, stiffness=args.stiffness, damping=args.damping, density=args.density,
        mass=args.mass, pins=tuple(args.pin or ()), drag_vertex=drag_vertex, drag_to=drag_to, hold=args.hold,
        lead_in=args.lead_in, poke_vertex=args.poke, impulse=args.impulse, velocity=args.velocity,
        poke_speed=args.poke_speed,
        velocity_vertices=vertices if args.velocity is not None and args.action != "drag" else (),
        wind=args.wind, seed=args.seed, barrier_radius=getattr(args, "barrier_radius", None),
        young=getattr(args, "young", None), floor=getattr(args, "floor", None),
        friction=getattr(args, "friction", 0.8), rigid=False if getattr(args, "no_rigid", False) else None,
        fixed_base=False if getattr(args, "free_base", False) else None,
        joints=not getattr(args, "free_parts", False))


def write_outputs(result, out_glb=None, video=None, npz=None, plot_energy=None, fps=30.0, progress=True,
                  title="", style=None):
    """Write the GLB / video / npz / energy plot of a SimulationResult; returns the written paths. ``style``:
    the video's ``kinemesh.viz.render.RenderStyle`` (default: cameras turned to face the side that moves,
    ``kinemesh.viz.render.facing_turn``)."""
    import numpy as np

    written = []
    seq = result.sequence
    if out_glb is not None:
        from kinemesh.data.exporters import export_glb

        written.append(export_glb(seq, out_glb))
    if npz is not None:
        written.append(seq.save(npz))
    if video is not None:
        from kinemesh.viz.render import RenderStyle, facing_turn, render_frames

        if style is None:  # the camera faces the side that moves (PartNet-Mobility fronts face -x)
            style = RenderStyle(azimuth=facing_turn(seq.frames[0], seq.frames))
        written.append(render_frames(seq.frames, seq.faces, video, fps=fps, part_ids=seq.part_ids,
                                     progress=progress, style=style))
    if plot_energy is not None:
        from kinemesh.viz.plots import plot_curves

        r = result.rollout
        start = result.info.get("lead_in_frames", 0)
        t = (np.arange(len(r.total)) + start) / fps
        written.append(plot_curves(plot_energy, t, {"kinetic": r.kinetic, "potential": r.potential,
                                                   "total": r.total}, xlabel="time (s)", ylabel="energy (J)",
                                   title=title or "latent Lagrangian dynamics: energy"))
    return written


def run(args) -> int:
    import dataclasses

    import numpy as np
    import torch

    from kinemesh.checks import out_file
    from kinemesh.dynamics.scene import simulate_mesh, torch_threads
    from kinemesh.errors import ConfigError
    from kinemesh.articulation.probes import probes_for
    from kinemesh.geometry.kind import resolve_kind
    from kinemesh.geometry.segments import load_segmented
    from kinemesh.reduce import ReductionConfig, bind

    spec = spec_from_args(args)
    for option, path, exts in (("--out", args.out, (".glb",)), ("--video", args.video, (".mp4", ".gif")),
                               ("--npz", args.npz, (".npz",)), ("--plot-energy", args.plot_energy, (".png",))):
        if path is not None:
            out_file(path, args.force, option, exts)
    wm = load_segmented(args.mesh, labels=args.labels, auto_parts=not args.no_auto_parts)
    vertices, faces = np.asarray(wm.mesh.vertices, dtype=np.float64), np.asarray(wm.mesh.faces, dtype=np.int64)
    n = len(wm.file_vertices)
    for vid in [spec.drag_vertex, spec.poke_vertex, *spec.velocity_vertices, *spec.pins]:
        if vid is not None and not 0 <= int(vid) < n:
            raise ConfigError(f"vertex id {vid} is out of range: {args.mesh} has {n} vertices (ids 0..{n - 1})")
    # --vertex, --poke and --pin index the file's vertices: map them to the merged / decimated working mesh
    work = lambda i: None if i is None else int(wm.to_work[int(i)])  # noqa: E731
    spec.vertex_names = {work(i): int(i) for i in (spec.drag_vertex, spec.poke_vertex) if i is not None}
    spec.drag_vertex, spec.poke_vertex = work(spec.drag_vertex), work(spec.poke_vertex)
    spec.velocity_vertices = tuple(work(i) for i in spec.velocity_vertices)
    spec.pins = tuple(dict.fromkeys(work(i) for i in spec.pins))
    # a URDF / PartNet-Mobility input is articulated by definition (its links and joints)
    kind = resolve_kind("articulated" if spec.kind == "auto" and wm.articulation is not None else spec.kind,
                        vertices, faces, wm.part_ids)
    probes, joints_from, art = probes_for(vertices, faces, wm.part_ids, wm.part_names, kind, wm.articulation,
                                          seed=args.seed) if args.basis != "prior" else (None, "-", wm.articulation)
    with torch_threads(1):
        b = bind(vertices, faces, args.checkpoint, kind=kind, part_ids=wm.part_ids,
                 reduction=ReductionConfig(k_q=args.k_q, basis=args.basis), n_points=args.points, seed=args.seed,
                 device=args.device, dtype=torch.float64, probes=probes)
    spec.kind = b.kind
    spec.limit_stops = joints_from == "given"  # a URDF's limits are the object's own: every one is a stop
    result = simulate_mesh(b.decoder, vertices, faces, spec, part_ids=wm.part_ids, progress=True,
                            category=str(getattr(args, "category", "unknown")), articulation=art,
                            part_names=wm.part_names)
    seq = result.sequence  # back to the file's vertices (count and order) unless the mesh was decimated
    result.sequence = dataclasses.replace(
        seq, rest_vertices=wm.to_file(seq.rest_vertices), frames=wm.to_file(seq.frames), faces=wm.faces,
        part_ids=None if seq.part_ids is None else wm.to_file(seq.part_ids[:, None])[:, 0])
    paths = write_outputs(result, args.out, args.video, args.npz, args.plot_energy, fps=spec.fps)
    info = result.info
    article = "an" if info["kind"][0] in "aeiou" else "a"
    print(f"simulated {spec.frames} frames of {article} {info['kind']} object ({n} vertices, k_q={info['k_q']}, "
          f"mass {info['mass_kg']:.3g} kg) in {info['simulate_s'] + info['decode_s']:.1f} s"
          + (f"; {len(info['step_warnings'])} step reductions" if info["step_warnings"] else "")
          + (f"; joints: {len(info['joints_network'])} moved by the network's coordinates, {len(info['joints_own'])} by "
             f"coordinates of their own" if info.get("joints") else "")
          + (f"; {wm.part_ids.max() + 1} parts ({wm.part_source})" if wm.part_ids is not None else "")
          + (f"; outputs are the mesh decimated to {len(vertices)} vertices" if wm.decimated else ""))
    for p in paths:
        print(f"wrote {p}")
    return 0
