"""``kinemesh eval <benchmark>``: evaluation tables on held-out data.

The benchmarks are a library (:mod:`kinemesh.eval`: a config dataclass, ``evaluate(cfg)`` and a renderer per
benchmark); this command builds the config from the options (one per config field, plus the files to write),
calls ``evaluate``, prints the table and writes the files atomically.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import MISSING, fields
from pathlib import Path

from kinemesh.atomic import write_text
from kinemesh.errors import InputFileError

log = logging.getLogger(__name__)


def add_config(p, config) -> None:
    """One option ``--a-b`` per field ``a_b`` of the config dataclass, with its default and metadata (help,
    type, choices, metavar, action; a False default is a flag, a True one a ``--a-b`` / ``--no-a-b`` pair: with
    ``type=bool`` a given ``False`` would read True)."""
    for f in fields(config):
        kw = {k: v for k, v in f.metadata.items() if k not in ("min", "max")}
        default = f.default_factory() if f.default is MISSING else f.default
        if default is False:
            kw.setdefault("action", "store_true")
        elif default is True:
            kw.setdefault("action", argparse.BooleanOptionalAction)
        elif default is not None and not isinstance(default, list):
            kw.setdefault("type", type(default))
        p.add_argument("--" + f.name.replace("_", "-"), default=default, **kw)


def config_from(args, config):
    """The config dataclass built from the parsed options (raises ConfigError)."""
    return config(**{f.name: getattr(args, f.name) for f in fields(config)})


def command_line(name: str, args, keys: str) -> str:
    """``kinemesh eval NAME`` with the options of ``keys`` (space-separated) that are set; a list repeats it."""
    words = [f"kinemesh eval {name}"]
    for k in keys.split():
        v = getattr(args, k, None)
        words += [f"--{k.replace('_', '-')} {x}" for x in (v if isinstance(v, list) else [v]) if x is not None]
    return " ".join(words)


# ------------------------------------------------------------------------------------------------ model
def _model_options(p) -> None:
    from kinemesh.eval.model import ModelEvalConfig

    add_config(p, ModelEvalConfig)
    p.add_argument("--out", default=None, help="write per-instance rows and the summary as JSON")
    p.add_argument("--from-json", default=None, metavar="FILE",
                   help="re-render the table of a previous --out JSON (no evaluation)")


def _model(args) -> int:
    from kinemesh.eval.model import ModelEvalConfig, evaluate, render, summarize

    if args.from_json:
        if not Path(args.from_json).is_file():
            raise InputFileError(args.from_json, "JSON of a previous `kinemesh eval model --out` not found")
        rows = json.loads(Path(args.from_json).read_text())["rows"]
    else:
        cfg = config_from(args, ModelEvalConfig)
        res = evaluate(cfg)
        rows = res.rows
        if args.out:
            write_text(args.out, json.dumps({"summary": summarize(rows), "rows": rows, "split": cfg.split,
                                             "checkpoint": cfg.checkpoint or "default",
                                             "model_info": res.model_info}, indent=1) + "\n")
    table = render(rows)
    print(table)
    if args.out:
        write_text(Path(args.out).with_suffix(".md"), table + "\n")
    return 0


# ------------------------------------------------------------------------------------------------ ik
def _ik_options(p) -> None:
    from kinemesh.eval.ik import IKEvalConfig

    add_config(p, IKEvalConfig)
    p.add_argument("--from-rows", nargs="+", default=None, metavar="ROWS",
                   help="only render the table from saved rows files (e.g. of runs split over processes)")
    p.add_argument("--histogram", default=None, metavar="PNG",
                   help="histogram of the per-target motion explained by NeuROK (reduced q), all groups")
    p.add_argument("--out", default=None, help="markdown file for the table (e.g. docs/results/ik.md)")


def _ik(args) -> int:
    from kinemesh.eval.ik import IKEvalConfig, evaluate, header, read_rows, render

    if args.from_rows:
        rows = read_rows(args.from_rows)
        command = " ".join(["kinemesh eval ik --from-rows", *args.from_rows] +
                           [f"--{k} {v}" for k, v in (("out", args.out), ("histogram", args.histogram)) if v])
        text = render(rows, command, [], f"Rendered from saved per-target rows ({', '.join(args.from_rows)}); "
                      "see the commands that produced them below the table.")
    else:
        cfg = config_from(args, IKEvalConfig)
        res = evaluate(cfg)
        rows = res.rows
        command = "kinemesh eval ik " + " ".join(sys.argv[3:]) if sys.argv[1:3] == ["eval", "ik"] else command_line(
            "ik", args, "data split checkpoint real real_val real_val_objects real_configs real_parts real_basis "
                        "real_base real_rest real_motion max_targets frames_per_seq methods subspace_method k_q rigidity "
                        "fit_loss seed out ablation")
        text = render(rows, command, res.notes, header(cfg, res.model_info))
    print(text)
    if args.out:
        write_text(args.out, text + "\n")
    if args.histogram:
        _histogram(rows, args.histogram)
    return 0


def _histogram(rows: list[dict], path: str, method: str = "neurok") -> None:
    """PNG histogram of the per-target motion explained (1 - vertex error / rest vertex error) of ``method``."""
    import numpy as np

    from kinemesh.viz.plots import plot_histogram

    proto = "vertex" if any(r.get("fit_loss") == "vertex" for r in rows) else "chamfer"
    vals = [1.0 - r["vertex_error"] / r["rest_vertex_error"] for r in rows
            if r["method"] == method and r.get("fit_loss", "chamfer") == proto
            and r.get("vertex_error") is not None and r.get("rest_vertex_error")]
    if not vals:
        log.warning("--histogram: no %s rows with vertex errors; nothing plotted", method)
        return
    out = plot_histogram(path, np.clip(vals, -1.0, 1.0), xlabel="motion explained per target (clipped to [-1, 1])",
                         title=f"IK, {method}, protocol '{proto}': {len(vals)} held-out targets", bins=20)
    print(f"wrote {out}")


# ------------------------------------------------------------------------------------------------ dynamics
def _dynamics_options(p) -> None:
    from kinemesh.eval.dynamics import DynamicsEvalConfig

    add_config(p, DynamicsEvalConfig)
    p.add_argument("--out", default="docs/results/dynamics.md", help="markdown table to write")


def _dynamics(args) -> int:
    from kinemesh.eval.dynamics import DynamicsEvalConfig, evaluate, render, report

    cfg = config_from(args, DynamicsEvalConfig)
    res = evaluate(cfg)
    print(render(res.rows))
    write_text(args.out, report(res, cfg, command_line(
        "dynamics", args, " ".join(f.name for f in fields(DynamicsEvalConfig)))))
    print(f"wrote {args.out}")
    return 0


# ------------------------------------------------------------------------------------------------ real
def _real_options(p) -> None:
    from kinemesh.eval.real import RealEvalConfig

    add_config(p, RealEvalConfig)
    p.add_argument("--out", default=None, help="write per-object rows and the summary as JSON")


def _real(args) -> int:
    from kinemesh.checks import out_file
    from kinemesh.eval.real import RealEvalConfig, evaluate, render, summarize

    cfg = config_from(args, RealEvalConfig)
    if args.out:
        out_file(args.out, force=True, option="--out")
    rows = evaluate(cfg).rows
    print(render(rows))
    if args.out:
        write_text(args.out, json.dumps({"summary": summarize(rows), "rows": rows, "args": {
            f.name: getattr(cfg, f.name) for f in fields(RealEvalConfig)}}, indent=1) + "\n")
    return 0


# ------------------------------------------------------------------------------------------------ articulation
def _articulation_options(p) -> None:
    from kinemesh.eval.articulation import ArticulationEvalConfig

    add_config(p, ArticulationEvalConfig)
    p.add_argument("--out", default="docs/results/articulation.md", help="markdown table output")


def _articulation(args) -> int:
    from kinemesh.eval.articulation import ArticulationEvalConfig, evaluate, render, report

    cfg = config_from(args, ArticulationEvalConfig)
    res = evaluate(cfg)
    print(render(res.rows))
    write_text(args.out, report(res, cfg, args.out))
    print(f"wrote {args.out}")
    return 0


BENCHMARKS = {"model": (_model_options, _model), "ik": (_ik_options, _ik), "dynamics": (_dynamics_options, _dynamics),
              "real": (_real_options, _real), "articulation": (_articulation_options, _articulation)}


def register(sub) -> None:
    import importlib

    p = sub.add_parser("eval", help="print and record evaluation tables on held-out data")
    bench = p.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    for name, (options, run) in sorted(BENCHMARKS.items()):
        module = importlib.import_module(f"kinemesh.eval.{name}")
        doc = (module.__doc__ or name).strip().splitlines()[0]
        q = bench.add_parser(name, help=doc, description=doc)
        options(q)
        q.set_defaults(func=run)
    p.set_defaults(func=lambda args: p.print_help() or 2)
