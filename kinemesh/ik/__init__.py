"""kinemesh.ik: inverse kinematics (fit a latent state to a target mesh or point cloud) and baselines."""

from kinemesh.ik.solver import IKConfig, IKResult, chamfer, chamfer_reference, solve
from kinemesh.ik.target import Target, make_target

__all__ = ["IKConfig", "IKResult", "Target", "chamfer", "chamfer_reference", "make_target", "solve"]
