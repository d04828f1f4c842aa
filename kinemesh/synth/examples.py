"""The small example objects bundled in ``kinemesh/assets/examples`` (inputs of ``kinemesh demo``).

Regenerate with ``python -m kinemesh.synth.examples [FOLDER]``: a two-door cabinet (rest mesh as OBJ with one
group per part, plus a PartNet-style folder with its ground-truth joints), a watertight soft toy made of
primitives, and a flat cloth grid.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from kinemesh.atomic import write_text

EXAMPLES = Path(__file__).resolve().parents[1] / "assets" / "examples"


def _obj_text(groups: list[tuple[str, np.ndarray, np.ndarray]], header: str) -> str:
    lines = [f"# {header}", "# kinemesh example: metres, +Z up"]
    offset = 1
    for name, v, f in groups:
        lines.append(f"o {name}")
        lines += [f"v {x:.5f} {y:.5f} {z:.5f}" for x, y, z in v]
        lines += [f"f {a + offset} {b + offset} {c + offset}" for a, b, c in f]
        offset += len(v)
    return "\n".join(lines) + "\n"


def example_cabinet():
    """A two-door cabinet (ArticulatedObject) with a fixed seed."""
    from kinemesh.synth import categories as C

    budget = C.TARGET_VERTICES
    C.TARGET_VERTICES = (300, 1200)  # keep the committed files small
    try:
        for seed in range(100):
            obj = C.build("cabinet", np.random.default_rng(seed))
            if obj.meta["params"]["doors"] == 2:
                obj.name = "cabinet"
                return obj
    finally:
        C.TARGET_VERTICES = budget
    raise RuntimeError("no two-door cabinet drawn")  # pragma: no cover


def write_examples(folder: str | Path = EXAMPLES) -> list[Path]:
    """Write the example files into ``folder``; returns their paths."""
    from kinemesh.data.partnet import write_partnet_folder
    from kinemesh.synth.cloth import grid_sheet
    from kinemesh.synth.elastic import soft_shape

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cab = example_cabinet()
    groups = [(p.name, p.vertices, p.faces) for p in cab.parts if len(p.vertices)]
    out = [
        write_text(
            folder / "cabinet.obj", _obj_text(groups, "two-door cabinet, rest pose, one object per part")
        )
    ]
    out.append(write_partnet_folder(cab, folder / "cabinet"))
    toy = soft_shape("toy", np.random.default_rng(0))
    assert toy.is_watertight
    out.append(
        write_text(
            folder / "soft_toy.obj",
            _obj_text([("soft_toy", toy.vertices, toy.faces)], "watertight soft toy made of primitives"),
        )
    )
    v, f = grid_sheet(21, 21, 0.6, 0.6)
    v = v - [0.3, 0.3, 0.0]
    out.append(
        write_text(folder / "cloth.obj", _obj_text([("cloth", v, f)], "flat 0.6 m cloth grid, 21 x 21"))
    )
    return out


if __name__ == "__main__":  # pragma: no cover
    for p in write_examples(sys.argv[1] if len(sys.argv) > 1 else EXAMPLES):
        print(p)
