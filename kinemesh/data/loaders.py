"""Read 4D sequences from the formats kinemesh supports (single meshes: ``kinemesh.data.meshes``).

* sequences (:func:`load_sequence`): a KinematicSequence ``.npz``; a folder of same-topology ``*.obj`` /
  ``*.ply`` frames in natural sort order; a DeformingThings4D ``.anime`` file; a PartNet-Mobility object
  folder or any ``.urdf`` (joint configurations are sampled; ground-truth joints go to ``meta.joints``).

Every user-caused problem raises :class:`~kinemesh.errors.InputFileError` naming the file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
from pathlib import Path

import numpy as np

from kinemesh.data.meshes import DEFAULT_MAX_VERTICES, MESH_SUFFIXES, load_mesh
from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import ConfigError, InputFileError

log = logging.getLogger(__name__)

FRAME_SUFFIXES = (".obj", ".ply")


def natural_key(name: str) -> list:
    """Sort key putting ``frame2`` before ``frame10``."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def mesh_to_sequence(mesh, source: str = "mesh", category: str = "unknown") -> KinematicSequence:
    """A one-frame KinematicSequence of a static mesh (kind ``mixed``)."""
    v = np.asarray(mesh.vertices, dtype=np.float32)
    return KinematicSequence(
        rest_vertices=v,
        faces=np.asarray(mesh.faces),
        frames=v[None],
        times=np.zeros(1),
        meta={"category": category, "kind": "mixed", "source": source, "units": "m", "up": "z"},
    )


# ---------------------------------------------------------------------------------------------- folders
def load_mesh_folder(
    folder: str | os.PathLike, fps: float = 30.0, kind: str = "mixed", category: str | None = None
) -> KinematicSequence:
    """Read a folder of same-topology ``*.obj`` / ``*.ply`` frames (natural sort order) as a sequence.

    Frame 0 is the rest shape. Vertex order is kept exactly (no merging, no decimation: the frames must
    keep a shared topology). Raises InputFileError naming the first frame whose topology differs.
    """
    folder = Path(folder)
    files = folder_files(folder, FRAME_SUFFIXES)
    if not files:
        raise InputFileError(folder, f"folder holds no mesh frames ({', '.join(FRAME_SUFFIXES)})")
    first = load_mesh(files[0], max_vertices=None, process=False)
    faces = np.asarray(first.faces)
    frames = [np.asarray(first.vertices)]
    for f in _progress(files[1:], desc="frames"):
        m = load_mesh(f, max_vertices=None, process=False)
        if (
            len(m.vertices) != len(first.vertices)
            or m.faces.shape != faces.shape
            or not np.array_equal(m.faces, faces)
        ):
            raise InputFileError(
                f,
                f"topology mismatch with {files[0].name}: {len(m.vertices)} vertices / {len(m.faces)} faces "
                f"vs {len(first.vertices)} / {len(faces)}",
            )
        frames.append(np.asarray(m.vertices))
    fr = np.stack(frames)
    times = np.arange(len(fr)) / fps
    meta = {
        "category": category or folder.name,
        "kind": kind,
        "source": f"mesh-folder:{folder.name}",
        "units": "m",
        "up": "z",
    }
    # A sidecar written by export_obj_sequence restores times and meta (ignored when inconsistent).
    sidecar = folder / "sequence.json"
    if sidecar.is_file():
        try:
            side = json.loads(sidecar.read_text(encoding="utf-8"))
            if isinstance(side, dict) and len(side.get("times", [])) == len(fr):
                times = np.asarray(side["times"], dtype=np.float64)
                if isinstance(side.get("meta"), dict):
                    meta.update(side["meta"])
                    if category:
                        meta["category"] = category
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError):
            log.warning("%s: unreadable sidecar ignored", sidecar)
    meta["frame_files"] = [f.name for f in files]
    seq = KinematicSequence(rest_vertices=fr[0], faces=faces, frames=fr, times=times, meta=meta)
    return seq.validate(folder)


def folder_files(folder: str | os.PathLike, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    """The files of ``folder`` (natural sort order, hidden files skipped), with a suffix among ``suffixes``
    when given. Raises UnsafePathError for a symlink leading out of the folder (as the URDF loader does)."""
    from kinemesh.data.urdf import escapes
    from kinemesh.errors import UnsafePathError

    files = []
    for p in sorted(Path(folder).iterdir(), key=lambda p: natural_key(p.name)):
        if p.name.startswith(".") or (suffixes and p.suffix.lower() not in suffixes):
            continue
        if escapes(folder, p):
            raise UnsafePathError(p, f"is a link leading out of {folder}")
        if p.is_file():
            files.append(p)
    return files


# ---------------------------------------------------------------------------------------------- .anime
def load_anime(
    path: str | os.PathLike, fps: float = 30.0, kind: str = "mixed", category: str | None = None
) -> KinematicSequence:
    """Read a DeformingThings4D ``.anime`` file.

    Layout (little endian): int32 nf, nv, nt; float32 nv*3 frame-0 vertices; int32 nt*3 triangles;
    float32 (nf-1)*nv*3 per-frame offsets relative to frame 0. Coordinates are kept as stored.
    Raises InputFileError when the file is empty, truncated, has trailing bytes, bad counts, face indices
    out of range or non-finite values.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "file not found")
    data = path.read_bytes()
    if len(data) == 0:
        raise InputFileError(path, "file is empty")
    if len(data) < 12:
        raise InputFileError(path, f"truncated: {len(data)} bytes, the header alone needs 12")
    nf, nv, nt = struct.unpack("<3i", data[:12])
    if nf < 1 or nv < 1 or nt < 1:
        raise InputFileError(
            path, f"bad header: frames={nf}, vertices={nv}, triangles={nt} (all must be >= 1)"
        )
    expected = 12 + 4 * (nv * 3 + nt * 3 + (nf - 1) * nv * 3)
    if len(data) < expected:
        raise InputFileError(
            path,
            f"truncated: {len(data)} bytes, expected {expected} for {nf} frames, "
            f"{nv} vertices, {nt} triangles",
        )
    if len(data) > expected:
        raise InputFileError(path, f"{len(data) - expected} unexpected trailing bytes (corrupt header?)")
    off = 12
    v0 = np.frombuffer(data, dtype="<f4", count=nv * 3, offset=off).reshape(nv, 3)
    off += nv * 12
    faces = np.frombuffer(data, dtype="<i4", count=nt * 3, offset=off).reshape(nt, 3)
    off += nt * 12
    offsets = np.frombuffer(data, dtype="<f4", count=(nf - 1) * nv * 3, offset=off).reshape(nf - 1, nv, 3)
    if faces.min() < 0 or faces.max() >= nv:
        raise InputFileError(path, f"triangle indices out of range [0, {nv - 1}]")
    if not np.isfinite(v0).all():
        raise InputFileError(path, "frame-0 vertices contain NaN or inf")
    frames = np.concatenate([v0[None], v0[None] + offsets]).astype(np.float32)
    if not np.isfinite(frames).all():
        bad = int(np.where(~np.isfinite(frames).all(axis=(1, 2)))[0][0])
        raise InputFileError(path, f"frame {bad} contains NaN or inf")
    seq = KinematicSequence(
        rest_vertices=v0.copy(),
        faces=faces.copy(),
        frames=frames,
        times=np.arange(nf) / fps,
        meta={
            "category": category or path.stem.split("_")[0],
            "kind": kind,
            "source": f"deformingthings4d:{path.name}",
            "units": "m",
            "up": "z",
        },
    )
    return seq.validate(path)


# ---------------------------------------------------------------------------------------------- articulated
def articulated_configurations(obj, n_frames: int = 16, seed: int = 0, motion: str = "random") -> list[dict]:
    """Joint configurations for ``obj`` (an ArticulatedObject): frame 0 is always the rest pose (all zeros).

    ``motion="random"`` samples the other frames uniformly within the limits; ``"sweep"`` moves every
    joint together from its lower to its upper limit (continuous joints over one turn).
    """
    if n_frames < 1:
        raise ConfigError(f"--frames must be >= 1, got {n_frames}")
    configs: list[dict] = [{j.name: 0.0 for j in obj.movable_joints}]
    if motion == "random":
        rng = np.random.default_rng(seed)
        configs += [obj.sample_values(rng) for _ in range(n_frames - 1)]
    elif motion == "sweep":
        for s in np.linspace(0.0, 1.0, n_frames)[1:]:
            c = {}
            for j in obj.movable_joints:
                lo, hi = j.limits if j.limits is not None else (0.0, 2 * np.pi)
                c[j.name] = float(lo + s * (hi - lo))
            configs.append(c)
    else:
        raise ConfigError(f"motion must be 'random' or 'sweep', got {motion!r}")
    return configs


def articulated_sequence(
    obj,
    n_frames: int = 16,
    seed: int = 0,
    motion: str = "random",
    fps: float = 30.0,
    source: str | None = None,
) -> KinematicSequence:
    """Sample joint configurations of ``obj`` into a KinematicSequence with ground-truth joints in meta."""
    configs = articulated_configurations(obj, n_frames, seed, motion)
    extra = {"sampling": {"motion": motion, "seed": int(seed), "n_frames": int(n_frames)}}
    for key in ("load_warnings", "source_path"):
        if key in obj.meta:
            extra[key] = obj.meta[key]
    return obj.to_sequence(
        configs, fps=fps, source=source or obj.meta.get("source", "urdf"), extra_meta=extra
    )


# ---------------------------------------------------------------------------------------------- dispatch
def sequence_kind(path: str | os.PathLike) -> str:
    """Name the input kind of ``path``: npz | anime | urdf | partnet | mesh-folder | mesh | unknown."""
    from kinemesh.data.partnet import find_urdf

    p = Path(path)
    s = p.suffix.lower()
    if p.is_dir():
        if (p / "mobility.urdf").is_file():
            return "partnet"
        if find_urdf(p, required=False) is not None:
            return "urdf"
        return "mesh-folder"
    if s == ".npz":
        return "npz"
    if s == ".anime":
        return "anime"
    if s == ".urdf":
        return "urdf"
    if s in MESH_SUFFIXES:
        return "mesh"
    return "unknown"


def load_sequence(
    path: str | os.PathLike,
    n_frames: int = 16,
    seed: int = 0,
    motion: str = "random",
    fps: float = 30.0,
    max_vertices: int | None = DEFAULT_MAX_VERTICES,
    kind: str = "mixed",
    category: str | None = None,
) -> KinematicSequence:
    """Load any supported input as a validated KinematicSequence.

    Parameters
    ----------
    path : ``.npz`` sequence, ``.anime`` file, folder of mesh frames, PartNet-Mobility folder, ``.urdf``
        file (or a folder holding one), or a single mesh file (one frame).
    n_frames, seed, motion : joint-configuration sampling for articulated inputs
        (see :func:`articulated_configurations`).
    fps : frame rate of the ``times`` field for inputs without timing (frames/s).
    max_vertices : vertex budget for meshes and articulated objects (decimated with a warning).
    kind, category : meta for inputs that do not say (mesh folders, ``.anime``).

    Raises
    ------
    InputFileError: missing/unsupported input or any problem reading it.
    """
    from kinemesh.data import partnet

    p = Path(path)
    if not p.exists():
        raise InputFileError(p, "file or folder not found")
    what = sequence_kind(p)
    if what == "npz":
        return KinematicSequence.load(p)
    if what == "anime":
        return load_anime(p, fps=fps, kind=kind, category=category)
    if what in ("urdf", "partnet"):
        obj = partnet.load_articulated(p, max_vertices=max_vertices)
        if category:
            obj.category = category
        seq = articulated_sequence(obj, n_frames, seed, motion, fps)
        return seq.validate(p)
    if what == "mesh-folder":
        return load_mesh_folder(p, fps=fps, kind=kind, category=category)
    if what == "mesh":
        return mesh_to_sequence(
            load_mesh(p, max_vertices=max_vertices, process=False), source=f"mesh:{p.name}",
            category=category or p.stem
        )
    raise InputFileError(
        p,
        f"unsupported input '{p.suffix}' (expected .npz, .anime, .urdf, a mesh "
        f"({', '.join(MESH_SUFFIXES)}) or a folder)",
    )


def _progress(items, desc: str):
    """A tqdm bar for long loops (shown only when there are many items)."""
    items = list(items)
    if len(items) < 50:
        return items
    from kinemesh.progress import tqdm

    return tqdm(items, desc=desc, leave=False)
