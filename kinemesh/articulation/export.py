"""Export predicted articulations: the articulation JSON of DESIGN.md, URDF (+ OBJ meshes), MJCF and a PNG.

URDF convention: Z up, metres; every link frame coincides with the world frame at rest, so a joint's
``<origin xyz>`` is the world position of its axis point, and a child link's frame is placed at the joint
origin (``<origin>`` of the child's visual/collision is then ``-origin``). MuJoCo loads it with
``<mujoco><compiler discardvisual="false" .../></mujoco>`` (added, DESIGN.md MuJoCo notes).
MJCF comes from :func:`kinemesh.synth.mjcf.articulated_to_mjcf` (meshes inlined, one self-contained file).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from kinemesh.atomic import atomic_path, write_text
from kinemesh.data.articulated import ArticulatedObject


def articulation_json(preds, root: str | None = None) -> dict:
    """``{"parts": [...], "units": "m", "up": "z"}`` from PartPrediction objects (+ the root as fixed)."""
    parts = []
    if root is not None:
        parts.append({"name": root, "type": "fixed", "axis": [0.0, 0.0, 1.0], "origin": [0.0, 0.0, 0.0],
                      "limits": None, "parent": None, "confidence": 1.0})
    parts += [p.to_dict() for p in preds]
    return {"parts": parts, "units": "m", "up": "z"}


def write_json(data: dict, path: str | os.PathLike) -> Path:
    return write_text(path, json.dumps(data, indent=2) + "\n")


def _fmt(a) -> str:
    return " ".join(f"{float(x):.6g}" for x in np.ravel(a))


def _write_obj(path: Path, v: np.ndarray, f: np.ndarray) -> None:
    lines = [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in v]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in f]
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


def urdf_string(obj: ArticulatedObject, mesh_dir: str = "meshes", density: float = 500.0) -> str:
    """URDF XML of ``obj`` referencing ``mesh_dir/<part>.obj`` (relative). Link frames are placed at their
    joint origins (world-aligned), so joint ``<origin>`` is the offset between parent and child origins."""
    frame = {obj.root: np.zeros(3)}
    for j in obj._order:
        frame[j.child] = j.origin.copy() if j.type != "fixed" else frame[j.parent].copy()
    lines = ['<?xml version="1.0"?>', f"<robot name={quoteattr(obj.name)}>",
             '  <mujoco><compiler discardvisual="false" angle="radian" balanceinertia="true"/></mujoco>']
    for p in obj.parts:
        lines.append(f"  <link name={quoteattr(p.name)}>")
        if len(p.vertices):
            off = _fmt(-frame[p.name])
            mesh = f"{mesh_dir}/{p.name}.obj"
            ext = np.ptp(p.vertices, axis=0) + 1e-3
            mass = max(1e-3, density * float(np.prod(ext)) * 0.2)
            c = p.vertices.mean(0) - frame[p.name]
            ixx, iyy, izz = (mass / 12.0 * (ext[1] ** 2 + ext[2] ** 2), mass / 12.0 * (ext[0] ** 2 + ext[2] ** 2),
                             mass / 12.0 * (ext[0] ** 2 + ext[1] ** 2))
            lines += [f'    <inertial><origin xyz="{_fmt(c)}"/><mass value="{mass:.6g}"/>'
                      f'<inertia ixx="{ixx:.6g}" iyy="{iyy:.6g}" izz="{izz:.6g}" ixy="0" ixz="0" iyz="0"/></inertial>',
                      f'    <visual><origin xyz="{off}"/><geometry><mesh filename="{mesh}"/></geometry></visual>',
                      f'    <collision><origin xyz="{off}"/><geometry><mesh filename="{mesh}"/></geometry></collision>']
        lines.append("  </link>")
    for j in obj._order:
        t = {"continuous": "continuous"}.get(j.type, j.type)
        lines.append(f"  <joint name={quoteattr(j.name)} type=\"{t}\">")
        lines.append(f"    <parent link={quoteattr(j.parent)}/><child link={quoteattr(j.child)}/>")
        lines.append(f'    <origin xyz="{_fmt(frame[j.child] - frame[j.parent])}" rpy="0 0 0"/>')
        if j.type != "fixed":
            lines.append(f'    <axis xyz="{_fmt(j.axis)}"/>')
        if j.type in ("revolute", "prismatic"):
            lo, hi = j.limits if j.limits is not None else (-np.pi, np.pi)
            lines.append(f'    <limit lower="{lo:.6g}" upper="{hi:.6g}" effort="100" velocity="10"/>')
        lines.append("  </joint>")
    lines.append("</robot>")
    return "\n".join(lines) + "\n"


def write_urdf(obj: ArticulatedObject, folder: str | os.PathLike, name: str = "object.urdf") -> Path:
    """Write ``folder/name`` and ``folder/meshes/<part>.obj``; returns the URDF path."""
    folder = Path(folder)
    (folder / "meshes").mkdir(parents=True, exist_ok=True)
    for p in obj.parts:
        if len(p.vertices):
            _write_obj(folder / "meshes" / f"{p.name}.obj", p.vertices, p.faces)
    return write_text(folder / name, urdf_string(obj))


def write_mjcf(obj: ArticulatedObject, path: str | os.PathLike) -> Path:
    """Self-contained MJCF (meshes inlined) with a motor per movable joint."""
    from kinemesh.synth.mjcf import MjcfOptions, articulated_to_mjcf

    xml = articulated_to_mjcf(obj, MjcfOptions(gravity=False), actuators=True)
    return write_text(path, xml)


def render_png(obj: ArticulatedObject, path: str | os.PathLike, open_fraction: float = 0.6) -> Path:
    """A PNG of the object at rest and with every joint at ``open_fraction`` of its range, joint axes drawn
    as arrows (viz engineer's renderer)."""
    from kinemesh.viz.render import render_frames

    vals = {}
    for j in obj.movable_joints:
        lo, hi = j.limits if j.limits is not None else (-np.pi / 2, np.pi / 2)
        vals[j.name] = (hi if abs(hi) >= abs(lo) else lo) * open_fraction
    rest, faces, ids = obj.merged(None)
    posed, _, _ = obj.merged(vals)
    axes = [(j.origin, j.axis) for j in obj.movable_joints]
    return render_frames(np.stack([rest, posed]), faces, path, part_ids=ids, axes=axes or None,
                         progress=False, titles=["rest", "articulated"])
