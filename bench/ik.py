"""IK speed: time per target for a ~10k-vertex mesh (goal: <= 2 s on 2 CPU cores).

Run: ``python bench/ik.py [--checkpoint DIR] [--vertices 10000] [--targets 3] [--out bench/RESULTS_ik.md]``

Stages timed separately: binding the model to the mesh with its active subspace (once per mesh, IK's
reduction settings), and the IK solve per target (Chamfer to a point cloud, and vertex L2 when correspondences
are known).
Targets are decoded from random prior samples, so they are reachable and the fit error is also printed.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch


def mesh_with(n_vertices: int):
    """A closed mesh with about ``n_vertices`` vertices: the toy cabinet, subdivided, plus a sphere knob."""
    import trimesh

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the shared test fixtures
    from toys import toy_cabinet

    v, f, _ = toy_cabinet(3)
    n_sphere = max(n_vertices - len(v), 12)
    sub = 1
    while 10 * 4 ** sub + 2 < n_sphere:
        sub += 1
    s = trimesh.creation.icosphere(subdivisions=sub, radius=0.08)
    sv = np.asarray(s.vertices) + np.array([0.55, -0.3, 0.2])
    if len(sv) > n_sphere:  # trim by keeping whole faces of the first vertices
        keep = np.all(np.asarray(s.faces) < n_sphere, axis=1)
        sf = np.asarray(s.faces)[keep]
        sv = sv[:n_sphere]
    else:
        sf = np.asarray(s.faces)
    return np.concatenate([v, sv]), np.concatenate([f, sf + len(v)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--vertices", type=int, default=10000)
    ap.add_argument("--targets", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (use 1 on a machine busy with other jobs)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    from kinemesh.ik import IKConfig, make_target, solve
    from kinemesh.ik.pipeline import IK_REDUCTION
    from kinemesh.reduce import bind

    v, f = mesh_with(args.vertices)
    red = IK_REDUCTION
    t0 = time.perf_counter()
    b = bind(v, f, args.checkpoint, reduction=red, n_points=2048)
    t_bind = time.perf_counter() - t0
    inst, sub, dec = b.instance, b.subspace, b.decoder
    trained = bool(b.model.info.get("trained", True))
    # warm-up: the first optimiser step imports and initialises torch machinery (~1-2 s, once per process)
    warm = make_target(v, f, v, f, correspondences=False)
    solve(dec, warm, IKConfig(n_candidates=2, n_starts=1, adam_steps=2, lbfgs_steps=2))
    rows = []
    for i in range(args.targets):
        z = inst.prior_sample(1, seed=100 + i)[0]
        with torch.no_grad():
            tv = inst.vertices(z).numpy().astype(np.float64)
        for mode in ("chamfer", "vertex"):
            target = make_target(tv, f, v, f, correspondences=mode == "vertex", seed=i)
            t0, c0 = time.perf_counter(), time.process_time()
            res = solve(dec, target, IKConfig(loss=mode, seed=i))
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            rows.append((i, mode, dt, res.errors["chamfer_l1"], res.errors.get("vertex_error", float("nan")), dc))
    machine = f"{platform.machine()}, {torch.get_num_threads()} torch threads, {len(__import__('os').sched_getaffinity(0))} CPU cores visible, no GPU"
    lines = [
        "# IK speed (bench/ik.py)", "",
        f"Command: `python bench/ik.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
        f"Machine: {machine}; torch {torch.__version__}; model: {args.checkpoint or 'default checkpoint'}"
        f"{'' if trained else ' (UNTRAINED fallback: speed only)'}.", "",
        f"Mesh: {len(v)} vertices, {len(f)} faces; latent D = {inst.latent_dim}, k_q = {sub.k} "
        f"({sub.method} active subspace, {sub.explained:.3f} explained).", "",
        f"Load average when finished: {' / '.join(f'{x:.1f}' for x in __import__('os').getloadavg())} "
        "(other jobs share the 2 cores; timings scale with it).", "",
        "| stage | wall seconds |", "|---|---|",
        f"| bind model to mesh and active subspace, {red.n_samples} samples (once per mesh) | {t_bind:.2f} |",
    ]
    for mode in ("chamfer", "vertex"):
        ts = [r[2] for r in rows if r[1] == mode]
        cs = [r[5] for r in rows if r[1] == mode]
        lines.append(f"| IK per target, {mode} data term (mean of {len(ts)}; max {max(ts):.2f}; "
                     f"CPU time {np.mean(cs):.2f}) | {np.mean(ts):.2f} |")
    lines += ["", "| target | data term | wall s | CPU s | Chamfer-L1 (samples) | vertex error |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[5]:.2f} | {r[3]:.4f} | {r[4]:.4f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        from kinemesh.atomic import write_text

        write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
