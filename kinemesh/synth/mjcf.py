"""The one MJCF writer: MuJoCo models built with ``mujoco.MjSpec`` (no XML text is formatted by hand).

Every scene of the package is built here or through these helpers: articulated objects (``articulated_spec``:
one recursive body writer, also used by the material test cases of :mod:`kinemesh.materials.physics`),
floors, and flex soft bodies / cloth (``flexcomp_spec``). Names are data, never markup: a part named
``door"/><x a="`` is a body of that name, escaped by MuJoCo's own XML writer (``spec.to_xml()``).

Articulated objects: every part becomes a body whose frame coincides with the world frame at rest (joint
value 0), so a body's world pose in MuJoCo (``data.xpos``, ``data.xmat``) *is* the part transform of
``ArticulatedObject.part_transforms``. Joints carry their axis, origin (``pos``) and limits in radians /
metres; the limits are ``Joint.rest_limits()`` (the rest pose lies inside them) and a keyframe ``rest``
holds the initial joint positions (the rest pose, every joint value 0, as ``qpos0``). Continuous joints are
unlimited hinges; fixed joints become welded child bodies. Contacts between a parent and its child are
excluded explicitly (they touch at the hinge).
"""

from __future__ import annotations

import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.errors import KinemeshError


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
    rest_overlap: float = 1e-4  # ... and pairs whose collision hulls overlap at rest by more than this x the size
    floor: bool = False  # add a ground plane at z = 0
    limit_solref: tuple[float, float] = (0.005, 1.0)  # stiff joint limits (time constant s, damping ratio)


def new_spec(name: str, timestep: float, integrator: str, gravity: float = 9.81, spec=None):
    """An empty ``MjSpec`` (or ``spec``, completed): angles in radians, the time step (s), the integrator
    (``euler``, ``rk4``, ``implicit``, ``implicitfast`` or ``discrete``) and gravity -``gravity`` z (m/s^2)."""
    import mujoco

    spec = spec or mujoco.MjSpec()
    spec.modelname = name
    spec.compiler.degree = False
    spec.option.timestep = timestep
    spec.option.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    spec.option.gravity = [0.0, 0.0, -gravity]
    return spec


def add_floor(spec, half_size: float, tilt: float = 0.0, **attrs):
    """A plane geom named ``floor`` through the origin, tilted by ``tilt`` rad about x; ``attrs`` are geom
    attributes (friction, contype, rgba, ...)."""
    import mujoco

    c, s = np.cos(tilt / 2), np.sin(tilt / 2)
    return spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[half_size, half_size, 0.1],
                                   quat=[c, s, 0.0, 0.0], **attrs)


def add_articulated(spec, obj: ArticulatedObject, prefix: tuple[str, str, str] = ("", "geom_", "mesh_"),
                    geom: Callable[[Part], dict] | None = None, joint: Callable[[Joint, Part], dict] | None = None,
                    mesh: Callable[[Part], dict] | None = None, helper_mass: float = 1e-3,
                    helper_inertia: float = 1e-6, root_pose: tuple | None = None) -> dict:
    """Add ``obj``'s parts as a body tree below the world body of ``spec``: the one recursive body writer.

    ``prefix`` = (body, geom, mesh) name prefixes. ``geom(part)`` / ``mesh(part)`` / ``joint(joint, child)``
    give extra attributes of a part's mesh geom, its mesh asset and a movable joint (type, axis, pos and the
    ``rest_limits`` range are set here). A part without geometry gets a tiny inertial (``helper_mass`` kg,
    ``helper_inertia`` kg m^2 on the diagonal) at its joint origin. ``root_pose`` = (pos (3,), quat (4,)): the
    root body is placed there with a free joint ``root``. Returns {part name: MjsBody}.
    """
    import mujoco

    children: dict[str, list[Joint]] = {}
    for j in obj.joints:
        children.setdefault(j.parent, []).append(j)
    bodies = {}

    def add(parent, name: str, j: Joint | None) -> None:
        part = obj.part(name)
        body = bodies[name] = parent.add_body(name=prefix[0] + name)
        if j is None and root_pose is not None:
            body.pos, body.quat = root_pose
            body.add_freejoint(name="root")
        if j is not None and j.type != "fixed":
            mj = body.add_joint(name=j.name, axis=j.axis, pos=j.origin,
                                type=mujoco.mjtJoint.mjJNT_SLIDE if j.type == "prismatic" else mujoco.mjtJoint.mjJNT_HINGE,
                                **(joint(j, part) if joint else {}))
            limits = j.rest_limits() if j.type != "continuous" else None
            mj.limited = mujoco.mjtLimited.mjLIMITED_TRUE if limits else mujoco.mjtLimited.mjLIMITED_FALSE
            if limits:
                mj.range = limits
        if len(part.vertices):
            spec.add_mesh(name=prefix[2] + name, uservert=part.vertices.ravel(), userface=part.faces.ravel(),
                          **(mesh(part) if mesh else {}))
            body.add_geom(name=prefix[1] + name, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=prefix[2] + name,
                          **(geom(part) if geom else {}))
        else:  # a helper link without geometry still needs mass for its joint to be well posed
            body.explicitinertial = True
            body.ipos = np.zeros(3) if j is None else j.origin
            body.mass, body.inertia = helper_mass, [helper_inertia] * 3
        for cj in children.get(name, []):
            add(body, cj.child, cj)

    add(spec.worldbody, obj.root, None)
    return bodies


def articulated_spec(obj: ArticulatedObject, options: MjcfOptions | None = None, actuators: bool = False):
    """The ``MjSpec`` of ``obj`` (meshes inlined). With ``actuators`` each movable joint gets a motor (gear 1)
    named ``motor_<joint>``; the keyframe ``rest`` holds the initial joint positions (all 0: the rest pose)."""
    import mujoco

    o = options or MjcfOptions()
    spec = new_spec(obj.name, o.timestep, o.integrator, 9.81 if o.gravity else 0.0)
    spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE
    spec.compiler.boundmass, spec.compiler.boundinertia = 1e-4, 1e-8
    if o.contacts == "none":
        spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    spec.default.geom.density = o.density
    spec.default.geom.rgba = [0.8, 0.7, 0.6, 1.0]
    spec.default.joint.armature = o.armature
    spec.default.joint.solref_limit = list(o.limit_solref)
    if o.floor:
        add_floor(spec, 5.0, rgba=[0.9, 0.9, 0.9, 1.0])
        spec.worldbody.add_light(pos=[0, -1, 3], dir=[0, 0.3, -1])

    def joint(j: Joint, part: Part) -> dict:
        size = float(np.max(np.ptp(part.vertices, axis=0))) if len(part.vertices) else 0.05
        return {"damping": o.damping * (size if j.type == "prismatic" else size**2)}

    add_articulated(spec, obj, joint=joint)
    if o.contacts != "none":
        for j in obj.joints:
            spec.add_exclude(bodyname1=j.parent, bodyname2=j.child)
        for a, b in overlapping_at_rest(spec, obj, o.rest_overlap):
            spec.add_exclude(bodyname1=a, bodyname2=b)
    movable = obj.movable_joints
    if actuators:
        for j in movable:
            spec.add_actuator(name=f"motor_{j.name}", target=j.name, trntype=mujoco.mjtTrn.mjTRN_JOINT, gear=[1, 0, 0, 0, 0, 0])
    spec.add_key(name="rest", qpos=[0.0] * len(movable))
    return spec


def overlapping_at_rest(spec, obj: ArticulatedObject, tol: float) -> list[tuple[str, str]]:
    """Pairs of bodies of ``spec`` (``obj``'s parts, no floor) whose collision geometry penetrates by more
    than ``tol`` x the object's size at rest. MuJoCo collides meshes by their convex hulls, and real parts
    nest: the hulls of a cardboard box's flaps overlap at its corners by 0.04 % of its size
    (PartNet-Mobility kitchenmodels__100194), and contact pushed two flaps open from the first step with no
    force applied. Excluding them keeps the rest pose at rest; pairs that only touch still collide (a
    dishwasher's rack stops at its closed door)."""
    import mujoco

    if len(obj.joints) < 2:
        return []
    names = {p.name for p in obj.parts}
    m = compile_spec(spec, obj.name)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    size = float(np.ptp(obj.merged(None)[0], axis=0).max())
    pairs = set()
    for c in d.contact[:d.ncon]:
        if c.dist < -tol * size:
            a, b = (mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.geom_bodyid[g])) for g in c.geom)
            if a in names and b in names and a != b:
                pairs.add(tuple(sorted((a, b))))
    return sorted(pairs)


def compile_spec(spec, what: str):
    """``spec.compile()`` with MuJoCo's complaint turned into a one-line KinemeshError naming ``what``."""
    try:
        return spec.compile()
    except ValueError as exc:
        raise KinemeshError(f"{what}: MuJoCo rejected the model: {str(exc).splitlines()[0]}") from None


def articulated_to_mjcf(obj: ArticulatedObject, options: MjcfOptions | None = None, actuators: bool = False) -> str:
    """The MJCF XML text of ``obj`` (see :func:`articulated_spec`), written by MuJoCo from the compiled spec."""
    spec = articulated_spec(obj, options, actuators)
    compile_spec(spec, obj.name)
    return spec.to_xml()


def load_model(obj: ArticulatedObject, options: MjcfOptions | None = None, actuators: bool = False):
    """Compile ``obj`` into a ``mujoco.MjModel`` (raises KinemeshError naming the object on failure)."""
    return compile_spec(articulated_spec(obj, options, actuators), obj.name)


def flexcomp_spec(name: str, attrs: dict, children: dict[str, dict], files: dict[str, bytes] | None = None):
    """An ``MjSpec`` whose world holds one ``<flexcomp>`` soft body / cloth, expanded by MuJoCo into its vertex
    bodies and ``flex`` (``MjsBody.make_flex`` of MuJoCo 4.0 takes no ``point``/``element``/``pin``, so the
    element is built with ``xml.etree`` - values are attributes, never formatted markup - and parsed by
    MuJoCo). ``attrs``: flexcomp attributes (arrays are space-joined), ``children``: tag -> attributes
    (``elasticity``, ``contact``, ``edge``, ``pin``), ``files``: file name -> bytes it reads (``file=``).
    Add options, floor and obstacles to the result with the MjSpec API."""
    import mujoco

    def text(v) -> str:
        return v if isinstance(v, str) else " ".join(f"{float(x):.17g}" if isinstance(x, (float, np.floating))
                                                     else str(x) for x in np.ravel(v))

    root = ET.Element("mujoco")
    fc = ET.SubElement(ET.SubElement(root, "worldbody"), "flexcomp", name=name, **{k: text(v) for k, v in attrs.items()})
    for tag, a in children.items():
        ET.SubElement(fc, tag, **{k: text(v) for k, v in a.items()})
    with tempfile.TemporaryDirectory() as tmp:  # flexcomp reads its file= at parse time, from disk only
        for fname, blob in (files or {}).items():
            (Path(tmp) / fname).write_bytes(blob)
        (Path(tmp) / "scene.xml").write_text(ET.tostring(root, encoding="unicode"), encoding="utf-8")
        try:
            return mujoco.MjSpec.from_file(str(Path(tmp) / "scene.xml"))
        except ValueError as exc:
            raise KinemeshError(f"{name}: MuJoCo rejected the flex: {str(exc).splitlines()[0]}") from None


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
