"""Physical validity of candidate motions (GEOPARD's simulator filter): no detachment, no collision.

A candidate is swept through its range (revolute 0..90 deg, prismatic 0..half the part size, ``steps``
poses). At every pose the moving part's surface samples are tested against a voxel occupancy grid of the
*rest* of the object (all other parts at rest):

- collision: the fraction of samples inside the rest's occupied voxels may not rise more than
  ``collision_fraction`` above its rest-pose value (contact at rest, e.g. a hinge gap smaller than a voxel,
  is not counted);
- detachment: the smallest distance from the part's samples to the rest (Euclidean distance transform of the
  grid) must stay below ``attach_distance`` at every pose.

With ``ValidityConfig.swept`` the collision test is per sample instead (used by the predictor's decoding):
a sample collides when it rests outside the rest of the object and enters it at some pose of a sweep sampled
so finely (no sample moves more than half a voxel between poses) that a one-voxel wall cannot be stepped
over. On zero-thickness shells the coarse test separates a wrong motion by a few % of the samples, the swept
one by tens of % (``tests/test_articulation_realism.py``).

Why voxels rather than embree ``contains``, FCL (trimesh's collision manager) or manifold3d booleans: real
PartNet-Mobility parts are triangle soups with holes and duplicated sheets, so ray-parity containment and
booleans are undefined on them; FCL reports surface contact, so hinged parts that touch at rest always
"collide", and it needs an extra dependency. Occupancy from densely rasterised surfaces with enclosed
cavities filled (``scipy.ndimage.binary_fill_holes``) is defined for any triangle set, treats thin sheets as
walls, and a sweep is one vectorised lookup (60 candidates x 8 poses x 600 samples in a few ms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kinemesh.articulation.candidates import Candidate
from kinemesh.data.articulated import ArticulatedObject, axis_angle_matrix


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


class OccupancyGrid:
    """Per-part voxel occupancy of an object at rest; ``rest(moving)`` gives the rest-of-object grid."""

    def __init__(self, obj: ArticulatedObject, config: ValidityConfig | None = None):
        import trimesh
        from scipy import ndimage

        from kinemesh.geometry.sampling import sample_surface

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
        rng = np.random.default_rng(c.seed)
        for p in obj.parts:
            if len(p.vertices) == 0 or len(p.faces) == 0:
                continue
            area = float(_area(p.vertices, p.faces))
            n_dense = int(np.clip(area / (0.35 * self.voxel) ** 2, 2000, 400000))
            try:
                dense, _, _ = sample_surface(p.vertices, p.faces, n_dense, seed=rng)
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
        self._cache: dict[frozenset, tuple[np.ndarray, np.ndarray]] = {}

    def _index(self, pts: np.ndarray) -> np.ndarray:
        idx = np.floor((pts - self.lo) / self.voxel).astype(np.int64)
        return np.clip(idx, 0, np.array(self.shape) - 1)

    def rest(self, moving) -> tuple[np.ndarray, np.ndarray]:
        """Occupancy (bool grid) and distance-to-occupied (m) grid of all parts not in ``moving``."""
        from scipy import ndimage

        key = frozenset(moving)
        if key not in self._cache:
            occ = np.zeros(self.shape, bool)
            for name, o in self.parts.items():
                if name not in key:
                    occ |= o
            dist = ndimage.distance_transform_edt(~occ) * self.voxel if occ.any() else np.full(self.shape, np.inf)
            self._cache[key] = (occ, dist)
        return self._cache[key]

    def inside(self, pts: np.ndarray, moving) -> np.ndarray:
        """(n,) bool: points (n, 3) inside a part not in ``moving``. Voxel broad phase; points in occupied
        voxels of a watertight part are re-tested exactly (ray-parity ``contains``, embree when installed),
        so sub-voxel gaps (a door 4 mm in front of its carcass) are not collisions."""
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
                res[cand] = self.meshes[name].contains(q[cand])
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


def _area(v, f) -> float:
    tri = v[f]
    return 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1).sum()


def sweep_poses(cand: Candidate, steps: int, power: float = 1.7) -> list[np.ndarray]:
    """Rigid motions (4, 4) of the candidate at ``steps`` values over (0, hi], denser near 0 by default
    (``power`` 1.7): contact-phase collisions (a door edge entering a wall it touches) happen within the
    first few degrees."""
    hi = cand.limits[1] if abs(cand.limits[1]) >= abs(cand.limits[0]) else cand.limits[0]
    out = []
    for s in hi * np.linspace(1.0 / steps, 1.0, steps) ** power:
        T = np.eye(4)
        if cand.type == "prismatic":
            T[:3, 3] = cand.axis * s
        else:
            R = axis_angle_matrix(cand.axis, s)
            T[:3, :3] = R
            T[:3, 3] = cand.origin - R @ cand.origin
        out.append(T)
    return out


def swept_poses(cand: Candidate, steps: int) -> list[np.ndarray]:
    """Rigid motions (4, 4) of the candidate at ``steps`` evenly spaced values over (0, hi]."""
    hi = cand.limits[1] if abs(cand.limits[1]) >= abs(cand.limits[0]) else cand.limits[0]
    lim = (0.0, hi)
    return sweep_poses(Candidate(cand.type, cand.axis, cand.origin, lim, cand.box_axis, cand.sign), steps,
                       power=1.0)


def _sweep_steps(grid: OccupancyGrid, pts: np.ndarray, candidates: list[Candidate]) -> int:
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


def check_candidates(grid: OccupancyGrid, moving: list[str], candidates: list[Candidate]) -> list[Candidate]:
    """Mark every candidate ``valid`` (and store ``info`` collision/gap numbers) for the parts ``moving``
    (the part and everything rigidly attached to / carried by it) against the rest of the object.

    Default collision measure: the largest fraction of samples inside the rest over the sweep minus that
    fraction at rest. With ``config.swept`` it is per sample instead: the fraction of samples that are
    outside the rest at rest and inside it at some pose of a sweep sampled finely enough that no sample
    jumps more than half a voxel. The difference matters for open shells: thin walls occupy one voxel layer,
    so a coarse sweep steps through them, and a part that leaves its resting contact while entering a
    neighbour keeps the same inside fraction."""
    c = grid.config
    if c.swept:
        return _check_swept(grid, moving, candidates)
    dist, pts, gap0, attach = _rest_contact(grid, moving)
    base = float(grid.inside(pts, moving).mean())
    if not candidates:
        return candidates
    poses = np.stack([np.stack(sweep_poses(cand, c.steps)) for cand in candidates])  # (C, S, 4, 4)
    P = np.swapaxes(np.matmul(poses[:, :, :3, :3], pts.T), 2, 3) + poses[:, :, None, :3, 3]  # (C, S, n, 3)
    flat = P.reshape(-1, 3)
    inside = grid.inside(flat, moving).reshape(P.shape[:3]).mean(axis=2)  # (C, S)
    gaps = grid.lookup(dist, flat).reshape(P.shape[:3]).min(axis=2)  # (C, S)
    for ci, cand in enumerate(candidates):
        coll = float(inside[ci].max() - base)
        gap = float(gaps[ci].max())
        cand.info = {"collision": coll, "gap": gap, "rest_gap": gap0}
        cand.valid = bool(coll <= c.collision_fraction and gap <= attach)
    return candidates


def _rest_contact(grid: OccupancyGrid, moving: list[str]):
    """(distance field of the rest of the object, samples (n, 3) of the moving parts, their rest gap (m),
    the largest gap (m) that still counts as attached) shared by both collision measures."""
    c = grid.config
    _, dist = grid.rest(moving)
    pts = np.concatenate([grid.samples[m] for m in moving if m in grid.samples])
    gap0 = float(grid.lookup(dist, pts).min())
    own = grid.samples.get(moving[0], pts)
    centred = own - own.mean(0)
    thin = float(np.min(np.ptp(centred @ np.linalg.svd(centred, full_matrices=False)[2].T, axis=0)))
    return dist, pts, gap0, gap0 + max(c.attach_distance * grid.size, 2.0 * grid.voxel, 1.5 * thin)


def _check_swept(grid: OccupancyGrid, moving: list[str], candidates: list[Candidate]) -> list[Candidate]:
    """``check_candidates`` with the per-sample swept collision measure (``ValidityConfig.swept``)."""
    c = grid.config
    dist, pts, gap0, attach = _rest_contact(grid, moving)
    free0 = ~grid.inside(pts, moving)  # samples not resting in contact
    if not candidates:
        return candidates
    steps = _sweep_steps(grid, pts, candidates)
    poses = np.stack([np.stack(swept_poses(cand, steps)) for cand in candidates])  # (C, S, 4, 4)
    P = np.swapaxes(np.matmul(poses[:, :, :3, :3], pts.T), 2, 3) + poses[:, :, None, :3, 3]  # (C, S, n, 3)
    flat = P.reshape(-1, 3)
    inside = grid.inside(flat, moving).reshape(P.shape[:3])  # (C, S, n)
    hit = (inside.any(axis=1) & free0).mean(axis=1)  # (C,)
    gaps = grid.lookup(dist, flat).reshape(P.shape[:3]).min(axis=2)  # (C, S)
    for ci, cand in enumerate(candidates):
        coll = float(hit[ci])
        gap = float(gaps[ci].max())
        cand.info = {"collision": coll, "gap": gap, "rest_gap": gap0}
        cand.valid = bool(coll <= c.collision_fraction and gap <= attach)
    return candidates


def moving_groups(obj: ArticulatedObject) -> dict[str, list[str]]:
    """For each part, the parts that move with it: itself plus its whole subtree in the joint tree."""
    kids: dict[str, list[str]] = {}
    for j in obj.joints:
        kids.setdefault(j.parent, []).append(j.child)
    out = {}
    for p in obj.parts:
        stack, group = [p.name], []
        while stack:
            n = stack.pop()
            group.append(n)
            stack.extend(kids.get(n, []))
        out[p.name] = group
    return out


def label_valid_candidates(obj: ArticulatedObject, parts: list[str] | None = None,
                           config: ValidityConfig | None = None,
                           grid: OccupancyGrid | None = None) -> dict[str, list[Candidate]]:
    """Valid-candidate labels of an object (GEOPARD self-supervision): part name -> its 60 candidates with
    ``valid`` set. The moving set of a part is its subtree in ``obj``'s joint tree (for an unannotated object
    built by :mod:`kinemesh.articulation.parts` every part hangs off the root, so it is the part alone)."""
    from kinemesh.articulation.candidates import candidate_motions, part_box

    grid = grid or OccupancyGrid(obj, config)
    groups = moving_groups(obj)
    out = {}
    for name in parts or [p.name for p in obj.parts if p.name != obj.root]:
        part = obj.part(name)
        if len(part.vertices) == 0:
            continue
        box = part_box(part.vertices, name)
        cands = candidate_motions(box)
        out[name] = check_candidates(grid, groups[name], cands)
    return out
