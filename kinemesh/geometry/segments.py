"""Segmented inputs for the kinematic model: a mesh file or a URDF / PartNet-Mobility folder loaded as the
working mesh with one part id per vertex, so that a part made of many components moves as one.

Parts come, in this order, from a ``--labels`` file, the URDF's links, OBJ ``o`` / ``g`` groups, GLB nodes
(``kinemesh.data.meshes.read_face_parts``), or, for a plain mesh, the automatic grouping of its connected
components (``kinemesh.geometry.kind.group_components``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kinemesh.data.articulated import face_parts_of, part_owners
from kinemesh.data.meshes import DEFAULT_MAX_VERTICES, WorkingMesh, load_mesh, read_face_parts, working_mesh
from kinemesh.errors import InputFileError
from kinemesh.geometry.kind import group_components


def is_articulated_input(path: str | os.PathLike) -> bool:
    """True for a URDF file or a folder (a PartNet-Mobility object)."""
    p = Path(path)
    return p.is_dir() or p.suffix.lower() == ".urdf"


def link_parts(obj) -> tuple[np.ndarray, list[str]]:
    """The parts of an ArticulatedObject's links: (to_part (n_links,) int, the part of each of ``obj.parts``,
    indexing ``names``), where a link welded to its parent by a fixed joint (a handle on its door, a knob on its
    drawer) belongs to the part of its nearest movable ancestor or the root, so it moves with it."""
    return part_owners([q.name for q in obj.parts], {j.child: j.parent for j in obj.joints if not j.movable})


def sequence_face_parts(seq) -> tuple[np.ndarray | None, list[str]]:
    """The parts of a KinematicSequence's faces, as :func:`link_parts` makes them from its links: (face
    part (m,) int indexing ``names``, names), or (None, []) when the sequence has no ``part_ids``
    (:func:`kinemesh.data.articulated.face_parts_of`)."""
    if seq.part_ids is None:
        return None, []
    return face_parts_of(seq.part_ids, seq.faces, seq.meta)


def segmented_object(obj, max_vertices: int | None = DEFAULT_MAX_VERTICES, name: str = "object") -> WorkingMesh:
    """The working mesh of an ArticulatedObject at rest, its links as parts (``part_ids`` index
    ``part_names``, fixed links merged into their parent: :func:`link_parts`)."""
    v, f, pid = obj.merged({})
    to_part, kept = link_parts(obj)
    wm = working_mesh(v, f, max_vertices, to_part[pid[np.asarray(f)[:, 0]]], name=name)
    wm.part_names, wm.part_source, wm.articulation = kept, "links", obj
    return wm


def load_segmented(path: str | os.PathLike, labels: str | os.PathLike | None = None, auto_parts: bool = True,
                   max_vertices: int | None = DEFAULT_MAX_VERTICES) -> WorkingMesh:
    """Load ``path`` (mesh file, URDF or PartNet-Mobility folder) as a :class:`WorkingMesh` with
    ``part_ids`` per working vertex (see module doc). Vertex ids of a mesh file are the file's; those of a
    URDF / folder are the vertices of ``kinemesh convert FOLDER rest.obj`` (the links' meshes in order).

    ``auto_parts``: group the components of a plain mesh (False: every connected component moves on its
    own, the model's default). Raises InputFileError naming the file.
    """
    p = Path(path)
    if not p.exists():
        raise InputFileError(p, "file or folder not found")
    if is_articulated_input(p):
        if labels is not None:
            raise InputFileError(labels, f"{p.name} is segmented by its links already; --labels is for mesh files")
        from kinemesh.data.partnet import load_articulated

        return segmented_object(load_articulated(p, max_vertices=max_vertices), max_vertices, name=str(p))
    face_parts, names, source = read_face_parts(p, labels)
    raw = load_mesh(p, max_vertices=None, process=False)  # the file's vertices and faces, read once
    v, f = np.asarray(raw.vertices), np.asarray(raw.faces)
    if face_parts is None and auto_parts:
        groups = group_components(v, f)
        if groups.max() >= 1:
            face_parts, names, source = groups[f[:, 0]], [f"part_{i}" for i in range(groups.max() + 1)], "auto"
    wm = working_mesh(v, f, max_vertices, face_parts, name=str(p))
    wm.part_names, wm.part_source = names, source
    return wm
