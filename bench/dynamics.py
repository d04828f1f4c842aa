"""Speed of the latent dynamics, side by side in one run: MuJoCo full order vs kinemesh on the same soft beam,
a real articulated object at its own size and subdivided to 10k / 100k vertices, 1M vertices (peak memory),
and batched decoding on the GPU when CUDA is present.

    python bench/dynamics.py [--checkpoint DIR] [--frames 120] [--sizes 10000,100000] [--million 1000000]
                             [--real ../shared/real_objects/kitchenmodels__7236] [--threads 1]
                             [--integrators local,midpoint]

Prints markdown tables. Every kinemesh time includes binding the mesh to the model and the active-subspace
reduction (``kinemesh.reduce.bind``), the set-up (rest state, boundary conditions), the integration and decoding
all output frames; every kinemesh row is run with each of ``--integrators`` (the 1M-vertex row with the first).
The 1M-vertex row runs in a subprocess and reports its peak resident memory
(``resource.getrusage``). The machine is shared: the load average is printed with the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "real_objects" / "kitchenmodels__7236"  # the microwave (PartNet-Mobility, test)


def subdivide_to(vertices, faces, parts, n_target: int):
    """Midpoint-subdivide the largest faces of every part (the shape does not change) until the mesh has at
    least ``n_target`` vertices: (vertices, faces, part ids)."""
    import trimesh.remesh

    out_v, out_f, out_p, off = [], [], [], 0
    for pid in np.unique(parts):
        idx = np.nonzero(parts == pid)[0]
        remap = np.full(len(vertices), -1)
        remap[idx] = np.arange(len(idx))
        fm = np.all(remap[faces] >= 0, axis=1)
        v, f = vertices[idx], remap[faces[fm]]
        goal = int(np.ceil(n_target * len(idx) / len(vertices)))
        while len(v) < goal and len(f):
            tri = v[f]
            area = np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
            m = min(len(f), int(np.ceil((goal - len(v)) / 1.5)))
            v, f = trimesh.remesh.subdivide(v, f, face_index=np.argsort(-area)[:m])
        out_v.append(v)
        out_f.append(f + off)
        out_p.append(np.full(len(v), pid))
        off += len(v)
    return np.concatenate(out_v), np.concatenate(out_f), np.concatenate(out_p)


def load_real(folder: Path):
    """(vertices, faces, part ids, movable part id, ArticulatedObject) of a PartNet-Mobility folder."""
    from kinemesh.data.partnet import load_articulated

    obj = load_articulated(folder)
    v, f, parts = obj.merged()
    child = obj.movable_joints[0].child
    moving = next(i for i, p in enumerate(obj.parts) if p.name == child)
    return v.astype(np.float64), f.astype(np.int64), parts, moving, obj


def time_kinemesh(model, vertices, faces, spec, part_ids=None, k_q: int = 8, points: int = 1024, obj=None) -> dict:
    """Bind + reduce + simulate + decode with ``spec.integrator``; seconds of each stage. ``obj``: the
    articulation of an articulated object (as ``kinemesh simulate`` on a URDF: motion probes along its joints
    span q, parts move along them; the probes and the joint calibration count in bind + reduce / set-up)."""
    from kinemesh.articulation.probes import motion_probes
    from kinemesh.dynamics.scene import simulate_mesh
    from kinemesh.reduce import ReductionConfig, bind

    t0 = time.perf_counter()
    names = None if obj is None else [p.name for p in obj.parts]
    probes, _, art = motion_probes(vertices, faces, part_ids, names, obj) if obj is not None else (None, "", None)
    dec = bind(vertices, faces, model, kind=spec.kind, part_ids=part_ids, reduction=ReductionConfig(k_q=k_q),
               n_points=points, probes=probes).decoder
    t1 = time.perf_counter()
    res = simulate_mesh(dec, vertices, faces, spec, part_ids=part_ids, progress=False, articulation=art,
                        part_names=names)
    t2 = time.perf_counter()
    return {"vertices": len(vertices), "integrator": spec.integrator, "bind_reduce_s": t1 - t0,
            "setup_s": res.info["setup_s"], "simulate_s": res.info["simulate_s"], "decode_s": res.info["decode_s"],
            "total_s": t2 - t0, "substeps": int(res.rollout.substeps.sum()), "anchors": res.info["anchors"],
            "disagreement": res.info["local_disagreement"], "frames": res.sequence.frames}


def poke_spec(vertices, parts, moving: int, frames: int, fps: float, integrator: str = "local"):
    """Poke the movable part's vertex farthest from the object's centre outwards (0.5 m/s), under gravity."""
    from kinemesh.dynamics.scene import SimulationSpec

    c = 0.5 * (vertices.min(0) + vertices.max(0))
    ids = np.nonzero(parts == moving)[0]
    vid = int(ids[np.argmax(np.linalg.norm(vertices[ids] - c, axis=1))])
    out = vertices[vid] - c
    out[2] = 0.0
    return SimulationSpec(kind="articulated", frames=frames, fps=fps, gravity=True, poke_vertex=vid,
                          impulse=tuple(out / max(np.linalg.norm(out), 1e-9)), poke_speed=0.5, integrator=integrator)


def time_or_fail(*a, **kw) -> dict:
    """``time_kinemesh``, or a row saying why the simulation stopped (SimulationDivergedError)."""
    from kinemesh.errors import SimulationDivergedError

    t0 = time.perf_counter()
    try:
        return time_kinemesh(*a, **kw)
    except SimulationDivergedError as exc:
        return {"vertices": len(a[1]), "integrator": a[3].integrator,
                "failed": f"diverged after {time.perf_counter() - t0:.0f} s ({exc})"}


def million_mesh(args, path: Path) -> None:
    """The microwave subdivided to ``--million`` vertices (a ball when the real object is absent) -> npz."""
    if args.real.is_dir():
        v, f, parts, moving, _ = load_real(args.real)
        v, f, parts = subdivide_to(v, f, parts, args.million)
    else:
        import trimesh

        m = trimesh.creation.icosphere(subdivisions=9, radius=0.15)
        v, f, parts, moving = np.asarray(m.vertices), np.asarray(m.faces), np.zeros(len(m.vertices), int), 0
    np.savez(path, vertices=v, faces=f, parts=parts, moving=moving)


def million_child(args) -> int:
    """Subprocess: load the mesh of ``million_mesh``, bind, reduce, simulate, decode; prints JSON with the peak
    resident memory of this process (the mesh was built elsewhere, so only kinemesh's own memory counts)."""
    import resource

    import torch

    from kinemesh.dynamics.scene import SimulationSpec

    torch.set_num_threads(args.threads)
    model = _model(args)
    d = np.load(args.child_million)
    v, f, parts, moving = d["vertices"], d["faces"], d["parts"], int(d["moving"])
    integrator = args.integrators.split(",")[0]
    if len(np.unique(parts)) > 1:
        spec = poke_spec(v, parts, moving, args.frames, args.fps, integrator)
    else:
        parts = None
        spec = SimulationSpec(kind="elastic", frames=args.frames, fps=args.fps, poke_vertex=int(np.argmax(v[:, 2])),
                              impulse=(0.0, 1.0, 0.0), poke_speed=0.8, integrator=integrator)
    # the articulation of the real object (subdividing keeps its part ids), as `kinemesh simulate` takes a URDF
    obj = load_real(args.real)[4] if parts is not None and args.real.is_dir() else None
    r = time_or_fail(model, v, f, spec, part_ids=parts, obj=obj)
    r.pop("frames", None)
    r["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2  # kB on Linux
    print("RESULT " + json.dumps(r))
    return 0


def print_side_by_side(args, seq, t_mj: float, runs: list) -> None:
    """The beam table: MuJoCo vs kinemesh per integrator (best of the interleaved runs) and their ratios."""
    v = seq.rest_vertices
    sim = seq.meta["simulation"]
    print(f"## Side by side: soft beam, poke ({len(v)} surface vertices), {args.frames} frames, best of "
          f"{args.repeat} interleaved runs (load average now {os.getloadavg()[0]:.1f})\n")
    print("| simulator | degrees of freedom | wall time (s) | speed-up vs MuJoCo |\n|---|---|---|---|")
    print(f"| MuJoCo flexcomp, full order (cage resolution {args.resolution}, step {sim['timestep']} s) | "
          f"{3 * sim['tet_nodes']} ({sim['tet_nodes']} nodes) | {t_mj:.2f} | 1.00 |")
    for name in args.integrators.split(","):
        mine = [x for x in runs if x["integrator"] == name]
        r = min(mine, key=lambda x: x["total_s"])
        step = min(x["simulate_s"] + x["decode_s"] for x in mine)
        print(f"| kinemesh latent `{name}`, total (bind + reduce + set-up + simulate + decode) | 8 + 6 rigid | "
              f"{r['total_s']:.2f} | {t_mj / r['total_s']:.2f} |")
        print(f"| kinemesh latent `{name}`, simulate + decode ({r['substeps']} substeps, {r['anchors']} anchors) | "
              f"8 + 6 rigid | {step:.2f} | {t_mj / step:.2f} |")
    print(flush=True)


def _model(args):
    import torch

    from kinemesh.model import load_model

    return load_model(args.checkpoint).to(dtype=torch.float64)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--points", type=int, default=1024, help="mass points of kinemesh (default 1024)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--resolution", type=int, default=8, help="MuJoCo tetrahedral cage resolution (default 8)")
    ap.add_argument("--real", type=Path, default=REAL, help="PartNet-Mobility folder of the articulated rows")
    ap.add_argument("--sizes", default="10000,100000", help="subdivided vertex counts of the real object")
    ap.add_argument("--million", type=int, default=1_000_000, help="vertices of the peak-memory row (0 = skip)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="interleaved MuJoCo / kinemesh beam runs, best of each (default 5: on the shared machine "
                         "best-of-2 pairs of the same code spread 9.5-12.0x)")
    ap.add_argument("--gpu-batch", type=int, default=16, help="latent states decoded at once in the GPU row")
    ap.add_argument("--skip-beam", action="store_true", help="leave out the side-by-side beam")
    ap.add_argument("--integrators", default="local,midpoint",
                    help="comma-separated integrators of the kinemesh rows (default local,midpoint)")
    ap.add_argument("--child-million", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_million:
        return million_child(args)

    import torch

    torch.set_num_threads(args.threads)
    model = _model(args)
    print(f"# kinemesh dynamics benchmark\n\nmachine: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPU cores visible, torch threads {args.threads}, "
          f"{'CUDA ' + torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}; "
          f"python {sys.version.split()[0]}; {args.frames} frames at {args.fps:g} fps, {args.points} mass points, "
          f"k_q = 8, integrators {args.integrators}; load average at start {os.getloadavg()[0]:.1f}\n", flush=True)

    # 1. side by side: the same soft beam, same frames and frame rate
    from kinemesh.dynamics.scene import SimulationSpec
    from kinemesh.synth.elastic import elastic_sequence

    # interleaved repeats, best of each: on a shared machine the load changes between runs
    t_mj, runs = np.inf, []
    for _ in range(0 if args.skip_beam else args.repeat):
        t0 = time.perf_counter()
        seq = elastic_sequence("beam", np.random.default_rng(0), action="poke", n_frames=args.frames,
                               duration=args.frames / args.fps, resolution=args.resolution)
        t_mj = min(t_mj, time.perf_counter() - t0)
        v = seq.rest_vertices.astype(np.float64)
        for name in args.integrators.split(","):
            spec = SimulationSpec(kind="elastic", frames=args.frames, fps=args.fps, integrator=name,
                                  poke_vertex=int(np.argmax(v[:, 2])), impulse=(0.0, 1.0, 0.0), poke_speed=0.8)
            runs.append(time_kinemesh(model, v, seq.faces.astype(np.int64), spec, points=args.points))
    if runs:
        print_side_by_side(args, seq, t_mj, runs)

    # 2. a real articulated object at its own size and subdivided
    rows = []
    if args.real.is_dir():
        v0, f0, p0, moving, obj = load_real(args.real)
        meshes = [(v0, f0, p0)] + [subdivide_to(v0, f0, p0, int(n)) for n in args.sizes.split(",") if n]
        for v, f, p in meshes:
            for name in args.integrators.split(","):
                spec = poke_spec(v, p, moving, args.frames, args.fps, name)
                rows.append(time_or_fail(model, v, f, spec, part_ids=p, points=args.points, obj=obj))
    else:
        print(f"(real object {args.real} not found: articulated rows skipped)\n")
    if args.million:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            mesh = Path(tmp) / "million.npz"
            million_mesh(args, mesh)
            out = subprocess.run([sys.executable, __file__, "--child-million", str(mesh), "--frames", str(args.frames),
                                  "--fps", str(args.fps), "--threads", str(args.threads),
                                  "--integrators", args.integrators, "--real", str(args.real)]
                                 + (["--checkpoint", args.checkpoint] if args.checkpoint else []),
                                 capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode or not line:
            print(f"1M-vertex run failed (exit {out.returncode}): {out.stderr.strip().splitlines()[-1:]}\n")
        else:
            rows.append(json.loads(line[0][7:]))
    if rows:
        print(f"## Real articulated object ({args.real.name}: the door poked outwards at 0.5 m/s under gravity), "
              f"{args.frames} frames\n")
        print("| vertices | integrator | bind + reduce (s) | set-up (s) | simulate (s) | decode (s) | total (s) | "
              "substeps | anchors | peak RSS (GB) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if "failed" in r:
                print(f"| {r['vertices']} | {r['integrator']} | {r['failed']} |  |  |  |  |  |  |  |")
                continue
            rss = f"{r['peak_rss_gb']:.2f}" if "peak_rss_gb" in r else "-"
            print(f"| {r['vertices']} | {r['integrator']} | {r['bind_reduce_s']:.2f} | {r['setup_s']:.2f} | "
                  f"{r['simulate_s']:.2f} | {r['decode_s']:.2f} | {r['total_s']:.2f} | {r['substeps']} | "
                  f"{r['anchors']} | {rss} |")
        print()

    # 3. GPU: a batch of latent states decoded at once (only when CUDA is present; not run on the CPU machine)
    if torch.cuda.is_available():
        import trimesh

        from kinemesh.reduce import bind

        ball = trimesh.creation.icosphere(subdivisions=6, radius=0.15)
        vg, fg = (v0, f0) if args.real.is_dir() else (np.asarray(ball.vertices), np.asarray(ball.faces))
        q = torch.randn(args.gpu_batch * args.frames, 8, dtype=torch.float64)
        times = {}
        for device in ("cuda", "cpu"):  # the same states through the same bound decoder on both, side by side
            dec = bind(vg, fg, model.to(device=device), n_points=args.points).decoder
            qd = q.to(dec.mu_cond.device)
            with torch.no_grad():
                dec.vertices(qd[:args.gpu_batch])  # warm-up (CUDA kernels, caches)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for i in range(0, len(qd), args.gpu_batch):
                    dec.vertices(qd[i:i + args.gpu_batch])
                torch.cuda.synchronize()
            times[device] = time.perf_counter() - t0
        print(f"GPU: {args.frames} batches of {args.gpu_batch} latent states ({len(vg)} vertices) decoded in "
              f"{times['cuda']:.2f} s on {torch.cuda.get_device_name(0)}, {times['cpu']:.2f} s on this machine's CPU "
              f"({args.threads} torch threads): {times['cpu'] / times['cuda']:.1f}x\n")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
