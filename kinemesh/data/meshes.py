"""Read single meshes: OBJ, PLY, STL, GLB/glTF, OFF (:func:`load_mesh`), decimated to a vertex budget, and the
working mesh of the model with the way back to the file's vertices (:func:`load_working_mesh`).

Every user-caused problem raises :class:`~kinemesh.errors.InputFileError` naming the file.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kinemesh.errors import InputFileError

log = logging.getLogger(__name__)

MESH_SUFFIXES = (".obj", ".ply", ".stl", ".glb", ".gltf", ".off")
DEFAULT_MAX_VERTICES = 50000


def load_mesh(path: str | os.PathLike, max_vertices: int | None = DEFAULT_MAX_VERTICES, process: bool = True):
    """Load one triangle mesh (OBJ, PLY, STL, GLB/glTF, OFF) as a ``trimesh.Trimesh``.

    Scenes are flattened with their node transforms; glTF/GLB (Y up by specification) is turned to
    kinemesh's Z up, so a GLB written by :func:`~kinemesh.data.exporters.export_glb` reads back in place;
    OBJ materials and textures are ignored (geometry only). With ``process`` duplicate vertices are merged
    (trimesh's default); without it the file's vertex order is kept exactly (needed for frame sequences).
    A mesh with more than ``max_vertices`` vertices is
    decimated (quadric error) to the budget with a logged warning; ``None`` or 0 disables this.

    Returns
    -------
    trimesh.Trimesh with (n, 3) float64 vertices and (m, 3) int64 faces.

    Raises
    ------
    InputFileError: missing, empty, unsupported, corrupt, no triangles, or non-finite vertices.
    """
    import trimesh

    path = Path(path)
    if not path.exists():
        raise InputFileError(path, "file not found")
    if path.is_dir():
        raise InputFileError(path, "is a folder, expected a mesh file")
    suffix = path.suffix.lower()
    if suffix not in MESH_SUFFIXES:
        raise InputFileError(
            path, f"unsupported mesh format '{suffix}' (supported: {', '.join(MESH_SUFFIXES)})"
        )
    if path.stat().st_size == 0:
        raise InputFileError(path, "file is empty")
    if suffix == ".gltf":
        _check_gltf_uris(path)
    try:
        if suffix == ".obj":
            mesh = trimesh.Trimesh(*read_obj_geometry(path), process=False)
        else:
            mesh = trimesh.load(str(path), force="mesh", process=False)
    except InputFileError:
        raise
    except Exception as exc:  # trimesh raises many exception types on corrupt input
        raise InputFileError(path, f"cannot read mesh ({exc.__class__.__name__}: {exc})") from None
    if isinstance(mesh, list):  # some loaders return a list of meshes
        mesh = trimesh.util.concatenate(mesh) if mesh else None
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.vertices) == 0 or len(mesh.faces) == 0:
        # an empty Trimesh from the OBJ reader, or something that is not a surface
        raise InputFileError(path, "contains no triangles")
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    if not np.isfinite(vertices).all():
        bad = int(np.where(~np.isfinite(vertices).all(axis=1))[0][0])
        raise InputFileError(path, f"vertex {bad} is not finite (NaN or inf)")
    faces = np.asarray(mesh.faces)
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise InputFileError(path, f"face indices out of range [0, {len(vertices) - 1}]")
    if suffix in (".glb", ".gltf"):
        # glTF is Y up by specification; kinemesh is Z up: (x, y, z) -> (x, -z, y).
        vertices = vertices @ np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]).T
    mesh = trimesh.Trimesh(vertices, faces, process=process)
    if max_vertices and len(mesh.vertices) > max_vertices:
        mesh = decimate(mesh, max_vertices, name=str(path))
    return mesh


def _check_gltf_uris(path: Path) -> None:
    """Refuse a .gltf whose buffers/images point outside its folder (absolute, ``..``, other schemes)."""
    from kinemesh.errors import UnsafePathError

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputFileError(path, f"not valid glTF JSON ({exc})") from None
    root = path.parent.resolve()
    for key in ("buffers", "images"):
        for item in doc.get(key, []) if isinstance(doc, dict) else []:
            uri = item.get("uri") if isinstance(item, dict) else None
            if not uri or uri.startswith("data:"):
                continue
            if "://" in uri or os.path.isabs(uri) or not (root / uri).resolve().is_relative_to(root):
                raise UnsafePathError(path, f"{key} uri '{uri[:80]}' leaves the file's folder")


def read_obj_geometry(path: str | os.PathLike, groups: bool = False):
    """Read the geometry of an OBJ file: vertices (n, 3) float64 in file order, triangles (m, 3) int64.

    Materials, texture coordinates and normals are ignored; polygons are fan-triangulated; negative
    (relative) indices are supported. With ``groups`` also returns the ``o`` / ``g`` group of each
    triangle (m,) int and the group names (faces before any statement are in group "default").
    Raises InputFileError naming the file and line.
    """
    path = Path(path)
    verts: list[list[float]] = []
    faces: list[tuple[int, int, int]] = []
    face_group: list[int] = []
    names: dict[str, int] = {}
    current = "default"
    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if line.startswith("v "):
                parts = line.split()
                try:
                    verts.append([float(parts[1]), float(parts[2]), float(parts[3])])
                except (ValueError, IndexError):
                    raise InputFileError(
                        path, f"line {n}: cannot read a vertex from {line.strip()[:60]!r}"
                    ) from None
            elif line.startswith("f "):
                try:
                    idx = [int(t.split("/", 1)[0]) for t in line.split()[1:]]
                except ValueError:
                    raise InputFileError(
                        path, f"line {n}: cannot read a face from {line.strip()[:60]!r}"
                    ) from None
                if len(idx) < 3:
                    raise InputFileError(path, f"line {n}: a face needs at least 3 vertices")
                nv = len(verts)
                idx = [i - 1 if i > 0 else nv + i for i in idx]
                if min(idx) < 0 or max(idx) >= nv:
                    raise InputFileError(
                        path, f"line {n}: face index out of range (only {nv} vertices so far)"
                    )
                g = names.setdefault(current, len(names))
                for k in range(1, len(idx) - 1):
                    faces.append((idx[0], idx[k], idx[k + 1]))
                    face_group.append(g)
            elif line[:2] in ("o ", "g ") and line[2:].strip():
                current = line[2:].strip()
    v = np.asarray(verts, dtype=np.float64).reshape(-1, 3)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    return (v, f, np.asarray(face_group, np.int64), list(names)) if groups else (v, f)


def decimate(mesh, max_vertices: int, name: str = "mesh"):
    """Quadric-decimate ``mesh`` to at most ``max_vertices`` vertices, logging a warning (never silent)."""
    import trimesh

    n0 = len(mesh.vertices)
    if n0 <= max_vertices:
        return mesh
    try:
        out = mesh
        target_faces = int(len(mesh.faces) * max_vertices / n0 * 0.98)
        for _ in range(4):
            out = mesh.simplify_quadric_decimation(face_count=max(4, target_faces))
            if len(out.vertices) <= max_vertices:
                break
            target_faces = int(target_faces * 0.9)
    except (ImportError, ModuleNotFoundError) as exc:  # pragma: no cover - pinned dependency
        from kinemesh.errors import MissingDependencyError

        raise MissingDependencyError("fast-simplification", "decimating large meshes") from exc
    out = trimesh.Trimesh(np.asarray(out.vertices), np.asarray(out.faces), process=True)
    log.warning(
        "%s: %d vertices exceed the budget of %d; decimated to %d vertices / %d faces",
        name,
        n0,
        max_vertices,
        len(out.vertices),
        len(out.faces),
    )
    return out


def read_part_labels(labels: str | os.PathLike, faces: np.ndarray, n_vertices: int, name: str
                     ) -> tuple[np.ndarray, list[str]]:
    """Part id per face (m,) int and the part names (sorted unique labels) from a part-label file (``.npy``
    integers, or text with one label per line) with one label per face of ``faces`` (m, 3) or one per vertex
    (a face takes the label its vertices share, else that of its first vertex). ``name``: the mesh, for errors.

    Raises InputFileError naming the label file: unreadable, or a count matching neither faces nor vertices.
    """
    from kinemesh.data.arrays import load_npy

    lp = Path(labels)
    try:
        lab = load_npy(lp) if lp.suffix.lower() == ".npy" else \
            np.array([t.strip() for t in lp.read_text(encoding="utf-8").splitlines() if t.strip()])
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputFileError(lp, f"cannot read part labels ({exc})") from None
    lab = np.asarray(lab).reshape(-1)
    names, ids = np.unique(lab, return_inverse=True)
    ids = ids.reshape(-1)
    f = np.asarray(faces)
    if len(lab) == len(f):
        face_ids = ids
    elif len(lab) == n_vertices:
        a, b, c = ids[f[:, 0]], ids[f[:, 1]], ids[f[:, 2]]
        face_ids = np.where((b == c) & (a != b), b, a)
    else:
        raise InputFileError(lp, f"{len(lab)} labels for the {len(f)} faces and {n_vertices} vertices "
                                 f"of {name}; give one label per face or per vertex")
    return face_ids, [str(n) for n in names]


def read_face_parts(path: str | os.PathLike, labels: str | os.PathLike | None = None
                    ) -> tuple[np.ndarray | None, list[str], str]:
    """The segmentation a mesh file carries, over the faces of ``load_mesh(path, process=False)``.

    ``labels``: a part-label file (``.npy`` integers, or text with one label per line), one label per face or
    one per vertex (a face takes the label its vertices share, else that of its first vertex); else OBJ
    ``o`` / ``g`` groups, the part ids of a GLB kinemesh wrote, or the nodes of a glTF/GLB scene, when there are
    two or more.

    Returns
    -------
    face_parts : (m,) int part id per face, or None when the file is not segmented.
    names : the part names (index = part id).
    source : "labels", "groups", "nodes", "part ids" (a GLB kinemesh wrote) or "none".

    Raises InputFileError naming the file: unreadable labels, or a count matching neither faces nor vertices.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if labels is not None:
        mesh = load_mesh(path, max_vertices=None, process=False)
        return *read_part_labels(labels, np.asarray(mesh.faces), len(mesh.vertices), path.name), "labels"
    if suffix == ".obj":
        _, _, face_group, names = read_obj_geometry(path, groups=True)
        if len(names) >= 2:
            return face_group, names, "groups"
    elif suffix in (".glb", ".gltf"):
        import trimesh

        if suffix == ".gltf":
            _check_gltf_uris(path)
        else:
            written = _kinemesh_glb_parts(path)  # a GLB kinemesh wrote: its part ids, one mesh
            if written is not None:
                return (*written, "part ids")
        try:
            parts = [g for g in trimesh.load(str(path), force="scene", process=False).dump()
                     if isinstance(g, trimesh.Trimesh)]  # the order load_mesh concatenates them in
        except Exception as exc:  # trimesh raises many exception types on corrupt input
            raise InputFileError(path, f"cannot read mesh ({exc.__class__.__name__}: {exc})") from None
        if len(parts) >= 2:
            names = [str(g.metadata.get("node", i)) for i, g in enumerate(parts)]
            return np.repeat(np.arange(len(parts)), [len(g.faces) for g in parts]), names, "nodes"
    return None, [], "none"


def _kinemesh_glb_parts(path: Path) -> tuple[np.ndarray, list[str]] | None:
    """The parts of a GLB kinemesh wrote (one mesh, one primitive with the ``_PART_ID`` attribute of
    :func:`kinemesh.data.exporters.glb_document`): (face parts, names), None for any other GLB or fewer than
    two parts."""
    from kinemesh.data.exporters import PART_ATTRIBUTE, accessor_array, read_glb
    from kinemesh.data.articulated import face_parts_of

    try:
        doc, blob = read_glb(path)
        prims = [q for m in doc.get("meshes", []) for q in m.get("primitives", [])]
        if len(prims) != 1 or PART_ATTRIBUTE not in prims[0].get("attributes", {}):
            return None
        ids = accessor_array(doc, blob, prims[0]["attributes"][PART_ATTRIBUTE]).reshape(-1)
        faces = accessor_array(doc, blob, prims[0]["indices"]).reshape(-1, 3).astype(np.int64)
        meta = (doc.get("extras") or {}).get("kinemesh_meta") or {}
    except (KeyError, IndexError, TypeError, ValueError, InputFileError):
        return None  # not one of ours after all: read as any GLB
    if not np.isfinite(ids).all() or len(np.unique(ids)) < 2 or len(faces) == 0 or faces.max() >= len(ids):
        return None
    return face_parts_of(np.round(ids).astype(np.int64), faces, meta if isinstance(meta, dict) else {})


@dataclass
class WorkingMesh:
    """A mesh file prepared for the kinematic model, with the way back to the file's own vertices.

    ``mesh``: the working trimesh (duplicate vertices merged, decimated above the vertex budget);
    ``file_vertices`` (n, 3) / ``file_faces`` (m, 3): the file as written, vertex order kept;
    ``to_work`` (n,) int: the working vertex of each file vertex (the same point unless ``decimated``).
    Outputs go through :meth:`to_file` so they keep the file's vertex count and order; a decimated mesh
    cannot, and its outputs are the decimated mesh (the loader has logged a warning).
    """

    mesh: Any
    file_vertices: np.ndarray
    file_faces: np.ndarray
    to_work: np.ndarray
    decimated: bool
    part_ids: np.ndarray | None = None
    """(n_work,) int part of each working vertex, or None (not segmented)."""
    part_names: list = None
    part_source: str = "none"
    """Where the parts came from: links (URDF), groups (OBJ), nodes (GLB), labels, auto (grouped components)."""
    articulation: Any = None
    """The ArticulatedObject (links and joints) of a URDF / PartNet-Mobility input, else None."""

    @property
    def faces(self) -> np.ndarray:
        """The faces of what :meth:`to_file` returns: the file's, or the decimated mesh's."""
        return np.asarray(self.mesh.faces) if self.decimated else self.file_faces

    def to_file(self, values: np.ndarray) -> np.ndarray:
        """Per-working-vertex ``values`` (..., n_work, d) -> per file vertex (..., n, d) (unchanged if decimated)."""
        return values if self.decimated else np.asarray(values)[..., self.to_work, :]

    def face_parts(self) -> tuple[np.ndarray | None, list]:
        """The parts over :attr:`faces` for the meshes written back (OBJ ``o`` groups): (face part (m,) int
        indexing ``part_names``, ``part_names``), or (None, []) when the parts are none or only the automatic
        grouping of the file's components (which the file does not carry)."""
        if self.part_ids is None or self.part_source in ("none", "auto"):
            return None, []
        ids = self.to_file(np.asarray(self.part_ids)[:, None])[:, 0]
        return ids[np.asarray(self.faces)[:, 0]], list(self.part_names)


def load_working_mesh(path: str | os.PathLike, max_vertices: int | None = DEFAULT_MAX_VERTICES,
                      face_parts: np.ndarray | None = None) -> WorkingMesh:
    """Load a mesh file as a :class:`WorkingMesh` (see :func:`working_mesh`; ``face_parts`` (m,) int over the
    file's faces). Raises InputFileError (see :func:`load_mesh`)."""
    raw = load_mesh(path, max_vertices=None, process=False)
    return working_mesh(raw.vertices, raw.faces, max_vertices, face_parts, name=str(path))


def working_mesh(vertices: np.ndarray, faces: np.ndarray, max_vertices: int | None = DEFAULT_MAX_VERTICES,
                 face_parts: np.ndarray | None = None, name: str = "mesh") -> WorkingMesh:
    """The working mesh of the model from a file's vertices (n, 3) m and faces (m, 3): coincident vertices
    merged (within a part when ``face_parts`` (m,) int is given: a vertex used by two parts is split, so a
    door welded to its frame at a hinge can still turn) and decimated above ``max_vertices``, with the map
    back to the file's vertices and ``part_ids`` per working vertex."""
    import trimesh
    from scipy.spatial import cKDTree

    v, f = np.asarray(vertices, np.float64), np.asarray(faces, np.int64)
    part_ids = None
    if face_parts is None:
        work = trimesh.Trimesh(v, f, process=True)
    else:
        fp = np.asarray(face_parts, np.int64).reshape(-1)
        # one copy of a vertex per part using it; coincident copies of one part merged (trimesh's 1e-8 grid)
        copies, inv = np.unique(np.stack([f.reshape(-1), np.repeat(fp, 3)], 1), axis=0, return_inverse=True)
        key = np.column_stack([np.round(v[copies[:, 0]] * 1e8).astype(np.int64), copies[:, 1]])
        merged, first, inv2 = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inv2 = inv2.reshape(-1)
        work = trimesh.Trimesh(v[copies[first, 0]], inv2[inv.reshape(-1)].reshape(-1, 3), process=False)
        part_ids = merged[:, 3]
    decimated = bool(max_vertices) and len(work.vertices) > max_vertices
    if decimated:
        old_v = np.asarray(work.vertices)
        work = decimate(work, max_vertices, name=name)
        if part_ids is not None:
            part_ids = part_ids[cKDTree(old_v).query(np.asarray(work.vertices))[1]]
    to_work = cKDTree(work.vertices).query(v)[1].astype(np.int64)
    if part_ids is not None and not decimated:  # a file vertex goes to a copy of its own (first) part
        used = np.zeros(len(v), bool)
        used[copies[:, 0]] = True
        first_copy = np.full(len(v), -1, np.int64)
        first_copy[copies[::-1, 0]] = inv2[::-1]
        to_work[used] = first_copy[used]
    return WorkingMesh(work, v, f, to_work, decimated, part_ids)
