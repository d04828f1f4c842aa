"""Assemble docs/RESULTS.md and bench/RESULTS.md from the per-area result files.

Each evaluation (``kinemesh eval model|ik|dynamics|articulation``) and each benchmark (``bench/*.py``) writes
its own Markdown file next to its raw rows, so areas can be re-run independently. This script gathers them,
in a fixed order, into the two files the README points to, demoting every heading by one level.

Run from the repository root: ``python scripts/collect_results.py`` (no arguments; rewrites both files).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DOCS = [
    ("docs/results/headline.md", "Headline: real objects and unlike categories"),
    ("docs/results/model.md", "Kinematic model (issue: neural kinematic model)"),
    ("docs/results/ik.md", "Active subspace and inverse kinematics (Table 1)"),
    ("docs/results/ik_real.md", "Inverse kinematics on real objects"),
    ("docs/results/ik_calibrated.md", "Inverse kinematics with the calibrated prior (option)"),
    ("docs/results/dynamics.md", "Latent dynamics vs MuJoCo"),
    ("docs/results/articulation.md", "Articulation (GEOPARD + ATOP)"),
    ("docs/results/physics.md", "Materials and physics test cases (SOPHY)"),
    ("docs/results/real.md", "Real objects, part by part: drag test, prior samples, automatic grouping"),
    ("docs/results/demo.md", "kinemesh demo wall time (issue 17)"),
]
BENCH = ["geometry", "data", "synth", "model", "ik", "dynamics", "articulation", "viz"]


def _demote(text: str) -> str:
    return re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", text, flags=re.M)


def _links(text: str, src: Path, dst: Path) -> str:
    """Rewrite relative Markdown links/images of ``src`` so they resolve from ``dst``'s folder."""

    def fix(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^[a-z]+:|^#|^/", target):
            return m.group(0)
        resolved = (src.parent / target).resolve()
        try:
            rel = resolved.relative_to(dst.parent.resolve())
        except ValueError:
            rel = Path("..") / resolved.relative_to(ROOT)
        return f"{m.group(1)}({rel.as_posix()})"

    return re.sub(r"(!?\[[^\]]*\])\(([^)\s]+)\)", fix, text)


def collect(dst: Path, title: str, intro: str, parts: list[tuple[Path, str]]) -> None:
    out = [f"# {title}\n", intro, ""]
    out += ["Contents: " + ", ".join(f"[{name}](#{_anchor(name)})" for _, name in parts if _.exists()), ""]
    for path, name in parts:
        if not path.exists():
            continue
        body = path.read_text()
        body = re.sub(r"^# .*\n", "", body, count=1)
        out += [f"## {name}\n", f"(from `{path.relative_to(ROOT).as_posix()}`)\n",
                _links(_demote(body), path, dst).strip(), ""]
    tmp = dst.with_suffix(".md.tmp")
    tmp.write_text("\n".join(out) + "\n")
    tmp.replace(dst)
    print(f"wrote {dst.relative_to(ROOT)}")


def _anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", name.lower()).replace(" ", "-")


def main() -> None:
    collect(ROOT / "docs/RESULTS.md", "kinemesh evaluation results",
            "Every table below is produced by `kinemesh eval ...` (or the script named beside it) on data that "
            "training never saw: held-out instances, held-out categories, and the real PartNet-Mobility "
            "objects of `../shared/real_objects/`. The exact command sits above each table. Machine: 2 CPU "
            "cores, no GPU.",
            [(ROOT / p, n) for p, n in DOCS])
    collect(ROOT / "bench/RESULTS.md", "kinemesh benchmarks",
            "Latest results of `bench/*.py` (run all with `make bench`), each with its command and machine.",
            [(ROOT / f"bench/RESULTS_{b}.md", b) for b in BENCH])


if __name__ == "__main__":
    main()
