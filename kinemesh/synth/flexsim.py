"""Shared MuJoCo flex machinery for soft bodies (dim=3) and cloth (dim=2): stepping, divergence checks, and
the edge-strain measure of a recorded surface.

Flex elasticity in MuJoCo 4 needs ``integrator="discrete"``. A run counts as diverged when MuJoCo
raises ``mjWARN_BADQACC`` (it silently resets the state then), a position becomes non-finite, or the nodes fly
further than ``explode_factor`` object sizes from their start; diverged runs are retried with a smaller step by
``run_with_retries`` and never returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kinemesh.errors import SimulationDivergedError


@dataclass
class FlexRun:
    """What a flex simulation needs: the scene builder (called with the timestep), the per-step force callback,
    the number of recorded frames and the duration."""

    make_spec: Callable[[float], object]  # timestep (s) -> the scene's mujoco.MjSpec (kinemesh.synth.mjcf)
    duration: float  # seconds
    n_frames: int
    controller: Callable | None = None  # controller(model, data, t, vert_body) sets data.xfrc_applied
    explode_factor: float = 20.0
    tets: np.ndarray | None = None  # (k, 4) node indices, to detect collapsed (inverted) elements
    max_inverted_fraction: float = 0.005  # more inverted tetrahedra than this fraction = diverged
    size: float = 1.0  # object size (m), for the explosion check
    extra: dict = field(default_factory=dict)


def simulate_flex(run: FlexRun, timestep: float) -> tuple[np.ndarray, np.ndarray]:
    """Step the model and record flex vertex positions: (frames (T, n, 3), times (T,)).

    MuJoCo's text warnings (e.g. an under-converged stiffness solve) are captured, logged at debug level and
    counted in ``run.extra["mujoco_warnings"]`` instead of flooding stderr. Raises SimulationDivergedError on
    divergence.
    """
    import logging

    import mujoco

    captured: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda msg: captured.append(str(msg)))
    try:
        return _simulate_flex(run, timestep, mujoco)
    finally:
        mujoco.set_mju_user_warning(previous)
        run.extra["mujoco_warnings"] = run.extra.get("mujoco_warnings", 0) + len(captured)
        for msg in captured[:3]:
            logging.getLogger(__name__).debug("mujoco: %s", msg.strip())


def _simulate_flex(run: FlexRun, timestep: float, mujoco) -> tuple[np.ndarray, np.ndarray]:
    model = run.make_spec(timestep).compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    vert_body = np.asarray(model.flex_vertbodyid).copy()
    x0 = data.flexvert_xpos.copy()
    steps = int(round(run.duration / timestep))
    every = steps / run.n_frames
    frames, times = [], []
    next_rec = every
    bad = mujoco.mjtWarning.mjWARN_BADQACC
    for s in range(steps):
        t = s * timestep
        if run.controller is not None:
            data.xfrc_applied[:] = 0.0
            run.controller(model, data, t, vert_body)
        mujoco.mj_step(model, data)
        if data.warning[bad].number > 0:
            raise SimulationDivergedError(f"flex simulation diverged (bad acceleration) at t={t:.3f} s")
        if s + 1 >= next_rec - 1e-9 and len(frames) < run.n_frames:
            x = data.flexvert_xpos.copy()
            if not np.isfinite(x).all():
                raise SimulationDivergedError(f"flex simulation produced NaN at t={t:.3f} s")
            if np.abs(x - x0).max() > run.explode_factor * run.size:
                raise SimulationDivergedError(f"flex simulation exploded at t={t:.3f} s")
            if run.tets is not None:
                c = x[run.tets]
                vol = np.einsum("ij,ij->i", np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0]), c[:, 3] - c[:, 0])
                inverted = float(np.mean(vol <= 0))
                run.extra["max_inverted_fraction"] = max(
                    run.extra.get("max_inverted_fraction", 0.0), inverted
                )
                if inverted > run.max_inverted_fraction:
                    raise SimulationDivergedError(
                        f"flex simulation inverted {int((vol <= 0).sum())} tetrahedra at t={t:.3f} s"
                    )
            frames.append(x)
            times.append(t + timestep)
            next_rec += every
    return np.stack(frames), np.asarray(times)


def edges_of(faces: np.ndarray) -> np.ndarray:
    """Unique undirected edges (e, 2) of a triangle mesh."""
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    return np.unique(np.sort(e, axis=1), axis=0)


def edge_ratios(rest: np.ndarray, frames: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Edge length over rest length, (T, e), of every frame (T, n, 3) of a mesh with rest vertices (n, 3)."""
    e = edges_of(faces)
    L0 = np.linalg.norm(rest[e[:, 0]] - rest[e[:, 1]], axis=-1)
    return np.linalg.norm(frames[:, e[:, 0]] - frames[:, e[:, 1]], axis=-1) / np.maximum(L0, 1e-12)


def edge_strain(rest: np.ndarray, frames: np.ndarray, faces: np.ndarray, q: float = 95.0) -> np.ndarray:
    """Strain of each frame, (T,): the ``q``-th percentile over the surface edges of |length / rest - 1|
    (0.1 = edges 10% longer or shorter). Rigid motions give 0; a percentile, not the maximum, so that one
    sliver edge does not decide it."""
    return np.percentile(np.abs(edge_ratios(rest, frames, faces) - 1.0), q, axis=1)


def run_with_retries(run: FlexRun, timestep: float, retries: int = 2) -> tuple[np.ndarray, np.ndarray, float]:
    """``simulate_flex`` with the step halved after each divergence. Returns (frames, times, timestep used)."""
    last = None
    for _ in range(retries + 1):
        try:
            frames, times = simulate_flex(run, timestep)
            return frames, times, timestep
        except SimulationDivergedError as exc:
            last = exc
            timestep *= 0.5
    raise SimulationDivergedError(f"{last} (after {retries} retries with smaller steps)")
