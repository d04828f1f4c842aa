"""4D data: the KinematicSequence format, manifests, loaders and exporters.

* :mod:`kinemesh.data.sequence` - ``KinematicSequence`` (the ``.npz`` contract).
* :mod:`kinemesh.data.articulated` - ``Part``, ``Joint``, ``ArticulatedObject`` (forward kinematics).
* :mod:`kinemesh.data.loaders` - ``load_mesh``, ``load_sequence`` (npz / mesh-frame folder / ``.anime`` /
  PartNet-Mobility folder / URDF), ``load_anime``, ``load_mesh_folder``.
* :mod:`kinemesh.data.partnet` - ``load_articulated`` (Z up), ``write_partnet_folder`` (Y-up files).
* :mod:`kinemesh.data.urdf` - the safe URDF reader used by ``partnet``.
* :mod:`kinemesh.data.exporters` - ``export_glb`` (morph-target animation), ``export_obj_sequence``,
  ``export_npz``, ``export_anime``, ``export_obj``.
* :mod:`kinemesh.data.manifest` - ``read_manifest``, ``write_manifest``, ``assign_splits``, ``entry_for``.
"""

from kinemesh.data.sequence import KinematicSequence

__all__ = ["KinematicSequence"]
