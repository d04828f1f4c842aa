"""Per-part material assignment: from a user's ``materials.json`` or inferred by documented rules.

The user file format (any subset of keys)::

    {"default": "wood",
     "parts": {"door_1": "wood",
               "handle": {"material": "metal", "density": 7000}}}

A material is a library name (``kinemesh.materials.library``) with optional SI overrides. Inference
(``--materials auto``) applies the ordered regular-expression rules of ``rules.json`` to
``category/label/name`` of each part, falls back to ``thin_sheet_material`` for open, flat parts (cloth)
and then to ``default_material``. The chosen assignment, with the reason for each part, is always written
out (``write_assignment``) so a user can edit it and run again.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kinemesh.atomic import write_text
from kinemesh.errors import ConfigError, InputFileError
from kinemesh.materials.library import Material, get_material

RULES_FILE = Path(__file__).with_name("rules.json")


@dataclass
class PartMaterial:
    """The material chosen for one part and why (``reason``: "file", "file default", "rule '<pattern>'",
    "thin open sheet" or "default")."""

    part: str
    material: Material
    reason: str


def load_rules(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read a rules file (default: the shipped ``rules.json``) and check its patterns compile."""
    path = Path(path) if path else RULES_FILE
    try:
        rules = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputFileError(path, f"cannot read rules ({exc})") from None
    for i, rule in enumerate(rules.get("rules", [])):
        try:
            re.compile(rule["pattern"], re.IGNORECASE)
            get_material(rule["material"])
        except (KeyError, re.error, ConfigError) as exc:
            raise InputFileError(path, f"rule {i} is invalid ({exc})") from None
    return rules


def is_thin_sheet(vertices: np.ndarray, faces: np.ndarray) -> bool:
    """True for an open surface much thinner than it is wide (a cloth-like sheet)."""
    import trimesh

    if len(vertices) < 3 or len(faces) == 0:
        return False
    mesh = trimesh.Trimesh(vertices, faces, process=False)
    # extents along the principal axes (robust for exactly flat sheets, unlike an OBB fit)
    centred = vertices - vertices.mean(0)
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    proj = centred @ axes.T
    extents = np.sort(proj.max(0) - proj.min(0))
    return (not mesh.is_watertight) and extents[0] < 0.02 * extents[2]


def infer_materials(parts, category: str = "", rules: dict[str, Any] | None = None) -> dict[str, PartMaterial]:
    """Infer a material per part. ``parts``: iterable of ``kinemesh.data.articulated.Part``."""
    rules = rules or load_rules()
    compiled = [(re.compile(r["pattern"], re.IGNORECASE), r) for r in rules.get("rules", [])]
    out: dict[str, PartMaterial] = {}
    for part in parts:
        if len(part.vertices) == 0:
            continue
        key = f"{category}/{part.label}/{part.name}"
        # rules first (a named 'lid' or 'door' is rigid even when its mesh is an open panel), then shape
        match = next((r for pat, r in compiled if pat.search(key)), None)
        if match is not None:
            name, reason = match["material"], f"rule '{match['pattern']}'"
        elif is_thin_sheet(part.vertices, part.faces):
            name, reason = rules.get("thin_sheet_material", "fabric"), "thin open sheet"
        else:
            name, reason = rules.get("default_material", "hard_plastic"), "default"
        out[part.name] = PartMaterial(part.name, get_material(name), reason)
    return out


def _material_from_spec(spec: Any, where: str) -> Material:
    if isinstance(spec, str):
        name, overrides = spec, {}
    elif isinstance(spec, dict) and "material" in spec:
        overrides = {k: v for k, v in spec.items() if k != "material"}
        name = spec["material"]
        for k, v in overrides.items():
            numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
            if not numeric and not (k == "behavior" and isinstance(v, str)):
                raise ConfigError(f"{where}: parameter '{k}' must be a number, got {v!r}")
    else:
        raise ConfigError(f"{where}: expected a material name or {{\"material\": NAME, ...}}, got {spec!r}")
    try:
        return get_material(name, **{k: v if k == "behavior" else float(v) for k, v in overrides.items()})
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_materials_file(path: str | os.PathLike, part_names: list[str]) -> dict[str, PartMaterial]:
    """Read a user ``materials.json`` and return a material for every part in ``part_names``.

    Raises InputFileError/ConfigError naming the file and the part for unknown materials, non-physical
    parameters, parts the object does not have, and parts left without a material (no ``default``).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFileError(path, "file not found") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InputFileError(path, f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputFileError(path, "must be a JSON object with 'parts' and/or 'default'")
    parts = data.get("parts", {})
    if not isinstance(parts, dict):
        raise InputFileError(path, "'parts' must map part names to materials")
    unknown = sorted(set(parts) - set(part_names))
    if unknown:
        raise InputFileError(path, f"part '{unknown[0]}' does not exist; the object's parts are: "
                                   f"{', '.join(part_names)}")
    out: dict[str, PartMaterial] = {}
    default = data.get("default")
    for name in part_names:
        try:
            if name in parts:
                out[name] = PartMaterial(name, _material_from_spec(parts[name], f"part '{name}'"), "file")
            elif default is not None:
                out[name] = PartMaterial(name, _material_from_spec(default, "default"), "file default")
            else:
                raise ConfigError(f"part '{name}' has no material and the file gives no 'default'")
        except ConfigError as exc:
            raise InputFileError(path, str(exc)) from None
    return out


def assignment_to_json(assignment: dict[str, PartMaterial]) -> dict[str, Any]:
    """The assignment in the user file format, plus the full parameters and reasons (for reading)."""
    return {
        "parts": {
            name: {"material": pm.material.name, **{
                k: v for k, v in pm.material.to_dict().items() if k not in ("name",)
            }}
            for name, pm in assignment.items()
        },
        "reasons": {name: pm.reason for name, pm in assignment.items()},
        "units": {"youngs_modulus": "Pa", "yield_stress": "Pa", "density": "kg/m^3",
                  "friction_angle": "deg", "thickness": "m"},
    }


def write_assignment(assignment: dict[str, PartMaterial], path: str | os.PathLike) -> Path:
    """Write the assignment so that ``load_materials_file`` reads it back unchanged."""
    return write_text(path, json.dumps(assignment_to_json(assignment), indent=2) + "\n")
