"""Segmented static shapes for articulation: parts from URDF links / PartNet-Mobility folders, GLB nodes, OBJ
groups, a per-face label file, or a plain mesh's connected components grouped as ``kinemesh simulate`` groups
them (``kinemesh.geometry.kind.group_components``), or, without ``auto_parts``, the components themselves.

The result is an :class:`ArticulatedObject` whose joints are *hidden*: every part is welded to the root by a
fixed joint (the articulation to be inferred); any joints the input had are kept in ``meta["hidden_joints"]``
(used by the evaluation, never by the predictor). Units metres, Z up.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.data.meshes import MESH_SUFFIXES, load_mesh, read_face_parts, read_part_labels
from kinemesh.data.partnet import Y_UP_TO_Z_UP
from kinemesh.errors import InputFileError


def static_object(parts: list[Part], name: str = "object", category: str = "unknown",
                  hidden: list[dict] | None = None, root: str | None = None) -> ArticulatedObject:
    """Parts welded to ``root`` (default: the largest by bounding-box volume)."""
    geo = [p for p in parts if len(p.vertices)]
    if root is None:
        root = max(geo, key=lambda p: float(np.prod(np.ptp(p.vertices, axis=0) + 1e-9))).name if geo else parts[0].name
    joints = [Joint(f"static_{p.name}", "fixed", root, p.name, (0, 0, 1), (0, 0, 0)) for p in parts if p.name != root]
    return ArticulatedObject(parts, joints, category, name, {"hidden_joints": hidden or [], "joints_hidden": True})


def load_parts(path: str | os.PathLike, labels: str | os.PathLike | None = None, up: str | None = None,
               min_component_fraction: float = 0.002, auto_parts: bool = True) -> ArticulatedObject:
    """Load ``path`` as a segmented static shape (see module doc).

    ``labels``: a part-label file (``.npy`` int array or text with one label per line, one per face or per
    vertex; :func:`kinemesh.data.meshes.read_part_labels`) that splits a single mesh into parts. ``up``: ``"z"`` (default for OBJ/PLY/STL/OFF) or ``"y"`` (default for
    glTF/GLB, whose convention is Y up). A mesh without parts (no groups, nodes or labels) is split into its
    connected components grouped as ``kinemesh simulate`` groups them (``auto_parts``: a part made of many
    components, a door's panel, glass and handle, is one part; buttons join their panel), else into the
    components themselves, those smaller than ``min_component_fraction`` of the surface area merged into the
    nearest larger one.

    Raises InputFileError naming the file for unreadable input, a label count matching neither the faces nor
    the vertices, or an unknown format.
    """
    p = Path(path)
    if not p.exists():
        raise InputFileError(p, "file or folder not found")
    if p.is_dir() or p.suffix.lower() == ".urdf":
        from kinemesh.data.partnet import load_articulated

        obj = load_articulated(p)
        hidden = [j.to_dict() for j in obj.joints]
        parts = [Part(q.name, q.vertices, q.faces, q.label) for q in obj.parts if len(q.vertices)]
        return static_object(parts, obj.name, obj.category, hidden, root=obj.root if
                             len(obj.part(obj.root).vertices) else None)
    if p.suffix.lower() == ".npz":
        from kinemesh.data.sequence import KinematicSequence

        seq = KinematicSequence.load(p)
        names = [d.get("name", f"part_{i}") for i, d in enumerate(seq.meta.get("parts", []))]
        labs = [d.get("label", "") for d in seq.meta.get("parts", [])]
        v, f = np.asarray(seq.rest_vertices, float), np.asarray(seq.faces)
        if seq.part_ids is None:
            face_parts, names = read_part_labels(labels, f, len(v), p.name) if labels is not None else (None, [])
            return _split(v, f, face_parts, names, labels is not None, p, min_component_fraction, auto_parts)
        parts = parts_from_vertex_ids(v, f, np.asarray(seq.part_ids), names, labs)
        return static_object(parts, p.stem, seq.meta.get("category", "unknown"), seq.meta.get("joints", []))
    if p.suffix.lower() not in MESH_SUFFIXES:
        raise InputFileError(p, f"unsupported input {p.suffix!r}; use a URDF/PartNet-Mobility folder, .npz "
                                f"sequence or a mesh ({', '.join(sorted(MESH_SUFFIXES))})")
    face_parts, names, source = read_face_parts(p, labels)  # GLB nodes, OBJ groups or the labels file
    mesh = load_mesh(p, max_vertices=None, process=False)  # glTF turned Z up
    v, default_up = np.asarray(mesh.vertices, float), "y" if p.suffix.lower() in (".glb", ".gltf") else "z"
    if up and up != default_up:
        v = v @ (Y_UP_TO_Z_UP.T if up == "y" else Y_UP_TO_Z_UP)
    return _split(v, np.asarray(mesh.faces), face_parts, names, source == "labels", p, min_component_fraction,
                  auto_parts)


def parts_from_vertex_ids(v, f, ids, names, labs=()) -> list[Part]:
    """One Part per id of ``ids`` (N,) (a part id per vertex of v (N, 3), f (M, 3)), named ``names[id]`` and
    labelled ``labs[id]`` when given; a face belongs to a part when all its vertices do."""
    parts = []
    for pid in np.unique(ids):
        vmask = ids == pid
        fmask = vmask[f].all(1)
        remap = -np.ones(len(v), np.int64)
        remap[vmask] = np.arange(vmask.sum())
        name = names[pid] if pid < len(names) else f"part_{pid}"
        parts.append(Part(name, v[vmask], remap[f[fmask]], labs[pid] if pid < len(labs) else ""))
    return parts


def _submesh(v, f, face_mask, name, label="") -> Part:
    ff = f[face_mask]
    used = np.unique(ff)
    remap = -np.ones(len(v), np.int64)
    remap[used] = np.arange(len(used))
    return Part(name, v[used], remap[ff], label)


def _split(v, f, face_parts, names, labelled: bool, path, min_fraction,
           auto_parts: bool = True) -> ArticulatedObject:
    """Parts from a part id per face (integer labels named ``part_<label>``), or, when ``face_parts`` is None,
    from the connected components grouped by ``group_components`` (``auto_parts``, on the file's topology, as
    ``kinemesh.geometry.segments.load_segmented`` groups them for ``simulate``), else from the components
    (those under ``min_fraction`` of the area merged into the nearest larger one)."""
    import trimesh

    if face_parts is None and auto_parts:
        from kinemesh.geometry.kind import group_components

        groups = group_components(v, f)
        if groups.max() >= 1:
            face_parts, names = groups[f[:, 0]], [f"part_{i}" for i in range(groups.max() + 1)]
    if face_parts is None:
        m = trimesh.Trimesh(v, f, process=True)
        v, f, face_parts = np.asarray(m.vertices), np.asarray(m.faces), _components(m, min_fraction)
        names = [f"part_{i}" for i in range(face_parts.max() + 1)]

    def named(n):
        return (f"part_{n}", "") if labelled and n.lstrip("-").isdigit() else (n, n if labelled else "")

    return static_object([_submesh(v, f, face_parts == i, *named(n)) for i, n in enumerate(names)
                          if (face_parts == i).any()], Path(path).stem)


def _components(m, min_fraction) -> np.ndarray:
    """(m,) component id per face of trimesh ``m``, largest first; slivers join the nearest big component."""
    import trimesh

    comps = trimesh.graph.connected_components(m.face_adjacency, nodes=np.arange(len(m.faces)), min_len=1)
    areas = m.area_faces
    total = areas.sum()
    comps = sorted(comps, key=lambda c: -areas[c].sum())
    big = [c for c in comps if areas[c].sum() >= min_fraction * total] or comps[:1]
    label = np.full(len(m.faces), -1)
    for i, c in enumerate(big):
        label[c] = i
    small = np.flatnonzero(label < 0)
    if len(small):  # merge slivers into the nearest big component
        from scipy.spatial import cKDTree

        cen = m.triangles_center
        tree = cKDTree(cen[label >= 0])
        label[small] = label[label >= 0][tree.query(cen[small])[1]]
    return label
