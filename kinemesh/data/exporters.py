"""Write KinematicSequences: animated GLB (morph targets), OBJ frame folders, ``.npz``, ``.anime``.

Every writer is atomic (temporary name, then rename): an error never leaves a half-written output.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from kinemesh.atomic import atomic_dir, atomic_path
from kinemesh.data.sequence import KinematicSequence

# kinemesh (Z up) -> glTF (Y up): (x, y, z) -> (x, z, -y), a -90 deg rotation about X.
Z_UP_TO_GLTF = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])

_PALETTE = np.array(
    [
        [0.90, 0.60, 0.20],
        [0.25, 0.55, 0.85],
        [0.40, 0.75, 0.35],
        [0.85, 0.35, 0.40],
        [0.60, 0.45, 0.80],
        [0.95, 0.85, 0.30],
        [0.30, 0.75, 0.75],
        [0.70, 0.70, 0.70],
    ]
)

# glTF constants
_FLOAT, _UINT, _UBYTE = 5126, 5125, 5121
PART_ATTRIBUTE = "_PART_ID"  # glTF vertex attribute of kinemesh's part ids
_ARRAY_BUFFER, _ELEMENT_ARRAY_BUFFER = 34962, 34963


def export_npz(seq: KinematicSequence, path: str | os.PathLike) -> Path:
    """Validate and write ``seq`` to ``path`` (``.npz``, the KinematicSequence contract), atomically."""
    return seq.save(path)


def export_obj_sequence(seq: KinematicSequence, folder: str | os.PathLike, prefix: str = "frame") -> Path:
    """Write one OBJ per frame (``frame_0000.obj`` ...) with shared faces into ``folder``, atomically.

    The folder also gets ``sequence.json`` (times in s and meta), so :func:`load_mesh_folder` reads the
    frames back in the same order with identical topology.
    """
    seq.validate(folder)
    faces = "\n".join(f"f {a + 1} {b + 1} {c + 1}" for a, b, c in seq.faces.astype(np.int64))
    with atomic_dir(folder) as tmp:
        for t in range(seq.n_frames):
            v = "\n".join("v %.9g %.9g %.9g" % tuple(p) for p in seq.frames[t].astype(np.float64))
            (tmp / f"{prefix}_{t:04d}.obj").write_text(
                f"# kinemesh frame {t} t={float(seq.times[t]):.6f}s\n{v}\n{faces}\n", encoding="utf-8"
            )
        sidecar = {"times": seq.times.tolist(), "meta": seq.meta}
        (tmp / "sequence.json").write_text(json.dumps(sidecar, default=_json_default), encoding="utf-8")
    return Path(folder)


def export_obj(vertices: np.ndarray, faces: np.ndarray, path: str | os.PathLike, digits: int = 9,
               face_parts: np.ndarray | None = None, part_names: list[str] | None = None) -> Path:
    """Write one mesh (vertices (n, 3), faces (m, 3)) as OBJ with ``digits`` significant digits (17: exact
    float64 round trip), atomically. With ``face_parts`` ((m,) int indexing ``part_names``) every run of faces
    of one part follows an ``o NAME`` line, so the parts read back as the file's groups
    (:func:`kinemesh.data.meshes.read_obj_geometry`); vertex and face order are the same either way."""
    f = np.asarray(faces, dtype=np.int64)
    with atomic_path(path) as tmp:
        fmt = "v %.{0}g %.{0}g %.{0}g".format(digits)
        v = "\n".join(fmt % tuple(p) for p in np.asarray(vertices, dtype=np.float64))
        fp = None if face_parts is None else np.asarray(face_parts).reshape(-1)
        lines = []
        for i, (a, b, c) in enumerate(f):
            if fp is not None and (i == 0 or fp[i] != fp[i - 1]):  # a run of one part's faces begins
                lines.append("o " + "_".join(str(part_names[int(fp[i])]).split()))
            lines.append(f"f {a + 1} {b + 1} {c + 1}")
        tmp.write_text(v + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return Path(path)


def export_anime(seq: KinematicSequence, path: str | os.PathLike) -> Path:
    """Write ``seq`` as a DeformingThings4D ``.anime`` file (frame-0 vertices + offsets to frame 0)."""
    seq.validate(path)
    v0 = seq.frames[0].astype("<f4")
    offsets = (seq.frames[1:] - seq.frames[0][None]).astype("<f4")
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(struct.pack("<3i", seq.n_frames, seq.n_vertices, seq.n_faces))
            fh.write(v0.tobytes())
            fh.write(seq.faces.astype("<i4").tobytes())
            fh.write(offsets.tobytes())
    return Path(path)


def glb_document(seq: KinematicSequence, y_up: bool = True) -> tuple[dict, bytes]:
    """Build the glTF 2.0 JSON and binary buffer of an animated morph-target mesh.

    One mesh, one primitive: ``POSITION`` = rest vertices, one morph target per frame holding
    ``frames[t] - rest`` and an animation on the node's ``weights`` whose keyframe ``t`` (at ``times[t] -
    times[0]`` s) is the one-hot weight vector of target ``t`` (LINEAR interpolation blends neighbouring
    frames). Vertex colours show ``part_ids``, which the ``_PART_ID`` attribute holds. With ``y_up``
    coordinates are converted to glTF's Y-up.
    """
    R = Z_UP_TO_GLTF if y_up else np.eye(3)
    rest = (seq.rest_vertices.astype(np.float64) @ R.T).astype(np.float32)
    frames = (seq.frames.astype(np.float64) @ R.T).astype(np.float32)
    T = seq.n_frames
    blob = bytearray()
    views: list[dict] = []
    accessors: list[dict] = []

    def add(
        array: np.ndarray,
        comp: int,
        typ: str,
        target: int | None = None,
        minmax: bool = False,
        normalized: bool = False,
    ) -> int:
        data = np.ascontiguousarray(array).tobytes()
        while len(blob) % 4:
            blob.append(0)
        view = {"buffer": 0, "byteOffset": len(blob), "byteLength": len(data)}
        if target is not None:
            view["target"] = target
        blob.extend(data)
        views.append(view)
        acc = {"bufferView": len(views) - 1, "componentType": comp, "count": int(array.shape[0]), "type": typ}
        if normalized:
            acc["normalized"] = True
        if minmax:
            flat = array.reshape(array.shape[0], -1)
            acc["min"] = flat.min(axis=0).astype(float).tolist()
            acc["max"] = flat.max(axis=0).astype(float).tolist()
        accessors.append(acc)
        return len(accessors) - 1

    pos = add(rest, _FLOAT, "VEC3", _ARRAY_BUFFER, minmax=True)
    idx = add(seq.faces.astype(np.uint32).reshape(-1), _UINT, "SCALAR", _ELEMENT_ARRAY_BUFFER, minmax=True)
    attributes = {"POSITION": pos}
    if seq.part_ids is not None:
        colours = _PALETTE[np.asarray(seq.part_ids) % len(_PALETTE)]
        rgba = np.concatenate([colours, np.ones((len(colours), 1))], axis=1)
        attributes["COLOR_0"] = add(
            (rgba * 255).round().astype(np.uint8), _UBYTE, "VEC4", _ARRAY_BUFFER, normalized=True
        )
        # the part ids themselves (an application-specific attribute), so the parts read back exactly
        # (kinemesh.data.meshes.read_face_parts); float32 holds integers exactly below 2^24
        attributes[PART_ATTRIBUTE] = add(np.asarray(seq.part_ids, np.float32), _FLOAT, "SCALAR", _ARRAY_BUFFER)
    targets = [
        {"POSITION": add(frames[t] - rest, _FLOAT, "VEC3", _ARRAY_BUFFER, minmax=True)} for t in range(T)
    ]
    times = (seq.times - seq.times[0]).astype(np.float32)
    if T > 1 and not np.all(np.diff(times) > 0):  # glTF needs strictly increasing keyframes
        times = np.arange(T, dtype=np.float32) / 30.0
    t_in = add(times, _FLOAT, "SCALAR", minmax=True)
    t_out = add(np.eye(T, dtype=np.float32).reshape(-1), _FLOAT, "SCALAR")
    names = [f"frame_{t:04d}" for t in range(T)]
    doc = {
        "asset": {"version": "2.0", "generator": "kinemesh"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0, "name": str(seq.meta.get("name", seq.category))}],
        "materials": [
            {
                "pbrMetallicRoughness": {
                    "baseColorFactor": [1, 1, 1, 1],
                    "metallicFactor": 0.0,
                    "roughnessFactor": 0.8,
                },
                "doubleSided": True,
            }
        ],
        "meshes": [
            {
                "name": str(seq.category),
                "primitives": [
                    {"attributes": attributes, "indices": idx, "mode": 4, "material": 0, "targets": targets}
                ],
                "weights": [1.0] + [0.0] * (T - 1),
                "extras": {"targetNames": names},  # Blender and three.js read morph names from here
            }
        ],
        "animations": [
            {
                "name": "sequence",
                "channels": [{"sampler": 0, "target": {"node": 0, "path": "weights"}}],
                "samplers": [{"input": t_in, "output": t_out, "interpolation": "LINEAR"}],
            }
        ],
        "accessors": accessors,
        "bufferViews": views,
        "buffers": [{"byteLength": len(blob)}],
        "extras": {
            "kinemesh_meta": json.loads(json.dumps(seq.meta, default=_json_default)),
            "up": "y" if y_up else "z",
        },
    }
    return doc, bytes(blob)


def export_glb(seq: KinematicSequence, path: str | os.PathLike, y_up: bool = True) -> Path:
    """Write ``seq`` as an animated binary glTF (``.glb``) with one morph target per frame, atomically.

    See :func:`glb_document` for the layout. Plays in Blender and three.js; trimesh reads the rest mesh and
    the target names (``mesh.metadata['targetNames']``).
    """
    seq.validate(path)
    doc, blob = glb_document(seq, y_up=y_up)
    js = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    js += b" " * (-len(js) % 4)
    blob += b"\x00" * (-len(blob) % 4)
    total = 12 + 8 + len(js) + 8 + len(blob)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(struct.pack("<4sII", b"glTF", 2, total))
            fh.write(struct.pack("<I4s", len(js), b"JSON"))
            fh.write(js)
            fh.write(struct.pack("<I4s", len(blob), b"BIN\x00"))
            fh.write(blob)
    return Path(path)


def read_glb(path: str | os.PathLike) -> tuple[dict, bytes]:
    """Split a ``.glb`` into its JSON document and binary chunk (for checks and tests)."""
    from kinemesh.errors import InputFileError

    data = Path(path).read_bytes()
    if len(data) < 20:
        raise InputFileError(path, "truncated GLB")
    magic, version, length = struct.unpack_from("<4sII", data, 0)
    if magic != b"glTF" or version != 2 or length != len(data):
        raise InputFileError(
            path, f"not a glTF 2.0 binary (magic {magic!r}, version {version}, length {length})"
        )
    jlen, jtype = struct.unpack_from("<I4s", data, 12)
    doc = json.loads(data[20 : 20 + jlen])
    off = 20 + jlen
    blob = b""
    if off < len(data):
        blen, btype = struct.unpack_from("<I4s", data, off)
        blob = data[off + 8 : off + 8 + blen]
    return doc, blob


def accessor_array(doc: dict, blob: bytes, index: int) -> np.ndarray:
    """Decode accessor ``index`` of a glTF document (tightly packed float/uint views only)."""
    acc = doc["accessors"][index]
    view = doc["bufferViews"][acc["bufferView"]]
    dtype = {_FLOAT: "<f4", _UINT: "<u4", _UBYTE: "u1"}[acc["componentType"]]
    width = {"SCALAR": 1, "VEC3": 3, "VEC4": 4}[acc["type"]]
    arr = np.frombuffer(
        blob,
        dtype=dtype,
        count=acc["count"] * width,
        offset=view.get("byteOffset", 0) + acc.get("byteOffset", 0),
    )
    return arr.reshape(acc["count"], width) if width > 1 else arr


def _json_default(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return str(obj)
