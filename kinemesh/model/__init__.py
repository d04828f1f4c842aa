"""kinemesh.model: the NeuROK-style conditional VAE (Sec. 4), its training and checkpoints.

``load_model(checkpoint_dir=None, device="cpu")`` returns a ``KinematicModel``; ``model.instance(vertices,
faces)`` binds it to a mesh and returns an ``InstanceDecoder`` (see ``interface.py``).
"""

from kinemesh.model.api import KinematicModel, NeuralInstanceDecoder, load_model, untrained_model
from kinemesh.model.config import Config, ModelConfig, TrainConfig, preset
from kinemesh.model.interface import InstanceDecoder

__all__ = ["InstanceDecoder", "KinematicModel", "NeuralInstanceDecoder", "load_model", "untrained_model",
           "Config", "ModelConfig", "TrainConfig", "preset"]
