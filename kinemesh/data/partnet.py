"""PartNet-Mobility object folders and URDF files <-> :class:`ArticulatedObject` (kinemesh Z-up frame).

A PartNet-Mobility folder holds ``mobility.urdf`` (links with many visuals under ``textured_objs/``,
joints revolute / prismatic / continuous / fixed; a slider that also rotates is a prismatic joint to a
geometry-less ``<link>_helper`` plus a continuous joint), ``mobility_v2.json`` (per part: joint kind
hinge / slider / free / heavy / static, ``jointData.axis {origin, direction}``, ``limit {a, b, noLimit,
rotates}`` with hinge limits in degrees), ``semantics.txt`` (``link_name joint_type label``) and
``meta.json`` (``model_cat``).

Frames. An object loads in the world frame of its URDF, the frame yourdfpy, pybullet, SAPIEN and MuJoCo
give it: link transforms are composed from the URDF's root link, so PartNet-Mobility's geometry-less ``base``
root and its fixed joint (rpy = (pi/2, 0, -pi/2): the Y-up *file frame* of the meshes and of
``mobility_v2.json`` turned Z up and yawed -90 deg, file (x, y, z) -> world (-z, -x, y)) place the object Z
up. ``up="y"`` is for a bare Y-up URDF without such a base: its world is turned +90 deg about X.

The geometry-less root (``base``) and its fixed joint are dropped; ``_helper`` links stay as parts
without geometry so screw joints keep both degrees of freedom.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from kinemesh.atomic import atomic_dir
from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.data.meshes import DEFAULT_MAX_VERTICES, decimate, load_mesh
from kinemesh.data.urdf import Urdf, read_urdf, rpy_matrix, write_urdf
from kinemesh.errors import InputFileError, KinemeshError

log = logging.getLogger(__name__)

# File frame (Y up) -> kinemesh frame (Z up): (x, y, z) -> (x, -z, y), a +90 deg rotation about X.
Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
# The fixed base joint rotation written by PartNet-Mobility (and by write_partnet_folder).
PARTNET_BASE_RPY = (1.570796326794897, 0.0, -1.570796326794897)

MOBILITY_KINDS = ("hinge", "slider", "free", "heavy", "static")


def find_urdf(folder: str | os.PathLike, required: bool = True) -> Path | None:
    """The URDF of an object folder: ``mobility.urdf`` if present, else the only ``*.urdf``."""
    folder = Path(folder)
    if (folder / "mobility.urdf").is_file():
        return folder / "mobility.urdf"
    urdfs = sorted(folder.glob("*.urdf"))
    if len(urdfs) == 1:
        return urdfs[0]
    if not required:
        return None
    if not urdfs:
        frames = (folder / "sequence.json").is_file() or any(folder.glob("*.obj"))
        raise InputFileError(folder, "no mobility.urdf or other .urdf file in the folder" + (
            " (it holds mesh frames: a 4D sequence, not an object; give one of its .obj files, or a URDF / "
            "PartNet-Mobility object folder)" if frames else ""))
    raise InputFileError(
        folder,
        f"several .urdf files ({', '.join(u.name for u in urdfs)}) and no mobility.urdf; pass the one to use",
    )


def _homogeneous(R: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = R
    return T


def _apply(T: np.ndarray, v: np.ndarray) -> np.ndarray:
    return v @ T[:3, :3].T + T[:3, 3]


def _visual_mesh(vis, cache: dict, merge: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (n, 3) and faces (m, 3) of one URDF visual in its geometry frame (``merge``: merge
    coincident vertices)."""
    import trimesh

    if vis.kind == "mesh":
        key = str(vis.path)
        if key not in cache:
            m = load_mesh(vis.path, max_vertices=None, process=False)
            v, f = np.asarray(m.vertices, dtype=np.float64), np.asarray(m.faces, dtype=np.int64)
            cache[key] = merge_duplicate_vertices(v, f) if merge else (v, f)
        v, f = cache[key]
        return v * vis.scale, f
    if vis.kind == "box":
        m = trimesh.creation.box(extents=vis.size)
    elif vis.kind == "cylinder":
        m = trimesh.creation.cylinder(radius=vis.radius, height=vis.length, sections=24)
    else:
        m = trimesh.creation.icosphere(subdivisions=2, radius=vis.radius)
    return np.asarray(m.vertices, dtype=np.float64), np.asarray(m.faces, dtype=np.int64)


def merge_duplicate_vertices(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge exactly coincident vertices (OBJ texture/normal seams), keeping first-occurrence order.

    A mesh without duplicates comes back unchanged. Faces that collapse (repeated index) are dropped.
    Returns (vertices (k, 3) float64, faces (m', 3) int64).
    """
    if len(vertices) == 0:
        return vertices, faces.astype(np.int64)
    _, first, inverse = np.unique(vertices, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    new_index = rank[inverse.ravel()]
    v = vertices[first[order]]
    f = new_index[np.asarray(faces, dtype=np.int64)]
    keep = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])
    return v, f[keep]


def _read_semantics(path: Path, warnings: list[str]) -> dict[str, tuple[str, str]]:
    """``semantics.txt`` -> {link: (joint_kind, label)}; malformed lines are skipped with a warning."""
    out: dict[str, tuple[str, str]] = {}
    if not path.is_file():
        return out
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 3:
            msg = f"semantics.txt line {i}: expected 'link_name joint_type label', got {line!r}; skipped"
            warnings.append(msg)
            log.warning("%s: %s", path.parent, msg)
            continue
        out[parts[0]] = (parts[1], " ".join(parts[2:]))
    return out


def _read_json(path: Path, warnings: list[str]) -> Any:
    """An auxiliary JSON file (mobility_v2.json, meta.json): None when absent or unreadable (warned);
    the URDF alone defines the kinematics."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        msg = f"{path.name} is not valid JSON ({exc}); ignored"
        warnings.append(msg)
        log.warning("%s: %s", path.parent, msg)
        return None


def _num(x, default=None):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return default
    return v if np.isfinite(v) else default


def load_articulated(
    folder_or_urdf: str | os.PathLike,
    max_vertices: int | None = DEFAULT_MAX_VERTICES,
    up: str | None = None,
    merge_vertices: bool | None = None,
) -> ArticulatedObject:
    """Load a PartNet-Mobility folder or any URDF as an ArticulatedObject in the kinemesh frame (Z up, m).

    Parameters
    ----------
    folder_or_urdf : an object folder (``mobility.urdf`` or a single ``*.urdf`` inside) or a ``.urdf`` path.
    max_vertices : total vertex budget; parts are decimated proportionally (with a warning) above it.
    up : ``"z"`` (default: the URDF's world frame is Z up, as in ROS and PartNet-Mobility, whose ``base`` joint
        turns the Y-up meshes) or ``"y"`` (a bare Y-up URDF: its world is turned +90 deg about X).
    merge_vertices : merge exactly coincident vertices of each mesh file (texture seams of real assets);
        default: yes, except for folders written by :func:`write_partnet_folder` (read back exactly).

    Raises
    ------
    InputFileError / UnsafePathError naming the file: missing or unsafe mesh paths, unknown joint types,
    broken trees, unreadable meshes or JSON.
    """
    p = Path(folder_or_urdf)
    if not p.exists():
        raise InputFileError(p, "file or folder not found")
    urdf_path = find_urdf(p) if p.is_dir() else p
    folder = urdf_path.parent
    urdf = read_urdf(urdf_path)
    warnings = list(urdf.warnings)
    mobility = _read_json(folder / "mobility_v2.json", warnings)
    up = up or "z"
    if up not in ("y", "z"):
        raise InputFileError(urdf_path, f"up must be 'y' or 'z', got {up!r}")

    T = urdf.rest_link_transforms()
    children_of: dict[str, list] = {}
    for j in urdf.joints:
        children_of.setdefault(j.parent, []).append(j)

    # Drop geometry-less roots attached by a single fixed joint (PartNet-Mobility's 'base').
    dropped: set[str] = set()
    root = urdf.root
    while (
        not urdf.links[root].visuals
        and len(children_of.get(root, [])) == 1
        and children_of[root][0].type == "fixed"
    ):
        dropped.add(root)
        root = children_of[root][0].child

    # World (kinemesh) transform W on top of the URDF root frame; the file frame of mobility_v2.json is the
    # frame of the first link with geometry (below PartNet-Mobility's 'base').
    W = _homogeneous(Y_UP_TO_Z_UP) if up == "y" else np.eye(4)
    file_frame = np.linalg.inv(T[root])  # URDF root frame -> file frame

    semantics = _read_semantics(folder / "semantics.txt", warnings)
    meta_json = _read_json(folder / "meta.json", warnings) or {}
    if not isinstance(meta_json, dict):
        meta_json = {}
    if merge_vertices is None:
        # Real assets split vertices along texture seams: merge them. Folders written by
        # write_partnet_folder are read back exactly as written.
        merge_vertices = not isinstance(meta_json.get("kinemesh"), dict)
    merge = bool(merge_vertices)

    # ---- parts
    cache: dict = {}
    parts: list[Part] = []
    for name, link in urdf.links.items():
        if name in dropped:
            continue
        verts, faces, offset = [], [], 0
        for vis in link.visuals:
            v, f = _visual_mesh(vis, cache, merge)
            verts.append(_apply(W @ T[name] @ vis.transform, v))
            faces.append(f + offset)
            offset += len(v)
        v = np.concatenate(verts) if verts else np.zeros((0, 3))
        f = np.concatenate(faces) if faces else np.zeros((0, 3), dtype=np.int64)
        label = semantics.get(name, ("", ""))[1]
        parts.append(Part(name, v, f, label))
    apply_vertex_budget(parts, max_vertices, urdf_path, warnings)

    # ---- joints
    joints: list[Joint] = []
    for uj in urdf.joints:
        if uj.parent in dropped:
            continue
        Tc = W @ T[uj.child]
        n = np.linalg.norm(uj.axis)
        axis = uj.axis / n if n > 0 else np.array([1.0, 0.0, 0.0])
        if uj.type != "fixed" and abs(n - 1.0) > 1e-6:
            msg = f"joint '{uj.name}': axis {uj.axis.tolist()} has length {n:.4g}; normalized"
            warnings.append(msg)
            log.debug("%s: %s", urdf_path, msg)
        limits = uj.limits if uj.type in ("revolute", "prismatic") else None
        joints.append(Joint(uj.name, uj.type, uj.parent, uj.child, Tc[:3, :3] @ axis, Tc[:3, 3], limits))

    if isinstance(mobility, list):
        _cross_check_mobility(mobility, urdf, T, file_frame, joints, folder / "mobility_v2.json", warnings)
    elif mobility is not None:
        warnings.append("mobility_v2.json is not a list; ignored")

    if mobility is not None or urdf_path.name.startswith("mobility"):
        source = f"partnet-mobility:{folder.name}"
    else:
        source = f"urdf:{urdf_path.name}"
    kin = meta_json.get("kinemesh", {}) if isinstance(meta_json.get("kinemesh"), dict) else {}
    name = str(kin.get("name") or (folder.name if urdf_path.name.startswith("mobility") else urdf.name))
    category = str(meta_json.get("model_cat") or urdf.name)
    meta = {"source": source, "source_path": str(urdf_path), "file_up": up}
    if warnings:
        meta["load_warnings"] = warnings
    try:
        return ArticulatedObject(parts, joints, category=category, name=name, meta=meta)
    except InputFileError:
        raise
    except KinemeshError as exc:  # the object's own structural checks
        raise InputFileError(urdf_path, str(exc)) from None


def apply_vertex_budget(parts: list[Part], max_vertices: int | None, path: Path, warnings: list[str]) -> None:
    import trimesh

    total = sum(len(p.vertices) for p in parts)
    if not max_vertices or total <= max_vertices:
        return
    # Parts too small to decimate (<= 8 vertices) keep theirs; the others share the rest proportionally.
    small = sum(len(p.vertices) for p in parts if len(p.vertices) <= 8)
    share = max(max_vertices - small, 0) / max(total - small, 1)
    for p in parts:
        if len(p.vertices) <= 8:
            continue
        budget = max(8, int(len(p.vertices) * share))
        if len(p.vertices) > budget:
            m = decimate(
                trimesh.Trimesh(p.vertices, p.faces, process=False), budget, name=f"{path} part {p.name}"
            )
            p.vertices, p.faces = (
                np.asarray(m.vertices, dtype=np.float64),
                np.asarray(m.faces, dtype=np.int64),
            )
    msg = (
        f"object has {total} vertices, above the budget of {max_vertices}; parts decimated to "
        f"{sum(len(p.vertices) for p in parts)}"
    )
    warnings.append(msg)
    log.warning("%s: %s", path, msg)


def _cross_check_mobility(
    entries: list,
    urdf: Urdf,
    T: dict,
    file_frame: np.ndarray,
    joints: list[Joint],
    path: Path,
    warnings: list[str],
) -> None:
    """Compare mobility_v2.json with the URDF; fill limits the URDF lacks; warn on disagreements."""
    by_child = {j.child: j for j in urdf.joints}
    kin_by_name = {j.name: j for j in joints}

    def warn(msg: str) -> None:
        warnings.append(f"mobility_v2.json: {msg}")
        log.warning("%s: %s", path, msg)

    for e in entries:
        if not isinstance(e, dict) or "id" not in e:
            warn(f"entry {e!r:.60} has no id; skipped")
            continue
        link = str(e.get("link") or f"link_{e['id']}")
        kind = e.get("joint")
        if kind not in MOBILITY_KINDS:
            warn(f"part {link}: unknown joint kind {kind!r} (expected one of {MOBILITY_KINDS})")
            continue
        if link not in urdf.links:
            warn(f"part {link} is not a link of {urdf.path.name}")
            continue
        uj = by_child.get(link)
        data = e.get("jointData") or {}
        limit = data.get("limit") or {}
        rotates = bool(limit.get("rotates")) if kind == "slider" else False
        if kind in ("free", "heavy", "static"):
            if uj is not None and uj.type != "fixed":
                warn(f"part {link} is '{kind}' but its URDF joint '{uj.name}' is {uj.type}")
            continue
        if kind == "slider" and rotates:
            helper = by_child.get(uj.parent) if uj is not None else None
            if uj is None or uj.type != "continuous" or helper is None or helper.type != "prismatic":
                warn(
                    f"part {link} is a rotating slider but the URDF has no prismatic + continuous pair "
                    f"through a helper link"
                )
                continue
            uj = helper  # the translational joint carries axis and limits
        expected = {"hinge": ("revolute", "continuous"), "slider": ("prismatic",)}[kind]
        if uj is None or uj.type not in expected:
            warn(f"part {link} is a {kind} but its URDF joint is {None if uj is None else uj.type}")
            continue
        # Axis direction in the file frame vs jointData.axis.direction.
        d = np.array([_num(x, np.nan) for x in (data.get("axis") or {}).get("direction", [])], dtype=float)
        flipped = False
        if d.shape == (3,) and np.isfinite(d).all() and np.linalg.norm(d) > 0:
            a = (file_frame @ T[uj.child])[:3, :3] @ (uj.axis / np.linalg.norm(uj.axis))
            cos = float(np.dot(a, d / np.linalg.norm(d)))
            # (d, [a, b]) and (-d, [-b, -a]) describe the same motion; PartNet-Mobility uses both.
            flipped = cos < -np.cos(np.radians(1.0))
            if abs(cos) < np.cos(np.radians(1.0)):
                warn(f"part {link}: axis {d.tolist()} differs from the URDF joint '{uj.name}' axis")
        # Limits: degrees for hinges, metres for sliders.
        if limit.get("noLimit") or ("a" not in limit and "b" not in limit):
            continue
        lo, hi = _num(limit.get("a")), _num(limit.get("b"))
        if lo is None or hi is None:
            warn(f"part {link}: limit a={limit.get('a')!r}, b={limit.get('b')!r} is not numeric; ignored")
            continue
        if kind == "hinge":
            lo, hi = np.radians(lo), np.radians(hi)
        lo, hi = min(lo, hi), max(lo, hi)
        if flipped:
            lo, hi = -hi, -lo
        kj = kin_by_name[uj.name]
        if kj.limits is None and kj.type in ("revolute", "prismatic"):
            kj.limits = (float(lo), float(hi))
            warn(f"joint '{uj.name}': limits taken from mobility_v2.json ({lo:.6g}, {hi:.6g})")
        elif kj.limits is not None and (abs(kj.limits[0] - lo) > 1e-3 or abs(kj.limits[1] - hi) > 1e-3):
            warn(
                f"joint '{uj.name}': URDF limits {kj.limits} differ from mobility_v2.json "
                f"({lo:.6g}, {hi:.6g}); "
                f"using the URDF"
            )


# ---------------------------------------------------------------------------------------------- writer
def _is_screw_helper(obj: ArticulatedObject, part: Part) -> bool:
    """A geometry-less part under a prismatic joint whose only child joint is continuous."""
    if len(part.vertices):
        return False
    up = [j for j in obj.joints if j.child == part.name]
    down = [j for j in obj.joints if j.parent == part.name]
    return len(up) == 1 and up[0].type == "prismatic" and len(down) == 1 and down[0].type == "continuous"


def write_partnet_folder(obj: ArticulatedObject, folder: str | os.PathLike) -> Path:
    """Write ``obj`` as a PartNet-Mobility-style folder (atomically) in the Y-up file convention.

    Writes ``mobility.urdf`` (a ``base`` root with the PartNet fixed rotation, one link per part with its
    OBJ under ``textured_objs/``, link frames at joint origins, axes in the file frame), ``mobility_v2.json``
    (hinge / slider (+rotates for screw joints) / heavy / static, hinge limits in degrees, plus a ``link``
    key naming the URDF link), ``semantics.txt`` and ``meta.json``. ``load_articulated`` of the result
    reproduces ``obj`` (names, labels, axes, origins, vertices; limits as ``Joint.rest_limits()``: widened to
    contain the rest pose). Returns the folder path.
    """
    folder = Path(folder)
    Cinv = rpy_matrix(PARTNET_BASE_RPY).T  # kinemesh (URDF world) -> file frame
    parent_joint = {j.child: j for j in obj.joints}
    with atomic_dir(folder) as tmp:
        write_urdf(obj, tmp, "mobility.urdf", mesh_dir="textured_objs", base_rpy=PARTNET_BASE_RPY,
                   robot_name=re.sub(r"\s+", "_", obj.name) or "object")

        # mobility_v2.json + semantics.txt: one entry per part with geometry (helpers fold into screws).
        listed = [p for p in obj.parts if len(p.vertices)]
        ids = {p.name: i for i, p in enumerate(listed)}

        def listed_ancestor(name: str) -> int:
            while name in parent_joint:
                name = parent_joint[name].parent
                if name in ids:
                    return ids[name]
            return -1

        entries, sem = [], []
        for p in listed:
            label = re.sub(r"\s+", "_", p.label) if p.label else ""
            j = parent_joint.get(p.name)
            data: dict[str, Any] = {}
            kind = "heavy" if j is None else "static"
            if j is not None and j.type != "fixed":
                screw = j.type == "continuous" and _is_screw_helper(obj, obj.part(j.parent))
                carrier = parent_joint[j.parent] if screw else j
                data["axis"] = {
                    "origin": (Cinv @ carrier.origin).tolist(),
                    "direction": (Cinv @ carrier.axis).tolist(),
                }
                if screw:
                    kind = "slider"
                    lo, hi = carrier.rest_limits() or (0.0, 0.0)
                    data["limit"] = {
                        "a": lo,
                        "b": hi,
                        "noLimit": carrier.limits is None,
                        "rotates": True,
                        "noRotationLimit": True,
                        "rotationLimit": 0,
                    }
                elif j.type == "prismatic":
                    kind = "slider"
                    lo, hi = j.rest_limits() or (0.0, 0.0)
                    data["limit"] = {"a": lo, "b": hi, "noLimit": j.limits is None, "rotates": False}
                else:
                    kind = "hinge"
                    lo, hi = j.rest_limits() or (-np.pi, np.pi)
                    data["limit"] = {
                        "a": float(np.degrees(lo)),
                        "b": float(np.degrees(hi)),
                        "noLimit": j.limits is None,
                    }
            entries.append(
                {
                    "id": ids[p.name],
                    "link": p.name,
                    "parent": listed_ancestor(p.name),
                    "joint": kind,
                    "name": label or p.name,
                    "parts": [{"id": ids[p.name], "name": label or p.name, "children": []}],
                    "jointData": data,
                }
            )
            if label:
                sem_kind = "slider+" if (kind == "slider" and data.get("limit", {}).get("rotates")) else kind
                sem.append(f"{p.name} {sem_kind} {label}")
        (tmp / "mobility_v2.json").write_text(json.dumps(entries, indent=1), encoding="utf-8")
        (tmp / "semantics.txt").write_text("\n".join(sem) + ("\n" if sem else ""), encoding="utf-8")
        meta = {
            "model_cat": obj.category,
            "version": "kinemesh",
            "kinemesh": {
                "name": obj.name,
                "units": "m",
                "file_up": "y",
                "note": "file coordinates (x, y, z) are kinemesh (-z, -x, y), the base joint's rotation",
            },
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return folder
