"""``kinemesh physics``: attach materials per part and run a physics test case (SOPHY)."""

from __future__ import annotations

import json
from pathlib import Path


def _vec3(text: str) -> tuple[float, float, float]:
    import argparse
    import math

    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 3 or not all(map(math.isfinite, values)):
        raise argparse.ArgumentTypeError(f"expected three comma-separated numbers X,Y,Z, got {text!r}")
    return values  # type: ignore[return-value]


def register(sub) -> None:
    from kinemesh.checks import number

    positive = number(float, 0, lo_open=True)
    p = sub.add_parser(
        "physics",
        help="assign physical materials per part and simulate drop/throw/tilt/drag/wind",
        description="Assign a physical material to every part (from a materials.json or inferred by rules) and "
                    "simulate a SOPHY test case in MuJoCo (rigid, articulated, elastic, elastoplastic and cloth "
                    "parts) or the material point method (granular). Writes sequence.npz, video.mp4, "
                    "materials.json (edit and re-run with --materials), report.json and scene.xml.",
    )
    p.add_argument("input", nargs="?", help="mesh, .npz sequence, .urdf or PartNet-Mobility folder")
    p.add_argument("--case", default="drop", help="drop, throw, tilt, drag, wind, or 'all' (default: drop)")
    p.add_argument("--materials", default="auto", help="'auto' (rules), a materials.json, or a library name "
                                                       "for every part (default: auto)")
    p.add_argument("--rules", help="a rules JSON replacing the shipped rules (with --materials auto)")
    p.add_argument("--out", help="output folder (an existing non-empty folder needs --force)")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty --out folder")
    p.add_argument("--duration", type=positive, help="simulated time, s (default 1.5)")
    p.add_argument("--fps", type=positive, default=30.0, help="frames per second (default 30)")
    p.add_argument("--height", type=number(float, 0), help="drop/throw height of the lowest point, m (default 0.3)")
    p.add_argument("--velocity", type=_vec3, help="throw: linear velocity VX,VY,VZ m/s")
    p.add_argument("--angular-velocity", type=_vec3, help="throw: angular velocity WX,WY,WZ rad/s")
    p.add_argument("--tilt", type=number(float, 0, 80), help="tilt: plane angle, degrees (default 30)")
    p.add_argument("--drag-vertex", type=number(int, 0), help="drag: vertex to pull (default: top-most)")
    p.add_argument("--drag-direction", type=_vec3, help="drag: direction DX,DY,DZ")
    p.add_argument("--wind", type=_vec3, help="wind: air velocity X,Y,Z m/s (default 8,0,0)")
    p.add_argument("--timestep", type=positive, help="physics time step, s (default 5e-4)")
    p.add_argument("--size", type=positive, help="scale the object so that its largest side is this many metres "
                   "(inputs are read as metres; PartNet-Mobility objects come in normalized units, a microwave "
                   "about 2 m wide)")
    p.add_argument("--no-video", action="store_true", help="skip the MP4")
    p.add_argument("--list-materials", action="store_true", help="print the material library and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    from kinemesh.errors import ConfigError

    if args.list_materials:
        _print_library()
        return 0
    if not args.input or not args.out:
        raise ConfigError("give an INPUT and --out DIR (or --list-materials)")
    from kinemesh.checks import out_dir

    out_dir(args.out, args.force)
    quiet_mujoco_log()
    from kinemesh.materials.physics import CASES, CaseConfig

    cases = list(CASES) if args.case == "all" else [args.case]
    overrides = {
        "duration": args.duration, "fps": args.fps, "height": args.height, "velocity": args.velocity,
        "angular_velocity": args.angular_velocity, "tilt_deg": args.tilt, "drag_vertex": args.drag_vertex,
        "drag_direction": args.drag_direction, "wind_velocity": args.wind, "timestep": args.timestep,
    }
    configs = [CaseConfig(case=c, **{k: v for k, v in overrides.items() if v is not None}).validate()
               for c in cases]

    from kinemesh.materials.objects import MESH_SUFFIXES, load_object, mesh_object

    working = order = None  # a single mesh file: simulated merged, written back with the file's vertices
    if Path(args.input).is_file() and Path(args.input).suffix.lower() in MESH_SUFFIXES:
        import numpy as np

        from kinemesh.geometry.segments import load_segmented
        from kinemesh.materials.objects import welded_object

        # a segmented file (OBJ groups, GLB nodes or part ids) gives a material per part, welded together
        working = load_segmented(args.input, auto_parts=False, max_vertices=None)
        if working.part_ids is not None and len(np.unique(working.part_ids)) >= 2:
            obj, order = welded_object(working.mesh, working.part_ids, working.part_names, Path(args.input).stem)
        else:
            obj = mesh_object(working.mesh, Path(args.input).stem)
    else:
        obj = load_object(args.input)
    obj = _sized(obj, args.size, args.input)
    assignment = _assignment(args, obj)
    out = Path(args.out)
    # the video faces the side the joints open towards (the default camera saw a PartNet microwave's back)
    turn = None
    if not args.no_video:
        from kinemesh.viz.render import opening_turn

        turn = opening_turn(obj)
    for cfg in configs:
        target = out / cfg.case if len(configs) > 1 else out
        _run_case(obj, assignment, cfg, target, video=turn, working=working, order=order)
    return 0


def _sized(obj, size: float | None, source: str):
    """``obj`` scaled so that its largest rest bounding-box side is ``size`` metres (None: as read); prints the
    size simulated, with a hint when a PartNet-Mobility folder (normalized units) is read as it is."""
    import numpy as np

    extent = np.ptp(obj.merged(None)[0], axis=0)
    if size is not None:
        obj = obj.scaled(size / float(extent.max()))
        extent = extent * (size / float(extent.max()))
    dims = " x ".join(f"{x:.3g}" for x in extent)
    hint = ""
    if size is None and Path(source).is_dir() and (Path(source) / "mobility.urdf").is_file():
        hint = " (PartNet-Mobility units are normalized, not metres: give --size to set its real size)"
    print(f"object: {dims} m{hint}")
    return obj


def quiet_mujoco_log() -> None:
    """Send MuJoCo's warnings to the log instead of its default handler, which also appends them to
    ``MUJOCO_LOG.TXT`` in the working folder."""
    import logging

    import mujoco

    mujoco.set_mju_user_warning(lambda msg: logging.getLogger("mujoco").warning(msg.strip()))


def _assignment(args, obj):
    from kinemesh.materials.assign import PartMaterial, infer_materials, load_materials_file, load_rules
    from kinemesh.materials.library import get_material, material_names

    names = [p.name for p in obj.parts if len(p.vertices)]
    if args.materials == "auto":
        return infer_materials(obj.parts, obj.category, load_rules(args.rules) if args.rules else None)
    if args.materials in material_names():
        m = get_material(args.materials)
        return {n: PartMaterial(n, m, "command line") for n in names}
    if not Path(args.materials).suffix == ".json" and not Path(args.materials).exists():
        from kinemesh.errors import ConfigError

        raise ConfigError(f"unknown material '{args.materials}'; known materials: {', '.join(material_names())} "
                          "(or give a materials.json)")
    return load_materials_file(args.materials, names)


def _run_case(obj, assignment, cfg, out: Path, video: float | None, working=None, order=None) -> None:
    """Simulate one case and write its folder, with an MP4 unless ``video`` is None (else the degrees its
    camera turns about +Z, ``RenderStyle.azimuth``); ``working`` (a :class:`~kinemesh.data.meshes.WorkingMesh`)
    maps the sequence back to the input file's vertex count and order (``order``: the working vertex of each
    of the welded parts' vertices, :func:`~kinemesh.materials.objects.welded_object`)."""
    from kinemesh.atomic import atomic_dir
    from kinemesh.materials.assign import write_assignment
    from kinemesh.materials.mpm import is_granular, simulate_granular
    from kinemesh.materials.physics import run_case

    if is_granular(assignment):
        result = simulate_granular(obj, assignment, cfg, progress=True)
    else:
        result = run_case(obj, assignment, cfg, progress=True)
    if working is not None:
        import numpy as np

        seq = result.sequence
        assert seq.n_vertices == len(working.mesh.vertices), "the parts keep the working mesh's vertices"
        if order is not None:  # the parts' vertices back in the working mesh's order
            back = np.argsort(order)
            seq.rest_vertices, seq.frames = seq.rest_vertices[back], seq.frames[:, back]
            seq.part_ids = None if seq.part_ids is None else seq.part_ids[back]
        seq.rest_vertices, seq.frames = working.to_file(seq.rest_vertices), working.to_file(seq.frames)
        seq.faces = working.faces.astype(np.int32)
        seq.part_ids = None if seq.part_ids is None else working.to_file(seq.part_ids[:, None])[:, 0]
    with atomic_dir(out) as tmp:
        result.sequence.save(tmp / "sequence.npz")
        write_assignment(assignment, tmp / "materials.json")
        (tmp / "report.json").write_text(json.dumps(result.report, indent=2, default=float) + "\n")
        (tmp / "scene.xml").write_text(result.scene_xml)
        for name, blob in result.scene_files.items():
            (tmp / name).write_bytes(blob)
        if video is not None:
            from kinemesh.viz.render import RenderStyle, render_frames

            seq = result.sequence
            render_frames(seq.frames, seq.faces, tmp / "video.mp4", fps=cfg.fps, part_ids=seq.part_ids,
                          style=RenderStyle(azimuth=video))
    rep = result.report
    extra = ", ".join(f"{k} {rep[k]:.4g}" for k in ("bounce_height_m", "slide_distance_m", "peak_deformation",
                                                    "final_displacement_m", "total_mass_kg") if k in rep)
    print(f"{cfg.case}: {extra}")
    print(f"  wrote {out}/ (sequence.npz, materials.json, report.json, scene.xml{'' if video is None else ', video.mp4'})")


def _print_library() -> None:
    from kinemesh.materials.library import get_material, material_names

    print(f"{'material':<14}{'behavior':<15}{'E (Pa)':>10}{'nu':>6}{'rho':>7}{'yield (Pa)':>11}{'phi':>6}{'e':>6}")
    for name in material_names():
        m = get_material(name)
        print(f"{name:<14}{m.behavior:<15}{m.youngs_modulus:>10.3g}{m.poisson_ratio:>6.2f}{m.density:>7.0f}"
              f"{m.yield_stress:>11.3g}{m.friction_angle:>6.0f}{m.restitution:>6.2f}")
