"""Motion probes of a segmented articulated mesh: its parts moved along their joints (given, or predicted from
the static shape by the articulation predictor), for the reduced coordinates of ``kinemesh.reduce.bind``."""

from __future__ import annotations

import logging

import numpy as np

from kinemesh.data.articulated import ArticulatedObject
from kinemesh.errors import KinemeshError

log = logging.getLogger(__name__)


def predicted_object(vertices: np.ndarray, faces: np.ndarray, part_ids: np.ndarray, part_names: list[str],
                     seed: int = 0) -> ArticulatedObject:
    """The parts of a segmented mesh (vertices (N, 3) m, faces (M, 3), part id per vertex indexing
    ``part_names``) with joints predicted from the static shape (``kinemesh.articulation.infer.articulate``).
    Raises KinemeshError when fewer than two parts have geometry."""
    from kinemesh.articulation.infer import articulate, to_articulated
    from kinemesh.articulation.parts import parts_from_vertex_ids, static_object

    parts = parts_from_vertex_ids(np.asarray(vertices, np.float64), np.asarray(faces, np.int64),
                                  np.asarray(part_ids).reshape(-1), part_names)
    obj = static_object(parts)
    return to_articulated(obj, articulate(obj, seed=seed))


def articulation_for(vertices: np.ndarray, faces: np.ndarray, part_ids, part_names: list[str] | None,
                     obj: ArticulatedObject | None = None, seed: int = 0
                     ) -> tuple[ArticulatedObject | None, str]:
    """(the articulation whose joints a segmented articulated mesh's parts move along, or None; where the joints
    came from: "given", "predicted" or why there are none): ``obj`` when it has a movable joint (a URDF /
    PartNet-Mobility input), else the joints predicted from the static shape. None when the mesh has fewer than
    two parts or no movable joint results."""
    if part_ids is None or part_names is None or len(np.unique(part_ids)) < 2:
        return None, "fewer than two parts"
    source = "given"
    if obj is None or not obj.movable_joints:
        try:
            obj, source = predicted_object(vertices, faces, part_ids, part_names, seed=seed), "predicted"
        except KinemeshError as exc:
            log.info("no articulation (%s)", exc)
            return None, f"no articulation ({exc})"
    if not obj.movable_joints:
        return None, f"no movable joint ({source})"
    return obj, source


def motion_probes(vertices: np.ndarray, faces: np.ndarray, part_ids, part_names: list[str] | None,
                  obj: ArticulatedObject | None = None, seed: int = 0
                  ) -> tuple[np.ndarray | None, str, ArticulatedObject | None]:
    """(probes (n, N, 3) or None, where the joints came from, the articulation used or None) of a segmented
    articulated mesh: its parts moved along the joints of ``articulation_for`` (the same arguments). The
    articulation is what ``kinemesh.dynamics`` moves the parts along."""
    from kinemesh.geometry.probes import articulated_probes

    obj, source = articulation_for(vertices, faces, part_ids, part_names, obj, seed=seed)
    if obj is None:
        return None, source, None
    return articulated_probes(vertices, part_ids, part_names, obj, seed=seed), source, obj


def probes_for(vertices: np.ndarray, faces: np.ndarray, part_ids, part_names, kind: str,
               obj: ArticulatedObject | None = None, seed: int = 0
               ) -> tuple[np.ndarray | None, str, ArticulatedObject | None]:
    """Motion probes for ``kinemesh.reduce.bind`` of a mesh of resolved ``kind``: for an articulated one, its
    parts moved along the joints of ``obj`` (a URDF / PartNet-Mobility input's ``WorkingMesh.articulation``),
    else along joints predicted from the static shape (``motion_probes``); None for elastic and cloth objects
    (bind makes theirs from the geometry). Returns (probes or None, where the joints came from, the articulation
    or None)."""
    if kind != "articulated":
        return None, "geometry", None
    return motion_probes(vertices, faces, part_ids, part_names, obj, seed=seed)
