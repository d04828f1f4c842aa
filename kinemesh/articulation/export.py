"""Export predicted articulations: the articulation JSON, URDF (+ OBJ meshes), MJCF and USD.

URDF (:func:`kinemesh.data.urdf.write_urdf`): Z up, metres, the kinemesh frame is the URDF's world frame;
link frames sit at their joint origins, world-aligned. MJCF comes from
:func:`kinemesh.synth.mjcf.articulated_to_mjcf` (meshes inlined, one self-contained file), USD from
:func:`kinemesh.data.usd.write_usd_articulated`. Before export, :func:`collision_free_limits` makes the
predicted limits usable as they are (rest pose inside, no closing through the carcass).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import numpy as np

from kinemesh.atomic import write_text
from kinemesh.data.articulated import ArticulatedObject


def articulation_json(preds, root: str | None = None) -> dict:
    """``{"parts": [...], "units": "m", "up": "z"}`` from PartPrediction objects (+ the root as fixed)."""
    parts = []
    if root is not None:
        parts.append({"name": root, "type": "fixed", "axis": [0.0, 0.0, 1.0], "origin": [0.0, 0.0, 0.0],
                      "limits": None, "parent": None, "confidence": 1.0, "type_from": "root"})
    parts += [p.to_dict() for p in preds]
    return {"parts": parts, "units": "m", "up": "z"}


def write_json(data: dict, path: str | os.PathLike) -> Path:
    return write_text(path, json.dumps(data, indent=2) + "\n")


def write_urdf(obj: ArticulatedObject, folder: str | os.PathLike, name: str = "object.urdf") -> Path:
    """Write ``folder/name`` and ``folder/meshes/<part>.obj`` (file stems sanitised by
    :func:`kinemesh.atomic.safe_names`); returns the URDF path. See :func:`kinemesh.data.urdf.write_urdf`."""
    from kinemesh.data.urdf import write_urdf as _write

    return _write(obj, Path(folder), name, mesh_dir="meshes")


def collision_free_limits(obj: ArticulatedObject, steps: int = 24) -> list[str]:
    """Make every revolute/prismatic joint's limits usable as they are, in place: widened to contain the rest
    pose (``Joint.rest_limits``), then the closing side (the smaller excursion from rest; the opening side is
    the prediction's) cut where the moving subtree, swept from the rest pose towards it in ``steps`` poses,
    enters the rest of the object (the collision test of
    :mod:`kinemesh.geometry.validity`, GEOPARD's simulator filter): a door then cannot close through its
    carcass in a simulator that excludes parent-child contacts. Returns one message per changed joint."""
    from kinemesh.geometry.validity import OccupancyGrid, moving_groups

    grid, groups, notes = OccupancyGrid(obj), moving_groups(obj), []
    for j in obj.movable_joints:
        pts = [grid.samples[m] for m in groups[j.child] if m in grid.samples]
        if j.limits is None or j.type not in ("revolute", "prismatic") or not pts:
            continue
        pts = np.concatenate(pts)
        base = float(grid.inside(pts, groups[j.child]).mean())
        lims = list(j.rest_limits())
        k = int(abs(lims[0]) < abs(lims[1])) ^ 1  # the closing side: the smaller excursion (the opening one stays)
        if lims[k] != 0.0:
            vals = lims[k] * np.linspace(1.0 / steps, 1.0, steps)
            T = np.stack([j.motion(v) for v in vals])
            P = np.einsum("sij,nj->sni", T[:, :3, :3], pts) + T[:, None, :3, 3]
            frac = grid.inside(P.reshape(-1, 3), groups[j.child]).reshape(steps, -1).mean(1) - base
            bad = np.flatnonzero(frac > grid.config.collision_fraction)
            if len(bad):
                lims[k] = float(vals[bad[0] - 1]) if bad[0] > 0 else 0.0
        if tuple(lims) != j.limits:
            notes.append(f"joint '{j.name}': limits {np.round(j.limits, 4).tolist()} -> "
                         f"{np.round(lims, 4).tolist()} (rest pose inside, no collision with the rest)")
            j.limits = (lims[0], lims[1])
    return notes


def write_mjcf(obj: ArticulatedObject, path: str | os.PathLike) -> Path:
    """Self-contained MJCF (meshes inlined) with a motor per movable joint. A flat part (a zero-thickness
    panel: a real cardboard box's flap) gets its vertices a second time 0.001 x the object's diagonal along
    its normal (:func:`kinemesh.synth.real.thickened`): MuJoCo refuses coplanar meshes."""
    from kinemesh.synth.mjcf import MjcfOptions, articulated_to_mjcf
    from kinemesh.synth.real import thickened

    xml = articulated_to_mjcf(thickened(obj), MjcfOptions(gravity=False), actuators=True)
    return write_text(path, xml)
