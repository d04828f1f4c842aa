"""The contract between the kinematic model and everything that uses it (reduce, ik, dynamics, viz).

The model, bound to one rest mesh, is an ``InstanceDecoder``: a differentiable map from a latent state z to
the positions of the rest mesh's sampled surface points, in the rest mesh's own frame (metres, Z up).
Reduction, inverse kinematics and dynamics only ever see this interface, so they are tested with small toy
decoders and work unchanged with the trained network.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class InstanceDecoder(Protocol):
    """A kinematic state space of one object.

    Attributes
    ----------
    latent_dim : int, D.
    mu_cond : (D,) tensor, the prior mean for this instance (prior is N(mu_cond, I)).
    rest_points : (P, 3) tensor, sampled surface points of the rest mesh, metres.
    rest_vertices : (N, 3) tensor, rest mesh vertices, metres.
    """

    latent_dim: int
    mu_cond: torch.Tensor
    rest_points: torch.Tensor
    rest_vertices: torch.Tensor

    def points(self, z: torch.Tensor) -> torch.Tensor:
        """Deformed sample points. z: (..., D) -> (..., P, 3) metres. Differentiable in z
        (reverse mode and ``torch.func.jvp`` forward mode)."""
        ...

    def vertices(self, z: torch.Tensor) -> torch.Tensor:
        """Deformed mesh vertices. z: (..., D) -> (..., N, 3) metres (points transferred to vertices
        by averaging the k nearest sampled points, NeuROK Sec. 4)."""
        ...
