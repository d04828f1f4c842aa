"""Draw docs/img/architecture.png: the package's layers (docs/architecture.md), lowest at the bottom; imports
only point down (checked by tests/test_layers.py).

    python scripts/architecture_diagram.py [--out docs/img/architecture.png]
"""

from __future__ import annotations

import argparse

LAYERS = [  # (rank label, [(subpackage, what it holds)]), top to bottom
    ("entry points", [("cli / commands", "argument checking, files in and out, drawing")]),
    ("evaluation", [("eval", "benchmarks: configs in, rows out")]),
    ("visualisation", [("viz", "renderer, plots, web viewer")]),
    ("applications", [("ik", "inverse kinematics\nNeuROK 6.1"), ("dynamics", "Euler-Lagrange in q\nNeuROK 5"),
                      ("articulation", "joints of parts\nGEOPARD, ATOP"), ("materials", "MuJoCo physics\nSOPHY")]),
    ("reduction", [("reduce", "active subspace, bind()\nNeuROK 4.3")]),
    ("model", [("model", "conditional VAE, calibrated prior\nNeuROK 4.1-4.2")]),
    ("data generation", [("synth", "MuJoCo 4D data generator")]),
    ("geometry, data", [("geometry", "normalisation, sampling, dual quaternions,\nmetrics, validity, object kind"),
                        ("data", "KinematicSequence, loaders,\nURDF, USD, exporters")]),
]


def draw(out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    W, row_h, box_h = 10.0, 1.0, 0.72
    fig, ax = plt.subplots(figsize=(W, row_h * len(LAYERS) * 0.78 + 0.4), dpi=110)
    n = len(LAYERS)
    for i, (label, boxes) in enumerate(LAYERS):
        y = (n - 1 - i) * row_h
        ax.text(0.05, y + box_h / 2, label, ha="left", va="center", fontsize=9, color="0.35", style="italic")
        x0, width = 1.7, (W - 1.8) / len(boxes)
        for j, (name, what) in enumerate(boxes):
            x = x0 + j * width
            ax.add_patch(FancyBboxPatch((x + 0.05, y), width - 0.1, box_h, boxstyle="round,pad=0.02",
                                        fc=plt.cm.Blues(0.15 + 0.6 * (n - 1 - i) / n), ec="0.3", lw=0.8))
            ax.text(x + width / 2, y + box_h * 0.70, name, ha="center", va="center", fontsize=10, weight="bold")
            ax.text(x + width / 2, y + box_h * 0.30, what, ha="center", va="center", fontsize=7.5)
        if i < n - 1:
            ax.add_patch(FancyArrowPatch((W - 0.05, y), (W - 0.05, y - row_h + box_h), arrowstyle="-|>",
                                         mutation_scale=10, color="0.4"))
    ax.set_title("kinemesh layers: a module imports only its own layer or the ones below", fontsize=10)
    ax.set_xlim(0, W + 0.05)
    ax.set_ylim(-0.1, n * row_h)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/img/architecture.png")
    draw(ap.parse_args().out)
