"""Render docs/img/physics_cases.png: the five SOPHY test cases on an articulated, a soft and a cloth object.

    python scripts/physics_contact_sheet.py [--out docs/img/physics_cases.png]

Takes about a minute on 2 CPU cores. Each tile shows the object at a late moment of the case (frame at 70 %
of the run, where the motion is visible), simulated by ``kinemesh.materials.physics.run_case``.
"""

from __future__ import annotations

import argparse

import numpy as np
import trimesh

from kinemesh.data.articulated import ArticulatedObject, Part
from kinemesh.materials.assign import PartMaterial
from kinemesh.materials.library import get_material
from kinemesh.materials.physics import CASES, CaseConfig, run_case
from kinemesh.viz.render import contact_sheet


def _examples():
    from kinemesh.synth.categories import build

    chest = build("chest", np.random.default_rng(3))
    toy = trimesh.creation.icosphere(subdivisions=2, radius=0.06)
    toy.vertices[:, 2] *= 1.3
    soft = ArticulatedObject([Part("toy", toy.vertices, toy.faces, "toy")], [], category="toy", name="toy")
    n, s = 12, 0.4
    g = np.linspace(-s / 2, s / 2, n)
    xx, yy = np.meshgrid(g, g)
    v = np.stack([xx.ravel(), yy.ravel(), np.zeros(n * n)], 1)
    f = [[i * n + j, i * n + j + 1, (i + 1) * n + j + 1] for i in range(n - 1) for j in range(n - 1)]
    f += [[i * n + j, (i + 1) * n + j + 1, (i + 1) * n + j] for i in range(n - 1) for j in range(n - 1)]
    cloth = ArticulatedObject([Part("towel", v, np.array(f), "towel")], [], category="towel", name="towel")
    return [(chest, "wood"), (soft, "rubber"), (cloth, "fabric")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/img/physics_cases.png")
    args = parser.parse_args()
    tiles = []
    for case in CASES:
        for obj, material in _examples():
            m = get_material(material)
            assignment = {p.name: PartMaterial(p.name, m, "docs") for p in obj.parts if len(p.vertices)}
            seq = run_case(obj, assignment, CaseConfig(case=case, duration=1.2, fps=20)).sequence
            k = int(0.7 * (seq.n_frames - 1))
            tiles.append((seq.frames[k], seq.faces, seq.part_ids, f"{case}: {obj.name} ({material})"))
            print(f"{case:6s} {obj.name:8s} {material:7s} done")
    contact_sheet(tiles, args.out, cols=3, size=(300, 225))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
