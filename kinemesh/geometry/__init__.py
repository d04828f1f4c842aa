"""Geometry core: normalization, surface sampling, point->vertex transfer, dual quaternions, oriented
bounding boxes, local Procrustes fits, evaluation metrics and physical validity (interpenetration, collision,
detachment).

Submodules are imported lazily (``from kinemesh.geometry import metrics`` or ``kinemesh.geometry.metrics``) so
that importing the package stays cheap (torch is only loaded by ``dualquat``).
"""

from __future__ import annotations

import importlib

__all__ = ["normalize", "sampling", "transfer", "dualquat", "obb", "procrustes", "metrics", "validity"]


def __getattr__(name):
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
