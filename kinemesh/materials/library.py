"""The material library: physical parameters of common materials (SOPHY's material model).

Values live in ``library.json`` beside this file, each with its physical range and source. Units are SI:
Young's modulus and yield stress in Pa, density in kg/m^3, friction angle in degrees.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kinemesh.errors import ConfigError

BEHAVIORS = ("rigid", "elastic", "elastoplastic", "cloth", "granular")
_LIBRARY_FILE = Path(__file__).with_name("library.json")


@dataclass(frozen=True)
class Material:
    """Physical parameters of one material.

    Attributes
    ----------
    name : library name (e.g. "rubber"), or "custom".
    behavior : one of rigid, elastic, elastoplastic, cloth, granular (selects the simulator).
    youngs_modulus : Pa.
    poisson_ratio : dimensionless, in [-1, 0.5).
    density : kg/m^3.
    yield_stress : Pa (0 for cohesionless granular media).
    friction_angle : degrees; contact friction mu = tan(angle) (internal friction angle for granular).
    restitution : coefficient of restitution of a drop on a hard floor, in [0, 1].
    damping : dimensionless loss factor (flex damping).
    thickness : m, for cloth shells.
    """

    name: str
    behavior: str
    youngs_modulus: float
    poisson_ratio: float
    density: float
    yield_stress: float
    friction_angle: float
    restitution: float = 0.5
    damping: float = 0.01
    thickness: float = 0.0005

    @property
    def friction(self) -> float:
        """Coulomb friction coefficient mu = tan(friction_angle)."""
        return math.tan(math.radians(self.friction_angle))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validate(self, where: str = "material") -> "Material":
        """Raise ConfigError naming ``where`` if a parameter is non-physical."""
        checks = [
            (self.behavior in BEHAVIORS, f"behavior must be one of {BEHAVIORS}, got {self.behavior!r}"),
            (self.youngs_modulus > 0, f"youngs_modulus must be > 0 Pa, got {self.youngs_modulus}"),
            (-1.0 < self.poisson_ratio < 0.5, f"poisson_ratio must lie in (-1, 0.5), got {self.poisson_ratio}"),
            (self.density > 0, f"density must be > 0 kg/m^3, got {self.density}"),
            (self.yield_stress >= 0, f"yield_stress must be >= 0 Pa, got {self.yield_stress}"),
            (0 <= self.friction_angle < 90, f"friction_angle must lie in [0, 90) deg, got {self.friction_angle}"),
            (0 <= self.restitution <= 1, f"restitution must lie in [0, 1], got {self.restitution}"),
            (self.damping >= 0, f"damping must be >= 0, got {self.damping}"),
            (self.thickness > 0, f"thickness must be > 0 m, got {self.thickness}"),
        ]
        for ok, message in checks:
            if not (ok and all(math.isfinite(v) for v in self._numbers())):
                raise ConfigError(f"{where}: {message if not ok else 'parameters must be finite numbers'}")
        return self

    def _numbers(self) -> list[float]:
        return [self.youngs_modulus, self.poisson_ratio, self.density, self.yield_stress,
                self.friction_angle, self.restitution, self.damping, self.thickness]


@lru_cache(maxsize=1)
def _raw_library() -> dict[str, Any]:
    return json.loads(_LIBRARY_FILE.read_text(encoding="utf-8"))["materials"]


def material_names() -> list[str]:
    """Names of the library materials, sorted."""
    return sorted(_raw_library())


def library_entry(name: str) -> dict[str, Any]:
    """The raw library entry (values with ranges and sources) of ``name``."""
    lib = _raw_library()
    if name not in lib:
        raise ConfigError(f"unknown material '{name}'; known materials: {', '.join(sorted(lib))}")
    return lib[name]


def get_material(name: str, **overrides: float) -> Material:
    """The library material ``name`` with optional parameter ``overrides`` (SI units), validated."""
    entry = library_entry(name)
    values: dict[str, Any] = {"name": name, "behavior": entry["behavior"]}
    for key, spec in entry.items():
        if isinstance(spec, dict) and "value" in spec:
            values[key] = float(spec["value"])
    unknown = set(overrides) - set(Material.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"material '{name}': unknown parameter(s) {sorted(unknown)}")
    values.update(overrides)
    return Material(**values).validate(f"material '{name}'")
