"""Benchmark of synthetic data generation: sequences per minute for each kind (one process).

Usage: python bench/synth.py [--n 4] [--seed 0]
Prints a markdown table (kind, sequences, frames, s/sequence, sequences/min per core, vertices).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np


def _bench(name, fn, n):
    times, cpu, frames, verts, failed = [], [], 0, [], 0
    for i in range(n):
        t = time.perf_counter()
        c = time.process_time()
        try:
            seqs = fn(i)
        except Exception:  # noqa: BLE001 -- diverged runs are dropped by the generator too
            failed += 1
            continue
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        frames += sum(s.n_frames for s in seqs)
        verts += [s.n_vertices for s in seqs]
        n_seq = len(seqs)
    total = sum(times)
    seqs_done = len(times) * n_seq if times else 0
    return {
        "kind": name,
        "sequences": seqs_done,
        "frames": frames,
        "failed": failed,
        "s_per_seq": total / max(seqs_done, 1),
        "per_min": 60 * seqs_done / max(total, 1e-9),
        "cpu_per_seq": sum(cpu) / max(seqs_done, 1),
        "per_min_cpu": 60 * seqs_done / max(sum(cpu), 1e-9),
        "vertices": f"{min(verts)}-{max(verts)}" if verts else "-",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=4, help="items per kind")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from kinemesh.synth.articulated_motion import dynamic_sequence, kinematic_sequence
    from kinemesh.synth.assemblies import random_assembly
    from kinemesh.synth.categories import CATEGORIES, build
    from kinemesh.synth.cloth import SCENES, cloth_sequence
    from kinemesh.synth.elastic import SHAPES, elastic_sequence

    cats = sorted(CATEGORIES)

    def rng(i, k):
        return np.random.default_rng([args.seed, k, i])

    rows = [
        _bench(
            "object build (category, with validity check)",
            lambda i: [build(cats[i % len(cats)], rng(i, 0)).to_sequence([{}])],
            args.n,
        ),
        _bench(
            "object build (random assembly)", lambda i: [random_assembly(rng(i, 1)).to_sequence([{}])], args.n
        ),
        _bench(
            "articulated kinematic (16 frames)",
            lambda i: [kinematic_sequence(build(cats[i % len(cats)], rng(i, 2), check=False), rng(i, 3))],
            args.n,
        ),
        _bench(
            "articulated dynamic (MuJoCo, 2 s, 24 frames)",
            lambda i: [dynamic_sequence(build(cats[i % len(cats)], rng(i, 4), check=False), rng(i, 5))],
            args.n,
        ),
        _bench(
            "elastic (flexcomp dim=3, 1.2 s, 24 frames)",
            lambda i: [elastic_sequence(SHAPES[i % len(SHAPES)], rng(i, 6))],
            args.n,
        ),
        _bench(
            "cloth (flexcomp dim=2, 1.6 s, 24 frames)",
            lambda i: [cloth_sequence(SCENES[i % len(SCENES)], rng(i, 7))],
            args.n,
        ),
    ]
    print(
        f"machine: {platform.processor() or platform.machine()}, 1 process (the generator runs one per core)"
    )
    print(
        "| kind | sequences | frames | failed | wall s / seq | CPU s / seq | seqs / min / core (CPU) | vertices |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['kind']} | {r['sequences']} | {r['frames']} | {r['failed']} | {r['s_per_seq']:.2f} | "
            f"{r['cpu_per_seq']:.2f} | {r['per_min_cpu']:.1f} | {r['vertices']} |"
        )


if __name__ == "__main__":
    main()
