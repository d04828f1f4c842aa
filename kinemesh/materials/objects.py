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
