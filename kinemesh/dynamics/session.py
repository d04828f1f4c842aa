"""An interactive dynamics session on one bound mesh: drag a vertex (boundary-condition solve, NeuROK Sec. 5.3),
let go and integrate the latent Euler-Lagrange equations (Sec. 5) a few frames at a time. ``kinemesh view``
drives it; positions are metres, q is in prior standard deviations.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from kinemesh.dynamics.boundary import solve_positions
from kinemesh.dynamics.integrators import integrate
from kinemesh.dynamics.scene import (LEAST_MOTION, SimulationSpec, build_system, relax_stops, rest_offset,
                                     stiffen_stops, torch_threads)
from kinemesh.dynamics.system import State, make_handles


class Session:
    """The mechanical system of ``decoder`` bound to a rest mesh (vertices (N, 3) m, faces (M, 3)) under
    ``spec`` (per-kind mass, stiffness, damping, barrier: :func:`kinemesh.dynamics.scene.build_system`);
    ``articulation`` / ``part_names``: the joints an articulated object's parts move along (``build_system``).

    Attributes
    ----------
    system, info : the System and what ``build_system`` chose (kind, mass, rest-fit RMS, ...).
    q_rest : (k,) float64, the state whose decoded shape best matches the rest mesh.
    rest_offset : (N, 3) float32, rest mesh minus the decoded rest state, added to every decoded pose so the
        mesh starts exactly as loaded (the model supplies the motion).
    """

    def __init__(self, decoder, vertices: np.ndarray, faces: np.ndarray, spec: SimulationSpec, articulation=None,
                 part_names=None):
        with torch_threads(1):
            self.system, self.info = build_system(decoder, vertices, faces, spec, articulation=articulation,
                                                  part_names=part_names)
        self.decoder = self.system.decoder  # as the dynamics see it (an articulated base held, parts on their joints)
        self.q_rest = self.system.q_rest.detach().cpu().numpy().astype(np.float64)
        offset = rest_offset(self.decoder, self.system.q_rest)
        self.rest_offset = np.asarray(offset, np.float32).reshape(np.shape(vertices))
        self._handles: dict[int, object] = {}

    def vertices(self, q, rest_offset: bool = True) -> np.ndarray:
        """Decoded vertices q (..., k) -> (..., N, 3) float32, with the rest offset unless ``rest_offset`` is
        False."""
        with torch.no_grad():
            v = self.decoder.vertices(torch.as_tensor(q, dtype=self.decoder.mu_cond.dtype)).detach().cpu().numpy()
        return (v + self.rest_offset if rest_offset else v).astype(np.float32)

    def drag(self, vertex: int, target, q: np.ndarray, iters: int = 4) -> tuple[np.ndarray, float]:
        """q (k,) that puts displayed vertex ``vertex`` at ``target`` (3,) m (plausible states only, ``iters``
        Levenberg-Marquardt steps from ``q``) and the remaining distance (m)."""
        if vertex not in self._handles:
            self._handles = {vertex: make_handles(self.decoder, [vertex])}
        goal = np.asarray(target, np.float64).reshape(3) - self.rest_offset[vertex]  # the solver sees decoded points
        q, rms = solve_positions(self.system, self._handles[vertex], goal[None], q_init=torch.as_tensor(q),
                                 n_starts=1, iters=iters, least_motion=LEAST_MOTION,
                                 polish=True)
        return q.detach().cpu().numpy().astype(np.float64), float(rms)

    def rollout(self, q0, qd0, n_frames: int, fps: float, substeps: int = 2, integrator: str = "midpoint",
                chunk: int = 3) -> Iterator[tuple[np.ndarray, list]]:
        """Integrate from (q0, qd0) (k,) for ``n_frames`` frames (the first is q0) in chunks of ``chunk`` frames:
        yields (q (m, k) float64 of the new frames, step warnings). A step the stability guard had to reduce is
        kept for the following chunks. Raises SimulationDivergedError as :func:`~kinemesh.dynamics.integrate`."""
        state = State(torch.as_tensor(q0, dtype=torch.float64), torch.as_tensor(qd0, dtype=torch.float64))
        relax_stops(self.system, state.q)  # a part released where the model leaves it penetrating is not shot out
        # a part flung at a joint stop is caught there, in the substeps that resolve the stiffened stop
        substeps = max(substeps, stiffen_stops(self.system, state, fps))
        done = 1
        while done < n_frames:
            m = min(chunk, n_frames - done)
            roll = integrate(self.system, state, n_frames=m + 1, fps=fps, substeps=substeps, integrator=integrator)
            substeps = max(substeps, int(roll.substeps[-1]))
            state = State(torch.as_tensor(roll.q[-1]), torch.as_tensor(roll.qd[-1]), float(roll.times[-1]))
            done += m
            yield np.asarray(roll.q[1:], np.float64), list(roll.warnings)
