"""``kinemesh demo``: bundled example objects brought to life with the default checkpoint.

For each example (an articulated cabinet, a soft toy, a cloth) the mesh is bound to the kinematic model,
reduced to its active subspace and simulated under an action with the latent Lagrangian dynamics; the
command writes per example an animated GLB, the KinematicSequence ``.npz``, an MP4 and an energy plot, plus
one PNG contact sheet of all examples, and prints where they are.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

EXAMPLES = ("cabinet", "toy", "cloth")
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "assets" / "examples"
MESH_SUFFIXES = (".obj", ".ply", ".glb", ".stl", ".off")


def register(sub) -> None:
    from kinemesh.checks import number

    p = sub.add_parser("demo", help="animate the bundled example objects (GLB, NPZ, MP4, contact sheet)",
                       description=__doc__.strip().splitlines()[0])
    p.add_argument("--out", default="kinemesh_demo", help="output folder (default ./kinemesh_demo; an existing "
                                                           "non-empty folder needs --force)")
    p.add_argument("--force", action="store_true", help="write into an existing non-empty --out folder")
    p.add_argument("--checkpoint", default=None, metavar="DIR", help="model checkpoint (default: shipped one)")
    p.add_argument("--examples", default=",".join(EXAMPLES),
                   help=f"comma-separated subset of {','.join(EXAMPLES)}")
    p.add_argument("--frames", type=number(int, 2, 100000), default=60,
                   help="frames per animation (default 60 = 2 s at 30 fps)")
    p.add_argument("--fps", type=number(float, 0, 1000, lo_open=True), default=30.0)
    p.add_argument("--no-video", action="store_true", help="skip the MP4 files (faster)")
    p.add_argument("--points", type=int, default=512, help="surface points carrying the mass (default 512)")
    p.add_argument("--k-q", type=int, default=8, help="reduced coordinates (default 8)")
    p.add_argument("--barrier-radius", type=float, default=None, metavar="STD",
                   help="soft barrier beyond this many prior std (default per kind: articulated 2, elastic and "
                        "cloth 3; see kinemesh simulate --help)")
    p.set_defaults(func=run)


# ---------------------------------------------------------------- example meshes
def _find_asset(name: str) -> Path | None:
    """A bundled mesh whose file name contains ``name`` (kinemesh/assets/examples), if any."""
    if not EXAMPLES_DIR.is_dir():
        return None
    keys = {"toy": ("toy", "soft"), "cabinet": ("cabinet",), "cloth": ("cloth",)}[name]
    for p in sorted(EXAMPLES_DIR.rglob("*")):
        if p.is_file() and p.suffix.lower() in MESH_SUFFIXES and any(k in p.stem.lower() for k in keys):
            return p
    return None


def _built_mesh(name: str):
    """Fallback example meshes built with trimesh (metres, Z up, resting on z = 0)."""
    import numpy as np
    import trimesh

    if name == "cabinet":
        body = trimesh.creation.box(extents=(0.5, 0.4, 0.8))
        body.apply_translation((0, 0, 0.4))
        door = trimesh.creation.box(extents=(0.48, 0.02, 0.76))
        door.apply_translation((0, -0.212, 0.4))
        body, door = body.subdivide().subdivide(), door.subdivide().subdivide()
        return trimesh.util.concatenate([body, door])
    if name == "toy":
        from kinemesh.synth.elastic import soft_shape

        return soft_shape("toy", np.random.default_rng(3))
    if name == "cloth":
        n = 24
        xs = np.linspace(-0.3, 0.3, n)
        X, Y = np.meshgrid(xs, xs, indexing="ij")
        v = np.stack([X.ravel(), Y.ravel(), np.full(n * n, 0.6)], 1)
        f = []
        for i in range(n - 1):
            for j in range(n - 1):
                a, b, c, d = i * n + j, (i + 1) * n + j, (i + 1) * n + j + 1, i * n + j + 1
                f += [[a, b, c], [a, c, d]]
        return trimesh.Trimesh(v, np.asarray(f), process=False)
    raise KeyError(name)


def _articulated_example():
    """(vertices, faces, part_ids, ArticulatedObject) of the bundled PartNet-style cabinet folder, or None."""
    folder = EXAMPLES_DIR / "cabinet"
    if not (folder / "mobility.urdf").is_file():
        return None
    from kinemesh.data.partnet import load_articulated

    obj = load_articulated(folder)
    v, f, ids = obj.merged(None)
    return v, f, ids, obj


def _door_edge_vertex(vertices, part_ids, obj) -> int | None:
    """The vertex of the first revolute part farthest from its hinge axis (the free edge of a door)."""
    import numpy as np

    for j in obj.movable_joints:
        if j.type != "revolute":
            continue
        names = [p.name for p in obj.parts if len(p.vertices)]
        if j.child not in names:
            continue
        sel = np.where(np.asarray(part_ids) == [p.name for p in obj.parts].index(j.child))[0]
        if not len(sel):
            continue
        a = np.asarray(j.axis, float) / np.linalg.norm(j.axis)
        r = vertices[sel] - np.asarray(j.origin, float)
        dist = np.linalg.norm(r - (r @ a)[:, None] * a, axis=1)
        return int(sel[np.argmax(dist)])
    return None


def _spec(name: str, vertices, faces, frames: int, fps: float, part_ids=None, obj=None):
    """The action of each example, chosen from the geometry so it works for any mesh of that type."""
    import numpy as np

    from kinemesh.dynamics.scene import SimulationSpec
    from kinemesh.geometry.kind import guess_kind

    v = np.asarray(vertices)
    if name == "cabinet":
        kind = "articulated"
        vid = _door_edge_vertex(v, part_ids, obj) if obj is not None else None
        if vid is None:
            front = v[:, 1] <= v[:, 1].min() + 0.02 * np.ptp(v[:, 1])
            cand = np.where(front)[0]
            vid = int(cand[np.argmax(v[cand, 0] + 0.1 * v[cand, 2])])  # front, right edge
        return SimulationSpec(kind=kind, frames=frames, fps=fps, poke_vertex=vid, impulse=(0.0, -1.0, 0.0),
                              poke_speed=0.15, damping=1.5), f"poke at vertex {vid} (0.15 m/s)"
    if name == "toy":
        kind = "elastic"
        vid = int(np.argmax(v[:, 2]))
        # a free body: it rests on a floor under gravity, so the poke squashes and shoves it rather than
        # sending it drifting off (the model's rigid-body coordinates move it as a whole)
        return SimulationSpec(kind=kind, frames=frames, fps=fps, poke_vertex=vid, impulse=(0.0, 1.0, 0.0),
                              poke_speed=0.5, gravity=True, floor="auto"), \
            f"poke at vertex {vid} (0.5 m/s), on the floor under gravity"
    kind = "cloth" if guess_kind(v, faces) == "cloth" else "elastic"
    pins = tuple(int(i) for i in np.where(v[:, 0] <= v[:, 0].min() + 0.02 * np.ptp(v[:, 0]))[0])
    # a flag on its pole: the training data has flags pinned along an edge, so the latent coordinates already
    # carry its motion relative to the pole; without rigid-body coordinates the demo stays well inside its
    # 2-minute budget (with them the stiff pin springs need 48 substeps per frame here: 118 s for this example)
    return SimulationSpec(kind=kind, frames=frames, fps=fps, gravity=True, pins=pins, rigid=False,
                          wind=(0.0, 3.0, 0.0)), f"gravity + wind, {len(pins)} pinned vertices"


def run(args) -> int:
    import time

    import numpy as np
    import torch

    from kinemesh.commands.simulate import write_outputs
    from kinemesh.dynamics.scene import simulate_mesh, torch_threads
    from kinemesh.errors import ConfigError, SimulationDivergedError
    from kinemesh.model import load_model
    from kinemesh.reduce import ReductionConfig, bind

    names = [n.strip() for n in str(args.examples).split(",") if n.strip()]
    bad = [n for n in names if n not in EXAMPLES]
    if bad or not names:
        raise ConfigError(f"--examples {args.examples!r}: choose from {','.join(EXAMPLES)}")
    from kinemesh.checks import out_dir

    out_dir(args.out, args.force)
    t_start = time.perf_counter()
    model = load_model(args.checkpoint).to(dtype=torch.float64)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sheet = []
    lines = []
    failed = []
    for name in names:
        t0 = time.perf_counter()
        asset = _find_asset(name)
        part_ids = obj = None
        art = _articulated_example() if name == "cabinet" else None
        if art is not None:
            vertices, faces, part_ids, obj = art
            source = str(EXAMPLES_DIR / "cabinet")
        elif asset is not None:
            from kinemesh.data.meshes import load_mesh

            mesh = load_mesh(asset, max_vertices=20000, process=False)
            source = str(asset)
        else:
            mesh = _built_mesh(name)
            source = "built with trimesh"
        if art is None:
            vertices = np.asarray(mesh.vertices, dtype=np.float64)
            faces = np.asarray(mesh.faces, dtype=np.int64)
        vertices = np.asarray(vertices, dtype=np.float64)
        faces = np.asarray(faces, dtype=np.int64)
        spec, action = _spec(name, vertices, faces, args.frames, args.fps, part_ids, obj)
        if args.barrier_radius is not None:
            spec.barrier_radius = float(args.barrier_radius)
        with torch_threads(1):
            dec = bind(vertices, faces, model, kind=spec.kind, part_ids=part_ids, n_points=args.points,
                       reduction=ReductionConfig(k_q=min(args.k_q, model.latent_dim))).decoder
        try:
            result = simulate_mesh(dec, vertices, faces, spec, part_ids=part_ids, progress=False, category=name)
        except SimulationDivergedError as exc:  # report it, keep going with the other examples
            failed.append(name)
            lines.append(f"{name}: FAILED ({exc})")
            continue
        paths = write_outputs(result, out / f"{name}.glb", None if args.no_video else out / f"{name}.mp4",
                              out / f"{name}.npz", out / f"{name}_energy.png", fps=args.fps, progress=False,
                              title=f"{name}: energy")
        seq = result.sequence
        for i in np.linspace(0, seq.n_frames - 1, 4).astype(int):
            sheet.append((seq.frames[i], seq.faces, seq.part_ids, f"{name} t={seq.times[i]:.2f}s"))
        inf = result.info
        lines.append(f"{name} ({inf['kind']}, {len(vertices)} vertices, {source}; {action}): "
                     f"{time.perf_counter() - t0:.1f} s (set-up {inf['setup_s']:.1f} s, simulation "
                     f"{inf['simulate_s']:.1f} s, decoding {inf['decode_s']:.1f} s)")
        lines += [f"  {p}" for p in paths]
    from kinemesh.viz.render import contact_sheet

    for line in lines:
        print(line)
    if sheet:
        print(f"contact sheet: {contact_sheet(sheet, out / 'contact_sheet.png', cols=4)}")
    if failed:
        raise SimulationDivergedError(f"examples {', '.join(failed)} diverged (see above); the others were written")
    print(f"done in {time.perf_counter() - t_start:.1f} s; open the .glb files in any glTF viewer "
          f"(e.g. Blender or https://gltf-viewer.donmccurdy.com) or play the .mp4 files")
    return 0
