"""kinemesh.reduce: active-subspace reduction of a kinematic latent space (NeuROK Sec. 4.3)."""

from kinemesh.reduce.active_subspace import ReducedDecoder, Subspace, fit, outer_product_matrix

__all__ = ["ReducedDecoder", "Subspace", "fit", "outer_product_matrix"]
