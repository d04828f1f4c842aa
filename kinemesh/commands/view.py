"""``kinemesh view INPUT``: the interactive browser viewer (viser), bound to 127.0.0.1 by default."""

from __future__ import annotations


def register(sub) -> None:
    from kinemesh.checks import add_part_arguments

    p = sub.add_parser(
        "view",
        help="interactive browser viewer: play sequences, drive joints and reduced coordinates, drag, let go",
        description=(
            "Start a local web server showing INPUT (mesh, .npz sequence, URDF/PartNet folder or "
            "articulation .json with --mesh) and print its URL. In the browser: play/scrub a sequence, drive "
            "joints with sliders, move the reduced coordinates q of the kinematic model, click a vertex and "
            "drag the gizmo (releasing it runs the latent dynamics), and download the motion as "
            "GLB/MP4/NPZ. A mesh is shown and moved part by part (a part made of many components as one), the "
            "parts as for kinemesh simulate. Stop with Ctrl-C."
        ),
    )
    p.add_argument("input", help="mesh, .npz sequence, URDF/PartNet folder or articulation .json")
    add_part_arguments(p)
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1 = this machine only; "
                        "0.0.0.0 exposes it on the network)")
    p.add_argument("--checkpoint", default=None,
                   help="kinematic model checkpoint folder (default: the shipped one)")
    p.add_argument("--mesh", default=None, help="the mesh an articulation .json describes")
    p.add_argument("--device", default="cpu", help="torch device of the model: cpu (default) or cuda")
    p.add_argument("--no-model", action="store_true", help="do not load the kinematic model")
    p.add_argument("--max-vertices", type=int, default=20000,
                   help="vertex budget (larger meshes are decimated; default 20000 keeps the browser fast)")
    p.add_argument("--frames-per-joint", type=int, default=45, help="frames per joint sweep for URDF inputs")
    p.add_argument("--seconds", type=float, default=None,
                   help="serve for this many seconds and exit (default: until Ctrl-C)")
    p.set_defaults(func=run)


def check_host(host: str, port: int) -> None:
    """Refuse an empty --host (servers read it as every interface); warn on stderr when the address is not
    loopback. Raises ConfigError."""
    import ipaddress
    import sys

    from kinemesh.errors import ConfigError

    if not host.strip():
        raise ConfigError("--host is empty, which would serve on every network interface; give an address "
                          "(127.0.0.1: this machine only, 0.0.0.0: every interface)")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost
        loopback = False
    if not loopback:
        print(f"warning: kinemesh view binds {host}:{port}, beyond this machine: anyone who can reach it can view "
              f"and drive the viewer", file=sys.stderr)


def run(args) -> int:
    import time

    from kinemesh.errors import ConfigError
    from kinemesh.viz.inputs import load_drawable
    from kinemesh.viz.viewer import ViewerApp, ViewerConfig, ViewerGUI

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be within 0..65535, got {args.port}")
    check_host(args.host, args.port)
    if args.checkpoint is not None:
        from pathlib import Path

        from kinemesh.errors import InputFileError

        if not Path(args.checkpoint).is_dir():
            raise InputFileError(args.checkpoint, "checkpoint folder not found")
    d = load_drawable(args.input, mesh=args.mesh, frames_per_joint=args.frames_per_joint,
                      max_vertices=args.max_vertices or None, parts=True, labels=args.labels,
                      auto_parts=not args.no_auto_parts)
    app = ViewerApp(d, ViewerConfig(checkpoint=args.checkpoint, device=args.device))
    gui = ViewerGUI(app, host=args.host, port=args.port, load_model_async=not args.no_model)
    if args.no_model:
        app.model_status = "kinematic model disabled (--no-model)"
        app._notify("model")
    print(f"kinemesh view: serving {d.title} at {gui.url}  (Ctrl-C to stop)", flush=True)
    try:
        if args.seconds is not None:
            time.sleep(max(args.seconds, 0.0))
        else:
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        gui.stop()
    return 0
