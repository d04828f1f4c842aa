"""Physical validity of articulated objects: interpenetration, collision and detachment of moving parts.

One module for both uses:

- **objects** (``is_valid`` / ``interpenetrations``; rejecting procedural objects and random assemblies):
  every part's surface samples (and vertices) must lie outside every other part at a set of joint
  configurations (rest, each joint at both limits and mid-range, all at either limit, random). Parts welded
  by fixed joints form one rigid group and are not tested against each other; the test is exact mesh
  containment (:func:`inside_mesh`).
- **candidate motions** (``check_candidates``; GEOPARD's simulator filter: no detachment, no collision): a
  candidate is swept through its range (revolute 0..90 deg, prismatic 0..half the part size) and at every
  pose the moving part's surface samples are tested against a voxel occupancy grid of the *rest* of the
  object (:class:`OccupancyGrid`, all other parts at rest; occupied voxels of watertight parts are re-tested
  with :func:`inside_mesh`):

  - collision: the fraction of samples inside the rest may not rise more than ``collision_fraction`` above
    its rest-pose value (contact at rest, e.g. a hinge gap smaller than a voxel, is not counted);
  - detachment: the smallest distance from the part's samples to the rest (Euclidean distance transform of
    the grid) must stay below the attach distance at every pose.

  With ``ValidityConfig.swept`` the collision test is per sample instead (used by the predictor's decoding):
  a sample collides when it rests outside the rest of the object and enters it at some pose of a sweep
  sampled so finely (no sample moves more than half a voxel between poses) that a one-voxel wall cannot be
  stepped over. With ``contact_slack`` too, contact is not collision: a sample that touches the rest at rest
  (a door flush under the frame above it, whose top face rises a fraction of a voxel as it turns out about
  its bottom edge) collides only once it is more than the slack past the plane of the surface it touches
  (that surface's normal from dense samples of the rest) or in the rest's core (occupancy eroded by a voxel).
  On zero-thickness shells the coarse test separates a wrong motion by a few % of the samples,
  the swept one by tens of % (``tests/test_articulation_realism.py``).

Why voxels rather than embree ``contains``, FCL (trimesh's collision manager) or manifold3d booleans for the
candidates: real PartNet-Mobility parts are triangle soups with holes and duplicated sheets, so ray-parity
containment and booleans are undefined on them; FCL reports surface contact, so hinged parts that touch at
rest always "collide", and it needs an extra dependency. Occupancy from densely rasterised surfaces with
enclosed cavities filled (``scipy.ndimage.binary_fill_holes``) is defined for any triangle set, treats thin
sheets as walls, and a sweep is one vectorised lookup (60 candidates x 8 poses x 600 samples in a few ms).
Objects take the joints as given (``ArticulatedObject``); candidates are any objects with ``type``,
``axis``, ``origin``, ``limits`` (e.g. :class:`kinemesh.articulation.candidates.Candidate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import trimesh

from kinemesh.data.articulated import ArticulatedObject, joint_motion


def inside_mesh(mesh: trimesh.Trimesh, points: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
    """(n,) bool: ``points`` (n, 3) strictly inside the mesh's bounding box and inside the mesh (ray parity,
    ``mesh.contains``), deeper than ``tolerance`` m from its surface (0: any depth)."""
    out = np.zeros(len(points), bool)
    lo, hi = mesh.bounds
    sel = np.flatnonzero(np.all((points > lo) & (points < hi), axis=1))
    if len(sel):
        ins = mesh.contains(points[sel])
        if tolerance > 0 and ins.any():
            ins[ins] = trimesh.proximity.closest_point(mesh, points[sel[ins]])[1] > tolerance
        out[sel] = ins
    return out


# ---------------------------------------------------------------------------------------------- objects
def rigid_groups(obj: ArticulatedObject) -> dict[str, str]:
    """Map each part name to the name of its rigid group: the topmost part reached through fixed joints."""
    welded = {j.child: j.parent for j in obj.joints if j.type == "fixed"}
    out = {}
    for p in obj.parts:
        n = p.name
        while n in welded:
            n = welded[n]
        out[p.name] = n
    return out


def check_configurations(obj: ArticulatedObject, rng: np.random.Generator, n_random: int = 4) -> list[dict]:
    """Joint configurations to test: rest, each joint at each limit (others at rest), all at hi, random."""
    configs: list[dict[str, float]] = [{}]
    movable = obj.movable_joints
    for j in movable:
        lo, hi = j.limits if j.limits is not None else (-np.pi, np.pi)
        configs += [{j.name: lo}, {j.name: hi}, {j.name: 0.5 * (lo + hi)}]
    if movable:
        configs.append({j.name: (j.limits[1] if j.limits else np.pi / 2) for j in movable})
        configs.append({j.name: (j.limits[0] if j.limits else -np.pi / 2) for j in movable})
    configs += [obj.sample_values(rng) for _ in range(n_random)]
    return configs


def interpenetrations(
    obj: ArticulatedObject,
    configs: list[dict[str, float]] | None = None,
    n_samples: int = 300,
    seed: int = 0,
    tolerance: float = 0.0,
) -> list[tuple[str, str, dict]]:
    """Pairs of parts (of different rigid groups) that interpenetrate at some configuration.

    Returns a list of ``(part_a, part_b, config)``; empty when the object is valid. ``tolerance`` (m) lets
    samples lie that deep inside another part without counting (0 = strict).
    """
    rng = np.random.default_rng(seed)
    if configs is None:
        configs = check_configurations(obj, rng)
    group = rigid_groups(obj)
    parts = [p for p in obj.parts if len(p.vertices)]
    samples = {}
    for p in parts:
        m = trimesh.Trimesh(p.vertices, p.faces, process=False)
        pts, _ = trimesh.sample.sample_surface(m, n_samples, seed=int(rng.integers(1 << 31)))
        samples[p.name] = np.concatenate([pts, p.vertices])
    bad = []
    for cfg in configs:
        T = obj.part_transforms(cfg)
        posed = {}
        for p in parts:
            R, t = T[p.name][:3, :3], T[p.name][:3, 3]
            posed[p.name] = (
                trimesh.Trimesh(p.vertices @ R.T + t, p.faces, process=False),
                samples[p.name] @ R.T + t,
            )
        for ia, a in enumerate(parts):
            for b in parts[ia + 1 :]:
                if group[a.name] == group[b.name]:
                    continue
                ma, pa = posed[a.name]
                mb, pb = posed[b.name]
                if np.any(np.maximum(ma.bounds[0], mb.bounds[0]) >= np.minimum(ma.bounds[1], mb.bounds[1])):
                    continue
                if inside_mesh(mb, pa, tolerance).any() or inside_mesh(ma, pb, tolerance).any():
                    bad.append((a.name, b.name, cfg))
    return bad


def is_valid(obj: ArticulatedObject, seed: int = 0, n_samples: int = 200, tolerance: float = 1e-3) -> bool:
    """True when no two parts interpenetrate deeper than ``tolerance`` m over the tested configurations."""
    return not interpenetrations(obj, n_samples=n_samples, seed=seed, tolerance=tolerance)


# ---------------------------------------------------------------------------------------------- candidate motions
@dataclass
class ValidityConfig:
    """Options of the sweep test."""

    resolution: int = 64  # voxels along the longest side of the padded object box
    n_points: int = 1000  # surface samples of the moving part
    steps: int = 8  # poses per sweep (the rest pose is extra)
    collision_fraction: float = 0.005  # allowed rise of the fraction of samples inside the rest
    attach_distance: float = 0.03  # allowed growth of the part-rest gap during the sweep, fraction of the
    # object size (at least 2 voxels and 1.5 x the part's thinnest side: a hinge sits on the part's face)
    pad: float = 0.25  # grid padding around the object box, fraction of the object size
    seed: int = 0  # surface sampling seed
    swept: bool = False  # per-sample swept test (open shells): see ``check_candidates``
    max_steps: int = 48  # swept test: at most this many poses per sweep (spacing <= half a voxel when possible)
    contact_slack: float = 0.0  # swept test: a sample touching the rest at rest (its voxel next to an
    # occupied one) collides only this many voxels past the plane of the surface it touches, or in the core


class OccupancyGrid:
    """Per-part voxel occupancy of an object at rest; ``rest(moving)`` gives the rest-of-object grid."""

    def __init__(self, obj: ArticulatedObject, config: ValidityConfig | None = None):
        from scipy import ndimage

        from kinemesh.geometry.sampling import face_areas, sample_surface

        self.config = c = config or ValidityConfig()
        verts = [p.vertices for p in obj.parts if len(p.vertices)]
        allv = np.concatenate(verts)
        lo, hi = allv.min(0), allv.max(0)
        self.size = float(np.max(hi - lo))
        pad = c.pad * self.size
        self.lo = lo - pad
        self.voxel = (self.size + 2 * pad) / c.resolution
        self.shape = tuple(int(np.ceil((hi + pad - self.lo)[k] / self.voxel)) + 1 for k in range(3))
        self.parts: dict[str, np.ndarray] = {}
        self.meshes: dict[str, "trimesh.Trimesh"] = {}  # watertight parts: exact containment (narrow phase)
        self.samples: dict[str, np.ndarray] = {}
        self.dense: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # surface samples at half a voxel, normals
        rng = np.random.default_rng(c.seed)
        for p in obj.parts:
            if len(p.vertices) == 0 or len(p.faces) == 0:
                continue
            area = float(face_areas(p.vertices, p.faces).sum())
            n_dense = int(np.clip(area / (0.25 * self.voxel) ** 2, 2000, 400000))
            try:
                dense, fid, _ = sample_surface(p.vertices, p.faces, n_dense, seed=rng)
                fid = fid[::4]  # one in four: about one sample per (half a voxel)^2 of surface
                fn = np.cross(*(p.vertices[p.faces[fid, k]] - p.vertices[p.faces[fid, 0]] for k in (1, 2)))
                fn /= np.maximum(np.linalg.norm(fn, axis=1, keepdims=True), 1e-12)
                self.dense[p.name] = (dense[::4], fn)
                self.samples[p.name], _, _ = sample_surface(p.vertices, p.faces, c.n_points, seed=rng)
            except Exception:  # zero-area part: vertices only
                dense = p.vertices
                self.samples[p.name] = p.vertices
            occ = np.zeros(self.shape, bool)
            idx = self._index(np.concatenate([dense, p.vertices]))
            occ[idx[:, 0], idx[:, 1], idx[:, 2]] = True
            self.parts[p.name] = ndimage.binary_fill_holes(occ)
            m = trimesh.Trimesh(p.vertices, p.faces, process=False)
            if m.is_watertight and m.volume > 0:
                self.meshes[p.name] = m
        self._cache: dict = {}
        self._trees: dict = {}  # part name -> KD-tree of its dense surface samples (contact normals)

    def _index(self, pts: np.ndarray) -> np.ndarray:
        idx = np.floor((pts - self.lo) / self.voxel).astype(np.int64)
        return np.clip(idx, 0, np.array(self.shape) - 1)

    def rest(self, moving) -> tuple[np.ndarray, np.ndarray]:
        """Occupancy (bool grid) and distance-to-occupied (m) grid of all parts not in ``moving``."""
        return self._rest(moving)[:2]

    def _rest(self, moving) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``rest`` and, per voxel, the index (3, ...) of the nearest occupied voxel."""
        from scipy import ndimage

        key = frozenset(moving)
        if key not in self._cache:
            occ = np.zeros(self.shape, bool)
            for name, o in self.parts.items():
                if name not in key:
                    occ |= o
            if occ.any():
                dist, near = ndimage.distance_transform_edt(~occ, return_indices=True)
                dist, near = dist * self.voxel, near.astype(np.int16)
            else:
                dist, near = np.full(self.shape, np.inf), np.indices(self.shape, dtype=np.int16)
            self._cache[key] = (occ, dist, near)
        return self._cache[key]

    def contact(self, moving, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Contact frame of ``pts`` (n, 3) against the surfaces of the parts not in ``moving``: which points
        touch the rest (their voxel next to an occupied one, 26-neighbourhood); for those, the unit normal
        (n, 3) of the nearest rest surface, turned towards it, and the distance to its plane (zero for the
        others); and the rest's core (its occupancy eroded by one voxel: deeper than the contact layer)."""
        from scipy import ndimage
        from scipy.spatial import cKDTree

        occ, dist, near = self._rest(moving)
        key = ("core", frozenset(moving))
        if key not in self._cache:
            self._cache[key] = ndimage.binary_erosion(occ)
        core = self._cache[key]
        touching = self.lookup(dist, pts) <= np.sqrt(3.0) * self.voxel + 1e-9
        normal, gap = np.zeros_like(pts), np.zeros(len(pts))
        q, at = pts[touching], np.flatnonzero(touching)
        best = np.full(len(q), np.inf)
        for name, (surf, normals) in self.dense.items():
            if name in moving or not len(q):
                continue
            if name not in self._trees:
                self._trees[name] = cKDTree(surf)
            d, k = self._trees[name].query(q)
            closer = d < best
            best[closer] = d[closer]
            normal[at[closer]] = normals[k[closer]]
            gap[at[closer]] = np.einsum("ij,ij->i", surf[k[closer]] - q[closer], normals[k[closer]])
        # turn each normal towards the surface; on the surface itself, towards the nearest occupied voxel
        idx = self._index(pts)
        towards = self.lo + (near[:, idx[:, 0], idx[:, 1], idx[:, 2]].T + 0.5) * self.voxel - pts
        side = np.where(np.abs(gap) > 0.1 * self.voxel, np.sign(gap),
                        np.sign(np.einsum("ij,ij->i", towards, normal)))
        return touching, normal * side[:, None], np.abs(gap), core

    def inside(self, pts: np.ndarray, moving) -> np.ndarray:
        """(n,) bool: points (n, 3) inside a part not in ``moving``. Voxel broad phase; points in occupied
        voxels of a watertight part are re-tested exactly (:func:`inside_mesh`, embree when installed), so
        sub-voxel gaps (a door 4 mm in front of its carcass) are not collisions."""
        occ, _ = self.rest(moving)
        hit = self.lookup(occ, pts, outside=False).astype(bool)
        if not hit.any():
            return hit
        idx = np.flatnonzero(hit)
        q = pts[idx]
        res = np.zeros(len(idx), bool)
        for name, o in self.parts.items():
            if name in moving:
                continue
            cand = ~res & self.lookup(o, q, outside=False).astype(bool)
            if not cand.any():
                continue
            if name in self.meshes:
                res[cand] = inside_mesh(self.meshes[name], q[cand])
            else:
                res[cand] = True
        out = np.zeros(len(pts), bool)
        out[idx] = res
        return out

    def lookup(self, grid: np.ndarray, pts: np.ndarray, outside: float | None = None) -> np.ndarray:
        """Values of ``grid`` at points (..., 3); points outside the grid get ``outside`` (or the clamped
        voxel's value plus the distance to the grid when ``outside`` is None, for distance grids)."""
        shp = pts.shape[:-1]
        p = pts.reshape(-1, 3)
        raw = np.floor((p - self.lo) / self.voxel).astype(np.int64)
        idx = np.clip(raw, 0, np.array(self.shape) - 1)
        val = grid[idx[:, 0], idx[:, 1], idx[:, 2]]
        out_mask = np.any(raw != idx, axis=1)
        if out_mask.any():
            if outside is not None:
                val = val.astype(type(outside)) if np.isscalar(outside) else val
                val[out_mask] = outside
            else:
                centre = self.lo + (idx[out_mask] + 0.5) * self.voxel
                val = val.astype(float)
                val[out_mask] += np.linalg.norm(p[out_mask] - centre, axis=1)
        return val.reshape(shp)

class RestOverlap:
    """Interpenetration beyond the rest pose on an :class:`OccupancyGrid` (``pad`` 0), robust to open shells
    and zero-thickness panels (``synth --from-urdf``: real parts often overlap at rest, so rest is the baseline).

    Each part's filled occupancy is eroded by one voxel into its *core* (a point in the core lies a voxel deep
    inside the part, so parts sliding or turning in contact, shifting by less than a voxel, do not count). For
    parts of different rigid groups, ``count(a, b, q)`` is the number of a's voxel centres, posed at joint
    values ``q``, in b's core (posed alike). A pair interpenetrates at ``q`` when that count exceeds its count
    at rest by more than ``max_fraction`` of a's voxels (either order). Thin shells have no core: only
    penetration into a part's closed volume is seen.
    """

    def __init__(self, obj: ArticulatedObject, resolution: int = 64, max_fraction: float = 0.1):
        from scipy.ndimage import binary_erosion

        self.obj, self.max_fraction = obj, max_fraction
        self.grid = g = OccupancyGrid(obj, ValidityConfig(resolution=resolution, pad=0.0))
        self.core = {n: binary_erosion(o) for n, o in g.parts.items()}
        self.centres = {n: g.lo + (np.argwhere(o) + 0.5) * g.voxel for n, o in g.parts.items()}
        group, names = rigid_groups(obj), list(g.parts)
        self.pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if group[a] != group[b]]
        self.rest = self._counts({})

    def _counts(self, values: dict) -> dict:
        T, out = self.obj.part_transforms(values), {}
        for a, b in self.pairs:
            for x, y in ((a, b), (b, a)):
                M = np.linalg.inv(T[y]) @ T[x]  # x's voxel centres in y's rest frame
                pts = self.centres[x] @ M[:3, :3].T + M[:3, 3]
                out[x, y] = int(self.grid.lookup(self.core[y], pts, outside=False).sum())
        return out

    def __call__(self, values: dict) -> list[tuple[str, str, float]]:
        """Pairs (a, b, excess fraction of a's voxels) that interpenetrate beyond rest at joint ``values``."""
        frac = {k: (n - self.rest[k]) / max(len(self.centres[k[0]]), 1) for k, n in self._counts(values).items()}
        return [(x, y, float(f)) for (x, y), f in frac.items() if f > self.max_fraction]


def sweep_poses(cand, steps: int, power: float = 1.7) -> list[np.ndarray]:
    """Rigid motions (4, 4) of the candidate at ``steps`` values over (0, hi] (``hi`` its limit of larger
    magnitude), denser near 0 by default (``power`` 1.7: contact-phase collisions, a door edge entering a
    wall it touches, happen within the first few degrees); ``power`` 1 spaces them evenly."""
    hi = cand.limits[1] if abs(cand.limits[1]) >= abs(cand.limits[0]) else cand.limits[0]
    return [joint_motion(cand.type, cand.axis, cand.origin, s)
            for s in hi * np.linspace(1.0 / steps, 1.0, steps) ** power]


def _sweep_steps(grid: OccupancyGrid, pts: np.ndarray, candidates: list) -> int:
    """Poses needed so that no sample moves more than half a voxel between poses (capped)."""
    c = grid.config
    travel = 0.0
    for cand in candidates:
        reach = max(abs(cand.limits[0]), abs(cand.limits[1]))
        if cand.type == "prismatic":
            travel = max(travel, reach)
        else:
            r = np.linalg.norm(np.cross(pts - cand.origin, cand.axis), axis=1).max()
            travel = max(travel, float(r) * reach)
    return int(np.clip(np.ceil(travel / (0.5 * grid.voxel)), c.steps, c.max_steps))


def check_candidates(grid: OccupancyGrid, moving: list[str], candidates: list) -> list:
    """Mark every candidate ``valid`` (and store ``info`` collision/gap numbers) for the parts ``moving``
    (the part and everything rigidly attached to / carried by it) against the rest of the object.

    Default collision measure: the largest fraction of samples inside the rest over the sweep minus that
    fraction at rest. With ``config.swept`` it is per sample instead: the fraction of samples that are
    outside the rest at rest and inside it at some pose of a sweep sampled finely enough that no sample
    jumps more than half a voxel. The difference matters for open shells: thin walls occupy one voxel layer,
    so a coarse sweep steps through them, and a part that leaves its resting contact while entering a
    neighbour keeps the same inside fraction. Detachment: the part-rest gap may not grow beyond
    ``attach_distance`` x the object size (at least 2 voxels and 1.5 x the part's thinnest side) at any pose."""
    c = grid.config
    _, dist = grid.rest(moving)
    pts = np.concatenate([grid.samples[m] for m in moving if m in grid.samples])
    gap0 = float(grid.lookup(dist, pts).min())
    own = grid.samples.get(moving[0], pts)
    centred = own - own.mean(0)
    thin = float(np.min(np.ptp(centred @ np.linalg.svd(centred, full_matrices=False)[2].T, axis=0)))
    attach = gap0 + max(c.attach_distance * grid.size, 2.0 * grid.voxel, 1.5 * thin)
    at_rest = grid.inside(pts, moving)  # samples resting in contact with (or inside) the rest
    if not candidates:
        return candidates
    steps, power = (_sweep_steps(grid, pts, candidates), 1.0) if c.swept else (c.steps, 1.7)
    poses = np.stack([np.stack(sweep_poses(cand, steps, power)) for cand in candidates])  # (C, S, 4, 4)
    P = np.swapaxes(np.matmul(poses[:, :, :3, :3], pts.T), 2, 3) + poses[:, :, None, :3, 3]  # (C, S, n, 3)
    flat = P.reshape(-1, 3)
    inside = grid.inside(flat, moving).reshape(P.shape[:3])  # (C, S, n)
    if c.swept:
        if c.contact_slack > 0:  # contact is not collision: a sample touching the rest at rest may sink
            # into what it touches by up to the slack (sliding along a frame it rests flush against)
            touching, normal, gap, core = grid.contact(moving, pts)
            into = np.einsum("csnk,nk->csn", P - pts, normal) - gap  # past the plane of what it touched
            deep = grid.lookup(core, flat, outside=False).reshape(into.shape).astype(bool)
            inside &= ~(touching & (into <= c.contact_slack * grid.voxel) & ~deep)
        coll = (inside.any(axis=1) & ~at_rest).mean(axis=1)
    else:
        coll = inside.mean(axis=2).max(axis=1) - float(at_rest.mean())
    gaps = grid.lookup(dist, flat).reshape(P.shape[:3]).min(axis=2).max(axis=1)  # (C,)
    for cand, cl, gap in zip(candidates, coll, gaps):
        cand.info = {"collision": float(cl), "gap": float(gap), "rest_gap": gap0}
        cand.valid = bool(cl <= c.collision_fraction and gap <= attach)
    return candidates


def subtree(parents: dict[str, str], name: str) -> list[str]:
    """``name`` and every part below it in the tree given as child -> parent names: the parts that move with it."""
    kids: dict[str, list[str]] = {}
    for c, p in parents.items():
        kids.setdefault(p, []).append(c)
    out, stack = [], [name]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(kids.get(n, []))
    return out


def moving_groups(obj: ArticulatedObject) -> dict[str, list[str]]:
    """For each part, the parts that move with it: itself plus its whole subtree in the joint tree."""
    parents = {j.child: j.parent for j in obj.joints}
    return {p.name: subtree(parents, p.name) for p in obj.parts}


def motion_extent(seq) -> float:
    """How far a sequence moves: max over frames and vertices of |x_t - x_0|, over the rest bounding-box
    diagonal (dimensionless). ``seq`` is a KinematicSequence with frames (T, n, 3)."""
    diag = float(np.linalg.norm(np.ptp(seq.rest_vertices, axis=0)))
    disp = np.linalg.norm(seq.frames - seq.frames[:1], axis=-1).max()
    return float(disp) / max(diag, 1e-12)


def moves(seq, min_motion: float = 0.01) -> bool:
    """False for a sequence that does not move: no vertex ever gets ``min_motion`` x the object's
    bounding-box diagonal away from its position in the first frame (such sequences teach no motion)."""
    return motion_extent(seq) >= min_motion
