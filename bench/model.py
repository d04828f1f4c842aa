"""Benchmark of the kinematic model: training samples/s (fp32 vs bf16 autocast on CPU), decoder points/s
(forward, forward-mode JVP), and peak memory (max RSS of a fresh process per measurement).

    python bench/model.py [--preset cpu-small] [--threads 1] [--steps 8]

Prints a Markdown table (copied into bench/RESULTS_model.md).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path


def _train_speed(q, preset_name, bf16, threads, steps, data):
    import numpy as np
    import torch

    from kinemesh.model import preset
    from kinemesh.model.data import Augment, PairSampler, read_manifest_entries, select_split
    from kinemesh.model.network import KinematicVAE, vae_loss

    torch.set_num_threads(threads)
    cfg = preset(preset_name)
    tc = cfg.train
    net = KinematicVAE(cfg.model)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    sampler = PairSampler(select_split(read_manifest_entries(data), "train"), tc.n_points, Augment())
    rng = np.random.default_rng(0)
    batches = [sampler.batch(rng, tc.batch_size) for _ in range(steps + 2)]
    t0 = None
    for i, (p, d, g) in enumerate(batches):
        if i == 2:
            t0 = time.perf_counter()
        p, d, g = torch.from_numpy(p), torch.from_numpy(d), torch.from_numpy(g)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = net(p, d, groups=g, prior_reg=tc.prior_weight > 0)  # the same step as kinemesh train
        loss = vae_loss(out, d, tc.kl_weight, tc.free_bits, tc.recon_weight, tc.prior_weight)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    q.put({"samples_per_s": steps * tc.batch_size / dt, "params": sum(x.numel() for x in net.parameters()),
           "batch": tc.batch_size, "n_points": tc.n_points,
           "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def _decoder_speed(q, preset_name, threads, n_points, batch, head):
    import torch
    import trimesh

    from kinemesh.model import KinematicModel, preset
    from kinemesh.model.network import KinematicVAE

    torch.set_num_threads(threads)
    cfg = preset(preset_name)
    cfg.model.use_head(head)
    model = KinematicModel(KinematicVAE(cfg.model), cfg)
    mesh = trimesh.creation.box(extents=(1, 0.6, 0.4)).subdivide().subdivide()
    t = time.perf_counter()
    inst = model.instance(mesh.vertices, mesh.faces, n_points=n_points)
    t_inst = time.perf_counter() - t
    z = inst.prior_sample(batch)
    with torch.no_grad():
        inst.points(z)
        t = time.perf_counter()
        reps = 5
        for _ in range(reps):
            inst.points(z)
        fwd = reps * batch * n_points / (time.perf_counter() - t)
    dz = torch.randn(inst.latent_dim)
    torch.func.jvp(inst.points, (z[0],), (dz,))
    t = time.perf_counter()
    for _ in range(reps):
        torch.func.jvp(inst.points, (z[0],), (dz,))
    jvp = reps / (time.perf_counter() - t)
    V = torch.randn(8, inst.latent_dim)
    batched = torch.func.vmap(lambda v: torch.func.jvp(inst.points, (z[0],), (v,))[1])
    batched(V)
    t = time.perf_counter()
    for _ in range(reps):
        batched(V)
    vjvp = reps * 8 / (time.perf_counter() - t)
    q.put({"instance_s": t_inst, "points_per_s": fwd, "jvp_per_s": jvp, "vmap_jvp_per_s": vjvp,
           "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def _run(fn, *args):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=fn, args=(q, *args))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="cpu-small")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the shared test fixtures
    from toys import write_toy_dataset

    data = write_toy_dataset(tempfile.mkdtemp(prefix="kinemesh_bench_"), n_train=6, n_val=2)
    print(f"machine: {platform.processor() or platform.machine()}, {mp.cpu_count()} CPU cores, no GPU; "
          f"threads={args.threads}; preset={args.preset}\n")
    print("| training | samples/s | batch x points | params | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    res = {}
    for bf16 in (False, True):
        r = _run(_train_speed, args.preset, bf16, args.threads, args.steps, data)
        res[bf16] = r
        print(f"| {'bf16 autocast' if bf16 else 'fp32'} | {r['samples_per_s']:.1f} | {r['batch']} x {r['n_points']} "
              f"| {r['params'] / 1e6:.2f} M | {r['rss_mb']:.0f} |")
    print(f"\nbf16 speed-up: {res[True]['samples_per_s'] / res[False]['samples_per_s']:.2f}x\n")
    print("| decoder head | bind mesh (s) | points/s (forward, batch 16 x 2048) | JVPs/s (one at a time) "
          "| JVPs/s (vmap over 8 directions) | peak RSS (MB) |")
    print("|---|---|---|---|---|---|")
    for head in ("dq_skinning", "per_point_dq", "displacement"):
        r = _run(_decoder_speed, args.preset, args.threads, 2048, 16, head)
        print(f"| {head} | {r['instance_s']:.2f} | {r['points_per_s']:.3g} | {r['jvp_per_s']:.1f} "
              f"| {r['vmap_jvp_per_s']:.1f} | {r['rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
