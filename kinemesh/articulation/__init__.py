"""Articulation inference (GEOPARD from a static segmented shape, ATOP from observed motion), text-prompted
part selection and URDF/MJCF export.

Modules: ``parts`` (segmented inputs), ``candidates`` (box candidate motions and their validity labels; the
sweep checks, no detachment, no collision, are :mod:`kinemesh.geometry.validity`), ``predictor`` (network), ``infer`` (``articulate`` / heuristic baseline),
``from_motion`` (ATOP stage 2), ``prompt`` (text -> part), ``export`` (JSON, URDF, MJCF, USD), ``train``.
"""
