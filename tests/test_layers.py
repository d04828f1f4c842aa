"""The package's layers point one way (docs/architecture.md): every ``kinemesh`` import, module-level or inside a
function, is parsed with ast and checked against the layer order; no private names cross modules; no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kinemesh"

LAYERS = {  # subpackage -> rank; a module may import its own rank (no cycles) or lower ones
    "errors": 0, "atomic": 0, "progress": 0, "checks": 0, "__init__": 0, "__main__": 9, "cli": 9,
    "geometry": 1, "data": 1, "synth": 3, "model": 4, "reduce": 5,  # geometry and data: the bottom, no cycle
    "ik": 6, "dynamics": 6, "articulation": 6, "materials": 6,
    "viz": 7, "eval": 8, "commands": 9,
}

PRIVATE_ALLOWED: set[tuple[str, str, str]] = set()  # (importer, module, name) exceptions: none


def module_imports(root: Path = PACKAGE) -> dict[str, set[tuple[str, str]]]:
    """{module: {(imported module, imported name or "")}} for every kinemesh import in every module."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = f.relative_to(root.parent).with_suffix("").parts
        mod = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("kinemesh"):
                found |= {(node.module, a.name) for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {(a.name, "") for a in node.names if a.name.startswith("kinemesh")}
        out[mod] = found
    return out


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def target(module: str, name: str, modules) -> str:
    """The module an import reaches: ``from kinemesh.model import api`` reaches kinemesh.model.api."""
    return f"{module}.{name}" if f"{module}.{name}" in modules else module


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on.discard(comp[-1])
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.fixture(scope="module")
def imports():
    return module_imports()


def test_every_subpackage_has_a_layer(imports):
    assert {layer(m) for m in imports} <= set(LAYERS), set(map(layer, imports)) - set(LAYERS)


def test_no_module_imports_a_layer_above_it(imports):
    bad = sorted(f"{m} imports {t}" for m, names in imports.items() for t, _ in names
                 if LAYERS[layer(t)] > LAYERS[layer(m)])
    assert not bad, "\n".join(bad)


def test_no_private_names_across_modules(imports):
    bad = []
    for m, names in imports.items():
        for t, name in names:
            reached = target(t, name, imports)
            private = name.startswith("_") and not name.startswith("__")
            if private and reached != m and (m, t, name) not in PRIVATE_ALLOWED:
                bad.append(f"{m} imports {name} from {t}")
    assert not bad, "\n".join(bad)


def test_no_import_cycles(imports):
    modules = {m: {target(t, n, imports) for t, n in names} & set(imports) - {m} for m, names in imports.items()}
    # a package's __init__ re-exports its own modules; only imports between different modules can cycle
    modules = {m: {t for t in ts if not m.startswith(t + ".") and not t.startswith(m + ".")}
               for m, ts in modules.items()}
    assert not cycles(modules), cycles(modules)
    packages = {}
    for m, ts in modules.items():
        packages.setdefault(layer(m), set()).update(layer(t) for t in ts if layer(t) != layer(m))
    assert not cycles(packages), cycles(packages)


def test_the_checks_catch_violations(tmp_path):
    """The parser sees function-level imports, upward layers, private names and cycles."""
    pkg = tmp_path / "kinemesh"
    for sub, text in {"model/a.py": "def f():\n    from kinemesh.viz.plots import _draw\n",
                      "viz/plots.py": "from kinemesh.model.a import f\n", "viz/__init__.py": "",
                      "model/__init__.py": ""}.items():
        (pkg / sub).parent.mkdir(parents=True, exist_ok=True)
        (pkg / sub).write_text(text)
    found = module_imports(pkg)
    assert found["kinemesh.model.a"] == {("kinemesh.viz.plots", "_draw")}
    assert LAYERS[layer("kinemesh.viz.plots")] > LAYERS[layer("kinemesh.model.a")]
    graph = {"kinemesh.model.a": {"kinemesh.viz.plots"}, "kinemesh.viz.plots": {"kinemesh.model.a"}}
    assert cycles(graph) == [["kinemesh.model.a", "kinemesh.viz.plots"]]
