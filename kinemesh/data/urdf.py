"""URDF in and out: parsed with yourdfpy behind our safety checks, written with an XML library.

Reading: the file must be well-formed XML without entity declarations (checked before yourdfpy sees it, so
neither XXE nor billion-laughs expansion can happen and yourdfpy's lenient "recover" parser never runs);
yourdfpy parses links, visuals and joints; we add the checks it leaves out (joint types, a joint naming a
missing link, one tree, a mesh path escaping the asset folder: :func:`resolve_asset`). Numbers that are not
numbers, a missing name or an empty ``<geometry>`` raise :class:`~kinemesh.errors.InputFileError` naming the
file. Writing (:func:`write_urdf`): one ``<link>`` per part with its OBJ under ``mesh_dir`` (file stems from
:func:`kinemesh.atomic.safe_names`), inertials from the mesh, link frames at joint origins; names and paths
are attribute values set through ``xml.etree`` (escaped), never formatted into the text.
"""

from __future__ import annotations

import io
import logging
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kinemesh.errors import InputFileError, UnsafePathError

log = logging.getLogger(__name__)

URDF_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")
# Types that are valid URDF but have no kinemesh equivalent.
UNSUPPORTED_URDF_TYPES = ("floating", "planar")
WRITE_DENSITY = 500.0  # kg/m^3 of the inertials written into URDFs (wood-like); `kinemesh physics` sets real ones


@dataclass
class UrdfVisual:
    """One visual element. ``transform`` (4, 4) from the geometry frame to the link frame.

    ``kind`` is ``mesh`` (``path`` set, ``scale`` (3,)), ``box`` (``size`` (3,)), ``cylinder``
    (``radius``, ``length``) or ``sphere`` (``radius``)."""

    kind: str
    transform: np.ndarray
    path: Path | None = None
    scale: np.ndarray = field(default_factory=lambda: np.ones(3))
    size: np.ndarray | None = None
    radius: float = 0.0
    length: float = 0.0
    name: str = ""


@dataclass
class UrdfLink:
    """A link and its visuals (possibly none, e.g. ``base`` or a screw joint's ``_helper`` link)."""

    name: str
    visuals: list[UrdfVisual] = field(default_factory=list)


@dataclass
class UrdfJoint:
    """A joint as written in the URDF: ``origin`` (4, 4) child-joint frame in the parent link frame,
    ``axis`` (3,) in the joint frame exactly as written (maybe not unit length), limits or None."""

    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    limits: tuple[float, float] | None


@dataclass
class Urdf:
    """A parsed URDF file."""

    path: Path
    name: str
    links: dict[str, UrdfLink]
    joints: list[UrdfJoint]
    warnings: list[str]

    @property
    def root(self) -> str:
        children = {j.child for j in self.joints}
        return next(n for n in self.links if n not in children)

    def rest_link_transforms(self) -> dict[str, np.ndarray]:
        """Transform (4, 4) of every link in the URDF root (world) frame at joint values 0."""
        by_parent: dict[str, list[UrdfJoint]] = {}
        for j in self.joints:
            by_parent.setdefault(j.parent, []).append(j)
        T = {self.root: np.eye(4)}
        stack = [self.root]
        while stack:
            name = stack.pop()
            for j in by_parent.get(name, []):
                T[j.child] = T[name] @ j.origin
                stack.append(j.child)
        return T


def rpy_matrix(rpy) -> np.ndarray:
    """Rotation (3, 3) of URDF roll-pitch-yaw angles (rad): R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def escapes(folder: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` (symlinks and ``..`` resolved) lies outside ``folder``."""
    return not Path(path).resolve().is_relative_to(Path(folder).resolve())


def resolve_asset(folder: Path, filename: str, urdf_path: Path) -> Path:
    """Resolve a mesh filename of ``urdf_path`` inside ``folder``; refuse paths that leave it.

    ``package://pkg/rest`` resolves ``rest`` inside the nearest ancestor folder named ``pkg`` that holds a
    ``package.xml`` (a ROS package root, e.g. ``pkg/urdf/robot.urdf`` with ``pkg/meshes/``), else inside
    ``folder``; a ``file://`` prefix is stripped. Raises UnsafePathError (absolute path or escaping
    ``..``/symlink) or InputFileError (missing file).
    """
    name = filename.strip()
    if name.startswith("package://"):
        pkg, _, name = name[len("package://") :].partition("/")
        package_root = next((a for a in (folder.resolve(), *folder.resolve().parents)
                             if a.name == pkg and (a / "package.xml").is_file()), None)
        if package_root is not None:
            folder = package_root
    elif name.startswith("file://"):
        name = name[len("file://") :]
    if not name:
        raise InputFileError(urdf_path, "a mesh element has an empty filename")
    if os.path.isabs(name) or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        raise UnsafePathError(urdf_path, f"mesh path '{filename}' is absolute; only paths inside {folder} are allowed")
    target = (folder.resolve() / name).resolve()
    if escapes(folder, target):
        raise UnsafePathError(urdf_path, f"mesh path '{filename}' escapes the asset folder {folder}")
    if not target.is_file():
        raise InputFileError(urdf_path, f"mesh file '{filename}' not found (looked for {target})")
    return target


def _visual(v, path: Path, folder: Path, where: str) -> UrdfVisual | None:
    """Our view of one yourdfpy visual (None, with a warning, for geometry we do not read)."""
    g = v.geometry
    vis = UrdfVisual(kind="", transform=np.eye(4) if v.origin is None else np.asarray(v.origin, float),
                     name=v.name or "")
    if g.mesh is not None:
        if not g.mesh.filename:
            raise InputFileError(path, f"{where}: <mesh> has no filename")
        vis.kind, vis.path = "mesh", resolve_asset(folder, g.mesh.filename, path)
        vis.scale = np.broadcast_to(np.asarray(1.0 if g.mesh.scale is None else g.mesh.scale, float), (3,)).copy()
    elif g.box is not None:
        vis.kind, vis.size = "box", np.asarray(g.box.size, float)
    elif g.cylinder is not None:
        vis.kind, vis.radius, vis.length = "cylinder", float(g.cylinder.radius), float(g.cylinder.length)
    elif g.sphere is not None:
        vis.kind, vis.radius = "sphere", float(g.sphere.radius)
    else:
        return None
    values = [vis.transform, vis.scale, vis.size if vis.size is not None else 0.0, vis.radius, vis.length]
    if not all(np.isfinite(x).all() for x in values):
        raise InputFileError(path, f"{where}: geometry or origin holds a non-finite number")
    return vis


def read_urdf(path: str | os.PathLike) -> Urdf:
    """Parse ``path`` into links, visuals and joints (yourdfpy + the checks of the module docstring)."""
    import yourdfpy

    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "URDF file not found")
    data = path.read_bytes()
    if not data.strip():
        raise InputFileError(path, "URDF file is empty")
    if b"<!ENTITY" in data:
        raise InputFileError(path, "URDF declares XML entities; refusing to expand them")
    try:
        tag = ET.fromstring(data).tag
    except ET.ParseError as exc:
        raise InputFileError(path, f"not valid XML ({exc})") from None
    if tag != "robot":
        raise InputFileError(path, f"root element is <{tag}>, expected <robot>")
    try:
        robot = yourdfpy.URDF.load(io.BytesIO(data), build_scene_graph=False, load_meshes=False).robot
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise InputFileError(path, f"cannot read the URDF ({type(exc).__name__}: {exc})") from None
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        log.warning("%s: %s", path, message)

    links: dict[str, UrdfLink] = {}
    for le in robot.links:
        if not le.name:
            raise InputFileError(path, "a <link> has no name")
        if le.name in links:
            raise InputFileError(path, f"link '{le.name}' is defined twice")
        link = links[le.name] = UrdfLink(le.name)
        for i, v in enumerate(le.visuals):
            vis = _visual(v, path, path.parent, f"link '{le.name}' visual {i}")
            if vis is None:
                warn(f"link '{le.name}' visual {i}: unsupported geometry; skipped")
            else:
                link.visuals.append(vis)
    if not links:
        raise InputFileError(path, "URDF has no <link>")

    joints: list[UrdfJoint] = []
    children: set[str] = set()
    for je in robot.joints:
        name, jtype = je.name or f"joint_{len(joints)}", (je.type or "").strip()
        if jtype in UNSUPPORTED_URDF_TYPES:
            raise InputFileError(path, f"joint '{name}' has type '{jtype}', which kinemesh does not support "
                                       f"(supported: {', '.join(URDF_JOINT_TYPES)})")
        if jtype not in URDF_JOINT_TYPES:
            raise InputFileError(path, f"joint '{name}' has unknown type '{jtype}' "
                                       f"(expected one of {', '.join(URDF_JOINT_TYPES)})")
        for end in (je.parent, je.child):
            if end not in links:
                raise InputFileError(path, f"joint '{name}' names unknown link '{end}'")
        if je.child in children:
            raise InputFileError(path, f"link '{je.child}' is the child of two joints")
        children.add(je.child)
        origin = np.eye(4) if je.origin is None else np.asarray(je.origin, float)
        axis = np.asarray(je.axis, float).ravel()
        if axis.shape != (3,) or not np.isfinite(axis).all() or not np.isfinite(origin).all():
            raise InputFileError(path, f"joint '{name}': origin or axis is not finite numbers")
        if jtype != "fixed" and np.linalg.norm(axis) < 1e-12:
            warn(f"joint '{name}': axis has zero length; using [1, 0, 0]")
            axis = np.array([1.0, 0.0, 0.0])
        limits = None
        if jtype in ("revolute", "prismatic"):
            if je.limit is None:
                warn(f"joint '{name}': {jtype} joint without <limit>; treating it as unlimited")
            else:  # URDF defaults are 0; a non-finite bound leaves the joint unlimited (mobility_v2.json may fill it)
                lo, hi = (0.0 if x is None else float(x) for x in (je.limit.lower, je.limit.upper))
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    warn(f"joint '{name}': limits ({lo}, {hi}) are not finite; treating it as unlimited")
                else:
                    if lo > hi:
                        warn(f"joint '{name}': limit lower {lo} > upper {hi}; swapped")
                    limits = (min(lo, hi), max(lo, hi))
        joints.append(UrdfJoint(name, jtype, je.parent, je.child, origin, axis, limits))

    roots = [n for n in links if n not in children]
    if len(roots) != 1:
        raise InputFileError(path, f"links must form one tree; found roots {roots}")
    urdf = Urdf(path, robot.name or path.stem, links, joints, warnings)
    if len(urdf.rest_link_transforms()) != len(links):
        raise InputFileError(path, "joints do not connect all links into one tree (cycle?)")
    return urdf


# ---------------------------------------------------------------------------------------------- writer
def _fmt(x) -> str:
    return " ".join(repr(float(v)) for v in np.asarray(x, dtype=np.float64).ravel())


def _inertial(link: ET.Element, vertices: np.ndarray, faces: np.ndarray, link_pos: np.ndarray) -> None:
    """Add an ``<inertial>`` so simulators (MuJoCo, PyBullet) accept moving links: mass and inertia of the
    mesh (link axes, origin at ``link_pos``) at ``WRITE_DENSITY`` (a 5 mm shell when not watertight); links
    without geometry get a tiny well-posed mass."""
    import trimesh

    mass, com, inertia = 1e-3, np.zeros(3), np.full(3, 1e-7)
    if len(vertices) >= 4:
        mesh = trimesh.Trimesh(vertices, faces, process=False)
        if mesh.is_watertight and mesh.volume > 1e-12:
            mesh.density = WRITE_DENSITY
            mass, com = float(mesh.mass), np.asarray(mesh.center_mass) - link_pos
            inertia = np.linalg.eigvalsh(mesh.moment_inertia)
        else:
            mass = max(float(mesh.area) * 0.005 * WRITE_DENSITY, 1e-3)
            com = np.asarray(mesh.vertices.mean(0)) - link_pos
            e = np.ptp(mesh.vertices, axis=0)
            inertia = mass / 12.0 * np.array([e[1] ** 2 + e[2] ** 2, e[0] ** 2 + e[2] ** 2, e[0] ** 2 + e[1] ** 2])
        inertia = np.maximum(inertia, 1e-9)
    ie = ET.SubElement(link, "inertial")
    ET.SubElement(ie, "origin", xyz=_fmt(com), rpy="0 0 0")
    ET.SubElement(ie, "mass", value=repr(float(mass)))
    # principal moments on the diagonal: an approximation when the principal axes are not the link axes
    ET.SubElement(ie, "inertia", ixx=repr(float(inertia[0])), ixy="0", ixz="0", iyy=repr(float(inertia[1])),
                  iyz="0", izz=repr(float(inertia[2])))


def write_urdf(obj, folder: Path, name: str = "object.urdf", mesh_dir: str = "meshes",
               base_rpy: tuple[float, float, float] | None = None, robot_name: str | None = None) -> Path:
    """Write ``obj`` (an ArticulatedObject) as ``folder/name`` plus one OBJ per part under ``folder/mesh_dir``.

    The URDF's world frame is the kinemesh frame. With ``base_rpy`` a geometry-less ``base`` link is the root
    and the object hangs below it by a fixed joint with that rotation R (PartNet-Mobility's Y-up convention):
    meshes, joint origins and axes are then written in the body frame R^T x, and every URDF consumer
    (yourdfpy, pybullet, SAPIEN, MuJoCo) composes them back to the same world coordinates. Link frames sit at
    their joint origins with the body frame's axes. Joint limits are ``Joint.rest_limits()``: the rest pose
    (every joint value 0, the pose the meshes are in) lies inside them, so value 0 - what URDF consumers start
    from, URDF has no initial-position field - is the rest pose. Writes through the caller's folder (use
    ``atomic_dir`` for an all-or-nothing output). Returns the URDF path.
    """
    from kinemesh.atomic import safe_names
    from kinemesh.data.exporters import export_obj

    folder = Path(folder)
    R = np.eye(3) if base_rpy is None else rpy_matrix(base_rpy)
    pos = {obj.root: np.zeros(3)}  # link frame origins in the body frame
    for j in obj._order:
        pos[j.child] = R.T @ j.origin if j.type != "fixed" else pos[j.parent]
    stems = safe_names(p.name for p in obj.parts)
    robot = ET.Element("robot", name=robot_name or obj.name or "object")
    mj = ET.SubElement(robot, "mujoco")  # MuJoCo reads the visual meshes as collision geometry
    ET.SubElement(mj, "compiler", discardvisual="false", angle="radian", balanceinertia="true")
    if base_rpy is not None:
        base = next(b for b in ("base", *(f"base_{i}" for i in range(1, len(obj.parts) + 2))) if b not in stems)
        ET.SubElement(robot, "link", name=base)
        j0 = ET.SubElement(robot, "joint", name=f"{base}_fixed", type="fixed")
        ET.SubElement(j0, "origin", xyz="0 0 0", rpy=_fmt(base_rpy))
        ET.SubElement(j0, "parent", link=base)
        ET.SubElement(j0, "child", link=obj.root)
    for part in obj.parts:
        link = ET.SubElement(robot, "link", name=part.name)
        v = part.vertices @ R
        if len(v):
            fname = f"{mesh_dir}/{stems[part.name]}.obj"
            export_obj(v, part.faces, folder / fname, digits=17)
            for tag, label in (("visual", part.label or part.name), ("collision", part.name)):
                e = ET.SubElement(link, tag, name=label)
                ET.SubElement(e, "origin", xyz=_fmt(-pos[part.name]), rpy="0 0 0")
                ET.SubElement(ET.SubElement(e, "geometry"), "mesh", filename=fname)
        _inertial(link, v, part.faces, pos[part.name])
    for j in obj.joints:
        je = ET.SubElement(robot, "joint", name=j.name, type=j.type)
        ET.SubElement(je, "origin", xyz=_fmt(pos[j.child] - pos[j.parent]), rpy="0 0 0")
        ET.SubElement(je, "parent", link=j.parent)
        ET.SubElement(je, "child", link=j.child)
        ET.SubElement(je, "axis", xyz=_fmt(R.T @ (j.axis if np.linalg.norm(j.axis) else [1.0, 0, 0])))
        limits = j.rest_limits()
        if j.type in ("revolute", "prismatic") and limits is not None:
            ET.SubElement(je, "limit", lower=repr(limits[0]), upper=repr(limits[1]), effort="30", velocity="1")
    ET.indent(robot, space="  ")
    from kinemesh.atomic import write_text

    return write_text(folder / name, '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n")
