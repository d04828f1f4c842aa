"""Articulation inference time per object (target <= 1 s on 2 CPU cores).

Run: ``python bench/articulation.py [--n 2] [--real data/real_train] [--n-real 12] [--baseline DIR] [--out
bench/RESULTS_articulation.md]``. Times the predictor with and without the validity (opening direction) check,
the heuristic baseline and the from-motion fit, on synthetic held-out objects, then the predictor with the
validity check on real PartNet-Mobility objects (the first ``--n-real`` of the validation split of ``--real``,
skipped when that folder is absent) with and without the part-box cache
(``kinemesh.articulation.candidates.BOX_CACHE``), side by side per object, and, with ``--baseline DIR``, the
shipped predictor against the predictor folder DIR (e.g. an earlier commit's weights), alternately on each real
object; torch 1 thread. Prints a table and writes it as markdown.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2, help="objects per category")
    ap.add_argument("--categories", default="cabinet,chest_of_drawers,microwave,oven,desk_lamp,faucet,refrigerator")
    ap.add_argument("--real", default="data/real_train",
                    help="folder of PartNet-Mobility objects ('' to skip)")
    ap.add_argument("--n-real", type=int, default=12, help="real validation objects timed")
    ap.add_argument("--baseline", default="",
                    help="predictor folder timed against the shipped one on the real objects (e.g. earlier weights)")
    ap.add_argument("--out", default="bench/RESULTS_articulation.md")
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from kinemesh.articulation.dataset import TEST_SEED_BASE, build_object, strip_joints
    from kinemesh.articulation.from_motion import fit_sequence
    from kinemesh.articulation.infer import articulate, heuristic_articulate
    from kinemesh.articulation.predictor import load_predictor
    from kinemesh.atomic import write_text

    net = load_predictor()
    objs = [build_object(c, TEST_SEED_BASE + i) for c in a.categories.split(",") for i in range(a.n)]
    articulate(strip_joints(objs[0]), net=net)  # warm-up (imports, first allocations)
    rows = {"predictor + validity check": [], "predictor only": [], "heuristic baseline": [],
            "from motion (6 frames)": []}
    cpu = {k: [] for k in rows}
    for o in objs:
        s = strip_joints(o)
        rng = np.random.default_rng(0)
        seq = o.to_sequence([o.sample_values(rng) for _ in range(6)])
        for k, fn in (("predictor + validity check", lambda: articulate(s, net=net)),
                      ("predictor only", lambda: articulate(s, net=net, check_validity=False)),
                      ("heuristic baseline", lambda: heuristic_articulate(s)),
                      ("from motion (6 frames)", lambda: fit_sequence(seq))):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            rows[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    nparts = np.mean([len(o.parts) for o in objs])
    lines = ["# Articulation inference time", "",
             f"Command: `python bench/articulation.py --n {a.n} --n-real {a.n_real}"
             + (f" --baseline {a.baseline}" if a.baseline else "") + "`; machine: "
             f"{os.cpu_count()} CPU cores shared with other jobs (load average {os.getloadavg()[0]:.1f} at the "
             "end), no GPU, torch 1 thread, "
             f"{platform.python_version()}. {len(objs)} held-out synthetic objects ({a.categories}), "
             f"{nparts:.1f} parts on average. Wall time is inflated by the shared load; CPU time is the "
             "process's own.", "",
             "| step | wall s/object mean | wall max | CPU s/object mean |", "|---|---|---|---|"]
    for k in rows:
        lines.append(f"| {k} | {np.mean(rows[k]):.3f} | {np.max(rows[k]):.3f} | {np.mean(cpu[k]):.3f} |")
    if a.real and os.path.isdir(a.real):
        from kinemesh.eval.articulation import load_real_objects, static_parts

        real = [static_parts(o) for _, o in load_real_objects(a.real, validation_only=True)[:a.n_real]]
        lines += _real_rows(real, a.real, net)
        if a.baseline:
            lines += _baseline_rows(real, net, a.baseline)
    text = "\n".join(lines) + "\n"
    print(text)
    write_text(a.out, text)
    return 0


def _alternate(objs: list, runs: dict) -> dict:
    """CPU seconds of ``articulate`` on each object in ``objs`` for each named setting in ``runs`` (name ->
    (net, part-box cache size)), the settings run one after the other on each object so a change of the shared
    machine's load falls on all of them; the box cache is emptied before each, as for one ``kinemesh
    articulate``."""
    from kinemesh.articulation import candidates
    from kinemesh.articulation.infer import articulate

    keep = candidates.BOX_CACHE
    cpu = {k: [] for k in runs}
    try:
        for o in objs:
            for name, (net, cache) in runs.items():
                candidates.BOX_CACHE = cache
                candidates._BOXES.clear()
                c0 = time.process_time()
                articulate(o, net=net)
                cpu[name].append(time.process_time() - c0)
    finally:
        candidates.BOX_CACHE = keep
    return {k: np.array(v) for k, v in cpu.items()}


def _real_rows(objs: list, folder: str, net) -> list[str]:
    """Markdown lines: the predictor with the validity check on the real validation objects ``objs`` (the first
    of ``folder``'s), the part-box cache on and off, alternating."""
    from kinemesh.articulation import candidates

    cpu = _alternate(objs, {"on": (net, candidates.BOX_CACHE), "off": (net, 0)})
    on, off = cpu["on"], cpu["off"]
    nparts = np.mean([len(o.parts) for o in objs])
    return ["", f"Real objects: the first {len(objs)} of the validation split of `{folder}` ({nparts:.1f} "
            "parts on average), predictor + validity check, CPU seconds per object, the part-box cache on and "
            "off run alternately on each object:", "",
            "| part-box cache | CPU s/object mean | max | ratio off / on (mean of per-object ratios) |",
            "|---|---|---|---|",
            f"| on | {on.mean():.3f} | {on.max():.3f} | {np.mean(off / on):.2f}x |",
            f"| off | {off.mean():.3f} | {off.max():.3f} | |"]


def _baseline_rows(objs: list, net, baseline: str) -> list[str]:
    """Markdown lines: the predictor with the validity check on the real objects ``objs`` through ``net`` and
    through the predictor folder ``baseline``, alternating on each object."""
    from kinemesh.articulation import candidates
    from kinemesh.articulation.predictor import load_predictor

    base = load_predictor(baseline)
    cpu = _alternate(objs, {"shipped": (net, candidates.BOX_CACHE), "baseline": (base, candidates.BOX_CACHE)})
    a, b = cpu["shipped"], cpu["baseline"]

    def size(m):
        return f"{len(getattr(m, 'members', [m]))} networks, {sum(p.numel() for p in m.parameters()) / 1e6:.1f} M"

    return ["", f"Shipped predictor against `{baseline}` on the same {len(objs)} real objects, alternately, "
            "predictor + validity check, CPU seconds per object:", "",
            "| predictor | parameters | CPU s/object mean | max | ratio to the baseline (mean of per-object ratios) |",
            "|---|---|---|---|---|",
            f"| shipped | {size(net)} | {a.mean():.3f} | {a.max():.3f} | {np.mean(a / b):.2f}x |",
            f"| baseline | {size(base)} | {b.mean():.3f} | {b.max():.3f} | |"]


if __name__ == "__main__":
    raise SystemExit(main())
