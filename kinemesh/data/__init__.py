"""4D data: the KinematicSequence format, manifests, loaders and exporters."""

from kinemesh.data.sequence import KinematicSequence

__all__ = ["KinematicSequence"]
