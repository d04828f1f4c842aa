"""``kinemesh render INPUT --out FILE.mp4|.gif|.png``: offscreen pictures and videos of meshes and motions."""

from __future__ import annotations

MAX_PIXEL_BYTES = 4 << 30
"""Bound of the renderer's working memory per view: about 100 bytes per supersampled pixel (depth, face ids,
barycentrics, colour buffers), so (width x supersample) x (height x supersample) x 100 B <= 4 GiB."""
MAX_AXES = 64
"""Joint arrows drawn at most (the first ones); a 5,000-link chain would otherwise draw 5,000 per frame."""


def register(sub) -> None:
    from kinemesh.checks import number

    p = sub.add_parser(
        "render",
        help="render a mesh, 4D sequence, URDF/PartNet object or articulation result to MP4/GIF/PNG",
        description=(
            "Render headless on CPU (built-in z-buffer rasterizer; no display or GPU needed). INPUT is a "
            "mesh (OBJ/PLY/STL/GLB/OFF), a KinematicSequence .npz (or mesh-frame folder / .anime), a URDF "
            "or PartNet-Mobility folder (each movable joint is swept through its range in turn, axes drawn "
            "as arrows) or an articulation-result .json (its axes drawn over --mesh). A still mesh written "
            "to .mp4/.gif turns once on a turntable. A .png of a motion is a grid of up to 8 evenly spaced "
            "frames."
        ),
    )
    p.add_argument("input", nargs="+",
                   help="mesh, .npz sequence, URDF/PartNet folder or articulation .json; several inputs are "
                        "rendered side by side (one tile each, own framing)")
    p.add_argument("--out", required=True, help="output file: .mp4, .gif or .png")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument("--views", type=int, default=1, help="camera views side by side (1-4 presets; default 1)")
    p.add_argument("--turn", type=number(float, -360, 360), default=None, metavar="DEG",
                   help="turn every camera by DEG about +Z (e.g. 180 to look at an object's -x side; default: "
                        "face the side of the (first) input that moves, 0 for a still mesh)")
    p.add_argument("--fps", type=number(float, 0, 1000, lo_open=True), default=None,
                   help="frames per second (default: the input's own, else 30)")
    p.add_argument("--size", default="640x480",
                   help="size of each view, WIDTHxHEIGHT pixels (default 640x480)")
    p.add_argument("--max-frames", type=int, default=600,
                   help="longer motions are subsampled evenly to at most this many frames (default 600)")
    p.add_argument("--frames-per-joint", type=int, default=45,
                   help="frames per joint sweep for URDF/PartNet inputs (default 45)")
    p.add_argument("--mesh", default=None, help="the mesh an articulation .json describes")
    p.add_argument("--no-axes", action="store_true", help="do not draw joint axes")
    p.add_argument("--no-floor", action="store_true", help="no floor and shadow")
    p.add_argument("--no-captions", action="store_true", help="no per-frame captions")
    p.add_argument("--supersample", type=number(int, 1, 8), default=2, help="anti-aliasing factor (1 = fastest; default 2)")
    p.add_argument("--max-vertices", type=int, default=50000,
                   help="vertex budget of the loaders (0 = never decimate)")
    p.set_defaults(func=run)


def parse_size(text: str) -> tuple[int, int]:
    from kinemesh.errors import ConfigError

    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError as exc:
        raise ConfigError(f"--size must look like 640x480, got {text!r}") from exc
    if w < 16 or h < 16 or w > 8192 or h > 8192:
        raise ConfigError(f"--size {text}: width and height must be within 16..8192 pixels")
    return w, h


def run(args) -> int:
    import time
    from pathlib import Path

    import numpy as np

    from kinemesh.checks import out_file
    from kinemesh.errors import ConfigError
    from kinemesh.viz import render
    from kinemesh.viz.inputs import load_drawable, turntable

    out = out_file(args.out, force=args.force, suffixes=(".mp4", ".gif", ".png"))
    if args.views < 1 or args.views > 12:
        raise ConfigError(f"--views must be within 1..12, got {args.views}")
    if args.max_frames < 1:
        raise ConfigError(f"--max-frames must be >= 1, got {args.max_frames}")
    size = parse_size(args.size)
    need = size[0] * size[1] * args.supersample**2 * 100
    if need > MAX_PIXEL_BYTES:
        raise ConfigError(f"--size {args.size} with --supersample {args.supersample} needs about {need / 2**30:.0f} "
                          f"GiB (bound {MAX_PIXEL_BYTES >> 30} GiB); lower --supersample or --size")
    items = []
    for path in args.input:
        d = load_drawable(path, mesh=args.mesh, frames_per_joint=args.frames_per_joint, fps=args.fps,
                          max_vertices=args.max_vertices or None, max_frames=args.max_frames)
        frames, axes, captions = d.frames, d.axes[:MAX_AXES], d.captions
        if len(d.axes) > MAX_AXES and not args.no_axes:
            print(f"{d.title}: drawing the first {MAX_AXES} of {len(d.axes)} joint axes")
        if frames.shape[0] == 1 and out.suffix.lower() in (".mp4", ".gif"):
            frames, axes = turntable(frames[0], n_frames=72, axes=axes)
            captions = None
        if frames.shape[0] > args.max_frames:
            pick = np.linspace(0, frames.shape[0] - 1, args.max_frames).round().astype(int)
            frames = frames[pick]
            axes = [(o[pick], v[pick]) for o, v in axes]
            captions = [captions[i] for i in pick] if captions else None
        items.append((d, frames, [] if args.no_axes else axes, captions))
    t0 = time.perf_counter()
    d, frames, axes, captions = items[0]
    turn = render.facing_turn(d.frames[0], d.frames) if args.turn is None else args.turn  # before a turntable
    style = render.RenderStyle(floor=not args.no_floor, shadow=not args.no_floor, azimuth=turn,
                               supersample=max(1, args.supersample))
    if len(items) == 1:
        render.render_frames(
            frames,
            d.faces,
            out,
            fps=args.fps or d.fps,
            part_ids=d.part_ids,
            axes=axes or None,
            views=args.views,
            size=size,
            style=style,
            titles=None if (args.no_captions or not captions) else captions,
        )
        what = d.title
    else:
        if args.views != 1:
            raise ConfigError("--views applies to a single input; several inputs are tiled side by side")
        render.render_side_by_side(
            [(f, it.faces, it.part_ids, ax or None, None if args.no_captions else it.title)
             for it, f, ax, _ in items],
            out, fps=args.fps or d.fps, size=size, style=style,
        )
        frames = max((f for _, f, _, _ in items), key=len)
        what = ", ".join(it.title for it, _, _, _ in items)
    print(f"wrote {out} ({frames.shape[0]} frame(s), {len(items)} input(s), {args.views} view(s), "
          f"{time.perf_counter() - t0:.1f} s): {what}")
    return 0
