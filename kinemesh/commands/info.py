"""``kinemesh info FILE``: print a summary of a mesh, sequence, URDF, PartNet-Mobility folder or manifest."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "info",
        help="summarize a mesh, .npz sequence, .anime, URDF, PartNet-Mobility folder or manifest",
        description="Print a summary of a mesh (OBJ/PLY/STL/GLB/OFF), a KinematicSequence .npz, a "
        "DeformingThings4D .anime file, a folder of mesh frames, a URDF or PartNet-Mobility "
        "folder (parts and joints in the kinemesh Z-up frame) or a dataset manifest (.jsonl).",
    )
    p.add_argument("path", help="file or folder to describe")
    p.add_argument(
        "--max-vertices",
        type=int,
        default=50000,
        help="vertex budget; larger meshes are decimated with a warning (0 = never)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    import numpy as np

    from kinemesh.errors import InputFileError

    path = Path(args.path)
    if not path.exists():
        raise InputFileError(path, "file or folder not found")
    if path.suffix.lower() == ".jsonl":
        print(_manifest_summary(path))
        return 0

    from kinemesh.data import loaders

    what = loaders.sequence_kind(path)
    budget = args.max_vertices or None
    if what == "mesh":
        from kinemesh.data.meshes import load_mesh

        raw = load_mesh(path, max_vertices=None, process=False)
        mesh = load_mesh(path, max_vertices=budget)
        lo, hi = mesh.bounds
        merged = f" ({len(mesh.vertices)} after merging duplicates)" if len(mesh.vertices) != len(raw.vertices) else ""
        print(f"mesh {path.name}: {len(raw.vertices)} vertices{merged}, {len(raw.faces)} faces")
        print(
            f"  bounds [{lo[0]:.3f} {lo[1]:.3f} {lo[2]:.3f}] .. [{hi[0]:.3f} {hi[1]:.3f} {hi[2]:.3f}], "
            f"extent {np.round(hi - lo, 3).tolist()}"
        )
        print(
            f"  watertight {mesh.is_watertight}, connected components {_components(mesh)}, "
            f"area {mesh.area:.4f}"
        )
        from kinemesh.data.meshes import read_face_parts

        face_parts, names, source = read_face_parts(path)  # the parts simulate, sample, ik and physics take
        if face_parts is not None:
            counts = np.bincount(face_parts, minlength=len(names))
            listed = ", ".join(f"{n} ({c} faces)" for n, c in list(zip(names, counts))[:12])
            more = f", ... {len(names) - 12} more" if len(names) > 12 else ""
            print(f"  parts {len(names)} ({source}): {listed}{more}")
        else:
            print("  parts: none in the file (simulate groups its connected components; --labels gives parts)")
        return 0
    if what in ("urdf", "partnet"):
        from kinemesh.data.partnet import load_articulated

        obj = load_articulated(path, max_vertices=budget)
        print(articulated_summary(obj))
        return 0
    if what == "unknown":
        raise InputFileError(path, f"unsupported input '{path.suffix}'")
    seq = loaders.load_sequence(path, max_vertices=budget)
    print(f"{what} {path.name}")
    print(seq.summary())
    return 0


def _components(mesh) -> int:
    """Number of vertex-connected pieces (robust to the non-manifold triangle soups of real assets)."""
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    e = np.asarray(mesh.edges)
    n = len(mesh.vertices)
    graph = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n))
    used = np.zeros(n, dtype=bool)
    used[np.asarray(mesh.faces).ravel()] = True
    _, labels = connected_components(graph, directed=False)
    return int(len(np.unique(labels[used])))


def articulated_summary(obj) -> str:
    """Lines describing the parts and joints of an ArticulatedObject."""
    import numpy as np

    lines = [
        f"articulated object {obj.name}: category {obj.category}, source {obj.meta.get('source')}, "
        f"{len(obj.parts)} parts, {len(obj.joints)} joints ({len(obj.movable_joints)} movable)"
    ]
    v, f, _ = obj.merged()
    lo, hi = v.min(0), v.max(0)
    lines.append(
        f"  {len(v)} vertices, {len(f)} faces, bounds [{lo[0]:.3f} {lo[1]:.3f} {lo[2]:.3f}] .. "
        f"[{hi[0]:.3f} {hi[1]:.3f} {hi[2]:.3f}] m (Z up)"
    )
    for p in obj.parts:
        lines.append(
            f"  part {p.name}: label {p.label or '-'}, {len(p.vertices)} vertices"
            + (" (no geometry)" if len(p.vertices) == 0 else "")
        )
    for j in obj.joints:
        if j.limits is None:
            lim = "none"
        elif j.type == "revolute":
            lim = (
                f"[{j.limits[0]:.4f}, {j.limits[1]:.4f}] rad ([{np.degrees(j.limits[0]):.1f}, "
                f"{np.degrees(j.limits[1]):.1f}] deg)"
            )
        else:
            lim = f"[{j.limits[0]:.4f}, {j.limits[1]:.4f}] m"
        lines.append(
            f"  joint {j.name}: {j.type} {j.parent} -> {j.child}, axis {np.round(j.axis, 4).tolist()}, "
            f"origin {np.round(j.origin, 4).tolist()}, limits {lim}"
        )
    for w in obj.meta.get("load_warnings", []):
        lines.append(f"  note: {w}")
    return "\n".join(lines)


def _manifest_summary(path) -> str:
    from collections import Counter

    from kinemesh.data.manifest import read_manifest

    entries = read_manifest(path)
    splits = Counter(e["split"] for e in entries)
    cats = Counter(e["category"] for e in entries)
    kinds = Counter(e["kind"] for e in entries)
    lines = [
        f"manifest {path.name}: {len(entries)} sequences",
        "  splits " + ", ".join(f"{k} {v}" for k, v in sorted(splits.items())),
        "  kinds " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())),
        "  categories " + ", ".join(f"{k} {v}" for k, v in sorted(cats.items())),
    ]
    return "\n".join(lines)
