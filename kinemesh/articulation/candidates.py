"""Candidate joint motions of a part from its oriented bounding box (GEOPARD self-supervision, ATOP 4.3.2).

ATOP (Sec. 4.3.2) uses 7 origins (box centre + 6 face centres) x 6 directions (the three box axes and their
negations). We use the same directions and, for revolute joints, the 3 x 3 grid of axis *lines* that those
origins and the 12 box edges span in the plane perpendicular to each axis (centre line, 4 face-centre lines,
4 hinge-like edge lines; points along the axis give the same line). Prismatic candidates slide along the 6
directions. That is 6 x 9 revolute + 6 prismatic = 60 candidates per part. The sign of the direction encodes
the opening direction: a candidate moves its part over ``[0, +range]``.

Box frame: ``PartBox.axes`` rows are unit vectors ordered to be closest to world X, Y, Z (signs chosen
positive along them) so the box index of an axis-aligned part's axis is its world axis index.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from kinemesh.errors import KinemeshError

GRID = (-1, 0, 1)  # box-relative coordinates of candidate origin lines (half-extent units)
REVOLUTE_RANGE = 0.5 * np.pi  # rad swept by validity checks
MIN_EXTENT = 1e-4  # m; thinner box sides are clamped (flat parts)


@dataclass
class PartBox:
    """Oriented bounding box of a part: ``center`` (3,) m, ``axes`` (3, 3) unit rows, ``extents`` (3,) m
    (full side lengths along each row)."""

    center: np.ndarray
    axes: np.ndarray
    extents: np.ndarray

    def to_box(self, points: np.ndarray) -> np.ndarray:
        """World points (n, 3) -> box coordinates (n, 3) (metres along each box axis, from the centre)."""
        return (np.asarray(points) - self.center) @ self.axes.T

    def from_box(self, coords: np.ndarray) -> np.ndarray:
        """Box coordinates (n, 3) -> world points (n, 3)."""
        return np.asarray(coords) @ self.axes + self.center

    def relative_point(self, rel) -> np.ndarray:
        """World point at box-relative coordinates ``rel`` (3,) in half-extent units (-1 .. 1 on the box)."""
        return self.from_box(np.asarray(rel, float) * 0.5 * self.extents)

    def corners(self) -> np.ndarray:
        """The 8 box corners (8, 3)."""
        s = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)], float)
        return self.from_box(s * 0.5 * self.extents)


_BOXES: OrderedDict = OrderedDict()  # content digest of the vertices -> PartBox (see part_box)
_BOXES_LOCK = threading.Lock()
BOX_CACHE = 512  # boxes kept (least recently used dropped)


def part_box(vertices: np.ndarray, name: str = "part") -> PartBox:
    """Minimum-volume oriented bounding box of ``vertices`` (n, 3) via trimesh, axes ordered towards X, Y, Z.

    Flat parts (one side thinner than ``MIN_EXTENT``) keep a clamped thickness. Raises KinemeshError naming
    the part when it has fewer than 3 distinct points or is degenerate along two directions (a line or point).

    The box is a pure function of the vertices, and one articulation asks for the box of each part many
    times (the network's features, then each decoding rule), so the last ``BOX_CACHE`` boxes are kept,
    keyed by a digest of the vertex bytes; each call gets its own copy (``BOX_CACHE = 0``: none kept).
    """
    v = np.ascontiguousarray(vertices, dtype=np.float64).reshape(-1, 3)
    if BOX_CACHE <= 0:
        return _part_box(v, name)
    key = (v.shape[0], hashlib.blake2b(v.tobytes(), digest_size=16).digest())
    with _BOXES_LOCK:
        box = _BOXES.get(key)
        if box is not None:
            _BOXES.move_to_end(key)
    if box is None:
        box = _part_box(v, name)
        with _BOXES_LOCK:
            _BOXES[key] = box
            while len(_BOXES) > BOX_CACHE:
                _BOXES.popitem(last=False)
    return PartBox(box.center.copy(), box.axes.copy(), box.extents.copy())


def _part_box(v: np.ndarray, name: str) -> PartBox:
    """:func:`part_box` without the cache."""
    import trimesh

    if len(np.unique(np.round(v, 9), axis=0)) < 3:
        raise KinemeshError(f"part '{name}': fewer than 3 distinct vertices, cannot estimate its box")
    c0 = v.mean(0)
    _, s, vt = np.linalg.svd(v - c0, full_matrices=False)
    if s[1] < 1e-9 * max(s[0], 1e-12) or s[0] < 1e-12:
        raise KinemeshError(f"part '{name}': degenerate geometry (all vertices on a line or point)")
    try:
        if s[2] < 1e-9 * s[0]:
            raise ValueError("flat")
        T, ext = trimesh.bounds.oriented_bounds(v)
        R = np.linalg.inv(T)[:3, :3].T  # rows = box axes in world
        center = np.linalg.inv(T)[:3, 3]
        ext = np.asarray(ext, float)
        # Prefer world-aligned frames when nearly as tight: round parts (knobs, lids) have an arbitrary
        # min-volume frame, and most objects are built along their world axes.
        vol = float(np.prod(ext))
        lo, hi = v.min(0), v.max(0)
        if np.prod(hi - lo) <= 1.1 * vol:
            R, center, ext = np.eye(3), 0.5 * (lo + hi), hi - lo
        else:
            T2, ext2 = trimesh.bounds.oriented_bounds_2D(v[:, :2])
            ang = np.arctan2(T2[1, 0], T2[0, 0])
            Rz = np.array([[np.cos(ang), -np.sin(ang), 0], [np.sin(ang), np.cos(ang), 0], [0, 0, 1]])
            coords = v @ Rz.T
            l2, h2 = coords.min(0), coords.max(0)
            if np.prod(h2 - l2) <= 1.1 * vol:
                R, center, ext = Rz, (0.5 * (l2 + h2)) @ Rz, h2 - l2
    except ValueError:  # flat parts: PCA frame
        R = vt
        coords = (v - c0) @ R.T
        lo, hi = coords.min(0), coords.max(0)
        center = c0 + (0.5 * (lo + hi)) @ R
        ext = hi - lo
    # order rows towards world X, Y, Z (greedy by |cos|), positive sign along them
    order = [-1, -1, -1]
    free = [0, 1, 2]
    A = np.abs(R)  # A[row, world]
    for _ in range(3):
        sub = A[np.ix_(free, [w for w in range(3) if order[w] < 0])]
        worlds = [w for w in range(3) if order[w] < 0]
        r, c = np.unravel_index(np.argmax(sub), sub.shape)
        order[worlds[c]] = free[r]
        free.remove(free[r])
    R2 = R[order].copy()
    ext2 = ext[order].copy()
    for k in range(3):
        if R2[k, k] < 0:
            R2[k] = -R2[k]
    if np.linalg.det(R2) < 0:  # keep right-handed (rare: a near-diagonal box)
        R2[2] = -R2[2]
    return PartBox(center=np.asarray(center, float), axes=R2, extents=np.maximum(ext2, MIN_EXTENT))


@dataclass
class Candidate:
    """One candidate joint of a part. ``axis`` (3,) unit, ``origin`` (3,) m (a point on the axis line),
    ``limits`` (lo, hi) rad or m; ``box_axis`` in 0..2, ``sign`` +-1, ``grid`` the two box-relative
    coordinates (in GRID) of the axis line in the plane perpendicular to it (revolute), else (0, 0)."""

    type: str
    axis: np.ndarray
    origin: np.ndarray
    limits: tuple[float, float]
    box_axis: int
    sign: int
    grid: tuple[int, int] = (0, 0)
    valid: bool | None = None
    info: dict = field(default_factory=dict)

    @property
    def index(self) -> int:
        """Position in :func:`candidate_motions` order."""
        return candidate_index(self.type, self.box_axis, self.sign, self.grid)


def perpendicular_axes(k: int) -> tuple[int, int]:
    """The two box axes perpendicular to box axis ``k`` (increasing order)."""
    return tuple(i for i in range(3) if i != k)  # type: ignore[return-value]


def candidate_index(type_: str, k: int, sign: int, grid: tuple[int, int] = (0, 0)) -> int:
    """Index of a candidate in the fixed order: revolute (axis k, sign, grid a, grid b), then prismatic."""
    s = 0 if sign > 0 else 1
    if type_ == "prismatic":
        return 54 + 2 * k + s
    a, b = GRID.index(grid[0]), GRID.index(grid[1])
    return ((k * 2 + s) * 3 + a) * 3 + b


N_CANDIDATES = 60


def candidate_motions(box: PartBox, prismatic_range: float | None = None) -> list[Candidate]:
    """All 60 candidates of a part with box ``box`` (see module doc), in :func:`candidate_index` order.

    ``prismatic_range`` (m) defaults to half the largest box extent.
    """
    out: list[Candidate] = []
    for k in range(3):
        for sign in (1, -1):
            i, j = perpendicular_axes(k)
            for a in GRID:
                for b in GRID:
                    rel = np.zeros(3)
                    rel[i], rel[j] = a, b
                    out.append(Candidate("revolute", sign * box.axes[k], box.relative_point(rel),
                                         (0.0, REVOLUTE_RANGE), k, sign, (a, b)))
    for k in range(3):
        for sign in (1, -1):
            rng_ = prismatic_range if prismatic_range is not None else 0.5 * float(np.max(box.extents))
            out.append(Candidate("prismatic", sign * box.axes[k], box.center.copy(), (0.0, rng_), k, sign))
    assert len(out) == N_CANDIDATES
    return out


def check_part_geometry(vertices: np.ndarray, faces: np.ndarray, name: str) -> None:
    """Raise KinemeshError naming the part if it has no faces or zero surface area."""
    from kinemesh.geometry.sampling import face_areas

    if len(vertices) == 0 or len(faces) == 0:
        raise KinemeshError(f"part '{name}' has no geometry (no faces)")
    if face_areas(vertices, faces).sum() <= 0:
        raise KinemeshError(f"part '{name}' is degenerate: zero surface area")


def label_valid_candidates(obj, parts: list[str] | None = None, config=None, grid=None) -> dict[str, list[Candidate]]:
    """Valid-candidate labels of an :class:`ArticulatedObject` (GEOPARD self-supervision): part name -> its 60
    candidates with ``valid`` set (:func:`kinemesh.geometry.validity.check_candidates`; ``config`` a
    ``ValidityConfig``, ``grid`` an ``OccupancyGrid`` to reuse). The moving set of a part is its subtree in
    ``obj``'s joint tree (for an unannotated object built by :mod:`kinemesh.articulation.parts` every part
    hangs off the root, so it is the part alone)."""
    from kinemesh.geometry.validity import OccupancyGrid, check_candidates, moving_groups

    grid = grid or OccupancyGrid(obj, config)
    groups = moving_groups(obj)
    out = {}
    for name in parts or [p.name for p in obj.parts if p.name != obj.root]:
        part = obj.part(name)
        if len(part.vertices) == 0:
            continue
        out[name] = check_candidates(grid, groups[name], candidate_motions(part_box(part.vertices, name)))
    return out
