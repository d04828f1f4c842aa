"""Synthetic 4D data from real physics (MuJoCo 4): articulated objects, soft bodies and cloth.

Modules
-------
- ``categories``: ``CATEGORIES`` (name -> builder(rng) -> ArticulatedObject), 15 procedural categories;
  ``build(category, rng)`` rejects instances whose parts interpenetrate.
- ``assemblies``: ``random_assembly(rng)``, random trees of primitive parts with valid joints.
- interpenetration checks and ``moves`` (the no-motion check) live in ``kinemesh.geometry.validity``.
- ``mjcf``: ``articulated_to_mjcf(obj)`` (meshes inlined), ``load_model``, ``body_transforms``.
- ``articulated_motion``: ``kinematic_sequence`` (random configurations), ``dynamic_sequence`` (MuJoCo).
- ``elastic``: ``elastic_sequence`` (flexcomp dim=3 on a tetrahedral cage, ``tetra``).
- ``cloth``: ``cloth_sequence`` (flexcomp dim=2).
- ``dataset``: ``generate(SynthConfig)``, the engine of ``kinemesh synth``; ``preview``: the contact sheet;
  ``examples``: the bundled example objects; ``map_items`` runs items on a process pool or Dask distributed.
- ``real``: ``generate_real(RealConfig)``, ``kinemesh synth --from-urdf`` (real PartNet-Mobility / URDF objects).
"""
