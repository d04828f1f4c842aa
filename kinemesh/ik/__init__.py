"""kinemesh.ik: inverse kinematics (fit a latent state to a target mesh or point cloud) and baselines."""

from kinemesh.ik.solver import IKConfig, IKResult, chamfer, solve
from kinemesh.ik.target import Target, make_target

__all__ = ["IKConfig", "IKResult", "Target", "chamfer", "make_target", "solve"]
