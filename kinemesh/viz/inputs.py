"""Turn any input kinemesh can read into something to draw: frames, faces, part ids and joint-axis arrows.

Shared by ``kinemesh render`` and ``kinemesh view``. Inputs: a mesh file (one frame), a KinematicSequence
``.npz`` or other sequence (mesh-frame folder, ``.anime``), a URDF / PartNet-Mobility folder (each movable
joint is animated through its range in turn, others at rest) and an articulation-result JSON (its joint axes
drawn as arrows over a mesh given with ``mesh=`` or named by the JSON's ``mesh`` / ``source`` field; without
either, the URDF that ``kinemesh articulate`` writes beside the JSON is animated instead).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kinemesh.errors import ConfigError, InputFileError
from kinemesh.geometry.procrustes import kabsch

__all__ = ["Drawable", "load_drawable", "articulated_sweep", "sequence_axes", "turntable"]


@dataclass
class Drawable:
    """Everything needed to draw a moving mesh.

    frames : (T, N, 3) float32 vertex positions per frame (metres, +Z up).
    faces : (M, 3) int64 triangles.
    part_ids : (N,) int part label per vertex, or None.
    axes : list of (origins (T, 3), directions (T, 3)) arrows, one per movable joint (possibly empty).
    axis_names : joint name per arrow.
    fps : playback rate in frames per second.
    title : short name for captions.
    articulated : the ArticulatedObject for URDF/PartNet inputs (joint sliders in the viewer), else None.
    sequence : the KinematicSequence when the input was one, else None.
    captions : per-frame captions, or None.
    """

    frames: np.ndarray
    faces: np.ndarray
    part_ids: np.ndarray | None = None
    axes: list = field(default_factory=list)
    axis_names: list = field(default_factory=list)
    fps: float = 30.0
    title: str = ""
    articulated: Any = None
    sequence: Any = None
    captions: list | None = None  # optional per-frame caption (e.g. the joint value being swept)


def joint_axes_at(obj, values: dict[str, float]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(origin, direction) of every movable joint of ``obj`` posed at ``values``: the joint frame moves
    with its parent part."""
    T = obj.part_transforms(values)
    out = []
    for j in obj.movable_joints:
        Tp = T[j.parent]
        out.append((Tp[:3, :3] @ j.origin + Tp[:3, 3], Tp[:3, :3] @ j.axis))
    return out


def _subtree_ranges(obj) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """Depth-first entry/exit numbers of the parts: the parts below part ``i`` (itself included) are those
    with ``tin[i] <= tin[k] < tout[i]``. Returns (part index by name, tin (P,), tout (P,))."""
    index = {p.name: i for i, p in enumerate(obj.parts)}
    children: dict[str, list[str]] = {}
    for j in obj.joints:
        children.setdefault(j.parent, []).append(j.child)
    tin, tout = np.zeros(len(index), np.int64), np.zeros(len(index), np.int64)
    clock, stack = 0, [(obj.root, False)]
    while stack:  # iterative: a 5,000-link chain is deeper than Python's recursion limit
        name, done = stack.pop()
        if done:
            tout[index[name]] = clock
            continue
        tin[index[name]] = clock
        clock += 1
        stack.append((name, True))
        stack.extend((c, False) for c in children.get(name, []))
    return index, tin, tout


def posed_frames(obj, configs: list[dict[str, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """Vertices and joint arrows of ``obj`` at each joint configuration.

    Joint origins and axes live in the rest frame, so a configuration moving a single joint j (every frame
    of :func:`articulated_sweep`) moves all parts below j by the one motion M_j(q) and leaves the rest at
    rest: a frame costs one masked transform of the vertices instead of a forward-kinematics pass over
    every joint (quadratic in the joint count for a sweep of a long chain). Configurations moving several
    joints take the full pass. Returns (frames (T, N, 3) float32, faces (M, 3), part_ids (N,),
    axes: list of (origins (T, 3), directions (T, 3)) per movable joint)."""
    v0, faces, part_ids = obj.merged({})
    index, tin, tout = _subtree_ranges(obj)
    movable = obj.movable_joints
    by_name = {j.name: j for j in movable}
    vertex_tin = tin[part_ids]
    parent_tin = tin[[index[j.parent] for j in movable]]
    frames = np.empty((len(configs), *v0.shape), np.float32)
    origins = np.tile(np.array([j.origin for j in movable]).reshape(-1, 3), (len(configs), 1, 1))
    dirs = np.tile(np.array([j.axis for j in movable]).reshape(-1, 3), (len(configs), 1, 1))
    for f, c in enumerate(configs):
        moving = [(n, q) for n, q in c.items() if q != 0.0]
        frames[f] = v0
        if len(moving) > 1 or (moving and moving[0][0] not in by_name):
            frames[f] = obj.merged(c)[0]
            for k, (o, d) in enumerate(joint_axes_at(obj, c)):
                origins[f, k], dirs[f, k] = o, d
        elif moving:
            j, q = by_name[moving[0][0]], moving[0][1]
            M = j.motion(q)
            lo, hi = tin[index[j.child]], tout[index[j.child]]
            sel = (vertex_tin >= lo) & (vertex_tin < hi)
            frames[f, sel] = v0[sel] @ M[:3, :3].T + M[:3, 3]
            ax = (parent_tin >= lo) & (parent_tin < hi)
            origins[f, ax] = origins[f, ax] @ M[:3, :3].T + M[:3, 3]
            dirs[f, ax] = dirs[f, ax] @ M[:3, :3].T
    return frames, faces, part_ids, [(origins[:, k], dirs[:, k]) for k in range(len(movable))]


def articulated_sweep(obj, frames_per_joint: int = 45) -> tuple[list[dict[str, float]], list[str]]:
    """Joint configurations moving each movable joint through its range in turn (rest -> hi -> lo -> rest
    for limits around 0, else lo -> hi -> lo), other joints at rest. Returns (configs, caption per frame).

    Continuous joints sweep one full turn.
    """
    joints = obj.movable_joints
    configs: list[dict[str, float]] = []
    captions: list[str] = []
    n = max(int(frames_per_joint), 2)
    for j in joints:
        if j.limits is None:
            lo, hi = 0.0, 2 * np.pi
        else:
            lo, hi = j.limits
        s = np.linspace(0.0, 1.0, n)
        if lo < 0.0 < hi:  # 0 -> hi -> lo -> 0, piecewise linear in time
            knots = np.array([0.0, hi, lo, 0.0])
            vals = np.interp(s * 3, np.arange(4), knots)
        elif lo >= 0.0:
            vals = lo + (hi - lo) * np.sin(np.pi * s)  # rest(lo) -> hi -> rest
        else:
            vals = hi + (lo - hi) * np.sin(np.pi * s)
        unit = "m" if j.type == "prismatic" else "rad"
        for v in vals:
            configs.append({j.name: float(v)})
            captions.append(f"{j.name} ({j.type}) = {v:+.2f} {unit}")
    if not configs:
        configs, captions = [{}], ["no movable joints"]
    return configs, captions


def turntable(vertices: np.ndarray, n_frames: int = 72, axes=None) -> tuple[np.ndarray, list]:
    """Rotate a still mesh one turn about the vertical axis through its bounding-box centre.

    Returns (frames (T, N, 3), axes rotated along: list of (origins (T,3), directions (T,3))).
    """
    v = np.asarray(vertices, np.float64)
    c = 0.5 * (v.min(0) + v.max(0))
    ang = np.linspace(0, 2 * np.pi, n_frames, endpoint=False)
    R = np.stack(
        [np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]]) for a in ang]
    )
    frames = np.einsum("tij,nj->tni", R, v - c) + c
    rot_axes = []
    for o, d in axes or []:
        o = np.asarray(o, np.float64).reshape(-1, 3)[0]
        d = np.asarray(d, np.float64).reshape(-1, 3)[0]
        rot_axes.append((np.einsum("tij,j->ti", R, o - c) + c, np.einsum("tij,j->ti", R, d)))
    return frames.astype(np.float32), rot_axes


def sequence_axes(seq) -> tuple[list, list[str]]:
    """Joint-axis arrows of a KinematicSequence with ``meta.joints``, following the parent part's motion.

    The parent part of each joint is found by name in ``meta.parts`` (index = part id); its rigid motion per
    frame is fitted to its vertices (Kabsch). Joints whose parent cannot be resolved keep their rest axis.
    Returns (axes list of (origins (T,3), directions (T,3)), joint names).
    """
    joints = [j for j in seq.joints if j.get("type") != "fixed"]
    if not joints:
        return [], []
    T = seq.n_frames
    names = [p.get("name") for p in seq.meta.get("parts", []) if isinstance(p, dict)]
    pid = seq.part_ids
    axes, labels = [], []
    for j in joints:
        o = np.asarray(j["origin"], np.float64)
        d = np.asarray(j["axis"], np.float64)
        d = d / max(np.linalg.norm(d), 1e-12)
        origins, dirs = np.tile(o, (T, 1)), np.tile(d, (T, 1))
        if pid is not None and j.get("parent") in names:
            sel = pid == names.index(j["parent"])
            if sel.sum() >= 3:
                R, t = kabsch(seq.rest_vertices[sel], seq.frames[:, sel])
                origins, dirs = R @ o + t, R @ d
        axes.append((origins, dirs))
        labels.append(str(j.get("name", f"joint{len(labels)}")))
    return axes, labels


def _articulation_json(path: Path, mesh: str | os.PathLike | None, max_vertices) -> Drawable:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(path, f"cannot read articulation JSON ({exc})") from exc
    parts = doc.get("parts") if isinstance(doc, dict) else None
    if not isinstance(parts, list):
        raise InputFileError(path, "not an articulation result: expected a top-level 'parts' list")
    if mesh is None:
        ref = doc.get("mesh") or doc.get("source")
        if isinstance(ref, str):
            cand = (path.parent / ref).resolve()
            # Never follow a reference out of the result's folder.
            if path.parent.resolve() in cand.parents and cand.exists():
                mesh = cand
    if mesh is None:
        # ``kinemesh articulate`` writes the same joints as a URDF beside the JSON: animate that.
        from kinemesh.data.partnet import find_urdf

        urdf = find_urdf(path.parent, required=False)
        if urdf is not None:
            return load_drawable(urdf, max_vertices=max_vertices)
        raise ConfigError(f"{path}: an articulation result needs the mesh it describes: pass --mesh MESH")
    base = load_drawable(mesh, max_vertices=max_vertices)
    axes, labels = [], []
    for i, p in enumerate(parts):
        if not isinstance(p, dict) or p.get("type") in (None, "fixed") or p.get("axis") is None:
            continue
        try:
            o = np.asarray(p.get("origin", [0, 0, 0]), np.float64).reshape(3)
            d = np.asarray(p["axis"], np.float64).reshape(3)
        except (TypeError, ValueError) as exc:
            raise InputFileError(path, f"parts[{i}]: axis/origin must be 3 numbers") from exc
        if not (np.isfinite(o).all() and np.isfinite(d).all() and np.linalg.norm(d) > 1e-12):
            raise InputFileError(path, f"parts[{i}]: non-finite origin or zero axis")
        n_frames = base.frames.shape[0]
        unit = d / np.linalg.norm(d)
        axes.append((np.broadcast_to(o, (n_frames, 3)).copy(), np.broadcast_to(unit, (n_frames, 3)).copy()))
        conf = p.get("confidence")
        conf_text = f", {conf:.2f}" if isinstance(conf, (int, float)) else ""
        labels.append(f"{p.get('name', f'part{i}')} ({p.get('type')}{conf_text})")
    base.axes, base.axis_names = axes, labels
    base.title = f"{path.stem}: {len(axes)} predicted joint(s)"
    return base


def _sequence_title(path: Path, seq) -> str:
    """Short caption: file stem, category when it adds something, and the kind."""
    extra = [c for c in (seq.category,) if c not in ("unknown", path.stem)]
    return f"{path.stem} ({', '.join(extra + [seq.kind])})"


def load_drawable(
    path: str | os.PathLike,
    mesh: str | os.PathLike | None = None,
    frames_per_joint: int = 45,
    fps: float | None = None,
    max_vertices: int | None = 50000,
    max_frames: int | None = None,
    parts: bool = False,
    labels: str | os.PathLike | None = None,
    auto_parts: bool = True,
) -> Drawable:
    """Load any supported input as a :class:`Drawable`.

    Parameters
    ----------
    path : mesh file, ``.npz`` / ``.anime`` / mesh-frame folder sequence, URDF or PartNet-Mobility folder,
        or an articulation-result ``.json``.
    mesh : the mesh an articulation JSON refers to (else taken from its ``mesh``/``source`` field).
    frames_per_joint : frames per joint sweep for articulated inputs.
    fps : frame rate override (sequences default to their own timing, else 30).
    max_vertices : vertex budget passed to the loaders (decimated with a warning above it).
    max_frames : URDF/PartNet sweeps longer than this are subsampled evenly before posing (None: all).
    parts : load a mesh file with its parts (``kinemesh.geometry.segments.load_segmented``: ``labels`` file,
        OBJ groups, GLB nodes, else grouped components unless ``auto_parts`` is False) as the model's working
        mesh (duplicates merged within a part, split between parts); URDF / PartNet inputs always use their
        links; ``labels`` is refused for inputs other than mesh files.

    Raises
    ------
    InputFileError / ConfigError naming the input.
    """
    from kinemesh.data import loaders

    p = Path(path)
    if not p.exists():
        raise InputFileError(p, "file or folder not found")
    what = "json" if p.suffix.lower() == ".json" else loaders.sequence_kind(p)
    if labels is not None and what != "mesh":
        raise InputFileError(labels, f"part labels are for mesh files; {p.name} is not one (URDF / PartNet "
                                     f"folders use their links)")
    if what == "json":
        return _articulation_json(p, mesh, max_vertices)
    if (parts or labels is not None) and what == "mesh":
        from kinemesh.geometry.segments import load_segmented

        wm = load_segmented(p, labels=labels, auto_parts=auto_parts, max_vertices=max_vertices)
        n = 0 if wm.part_ids is None else int(wm.part_ids.max()) + 1
        return Drawable(frames=np.asarray(wm.mesh.vertices, np.float32)[None],
                        faces=np.asarray(wm.mesh.faces, np.int64), part_ids=wm.part_ids, fps=fps or 30.0,
                        title=p.name + (f" ({n} parts: {wm.part_source})" if n else ""))
    if what in ("urdf", "partnet"):
        from kinemesh.data import partnet

        obj = partnet.load_articulated(p, max_vertices=max_vertices)
        configs, captions = articulated_sweep(obj, frames_per_joint)
        if max_frames and len(configs) > max_frames:
            pick = np.linspace(0, len(configs) - 1, max_frames).round().astype(int)
            configs, captions = [configs[i] for i in pick], [captions[i] for i in pick]
        frames, faces, part_ids, axes = posed_frames(obj, configs)
        d = Drawable(
            frames=frames,
            faces=np.asarray(faces, np.int64),
            part_ids=part_ids,
            axes=axes,
            axis_names=[j.name for j in obj.movable_joints],
            fps=fps or 30.0,
            title=f"{obj.name} ({obj.category})",
            articulated=obj,
            captions=captions,
        )
        return d
    if what == "unknown":
        raise InputFileError(
            p, "unsupported input (expected a mesh, .npz, .anime, .urdf, a folder or a .json result)"
        )
    seq = loaders.load_sequence(p, max_vertices=max_vertices)
    if fps is None:
        dt = np.diff(seq.times.astype(np.float64))
        fps = float(1.0 / np.median(dt)) if dt.size and np.median(dt) > 0 else 30.0
    axes, names = sequence_axes(seq)
    return Drawable(
        frames=seq.frames,
        faces=np.asarray(seq.faces, np.int64),
        part_ids=seq.part_ids,
        axes=axes,
        axis_names=names,
        fps=fps,
        title=_sequence_title(p, seq) if what != "mesh" else p.name,
        sequence=seq,
    )
