"""kinemesh.dynamics: latent Lagrangian dynamics (NeuROK Sec. 5): system, equations of motion, boundary
conditions, integrators.

The core is functional: ``step(system, state, dt) -> state``; ``simulate`` adds fixed substeps with a
stability guard; ``solve_initial_state`` turns vertex positions/velocities into (q0, qd0).
"""

from kinemesh.dynamics.boundary import (InitialState, impulse_velocity, solve_initial_state, solve_positions,
                                        solve_velocities)
from kinemesh.dynamics.eom import Kinematics, acceleration, energies, kinematics, mass_matrix
from kinemesh.dynamics.integrators import INTEGRATORS, Rollout, StepRejected, simulate, step
from kinemesh.dynamics.system import Handles, PointForce, Spring, State, System, Wind, make_handles

__all__ = [
    "Handles", "InitialState", "INTEGRATORS", "Kinematics", "PointForce", "Rollout", "Spring", "State",
    "StepRejected", "System", "Wind", "acceleration", "energies", "impulse_velocity", "kinematics",
    "make_handles", "mass_matrix", "simulate", "solve_initial_state", "solve_positions", "solve_velocities",
    "step",
]
