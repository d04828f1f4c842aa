"""Offscreen renderer speed: frames per second of ``render_frames`` on CPU (no GPU, no display).

    python bench/viz.py [--frames 120]

Prints one row per case: wall and CPU seconds for the whole video (rendering + H.264 encoding) and the
per-frame CPU cost. CPU time is reported beside wall time because the 2-core machine is shared.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def _sphere_motion(T: int):
    import trimesh

    m = trimesh.creation.icosphere(subdivisions=4)  # 2562 vertices, 5120 faces
    v = np.asarray(m.vertices) * [0.5, 0.3, 0.3]
    ang = np.linspace(0, np.pi, T)
    R = np.stack([[[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]] for a in ang])
    return np.einsum("tij,nj->tni", R, v), np.asarray(m.faces), None, []


def _cabinet_sweep(T: int):
    from kinemesh.viz.inputs import load_drawable

    root = Path(__file__).resolve().parents[1]
    d = load_drawable(root / "kinemesh/assets/examples/cabinet", frames_per_joint=max(T // 2, 2))
    return d.frames[:T], d.faces, d.part_ids, d.axes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=120)
    args = ap.parse_args()
    from kinemesh.viz.render import RenderStyle, render_frames

    T = args.frames
    cases = [
        ("icosphere 5120 faces, 640x480, AA 2x", _sphere_motion, (640, 480), 2, ".mp4"),
        ("icosphere 5120 faces, 640x480, AA off", _sphere_motion, (640, 480), 1, ".mp4"),
        ("example cabinet 1520 faces + 2 axes, 640x480, AA 2x", _cabinet_sweep, (640, 480), 2, ".mp4"),
        ("icosphere 5120 faces, 320x240 GIF, AA 2x", _sphere_motion, (320, 240), 2, ".gif"),
    ]
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 CPU cores, no GPU)")
    print(f"| case | frames | wall s | CPU s | CPU ms/frame |")
    print(f"|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, size, ss, ext in cases:
            frames, faces, pid, axes = make(T)
            w0, c0 = time.perf_counter(), time.process_time()
            render_frames(frames, faces, Path(tmp) / f"out{ext}", fps=30, part_ids=pid, axes=axes or None,
                          size=size, style=RenderStyle(supersample=ss), progress=False)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            per = 1000 * cpu / len(frames)
            print(f"| {name} | {len(frames)} | {wall:.1f} | {cpu:.1f} | {per:.0f} |", flush=True)


if __name__ == "__main__":
    main()
