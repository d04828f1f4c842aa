"""Articulation from observed motion (ATOP stage 2, Sec. 4.3.2) plus continuous refinement and parents.

Two kinds of observations:

- with correspondences (a :class:`KinematicSequence` with ``part_ids``, or samples of the kinematic model,
  i.e. vertices per frame): every part's rigid motion per frame is fitted by Procrustes (Kabsch);
- point clouds without correspondences: ATOP's candidate selection. For the part's 60 box candidates (7 ATOP
  origins x 6 directions, extended to the 3 x 3 grid of axis lines, see :mod:`candidates`) the motion value
  of each frame is searched on a grid, and the candidate with the lowest Chamfer distance between the
  articulated model (moved part + static rest) and the observed cloud wins; the part's per-frame poses are
  then refined by ICP against the cloud.

Either way the per-frame rigid motions relative to the parent are reduced to one joint: rotation axis from
the rotation vectors (SVD), origin from ``(I - R_t) o = t_t`` (least squares), then all of axis, origin and
per-frame values are refined jointly with ``scipy.optimize.least_squares`` on point residuals. Parents: the
tree is grown from the least-moving part (Prim-like), attaching at each step the part whose motion relative
to a part already in the tree is best explained by a single revolute/prismatic joint (or is rigid: fixed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kinemesh.data.articulated import axis_angle_matrix, joint_motion
from kinemesh.errors import KinemeshError
from kinemesh.geometry.procrustes import kabsch_matrix


@dataclass
class MotionFit:
    """A joint fitted to observed motion (world frame at rest; metres / radians)."""

    part: str
    type: str  # fixed | revolute | prismatic
    axis: np.ndarray
    origin: np.ndarray
    values: np.ndarray  # (T,) joint value per frame
    residual: float  # mean point error of the 1-DoF model (m)
    parent: str = ""
    info: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.part

    @property
    def limits(self) -> tuple[float, float] | None:
        if self.type == "fixed":
            return None
        return float(min(0.0, self.values.min())), float(max(0.0, self.values.max()))


# ---------------------------------------------------------------------------------------------- rigid fits
def rotation_vector(R: np.ndarray) -> np.ndarray:
    """Axis * angle (3,) of a rotation matrix (angle in [0, pi])."""
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(R).as_rotvec()


def _apply(T: np.ndarray, p: np.ndarray) -> np.ndarray:
    return p @ T[:3, :3].T + T[:3, 3]


def fit_joint(rel: np.ndarray, points: np.ndarray, name: str = "part", size: float | None = None,
              refine: bool = True, force_type: str | None = None) -> MotionFit:
    """One joint from per-frame relative rigid motions ``rel`` (T, 4, 4) of a part with rest ``points`` (n, 3).

    Rotation below 0.5 deg and translation below 0.2% of ``size`` (default: the part's extent) in every frame
    -> fixed; rotation below 1 deg -> prismatic; else revolute (``force_type`` skips this decision, e.g. when
    a Chamfer-selected candidate already fixed the type). Returns the refined fit.
    """
    size = size or float(np.max(np.ptp(points, axis=0)))
    rv = np.array([rotation_vector(T[:3, :3]) for T in rel])
    ang = np.linalg.norm(rv, axis=1)
    tr = np.array([T[:3, 3] for T in rel])
    moved = np.array([np.linalg.norm(_apply(T, points) - points, axis=1).mean() for T in rel])
    if force_type is None and np.degrees(ang.max()) < 0.5 and moved.max() < 2e-3 * size:
        return MotionFit(name, "fixed", np.array([0, 0, 1.0]), points.mean(0), np.zeros(len(rel)),
                         float(moved.mean()))
    if force_type == "prismatic" or (force_type is None and np.degrees(ang.max()) < 1.0):
        _, _, vt = np.linalg.svd(tr, full_matrices=False)
        d = vt[0] / np.linalg.norm(vt[0])
        vals = tr @ d
        if vals[np.argmax(np.abs(vals))] < 0:
            d, vals = -d, -vals
        fit = MotionFit(name, "prismatic", d, points.mean(0), vals, 0.0)
    else:
        big = ang > np.radians(0.5)
        if not big.any():
            big = ang >= ang.max()
        _, _, vt = np.linalg.svd(rv[big], full_matrices=False)
        a = vt[0] / np.linalg.norm(vt[0])
        vals = rv @ a
        if vals[np.argmax(np.abs(vals))] < 0:
            a, vals = -a, -vals
        A = np.concatenate([np.eye(3) - axis_angle_matrix(a, v) for v in vals])
        b = np.concatenate(list(tr))
        o = np.linalg.lstsq(A, b, rcond=None)[0]
        o = o - (o - points.mean(0)) @ a * a  # the point of the line nearest the part centre
        fit = MotionFit(name, "revolute", a, o, vals, 0.0)
    if refine:
        fit = _refine(fit, rel, points)
    fit.residual = float(np.mean([np.linalg.norm(_apply(joint_motion(fit.type, fit.axis, fit.origin, v), points)
                                                 - _apply(T, points), axis=1).mean() for v, T in zip(fit.values, rel)]))
    return fit


def _refine(fit: MotionFit, rel: np.ndarray, points: np.ndarray) -> MotionFit:
    """Joint least squares over axis (2 angles), origin (2 in-plane offsets) and per-frame values."""
    from scipy.optimize import least_squares

    sub = points[np.linspace(0, len(points) - 1, min(len(points), 200)).astype(int)]
    targets = [_apply(T, sub) for T in rel]
    a0 = fit.axis
    e1 = np.cross(a0, [1.0, 0, 0] if abs(a0[0]) < 0.9 else [0, 1.0, 0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(a0, e1)

    def unpack(x):
        a = a0 + x[0] * e1 + x[1] * e2
        a /= np.linalg.norm(a)
        o = fit.origin + x[2] * e1 + x[3] * e2
        return a, o, x[4:]

    def resid(x):
        a, o, vals = unpack(x)
        return np.concatenate([(_apply(joint_motion(fit.type, a, o, v), sub) - tg).ravel()
                               for v, tg in zip(vals, targets)])

    x0 = np.concatenate([np.zeros(4), fit.values])
    try:
        sol = least_squares(resid, x0, method="lm" if resid(x0).size >= x0.size else "trf", max_nfev=200)
        a, o, vals = unpack(sol.x)
    except Exception:  # keep the closed-form fit
        return fit
    if fit.type == "revolute":
        o = o - (o - points.mean(0)) @ a * a
    else:
        o = fit.origin
    return MotionFit(fit.part, fit.type, a, o, np.asarray(vals), fit.residual, fit.parent, fit.info)


# ---------------------------------------------------------------------------------------------- trees
def fit_parts(rest: dict[str, np.ndarray], frames: dict[str, np.ndarray]) -> list[MotionFit]:
    """Joints of all parts from corresponding points: ``rest`` name -> (n, 3), ``frames`` name -> (T, n, 3).

    Returns one MotionFit per non-root part with ``parent`` set (see module doc for the tree growth).
    """
    names = [n for n in rest if len(rest[n]) >= 3]
    if len(names) < 2:
        raise KinemeshError(f"observed motion has {len(names)} part(s) with points; need at least two")
    size = float(np.max(np.ptp(np.concatenate([rest[n] for n in names]), axis=0)))
    world = {n: kabsch_matrix(rest[n], frames[n]) for n in names}
    motion = {n: float(np.mean([np.linalg.norm(_apply(T, rest[n]) - rest[n], axis=1).mean() for T in world[n]]))
              for n in names}
    root = min(names, key=lambda n: (motion[n], -len(rest[n])))
    in_tree, fits = {root}, {}
    cache: dict[tuple[str, str], MotionFit] = {}
    vol = {n: float(np.prod(np.ptp(rest[n], axis=0) + 1e-3 * size)) for n in names}
    while len(in_tree) < len(names):
        options = []
        for c in names:
            if c in in_tree:
                continue
            for p in in_tree:
                if (c, p) not in cache:
                    rel = np.stack([np.linalg.inv(Tp) @ Tc for Tp, Tc in zip(world[p], world[c])])
                    cache[(c, p)] = fit_joint(rel, rest[c], c, size, refine=False)
                f = cache[(c, p)]
                options.append((f.residual + (0.0 if f.type == "fixed" else 1e-3 * size), c, p))
        # near-ties (a handle and its drawer both slide relative to the carcass): attach the bigger part
        # first, so the smaller one then hangs off it by a fixed joint
        lowest = min(o[0] for o in options)
        # then prefer a fixed joint (a handle on its door), then the bigger parent (a drawer on the carcass,
        # not on the drawer next to it, although relative to both it slides along one axis)
        bucket = 5e-4 * size
        best = max((o for o in options if o[0] <= lowest + 2e-3 * size),
                   key=lambda o: (vol[o[1]], -round(o[0] / bucket), vol[o[2]]))
        _, c, p = best
        rel = np.stack([np.linalg.inv(Tp) @ Tc for Tp, Tc in zip(world[p], world[c])])
        f = fit_joint(rel, rest[c], c, size, refine=True)
        f.parent = p
        fits[c] = f
        in_tree.add(c)
    return [fits[n] for n in names if n in fits]


def fit_sequence(seq, max_points_per_part: int = 2000) -> list[MotionFit]:
    """Joints from a KinematicSequence with ``part_ids`` (vertex correspondences over frames)."""
    if seq.part_ids is None:
        raise KinemeshError("observed sequence has no part_ids; fitting joints needs the part of every vertex")
    names = [p.get("name", f"part_{i}") for i, p in enumerate(seq.meta.get("parts", []))]
    ids = np.asarray(seq.part_ids)
    rest, frames = {}, {}
    for pid in np.unique(ids):
        sel = np.flatnonzero(ids == pid)[:: max(1, int(np.sum(ids == pid)) // max_points_per_part)]
        name = names[pid] if pid < len(names) else f"part_{pid}"
        rest[name] = np.asarray(seq.rest_vertices, float)[sel]
        frames[name] = np.asarray(seq.frames, float)[:, sel]
    return fit_parts(rest, frames)


def fit_vertex_frames(rest_vertices: np.ndarray, frames: np.ndarray, part_ids: np.ndarray,
                      names: list[str]) -> list[MotionFit]:
    """Joints from vertex frames (T, N, 3) with per-vertex part ids, e.g. samples of the kinematic model
    (``decoder.vertices(z)`` for prior samples z) with the static mesh's parts."""
    ids = np.asarray(part_ids)
    rest = {names[i]: np.asarray(rest_vertices, float)[ids == i] for i in range(len(names))}
    fr = {names[i]: np.asarray(frames, float)[:, ids == i] for i in range(len(names))}
    return fit_parts(rest, fr)


def decoder_frames(decoder, n: int = 16, seed: int = 0, spread: float = 1.0) -> np.ndarray:
    """(n, N, 3) vertex frames sampled from an InstanceDecoder's prior N(mu_cond, spread^2 I)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    mu = decoder.mu_cond.detach()
    z = mu + spread * torch.randn((n, mu.shape[-1]), generator=g, dtype=mu.dtype)
    with torch.no_grad():
        return decoder.vertices(z).detach().cpu().numpy()


# ---------------------------------------------------------------------------------------------- point clouds
def fit_from_clouds(part_points: np.ndarray, rest_points: np.ndarray, clouds: list[np.ndarray],
                    name: str = "part", n_values: int = 49, icp_iters: int = 15) -> MotionFit:
    """ATOP axis estimation for one part from observed clouds without correspondences.

    ``part_points`` (n, 3): the part at rest; ``rest_points`` (m, 3): the static rest of the object;
    ``clouds``: observed clouds (k_t, 3) of the whole object, one per frame. Candidate selection by Chamfer
    over sampled motion values, then per-frame ICP of the part against the cloud and :func:`fit_joint`.
    """
    from scipy.spatial import cKDTree

    from kinemesh.articulation.candidates import candidate_motions, part_box

    box = part_box(part_points, name)
    size = float(np.max(np.ptp(np.concatenate([part_points, rest_points]), axis=0)))
    sub = part_points[np.linspace(0, len(part_points) - 1, min(len(part_points), 300)).astype(int)]
    rest_tree = cKDTree(rest_points)
    spacing = float(np.median(rest_tree.query(rest_points, k=2)[0][:, 1]))
    tol = max(0.01 * size, 2.0 * spacing)  # sampling density decides what "explained by the rest" means
    frames = []
    for cl in clouds:
        cl = np.asarray(cl, float)
        d_static = rest_tree.query(cl, k=1)[0]
        frames.append((cKDTree(cl), cl[d_static > tol]))  # cloud points the static rest cannot explain
    cands = [c for c in candidate_motions(box) if c.sign > 0]  # +-values cover both signs
    sel = sub[np.linspace(0, len(sub) - 1, min(len(sub), 150)).astype(int)]
    loose_sub = [lo[np.linspace(0, len(lo) - 1, min(len(lo), 200)).astype(int)] for _, lo in frames]
    best = None
    for c in cands:
        L = np.pi if c.type == "revolute" else float(np.max(box.extents)) * 1.5
        vals = np.linspace(-L, L, n_values)
        Ts = np.stack([joint_motion(c.type, c.axis, c.origin, v) for v in vals])  # (V, 4, 4)
        moved = np.swapaxes(np.matmul(Ts[:, :3, :3], sel.T), 1, 2) + Ts[:, None, :3, 3]  # (V, n, 3)
        total, chosen = 0.0, []
        for (tree, _), loose in zip(frames, loose_sub):
            errs = tree.query(moved.reshape(-1, 3), k=1)[0].reshape(len(vals), -1).mean(1)
            if len(loose):
                d2 = ((loose ** 2).sum(1)[None, :, None] + (moved ** 2).sum(2)[:, None, :]
                      - 2.0 * np.matmul(moved, loose.T).transpose(0, 2, 1))  # (V, l, n) squared distances
                errs = errs + np.sqrt(np.maximum(d2.min(axis=2), 0.0)).mean(axis=1)
            k = int(np.argmin(errs))
            total += float(errs[k])
            chosen.append(vals[k])
        if best is None or total < best[0]:
            best = (total, c, np.array(chosen))
    _, c, vals = best
    # ICP refinement of each frame's part pose against the cloud, from the selected candidate's pose
    rel = []
    for (tree, loose), v in zip(frames, vals):
        T = joint_motion(c.type, c.axis, c.origin, v)
        for _ in range(icp_iters):
            moved = _apply(T, sub)
            _, idx = tree.query(moved, k=1)
            T = kabsch_matrix(sub, tree.data[idx])
        rel.append(T)
    fit = fit_joint(np.stack(rel), sub, name, size, refine=True, force_type=c.type)
    fit.info["candidate"] = {"type": c.type, "axis": c.axis.tolist(), "origin": c.origin.tolist(),
                             "chamfer": float(best[0] / max(1, len(frames)))}
    return fit


# ---------------------------------------------------------------------------------------------- objects
def load_clouds(folder) -> list[np.ndarray]:
    """Observed point clouds, one file per frame in natural order (.npy (k, 3), .xyz/.txt, or any mesh/point
    file trimesh reads: .ply, .obj, ...). Raises InputFileError naming the file."""

    import trimesh

    from kinemesh.data.arrays import load_npy
    from kinemesh.data.loaders import folder_files
    from kinemesh.errors import InputFileError

    files = folder_files(folder)
    clouds = []
    for f in files:
        try:
            if f.suffix == ".npy":
                c = load_npy(f)
            elif f.suffix in (".xyz", ".txt"):
                c = np.loadtxt(f)[:, :3]
            else:
                g = trimesh.load(f, process=False)
                c = np.asarray(g.vertices if not hasattr(g, "dump") else g.dump(concatenate=True).vertices)
        except Exception as exc:
            raise InputFileError(f, f"cannot read point cloud: {exc}") from None
        c = np.asarray(c, float).reshape(-1, 3) if np.asarray(c).size % 3 == 0 else None
        if c is None or len(c) < 10 or not np.isfinite(c).all():
            raise InputFileError(f, "needs at least 10 finite 3D points")
        clouds.append(c)
    if not clouds:
        raise InputFileError(folder, "no point-cloud files found")
    return clouds


def fit_object_from_clouds(obj, clouds: list[np.ndarray], n_points: int = 800, seed: int = 0) -> list[MotionFit]:
    """ATOP stage 2 for every non-root part of a segmented static ``obj`` from observed whole-object clouds.
    Parents come from the rest-pose contact tree (:func:`kinemesh.articulation.infer.part_tree`)."""
    from kinemesh.articulation.infer import geometric_parts, part_tree
    from kinemesh.geometry.sampling import sample_surface

    parts = geometric_parts(obj)
    root, parents, _ = part_tree(parts, seed=seed)
    rng = np.random.default_rng(seed)
    pts = {p.name: sample_surface(p.vertices, p.faces, n_points, seed=rng)[0] for p in parts}
    fits = []
    for p in parts:
        if p.name == root:
            continue
        rest = np.concatenate([pts[q.name] for q in parts if q.name != p.name])
        f = fit_from_clouds(pts[p.name], rest, clouds, p.name)
        f.parent = parents[p.name]
        fits.append(f)
    return fits


def fit_object_from_model(obj, checkpoint=None, n: int = 16, seed: int = 0, device: str = "cpu") -> list[MotionFit]:
    """Joints of a segmented static ``obj`` from ``n`` samples of the kinematic model (its prior over
    states of this mesh), fitted with vertex correspondences (:func:`fit_vertex_frames`)."""
    from kinemesh.articulation.infer import geometric_parts
    from kinemesh.model import load_model

    parts = geometric_parts(obj)
    verts = np.concatenate([p.vertices for p in parts])
    offs = np.cumsum([0] + [len(p.vertices) for p in parts])
    faces = np.concatenate([p.faces + o for p, o in zip(parts, offs[:-1])])
    ids = np.concatenate([np.full(len(p.vertices), i) for i, p in enumerate(parts)])
    model = load_model(checkpoint, device=device)
    dec = model.instance(verts, faces, seed=seed)
    frames = decoder_frames(dec, n=n, seed=seed)
    return fit_vertex_frames(verts, frames, ids, [p.name for p in parts])
