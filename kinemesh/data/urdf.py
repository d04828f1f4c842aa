"""A small, safe URDF reader: links with their visual geometry, joints with origins, axes and limits.

Only what kinemesh needs is read (visual meshes and primitives, joint kinematics). Numbers that cannot be
parsed are replaced by the URDF default with a logged warning instead of failing the whole file; structural
problems (unknown joint type, a joint naming a missing link, a cycle, a mesh path escaping the asset folder)
raise :class:`~kinemesh.errors.InputFileError` naming the file.
"""

from __future__ import annotations

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
        roots = [n for n in self.links if n not in children]
        return roots[0]

    def rest_link_transforms(self) -> dict[str, np.ndarray]:
        """Transform (4, 4) of every link in the URDF root frame at joint values 0."""
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


class _Reader:
    def __init__(self, path: Path):
        self.path = path
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        text = f"{self.path}: {message}"
        self.warnings.append(message)
        log.warning(text)

    def floats(self, text: str | None, n: int, default: tuple[float, ...], where: str) -> np.ndarray:
        """Parse ``n`` finite floats; junk gives ``default`` and a warning."""
        if text is None:
            return np.array(default, dtype=np.float64)
        try:
            vals = [float(t) for t in text.replace(",", " ").split()]
        except ValueError:
            vals = []
        if len(vals) != n or not all(math.isfinite(v) for v in vals):
            self.warn(f"{where}: cannot read {n} finite numbers from {text!r}; using {list(default)}")
            return np.array(default, dtype=np.float64)
        return np.array(vals, dtype=np.float64)

    def float(self, text: str | None, default: float | None, where: str) -> float | None:
        if text is None:
            return default
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if not math.isfinite(v):
            self.warn(f"{where}: cannot read a finite number from {text!r}; using {default}")
            return default
        return v

    def origin(self, elem, where: str) -> np.ndarray:
        T = np.eye(4)
        o = elem.find("origin") if elem is not None else None
        if o is not None:
            T[:3, 3] = self.floats(o.get("xyz"), 3, (0.0, 0.0, 0.0), f"{where} origin xyz")
            T[:3, :3] = rpy_matrix(self.floats(o.get("rpy"), 3, (0.0, 0.0, 0.0), f"{where} origin rpy"))
        return T


def escapes(folder: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` (symlinks and ``..`` resolved) lies outside ``folder``."""
    return not Path(path).resolve().is_relative_to(Path(folder).resolve())


def resolve_asset(folder: Path, filename: str, urdf_path: Path) -> Path:
    """Resolve a mesh filename of ``urdf_path`` inside ``folder``; refuse paths that leave it.

    ``package://pkg/rest`` resolves ``rest`` inside the nearest ancestor folder named ``pkg`` that holds a
    ``package.xml`` (a ROS package root, e.g. ``pkg/urdf/robot.urdf`` with ``pkg/meshes/``), else inside
    ``folder``; a
    ``file://`` prefix is stripped. Raises UnsafePathError (absolute path or escaping ``..``/symlink) or
    InputFileError (missing file).
    """
    name = filename.strip()
    if name.startswith("package://"):
        rest = name[len("package://") :]
        pkg, _, name = rest.partition("/")
        package_root = next(
            (
                a
                for a in (folder.resolve(), *folder.resolve().parents)
                if a.name == pkg and (a / "package.xml").is_file()
            ),
            None,
        )
        if package_root is not None:
            folder = package_root
    elif name.startswith("file://"):
        name = name[len("file://") :]
    if not name:
        raise InputFileError(urdf_path, "a mesh element has an empty filename")
    if os.path.isabs(name) or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        raise UnsafePathError(
            urdf_path, f"mesh path '{filename}' is absolute; only paths inside {folder} are allowed"
        )
    target = (folder.resolve() / name).resolve()
    if escapes(folder, target):
        raise UnsafePathError(urdf_path, f"mesh path '{filename}' escapes the asset folder {folder}")
    if not target.is_file():
        raise InputFileError(urdf_path, f"mesh file '{filename}' not found (looked for {target})")
    return target


def read_urdf(path: str | os.PathLike) -> Urdf:
    """Parse ``path`` into links, visuals and joints. See module docstring for the error policy."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "URDF file not found")
    if path.stat().st_size == 0:
        raise InputFileError(path, "URDF file is empty")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        if "<!ENTITY" in text:
            raise InputFileError(path, "URDF declares XML entities; refusing to expand them")
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InputFileError(path, f"not valid XML ({exc})") from None
    if root.tag != "robot":
        raise InputFileError(path, f"root element is <{root.tag}>, expected <robot>")
    rd = _Reader(path)
    folder = path.parent

    links: dict[str, UrdfLink] = {}
    for le in root.findall("link"):
        name = le.get("name")
        if not name:
            raise InputFileError(path, "a <link> has no name")
        if name in links:
            raise InputFileError(path, f"link '{name}' is defined twice")
        link = UrdfLink(name)
        for i, ve in enumerate(le.findall("visual")):
            where = f"link '{name}' visual {i}"
            T = rd.origin(ve, where)
            ge = ve.find("geometry")
            if ge is None or len(ge) == 0:
                rd.warn(f"{where} has no geometry; skipped")
                continue
            g = ge[0]
            vis = UrdfVisual(kind=g.tag, transform=T, name=ve.get("name", ""))
            if g.tag == "mesh":
                fn = g.get("filename")
                if fn is None:
                    raise InputFileError(path, f"{where}: <mesh> has no filename")
                vis.path = resolve_asset(folder, fn, path)
                vis.scale = rd.floats(g.get("scale"), 3, (1.0, 1.0, 1.0), f"{where} mesh scale")
            elif g.tag == "box":
                vis.size = rd.floats(g.get("size"), 3, (1.0, 1.0, 1.0), f"{where} box size")
            elif g.tag == "cylinder":
                vis.radius = rd.float(g.get("radius"), 0.0, f"{where} cylinder radius") or 0.0
                vis.length = rd.float(g.get("length"), 0.0, f"{where} cylinder length") or 0.0
            elif g.tag == "sphere":
                vis.radius = rd.float(g.get("radius"), 0.0, f"{where} sphere radius") or 0.0
            else:
                rd.warn(f"{where}: unsupported geometry <{g.tag}>; skipped")
                continue
            link.visuals.append(vis)
        links[name] = link
    if not links:
        raise InputFileError(path, "URDF has no <link>")

    joints: list[UrdfJoint] = []
    seen_children: set[str] = set()
    for je in root.findall("joint"):
        name = je.get("name") or f"joint_{len(joints)}"
        jtype = (je.get("type") or "").strip()
        if jtype in UNSUPPORTED_URDF_TYPES:
            raise InputFileError(
                path,
                f"joint '{name}' has type '{jtype}', which kinemesh does not support "
                f"(supported: {', '.join(URDF_JOINT_TYPES)})",
            )
        if jtype not in URDF_JOINT_TYPES:
            raise InputFileError(
                path,
                f"joint '{name}' has unknown type '{jtype}' (expected one of {', '.join(URDF_JOINT_TYPES)})",
            )
        pe, ce = je.find("parent"), je.find("child")
        if pe is None or ce is None or not pe.get("link") or not ce.get("link"):
            raise InputFileError(path, f"joint '{name}' needs <parent link=...> and <child link=...>")
        parent, child = pe.get("link"), ce.get("link")
        for end in (parent, child):
            if end not in links:
                raise InputFileError(path, f"joint '{name}' names unknown link '{end}'")
        if child in seen_children:
            raise InputFileError(path, f"link '{child}' is the child of two joints")
        seen_children.add(child)
        where = f"joint '{name}'"
        origin = rd.origin(je, where)
        ae = je.find("axis")
        axis = rd.floats(None if ae is None else ae.get("xyz"), 3, (1.0, 0.0, 0.0), f"{where} axis")
        if jtype != "fixed" and np.linalg.norm(axis) < 1e-12:
            rd.warn(f"{where}: axis has zero length; using [1, 0, 0]")
            axis = np.array([1.0, 0.0, 0.0])
        limits = None
        if jtype in ("revolute", "prismatic"):
            le = je.find("limit")
            if le is None:
                rd.warn(f"{where}: {jtype} joint without <limit>; treating it as unlimited")
            else:
                # URDF defaults are 0; junk makes the joint unlimited (a later source, e.g.
                # mobility_v2.json, may supply the limits).
                lo = rd.float(le.get("lower", "0"), None, f"{where} limit lower")
                hi = rd.float(le.get("upper", "0"), None, f"{where} limit upper")
                if lo is not None and hi is not None:
                    if lo > hi:
                        rd.warn(f"{where}: limit lower {lo} > upper {hi}; swapped")
                        lo, hi = hi, lo
                    limits = (lo, hi)
        joints.append(UrdfJoint(name, jtype, parent, child, origin, axis, limits))

    roots = [n for n in links if n not in seen_children]
    if len(roots) != 1:
        raise InputFileError(path, f"links must form one tree; found roots {roots}")
    urdf = Urdf(path, root.get("name", path.stem), links, joints, rd.warnings)
    if len(urdf.rest_link_transforms()) != len(links):
        raise InputFileError(path, "joints do not connect all links into one tree (cycle?)")
    return urdf
