"""Speed of the latent dynamics: time per frame vs vertex count and k_q, and latent vs MuJoCo full-order flex.

    python bench/dynamics.py [--checkpoint DIR] [--frames 120] [--vertices 1000,10000,50000] [--kq 4,8,16]

Prints a markdown table; the side-by-side run simulates the same soft object (a beam) with MuJoCo flexcomp
(full order, tetrahedral cage, integrator "discrete") and with kinemesh (latent, k_q coordinates) for the
same number of output frames at the same frame rate. Uses the default checkpoint unless --checkpoint is given
(an untrained network of the same architecture with --untrained: same cost, meaningless motion).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np


def sphere_mesh(n_vertices: int):
    """A soft ball with about ``n_vertices`` vertices (icosphere subdivided, then decimated/padded)."""
    import trimesh

    sub = 1
    while 10 * 4 ** sub + 2 < n_vertices:
        sub += 1
    m = trimesh.creation.icosphere(subdivisions=sub, radius=0.15)
    m.apply_translation((0, 0, 0.15))
    if len(m.vertices) > 1.3 * n_vertices:
        m = m.simplify_quadric_decimation(face_count=2 * n_vertices)
    return np.asarray(m.vertices), np.asarray(m.faces)


def time_latent(model, vertices, faces, k_q: int, frames: int, fps: float, points: int, poke: bool = True):
    from kinemesh.dynamics.scene import SimulationSpec, simulate_mesh
    from kinemesh.reduce import ReductionConfig, bind

    t0 = time.perf_counter()
    dec = bind(vertices, faces, model, kind="elastic", reduction=ReductionConfig(k_q=k_q), n_points=points).decoder
    t1 = time.perf_counter()
    spec = SimulationSpec(kind="elastic", frames=frames, fps=fps, poke_vertex=int(np.argmax(vertices[:, 2])),
                          impulse=(0.0, 1.0, 0.0), poke_speed=0.8)
    res = simulate_mesh(dec, vertices, faces, spec, progress=False)
    t2 = time.perf_counter()
    return {"reduce_s": t1 - t0, "setup_s": res.info["setup_s"], "simulate_s": res.info["simulate_s"],
            "decode_s": res.info["decode_s"], "total_s": t2 - t0, "substeps": res.info["substeps_final"]}


def time_mujoco_beam(frames: int, fps: float, seed: int = 0, resolution: int = 8):
    """MuJoCo full-order flex simulation of a soft beam (synth.elastic, poke) for the same frames/fps;
    ``resolution`` sets the tetrahedral cage (cells along the longest side)."""
    from kinemesh.synth.elastic import elastic_sequence

    t0 = time.perf_counter()
    seq = elastic_sequence("beam", np.random.default_rng(seed), action="poke", n_frames=frames,
                           duration=frames / fps, resolution=resolution)
    return time.perf_counter() - t0, seq


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--untrained", action="store_true", help="use an untrained network (timing only)")
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--vertices", default="1000,10000,50000")
    ap.add_argument("--kq", default="4,8,16")
    ap.add_argument("--points", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only-side-by-side", action="store_true", help="skip the vertex / k_q sweep")
    ap.add_argument("--resolutions", default="8,16", help="MuJoCo cage resolutions of the side-by-side run")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    from kinemesh.model import load_model, untrained_model

    model = (untrained_model() if args.untrained else load_model(args.checkpoint)).to(dtype=torch.float64)
    print(f"# kinemesh dynamics benchmark\n\nmachine: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPU cores visible, torch threads {args.threads}, no GPU; python {sys.version.split()[0]}; "
          f"{args.frames} frames at {args.fps:g} fps, {args.points} mass points, implicit midpoint, 2 substeps/frame\n")
    if not args.only_side_by_side:
        print("| vertices | k_q | reduce (s) | set-up (s) | simulate (s) | decode (s) | total (s) | ms / frame (sim+decode) |")
        print("|---|---|---|---|---|---|---|---|")
    kqs = [int(k) for k in args.kq.split(",") if k]
    for nv in [] if args.only_side_by_side else [int(v) for v in args.vertices.split(",") if v]:
        v, f = sphere_mesh(nv)
        for k in kqs if nv == 10000 else [8]:
            r = time_latent(model, v, f, k, args.frames, args.fps, args.points)
            per = (r["simulate_s"] + r["decode_s"]) / args.frames * 1e3
            print(f"| {len(v)} | {k} | {r['reduce_s']:.1f} | {r['setup_s']:.1f} | {r['simulate_s']:.1f} | "
                  f"{r['decode_s']:.1f} | {r['total_s']:.1f} | {per:.0f} |", flush=True)
    # side by side: the same soft beam, same frames and frame rate
    runs = [(res,) + time_mujoco_beam(args.frames, args.fps, resolution=res)
            for res in [int(r) for r in args.resolutions.split(",") if r]]
    seq = runs[0][2]
    r = time_latent(model, seq.rest_vertices.astype(np.float64), seq.faces, 8, args.frames, args.fps, args.points)
    lat = r["total_s"]
    print(f"\nside by side, the same soft beam ({seq.rest_vertices.shape[0]} surface vertices, poke), "
          f"{args.frames} frames at {args.fps:g} fps:\n")
    print("| simulator | degrees of freedom | wall time (s) | time / kinemesh |\n|---|---|---|---|")
    for res, t_mj, sq in runs:
        sim = sq.meta["simulation"]
        print(f"| MuJoCo flexcomp, full order (cage resolution {res}, step {sim['timestep']} s) | "
              f"{3 * sim['tet_nodes']} ({sim['tet_nodes']} nodes, {sim['tets']} tets) | {t_mj:.1f} | {t_mj / lat:.2f} |")
    print(f"| kinemesh latent (k_q=8, incl. reduction and decoding) | 8 | {lat:.1f} | 1.00 |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
