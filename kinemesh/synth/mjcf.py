"""ArticulatedObject -> MJCF (MuJoCo XML) with the meshes inlined, so the string alone loads.

Every part becomes a body whose frame coincides with the world frame at rest (joint value 0), so a body's
world pose in MuJoCo (``data.xpos``, ``data.xmat``) *is* the part transform of
``ArticulatedObject.part_transforms``. Joints carry their axis, origin (``pos``) and limits in radians /
metres (``<compiler angle="radian"/>``); continuous joints are unlimited hinges; fixed joints become welded
child bodies. Contacts between a parent and its child are excluded explicitly (DESIGN.md MuJoCo notes).
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

import numpy as np

from kinemesh.data.articulated import ArticulatedObject


@dataclass
class MjcfOptions:
    """Options of the generated MJCF."""

    timestep: float = 0.002  # simulation step (s)
    integrator: str = "implicitfast"  # rigid objects only, so the implicit integrators are allowed
    gravity: bool = True  # gravity (0, 0, -9.81) m/s^2 on or off
    damping: float = 0.5  # joint damping (N m s/rad or N s/m), scaled by the child's size below
    armature: float = 0.01  # joint armature (kg m^2 or kg), stabilises light parts
    density: float = 500.0  # part density (kg/m^3) for the mesh inertia
    contacts: str = "parent_child"  # "parent_child": exclude parent-child pairs; "none": disable all contacts
    floor: bool = False  # add a ground plane at z = 0
    limit_solref: tuple[float, float] = (0.005, 1.0)  # stiff joint limits (time constant s, damping ratio)


def _fmt(a, digits: int = 10) -> str:
    return " ".join(f"{float(x):.{digits}g}" for x in np.ravel(a))


def _name(s: str) -> str:
    return quoteattr(s)


def articulated_to_mjcf(
    obj: ArticulatedObject, options: MjcfOptions | None = None, actuators: bool = False
) -> str:
    """The MJCF XML string of ``obj`` (meshes inlined as ``<mesh vertex=... face=...>``).

    With ``actuators`` each movable joint gets a ``<motor>`` (gear 1) named ``motor_<joint>``.
    """
    o = options or MjcfOptions()
    children: dict[str, list] = {}
    for j in obj.joints:
        children.setdefault(j.parent, []).append(j)
    lines = [
        f"<mujoco model={_name(obj.name)}>",
        '  <compiler angle="radian" inertiafromgeom="true" boundmass="1e-4" boundinertia="1e-8"/>',
        (
            f'  <option timestep="{o.timestep:g}" integrator="{o.integrator}" '
            f'gravity="{_fmt([0, 0, -9.81] if o.gravity else [0, 0, 0])}">'
        ),
    ]
    if o.contacts == "none":
        lines.append('    <flag contact="disable"/>')
    lines.append("  </option>")
    lines.append(
        f'  <default><geom density="{o.density:g}" rgba="0.8 0.7 0.6 1"/>'
        f'<joint armature="{o.armature:g}" solreflimit="{_fmt(o.limit_solref)}"/></default>'
    )
    lines.append("  <asset>")
    for p in obj.parts:
        if len(p.vertices):
            lines.append(
                f'    <mesh name={_name("mesh_" + p.name)} vertex="{_fmt(p.vertices, 7)}" face="{_fmt(p.faces)}"/>'
            )
    lines.append("  </asset>")
    lines.append("  <worldbody>")
    if o.floor:
        lines.append('    <geom name="floor" type="plane" size="5 5 0.1" rgba="0.9 0.9 0.9 1"/>')
        lines.append('    <light pos="0 -1 3" dir="0 0.3 -1"/>')

    def body(name: str, joint, depth: int) -> None:
        pad = "  " * (depth + 2)
        lines.append(f'{pad}<body name={_name(name)} pos="0 0 0">')
        part = obj.part(name)
        if joint is not None and joint.type != "fixed":
            size = _part_size(part)
            damp = o.damping * (size if joint.type == "prismatic" else size**2)
            jt = "slide" if joint.type == "prismatic" else "hinge"
            attrs = f'name={_name(joint.name)} type="{jt}" axis="{_fmt(joint.axis)}" pos="{_fmt(joint.origin)}" damping="{damp:.4g}"'
            if joint.type != "continuous" and joint.limits is not None:
                attrs += f' limited="true" range="{_fmt(joint.limits)}"'
            else:
                attrs += ' limited="false"'
            lines.append(f"{pad}  <joint {attrs}/>")
        if len(part.vertices):
            lines.append(
                f'{pad}  <geom name={_name("geom_" + name)} type="mesh" mesh={_name("mesh_" + name)}/>'
            )
        else:
            c = np.zeros(3) if joint is None else joint.origin
            lines.append(f'{pad}  <inertial pos="{_fmt(c)}" mass="0.001" diaginertia="1e-6 1e-6 1e-6"/>')
        for cj in children.get(name, []):
            body(cj.child, cj, depth + 1)
        lines.append(f"{pad}</body>")

    body(obj.root, None, 0)
    lines.append("  </worldbody>")
    if o.contacts != "none":
        lines.append("  <contact>")
        for j in obj.joints:
            lines.append(f"    <exclude body1={_name(j.parent)} body2={_name(j.child)}/>")
        lines.append("  </contact>")
    if actuators:
        lines.append("  <actuator>")
        for j in obj.movable_joints:
            lines.append(f'    <motor name={_name("motor_" + j.name)} joint={_name(j.name)} gear="1"/>')
        lines.append("  </actuator>")
    lines.append("</mujoco>")
    return "\n".join(lines)


def _part_size(part) -> float:
    if len(part.vertices) == 0:
        return 0.05
    return float(np.max(np.ptp(part.vertices, axis=0)))


def load_model(obj: ArticulatedObject, options: MjcfOptions | None = None, actuators: bool = False):
    """Compile ``obj`` into a ``mujoco.MjModel`` (raises KinemeshError naming the object on failure)."""
    import mujoco

    from kinemesh.errors import KinemeshError

    xml = articulated_to_mjcf(obj, options, actuators)
    try:
        return mujoco.MjModel.from_xml_string(xml)
    except ValueError as exc:
        raise KinemeshError(f"{obj.name}: MuJoCo rejected the generated MJCF: {exc}") from None


def body_transforms(model, data, obj: ArticulatedObject) -> dict[str, np.ndarray]:
    """World transforms (4, 4) of every part from a simulated MuJoCo state (the part transforms)."""
    import mujoco

    out = {}
    for p in obj.parts:
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, p.name)
        T = np.eye(4)
        T[:3, :3] = data.xmat[bid].reshape(3, 3)
        T[:3, 3] = data.xpos[bid]
        out[p.name] = T
    return out
