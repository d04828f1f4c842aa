"""Load anything ``kinemesh physics`` can simulate as an ArticulatedObject (parts + joints)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.errors import InputFileError

MESH_SUFFIXES = (".obj", ".ply", ".stl", ".off", ".glb", ".gltf")


def load_object(path: str | os.PathLike) -> ArticulatedObject:
    """A mesh file (one part), a KinematicSequence ``.npz`` (parts from ``part_ids``, joints from meta), a
    PartNet-Mobility folder or a URDF (links and joints). Raises InputFileError naming the file."""
    path = Path(path)
    if not path.exists():
        raise InputFileError(path, "file not found")
    if path.is_dir() or path.suffix.lower() == ".urdf":
        from kinemesh.data.partnet import load_articulated

        return load_articulated(path)
    if path.suffix.lower() == ".npz":
        return _from_sequence(path)
    if path.suffix.lower() in MESH_SUFFIXES:
        from kinemesh.data.meshes import load_mesh

        return mesh_object(load_mesh(path), path.stem)
    raise InputFileError(path, f"unsupported input; expected a mesh ({', '.join(MESH_SUFFIXES)}), a .npz "
                               "sequence, a .urdf or a PartNet-Mobility folder")


def mesh_object(mesh, name: str) -> ArticulatedObject:
    """A single mesh (a trimesh) as a one-part object named ``name``."""
    return ArticulatedObject([Part(name, mesh.vertices, mesh.faces, label=name)], [], category=name, name=name)


def welded_object(mesh, part_ids: np.ndarray, names: list[str], name: str) -> tuple[ArticulatedObject, np.ndarray]:
    """A segmented mesh (a trimesh whose every vertex is in one part: ``part_ids`` (n,) int indexing
    ``names``, as :func:`kinemesh.geometry.segments.load_segmented` splits the vertices two parts share) as an
    object of those parts welded by fixed joints to the one of largest area, so each part gets its own
    material, mass and friction while the object moves as one body (a mesh file says nothing of joints).
    Returns (object, order): the mesh vertex of each vertex of ``object.merged()`` (n,)."""
    v, f = np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces, dtype=np.int64)
    ids = np.asarray(part_ids).reshape(-1)
    area = np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
    parts, order, areas = [], [], []
    for k in np.unique(ids):
        keep = np.flatnonzero(ids == k)
        remap = -np.ones(len(v), dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        faces = f[ids[f[:, 0]] == k]
        label = str(names[k]) if 0 <= k < len(names) else f"part_{int(k)}"
        if label in {p.name for p in parts}:  # a GLB's nodes may share a name: parts need their own
            label = f"{label}_{int(k)}"
        parts.append(Part(label, v[keep], remap[faces], label=label))
        order.append(keep)
        areas.append(area[ids[f[:, 0]] == k].sum())
    root = parts[int(np.argmax(areas))].name
    joints = [Joint(f"weld_{p.name}", "fixed", root, p.name, np.array([0.0, 0.0, 1.0]), np.zeros(3), None)
              for p in parts if p.name != root]
    return ArticulatedObject(parts, joints, category=name, name=name), np.concatenate(order)


def _from_sequence(path: Path) -> ArticulatedObject:
    from kinemesh.data.sequence import KinematicSequence

    seq = KinematicSequence.load(path)
    ids = seq.part_ids if seq.part_ids is not None else np.zeros(seq.n_vertices, dtype=np.int32)
    names_meta = seq.meta.get("parts", [])
    parts = []
    for k, pid in enumerate(np.unique(ids)):
        keep = ids == pid
        remap = -np.ones(seq.n_vertices, dtype=np.int64)
        remap[keep] = np.arange(keep.sum())
        faces = seq.faces[keep[seq.faces].all(1)]
        info = names_meta[k] if k < len(names_meta) else {}
        name = info.get("name", f"part_{int(pid)}")
        parts.append(Part(name, seq.rest_vertices[keep], remap[faces], label=info.get("label", name)))
    names = {p.name for p in parts}
    joints = [Joint.from_dict(j) for j in seq.joints]
    # joints to helper links the sequence does not carry as geometry get an empty part
    for j in joints:
        for end in (j.parent, j.child):
            if end not in names:
                parts.append(Part(end, np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64), label="helper"))
                names.add(end)
    return ArticulatedObject(parts, joints, category=seq.category, name=path.stem)
