"""``kinemesh convert IN OUT``: convert between mesh, sequence and articulated-object formats."""

from __future__ import annotations

FORMATS = ("auto", "npz", "glb", "obj", "obj-seq", "anime", "usd", "partnet")
MAX_FRAMES = 10000
"""Bound of --frames (joint configurations sampled from an articulated input)."""


def register(sub) -> None:
    from kinemesh.checks import number

    p = sub.add_parser(
        "convert",
        help="convert any loadable input to .npz, animated .glb, OBJ frames, a rest .obj, .anime, animated "
        ".usd/.usda/.usdc or a PartNet folder",
        description="Read IN (mesh, .npz, .anime, folder of frames, URDF or PartNet-Mobility folder) and "
        "write OUT. The format follows OUT's suffix: .npz (KinematicSequence), .glb (animated, morph "
        "targets), .obj (the rest mesh, its parts as o groups), .anime, .usd/.usda/.usdc (mesh points "
        "time-sampled per frame; needs usd-core); a path without suffix becomes a folder of OBJ frames. "
        "Articulated inputs are sampled at --frames joint configurations (frame 0 = rest).",
    )
    p.add_argument("input", help="input file or folder")
    p.add_argument("output", help="output file or folder")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="output format (default: from OUT's suffix; 'partnet' writes a PartNet-Mobility-style "
        "folder from an articulated input)",
    )
    p.add_argument(
        "--frames", type=number(int, 1, MAX_FRAMES), default=16,
        help=f"joint configurations sampled for articulated inputs (1..{MAX_FRAMES})"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed of the joint-configuration sampling")
    p.add_argument(
        "--motion",
        choices=("random", "sweep"),
        default="random",
        help="random configurations within limits, or all joints swept from lower to upper limit",
    )
    p.add_argument("--fps", type=number(float, 0, 1000, lo_open=True), default=30.0, help="frame rate for inputs without timing (frames/s)")
    p.add_argument(
        "--max-vertices",
        type=number(int, 0),
        default=50000,
        help="vertex budget; larger meshes are decimated with a warning (0 = never)",
    )
    p.add_argument(
        "--kind",
        default="mixed",
        choices=("articulated", "elastic", "cloth", "mixed"),
        help="meta.kind for inputs that do not say (mesh folders, .anime, single meshes)",
    )
    p.add_argument("--category", default=None, help="override meta.category")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    p.set_defaults(func=run)


def output_format(path, fmt: str = "auto") -> str:
    """The output format for ``path`` (see FORMATS)."""
    from pathlib import Path

    from kinemesh.errors import ConfigError

    if fmt != "auto":
        return fmt
    s = Path(path).suffix.lower()
    table = {".npz": "npz", ".glb": "glb", ".obj": "obj", ".anime": "anime", ".usd": "usd", ".usda": "usd",
             ".usdc": "usd", "": "obj-seq"}
    if s not in table:
        raise ConfigError(
            f"cannot tell the output format from '{path}'; use .npz, .glb, .obj, .anime, .usd, a folder "
            f"name without suffix, or --format"
        )
    return table[s]


def run(args) -> int:
    from pathlib import Path

    from kinemesh.checks import out_dir, out_file
    from kinemesh.data import exporters, loaders
    from kinemesh.errors import ConfigError, InputFileError

    src, dst = Path(args.input), Path(args.output)
    fmt = output_format(dst, args.format)
    if src.resolve() == dst.resolve():
        raise ConfigError("input and output are the same path")
    if fmt in ("obj-seq", "partnet"):
        out_dir(dst, args.force, option="OUT")
    else:
        out_file(dst, args.force, option="OUT")
    budget = args.max_vertices or None
    if fmt == "partnet":
        if loaders.sequence_kind(src) not in ("urdf", "partnet"):
            raise InputFileError(src, "--format partnet needs a URDF or PartNet-Mobility folder as input")
        from kinemesh.data.partnet import load_articulated, write_partnet_folder

        obj = load_articulated(src, max_vertices=budget)
        if args.category:
            obj.category = args.category
        write_partnet_folder(obj, dst)
        print(f"wrote {dst} ({len(obj.parts)} parts, {len(obj.movable_joints)} movable joints)")
        return 0
    seq = loaders.load_sequence(
        src,
        n_frames=args.frames,
        seed=args.seed,
        motion=args.motion,
        fps=args.fps,
        max_vertices=budget,
        kind=args.kind,
        category=args.category,
    )
    if args.category:
        seq.meta["category"] = args.category
    face_parts = None  # the parts a rest .obj carries as o groups
    if fmt == "npz":
        exporters.export_npz(seq, dst)
    elif fmt == "glb":
        exporters.export_glb(seq, dst)
    elif fmt == "obj":
        from kinemesh.geometry.segments import sequence_face_parts

        face_parts, names = sequence_face_parts(seq)  # a URDF's / sequence's parts become the OBJ's groups
        if len(names) < 2:
            face_parts = None
        exporters.export_obj(seq.rest_vertices, seq.faces, dst, face_parts=face_parts, part_names=names)
    elif fmt == "anime":
        exporters.export_anime(seq, dst)
    elif fmt == "usd":
        from kinemesh.data.usd import write_usd_sequence

        write_usd_sequence(seq, dst if dst.suffix else dst.with_suffix(".usd"))
    else:
        exporters.export_obj_sequence(seq, dst)
    what = "the rest frame" if fmt == "obj" else f"{seq.n_frames} frames"  # a single .obj holds the rest pose
    if face_parts is not None:
        what += f", {len(names)} parts as o groups"
    print(f"wrote {dst} ({fmt}: {what}, {seq.n_vertices} vertices, {seq.n_faces} faces)")
    return 0
