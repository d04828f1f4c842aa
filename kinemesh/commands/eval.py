"""``kinemesh eval <benchmark>``: evaluation tables on held-out data.

Each benchmark lives in ``kinemesh/eval/<name>.py`` and exposes ``add_arguments(parser)`` and
``run(args) -> int``; this command only dispatches to them.
"""

from __future__ import annotations

import importlib
import pkgutil


def _benchmarks() -> list[str]:
    import kinemesh.eval as pkg

    names = []
    for m in pkgutil.iter_modules(pkg.__path__):
        if m.name.startswith("_"):
            continue
        module = importlib.import_module(f"kinemesh.eval.{m.name}")
        if hasattr(module, "add_arguments") and hasattr(module, "run"):
            names.append(m.name)
    return sorted(names)


def register(sub) -> None:
    p = sub.add_parser("eval", help="print and record evaluation tables on held-out data")
    bench = p.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    for name in _benchmarks():
        module = importlib.import_module(f"kinemesh.eval.{name}")
        doc = (module.__doc__ or name).strip().splitlines()[0]
        q = bench.add_parser(name, help=doc, description=doc)
        module.add_arguments(q)
        q.set_defaults(func=module.run)
    p.set_defaults(func=lambda args: p.print_help() or 2)
