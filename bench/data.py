"""Loader/exporter speed on the real PartNet-Mobility objects: load, sample 16 frames, write GLB/NPZ.

Usage: python bench/data.py [REAL_OBJECTS_DIR]   (default: ../shared/real_objects next to the repo)
Prints a markdown table (one row per object). No assertions: numbers only.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from kinemesh.data.exporters import export_glb, export_npz
from kinemesh.data.loaders import articulated_sequence
from kinemesh.data.partnet import load_articulated


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[2] / "shared" / "real_objects"
    folders = sorted(p for p in root.iterdir() if (p / "mobility.urdf").is_file())
    print(
        "| object | category | parts | movable joints | vertices | faces | load s | 16 frames s | GLB s "
        "| GLB MB | NPZ MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for f in folders:
            t0 = time.perf_counter()
            obj = load_articulated(f)
            t1 = time.perf_counter()
            seq = articulated_sequence(obj, n_frames=16, seed=0)
            t2 = time.perf_counter()
            glb = export_glb(seq, Path(tmp) / f"{f.name}.glb")
            t3 = time.perf_counter()
            npz = export_npz(seq, Path(tmp) / f"{f.name}.npz")
            kinds = Counter(j.type for j in obj.movable_joints)
            joints = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            print(
                f"| {f.name} | {obj.category} | {sum(len(p.vertices) > 0 for p in obj.parts)} | {joints} | "
                f"{seq.n_vertices} | {seq.n_faces} | {t1 - t0:.3f} | {t2 - t1:.3f} | {t3 - t2:.3f} | "
                f"{glb.stat().st_size / 1e6:.2f} | {npz.stat().st_size / 1e6:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
