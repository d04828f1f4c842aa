"""kinemesh: turn a static 3D object into a dynamic, interactive 4D object."""

__version__ = "0.1.0"

from kinemesh.errors import KinemeshError  # noqa: E402

__all__ = ["KinemeshError", "__version__"]
