"""4D data: the KinematicSequence format, manifests, loaders and exporters.

* :mod:`kinemesh.data.sequence` - ``KinematicSequence`` (the ``.npz`` contract).
* :mod:`kinemesh.data.articulated` - ``Part``, ``Joint``, ``ArticulatedObject`` (forward kinematics).
* :mod:`kinemesh.data.meshes` - ``load_mesh`` (OBJ / PLY / STL / glTF / OFF, decimated to a budget).
* :mod:`kinemesh.data.loaders` - ``load_sequence`` (npz / mesh-frame folder / ``.anime`` /
  PartNet-Mobility folder / URDF), ``load_anime``, ``load_mesh_folder``.
* :mod:`kinemesh.data.partnet` - ``load_articulated`` (the URDF's world frame, Z up), ``write_partnet_folder``.
* :mod:`kinemesh.data.urdf` - URDF read (yourdfpy behind our safety checks) and written (``write_urdf``).
* :mod:`kinemesh.data.usd` - USD export: UsdPhysics articulations and time-sampled sequences (usd-core).
* :mod:`kinemesh.data.exporters` - ``export_glb`` (morph-target animation), ``export_obj_sequence``,
  ``export_npz``, ``export_anime``, ``export_obj``.
* :mod:`kinemesh.data.manifest` - ``read_manifest``, ``write_manifest``, ``assign_splits``, ``entry_for``.
"""

from kinemesh.data.sequence import KinematicSequence

__all__ = ["KinematicSequence"]
