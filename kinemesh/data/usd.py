"""USD export (OpenUSD through ``pxr`` from the optional ``usd-core``): articulated objects with UsdPhysics
joints, and KinematicSequences as time-sampled mesh points.

Both stages are Z up, metres (``metersPerUnit`` 1), in the kinemesh frame. Articulated object
(:func:`write_usd_articulated`): ``/<object>`` carries ``PhysicsArticulationRootAPI``; each part with geometry
is a rigid body ``/<object>/<part>`` (``PhysicsRigidBodyAPI``, mass from density; a part without geometry,
e.g. a screw joint's helper link, gets 1 g) holding its mesh
``mesh`` (``PhysicsCollisionAPI``, convex decomposition); bodies sit at the identity at rest, so mesh points
are the rest vertices. Joints live under ``/<object>/joints``: ``PhysicsRevoluteJoint`` /
``PhysicsPrismaticJoint`` with ``body0`` the parent, ``body1`` the child, ``localPos0 = localPos1`` the
joint origin and ``localRot0 = localRot1`` the rotation taking the joint's X axis (``physics:axis = "X"``)
onto the kinemesh axis, limits from ``Joint.rest_limits()`` (degrees for revolute joints as UsdPhysics
wants, metres for prismatic ones; continuous joints have none); fixed joints are ``PhysicsFixedJoint``, and
the root part is fixed to the world. The rest pose (every joint value 0) is the initial state. Prim names
come from :func:`kinemesh.atomic.safe_names` (identifiers); the original names are kept in
``kinemesh:name``. Sequence (:func:`write_usd_sequence`): ``/<name>/mesh`` with ``points`` time-sampled
per frame at time code ``t * timeCodesPerSecond`` (the frame rate), the rest vertices as default value.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kinemesh.atomic import atomic_path, safe_names
from kinemesh.errors import MissingDependencyError


def _pxr():
    try:
        from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, Vt
    except ImportError:
        raise MissingDependencyError("usd-core", "USD export", extra="usd") from None
    return Gf, Sdf, Usd, UsdGeom, UsdPhysics, Vt


def _stage(path: Path, fps: float | None = None):
    """A new stage at ``path`` (Z up, metres); with ``fps``, time codes per second = frames per second."""
    _, _, Usd, UsdGeom, _, _ = _pxr()
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    if fps:
        stage.SetTimeCodesPerSecond(fps)
    return stage


def _mesh(stage, prim_path: str, vertices: np.ndarray, faces: np.ndarray):
    _, _, _, UsdGeom, _, Vt = _pxr()
    mesh = UsdGeom.Mesh.Define(stage, prim_path)
    mesh.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(vertices, dtype=np.float32)))
    mesh.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(faces), 3, dtype=np.int32)))
    mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(np.ascontiguousarray(faces, dtype=np.int32).ravel()))
    mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    return mesh


def _x_to(axis: np.ndarray):
    """The rotation (Gf.Quatf) taking +X onto the unit ``axis``."""
    Gf = _pxr()[0]
    rot = Gf.Rotation(Gf.Vec3d(1, 0, 0), Gf.Vec3d(*map(float, axis))).GetQuat()
    return Gf.Quatf(rot.GetReal(), Gf.Vec3f(rot.GetImaginary()))


def write_usd_articulated(obj, path: str | os.PathLike, density: float = 500.0) -> Path:
    """Write ``obj`` (an ArticulatedObject) as a USD stage with UsdPhysics bodies and joints (module
    docstring); ``density`` kg/m^3 of the parts. Atomic. Raises MissingDependencyError without usd-core."""
    Gf, Sdf, _, UsdGeom, UsdPhysics, _ = _pxr()
    path = Path(path)
    pn = safe_names((p.name for p in obj.parts), identifier=True)
    jn = safe_names((j.name for j in obj.joints), identifier=True)
    scope = next(s for s in ("joints", "joints_", "kinemesh_joints") if s.lower() not in {v.lower() for v in pn.values()})
    root = f"/{safe_names([obj.name], identifier=True)[obj.name]}"
    with atomic_path(path) as tmp:
        stage = _stage(tmp)
        top = UsdGeom.Xform.Define(stage, root).GetPrim()
        stage.SetDefaultPrim(top)
        UsdPhysics.ArticulationRootAPI.Apply(top)
        body = {}
        for part in obj.parts:
            prim = UsdGeom.Xform.Define(stage, f"{root}/{pn[part.name]}").GetPrim()
            prim.CreateAttribute("kinemesh:name", Sdf.ValueTypeNames.String).Set(part.name)
            UsdPhysics.RigidBodyAPI.Apply(prim)
            body[part.name] = prim.GetPath()
            if not len(part.vertices):  # a helper link (screw joint): a tiny mass keeps its joints well posed
                UsdPhysics.MassAPI.Apply(prim).CreateMassAttr(1e-3)
                continue
            UsdPhysics.MassAPI.Apply(prim).CreateDensityAttr(density)
            mesh = _mesh(stage, f"{root}/{pn[part.name]}/mesh", part.vertices, part.faces).GetPrim()
            UsdPhysics.CollisionAPI.Apply(mesh)
            UsdPhysics.MeshCollisionAPI.Apply(mesh).CreateApproximationAttr(UsdPhysics.Tokens.convexDecomposition)
        jroot = f"{root}/{scope}"
        UsdGeom.Scope.Define(stage, jroot)
        fix = UsdPhysics.FixedJoint.Define(stage, f"{jroot}/world_{pn[obj.root]}")  # the root part: to the world
        fix.CreateBody1Rel().SetTargets([body[obj.root]])
        for j in obj.joints:
            kind = {"revolute": UsdPhysics.RevoluteJoint, "continuous": UsdPhysics.RevoluteJoint,
                    "prismatic": UsdPhysics.PrismaticJoint, "fixed": UsdPhysics.FixedJoint}[j.type]
            uj = kind.Define(stage, f"{jroot}/{jn[j.name]}")
            uj.GetPrim().CreateAttribute("kinemesh:name", Sdf.ValueTypeNames.String).Set(j.name)
            uj.CreateBody0Rel().SetTargets([body[j.parent]])
            uj.CreateBody1Rel().SetTargets([body[j.child]])
            rot = _x_to(j.axis if j.movable else np.array([1.0, 0.0, 0.0]))
            for pos, r in ((uj.CreateLocalPos0Attr, uj.CreateLocalRot0Attr), (uj.CreateLocalPos1Attr, uj.CreateLocalRot1Attr)):
                pos(Gf.Vec3f(*map(float, j.origin)))
                r(rot)
            if j.movable:
                uj.CreateAxisAttr(UsdPhysics.Tokens.x)
                limits = j.rest_limits() if j.type != "continuous" else None
                if limits is not None:
                    scale = np.degrees(1.0) if j.type == "revolute" else 1.0
                    uj.CreateLowerLimitAttr(float(limits[0] * scale))
                    uj.CreateUpperLimitAttr(float(limits[1] * scale))
        stage.GetRootLayer().Save()
    return path


def write_usd_sequence(seq, path: str | os.PathLike) -> Path:
    """Write a KinematicSequence as a USD stage: one mesh whose ``points`` are time-sampled per frame
    (module docstring). Atomic. Raises MissingDependencyError without usd-core."""
    _, _, _, UsdGeom, _, Vt = _pxr()
    path = Path(path)
    seq.validate(path)
    t = np.asarray(seq.times, dtype=np.float64)
    fps = (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 and t[-1] > t[0] else 30.0
    name = safe_names([str(seq.meta.get("name") or seq.meta.get("category") or "sequence")], identifier=True)
    with atomic_path(path) as tmp:
        stage = _stage(tmp, fps)
        top = UsdGeom.Xform.Define(stage, f"/{next(iter(name.values()))}").GetPrim()
        stage.SetDefaultPrim(top)
        points = _mesh(stage, f"{top.GetPath()}/mesh", seq.rest_vertices, seq.faces).GetPointsAttr()
        codes = t * fps
        for code, frame in zip(codes, seq.frames):
            points.Set(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(frame, dtype=np.float32)), float(code))
        stage.SetStartTimeCode(float(codes[0]))
        stage.SetEndTimeCode(float(codes[-1]))
        stage.GetRootLayer().Save()
    return path
