"""Segmented static shapes for articulation: parts from URDF links / PartNet-Mobility folders, GLB nodes, OBJ
groups, a per-face label file, or connected components.

The result is an :class:`ArticulatedObject` whose joints are *hidden*: every part is welded to the root by a
fixed joint (the articulation to be inferred); any joints the input had are kept in ``meta["hidden_joints"]``
(used by the evaluation, never by the predictor). Units metres, Z up.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kinemesh.data.arrays import load_npy
from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.errors import InputFileError

MESH_EXTS = {".obj", ".ply", ".stl", ".off", ".glb", ".gltf"}
Y_UP_TO_Z_UP = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])  # (x, y, z) -> (x, -z, y)


def static_object(parts: list[Part], name: str = "object", category: str = "unknown",
                  hidden: list[dict] | None = None, root: str | None = None) -> ArticulatedObject:
    """Parts welded to ``root`` (default: the largest by bounding-box volume)."""
    geo = [p for p in parts if len(p.vertices)]
    if root is None:
        root = max(geo, key=lambda p: float(np.prod(np.ptp(p.vertices, axis=0) + 1e-9))).name if geo else parts[0].name
    joints = [Joint(f"static_{p.name}", "fixed", root, p.name, (0, 0, 1), (0, 0, 0)) for p in parts if p.name != root]
    return ArticulatedObject(parts, joints, category, name, {"hidden_joints": hidden or [], "joints_hidden": True})


def load_parts(path: str | os.PathLike, labels: str | os.PathLike | None = None, up: str | None = None,
               min_component_fraction: float = 0.002) -> ArticulatedObject:
    """Load ``path`` as a segmented static shape (see module doc).

    ``labels``: a per-face label file (``.npy`` int array or text with one label per line, one per face) that
    splits a single mesh into parts. ``up``: ``"z"`` (default for OBJ/PLY/STL/OFF) or ``"y"`` (default for
    glTF/GLB, whose convention is Y up). Connected components smaller than ``min_component_fraction`` of the
    surface area are merged into the nearest larger component.

    Raises InputFileError naming the file for unreadable input, a label count that does not match the faces,
    or an unknown format.
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
        if seq.part_ids is None:
            return _split(np.asarray(seq.rest_vertices, float), np.asarray(seq.faces), p, labels,
                          min_component_fraction)
        parts = _parts_from_vertex_ids(np.asarray(seq.rest_vertices, float), np.asarray(seq.faces),
                                       np.asarray(seq.part_ids), names, labs)
        return static_object(parts, p.stem, seq.meta.get("category", "unknown"), seq.meta.get("joints", []))
    if p.suffix.lower() not in MESH_EXTS:
        raise InputFileError(p, f"unsupported input {p.suffix!r}; use a URDF/PartNet-Mobility folder, .npz "
                                f"sequence or a mesh ({', '.join(sorted(MESH_EXTS))})")
    import trimesh

    up = up or ("y" if p.suffix.lower() in (".glb", ".gltf") else "z")
    R = Y_UP_TO_Z_UP if up == "y" else np.eye(3)
    if p.suffix.lower() == ".obj" and labels is None:
        groups = _obj_groups(p)
        if len(groups) >= 2:
            return static_object([Part(n, v @ R.T, f, "") for n, (v, f) in groups.items()], p.stem)
    try:
        loaded = trimesh.load(p, process=False)
    except Exception as exc:  # trimesh raises many types for broken files
        raise InputFileError(p, f"cannot read mesh: {exc}") from None
    if isinstance(loaded, trimesh.Scene) and labels is None:
        parts = []
        for node in loaded.graph.nodes_geometry:
            T, geom = loaded.graph[node]
            g = loaded.geometry[geom]
            if not hasattr(g, "faces") or len(g.faces) == 0:
                continue
            v = trimesh.transform_points(np.asarray(g.vertices, float), T) @ R.T
            parts.append(Part(_unique(str(node), parts), v, np.asarray(g.faces), ""))
        if len(parts) >= 2:
            return static_object(parts, p.stem)
        loaded = loaded.dump(concatenate=True) if len(loaded.geometry) else None
        if loaded is None:
            raise InputFileError(p, "the file holds no triangles")
    mesh = loaded if not isinstance(loaded, trimesh.Scene) else loaded.dump(concatenate=True)
    if len(mesh.faces) == 0:
        raise InputFileError(p, "the file holds no triangles")
    return _split(np.asarray(mesh.vertices, float) @ R.T, np.asarray(mesh.faces), p, labels, min_component_fraction)


def _obj_groups(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Faces of an OBJ file split by ``o`` / ``g`` statements: name -> (vertices (n, 3), faces (m, 3)).
    Polygons are fan-triangulated; texture/normal indices are ignored."""
    verts, faces, names = [], {}, []
    current = "default"
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc}") from None
    for line in lines:
        tok = line.split()
        if not tok:
            continue
        if tok[0] == "v" and len(tok) >= 4:
            verts.append([float(x) for x in tok[1:4]])
        elif tok[0] in ("o", "g") and len(tok) > 1:
            current = " ".join(tok[1:])
        elif tok[0] == "f" and len(tok) >= 4:
            idx = [int(t.split("/")[0]) for t in tok[1:]]
            idx = [i - 1 if i > 0 else len(verts) + i for i in idx]
            if current not in faces:
                faces[current] = []
                names.append(current)
            faces[current] += [[idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1)]
    V = np.asarray(verts, float).reshape(-1, 3)
    out = {}
    for n in names:
        f = np.asarray(faces[n], np.int64)
        if len(f) == 0 or f.max() >= len(V) or f.min() < 0:
            raise InputFileError(path, f"group '{n}' has face indices outside the {len(V)} vertices")
        used, inv = np.unique(f, return_inverse=True)
        out[n] = (V[used], inv.reshape(-1, 3))
    return out


def _unique(name: str, parts: list[Part]) -> str:
    names = {q.name for q in parts}
    out, k = name, 1
    while out in names:
        out, k = f"{name}_{k}", k + 1
    return out


def _parts_from_vertex_ids(v, f, ids, names, labs) -> list[Part]:
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


def _split(v, f, path, labels, min_fraction) -> ArticulatedObject:
    if labels is not None:
        lp = Path(labels)
        try:
            lab = load_npy(lp) if lp.suffix == ".npy" else \
                np.array([s.strip() for s in lp.read_text().splitlines() if s.strip()])
        except (OSError, ValueError) as exc:
            raise InputFileError(lp, f"cannot read per-face labels: {exc}") from None
        lab = np.asarray(lab).reshape(-1)
        if len(lab) != len(f):
            raise InputFileError(lp, f"{len(lab)} labels for {len(f)} faces of {Path(path).name}; need one per face")
        parts = [_submesh(v, f, lab == u, f"part_{u}" if lab.dtype.kind in "iu" else str(u), "" if lab.dtype.kind
                          in "iu" else str(u)) for u in np.unique(lab)]
        return static_object(parts, Path(path).stem)
    import trimesh

    m = trimesh.Trimesh(v, f, process=True)
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
    parts = [_submesh(np.asarray(m.vertices), np.asarray(m.faces), label == i, f"part_{i}") for i in range(len(big))]
    return static_object(parts, Path(path).stem)
