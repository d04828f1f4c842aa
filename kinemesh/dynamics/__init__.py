"""kinemesh.dynamics: latent Lagrangian dynamics (NeuROK Sec. 5): system, equations of motion, boundary
conditions, integrators.

The core is functional: ``step(system, state, dt) -> state``; ``integrate`` adds fixed substeps with a
stability guard; ``solve_initial_state`` turns vertex positions/velocities into (q0, qd0);
``simulate_mesh(decoder, vertices, faces, SimulationSpec(...))`` is the whole ``kinemesh simulate`` pipeline.
"""

from kinemesh.dynamics.boundary import (InitialState, impulse_velocity, solve_initial_state, solve_positions,
                                        solve_velocities)
from kinemesh.dynamics.eom import Kinematics, acceleration, energies, kinematics, mass_matrix
from kinemesh.dynamics.integrators import INTEGRATORS, Rollout, StepRejected, integrate, step
from kinemesh.dynamics.linear import LinearDecoder
from kinemesh.dynamics.scene import SimulationResult, SimulationSpec, build_system, initial_conditions, simulate_mesh
from kinemesh.dynamics.system import Handles, PointForce, Spring, State, System, Wind, make_handles

__all__ = [
    "Handles", "InitialState", "INTEGRATORS", "Kinematics", "LinearDecoder", "PointForce", "Rollout",
    "SimulationResult", "SimulationSpec", "Spring", "State", "StepRejected", "System", "Wind", "acceleration",
    "build_system", "energies", "impulse_velocity", "initial_conditions", "kinematics", "make_handles",
    "integrate", "mass_matrix", "simulate_mesh", "solve_initial_state", "solve_positions", "solve_velocities",
    "step",
]
