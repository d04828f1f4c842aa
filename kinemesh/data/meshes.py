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


def read_obj_geometry(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Read the geometry of an OBJ file: vertices (n, 3) float64 in file order, triangles (m, 3) int64.

    Materials, texture coordinates, normals and groups are ignored; polygons are fan-triangulated;
    negative (relative) indices are supported. Raises InputFileError naming the file and line.
    """
    path = Path(path)
    verts: list[list[float]] = []
    faces: list[tuple[int, int, int]] = []
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
                for k in range(1, len(idx) - 1):
                    faces.append((idx[0], idx[k], idx[k + 1]))
    v = np.asarray(verts, dtype=np.float64).reshape(-1, 3)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    return v, f


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

    @property
    def faces(self) -> np.ndarray:
        """The faces of what :meth:`to_file` returns: the file's, or the decimated mesh's."""
        return np.asarray(self.mesh.faces) if self.decimated else self.file_faces

    def to_file(self, values: np.ndarray) -> np.ndarray:
        """Per-working-vertex ``values`` (..., n_work, d) -> per file vertex (..., n, d) (unchanged if decimated)."""
        return values if self.decimated else np.asarray(values)[..., self.to_work, :]


def load_working_mesh(path: str | os.PathLike, max_vertices: int | None = DEFAULT_MAX_VERTICES) -> WorkingMesh:
    """Load a mesh file as a :class:`WorkingMesh`: merged (and decimated above ``max_vertices``) for the
    model, with the map back to the file's vertices. Raises InputFileError (see :func:`load_mesh`)."""
    import trimesh
    from scipy.spatial import cKDTree

    raw = load_mesh(path, max_vertices=None, process=False)
    work = trimesh.Trimesh(raw.vertices, raw.faces, process=True)
    decimated = bool(max_vertices) and len(work.vertices) > max_vertices
    if decimated:
        work = decimate(work, max_vertices, name=str(path))
    to_work = cKDTree(work.vertices).query(raw.vertices)[1].astype(np.int64)
    return WorkingMesh(work, np.asarray(raw.vertices), np.asarray(raw.faces), to_work, decimated)
