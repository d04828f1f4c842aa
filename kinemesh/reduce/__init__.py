"""kinemesh.reduce: active-subspace reduction of a kinematic latent space (NeuROK Sec. 4.3), and ``bind``, the
one entry point from a checkpoint and a mesh to a reduced decoder."""

from kinemesh.reduce.active_subspace import ReducedDecoder, Subspace, fit, outer_product_matrix
from kinemesh.reduce.bind import Binding, ReductionConfig, bind

__all__ = ["Binding", "ReducedDecoder", "ReductionConfig", "Subspace", "bind", "fit", "outer_product_matrix"]
