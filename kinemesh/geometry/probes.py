"""Motion probes: a few plausible poses of a rest mesh, from its geometry (and joints, for articulated objects).

The kinematic model's encoder maps each probe to its posterior mean; the principal directions of those posterior
means span the instance's reduced coordinates (``kinemesh.reduce.active_subspace.fit_probes``). Probes are
deliberately generic: an articulated object's parts turned / slid along their joints within the limits; an
elastic body squashed, stretched, bent, twisted and dented; a cloth folded along lines and hanging from its edges.
They say which motions the object should be able to make, not how it moves under a given load: the dynamics
still decide that.

All functions take vertices (N, 3) metres (z up) and return probes (n, N, 3) float64 in the same vertex order.
"""

from __future__ import annotations

import numpy as np

from kinemesh.errors import ConfigError


def _frame(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre (3,), principal axes (3, 3) rows by decreasing extent, extents (3,)) of points v (N, 3)."""
    c = v.mean(0)
    _, _, vt = np.linalg.svd(v - c, full_matrices=False)
    ext = np.ptp((v - c) @ vt.T, axis=0)
    return c, vt, np.maximum(ext, 1e-9)


def elastic_probes(vertices: np.ndarray, amplitude: float = 0.25) -> np.ndarray:
    """Squashes and stretches along each principal axis (volume-preserving), bends about the two shorter axes
    in both senses, a twist about the longest axis and four dents, each at ``amplitude`` (0.25: a quarter of the
    size, or a 25 % squash) and half of it."""
    v = np.asarray(vertices, np.float64)
    c, R, ext = _frame(v)
    u = (v - c) @ R.T  # local coordinates along the principal axes
    size = float(ext.max())
    out = []
    for a in (amplitude, 0.5 * amplitude):
        for i in range(3):
            for s in (1.0 - a, 1.0 + a):  # squash / stretch along axis i, the others scaled to keep the volume
                f = np.full(3, 1.0 / np.sqrt(s))
                f[i] = s
                out.append(u * f)
        for i in (1, 2):  # bend: displace along axis i quadratically along the longest axis
            t = u[:, 0] / (0.5 * ext[0])
            for sgn in (1.0, -1.0):
                w = u.copy()
                w[:, i] += sgn * a * 0.5 * ext[0] * (t * t - 1.0 / 3.0)
                out.append(w)
        ang = 2.0 * a * u[:, 0] / (0.5 * ext[0])  # twist about the longest axis
        w = u.copy()
        w[:, 1] = np.cos(ang) * u[:, 1] - np.sin(ang) * u[:, 2]
        w[:, 2] = np.sin(ang) * u[:, 1] + np.cos(ang) * u[:, 2]
        out.append(w)
    # dents: a Gaussian push towards the centre around the extreme points along +-axis 1 and 2 (pokes)
    for i in (1, 2):
        for sgn in (1.0, -1.0):
            p = u[np.argmax(sgn * u[:, i])]
            g = np.exp(-((u - p) ** 2).sum(1) / (2 * (0.25 * size) ** 2))
            w = u - amplitude * 0.5 * ext[i] * g[:, None] * (p / (np.linalg.norm(p) + 1e-12))[None]
            out.append(w)
    return np.stack([w @ R + c for w in out])


def cloth_probes(vertices: np.ndarray, angles=(45.0, 90.0)) -> np.ndarray:
    """Folds of a sheet: the part beyond a line (at 1/4, 1/2 and 3/4 of each in-plane extent) turned about the
    line by each of ``angles`` in both senses, the whole sheet hanging from each of its four edges (turned about
    the edge), and a sag (the middle lowered along the sheet's normal)."""
    v = np.asarray(vertices, np.float64)
    c, R, ext = _frame(v)
    n = R[2]
    if np.abs(n).max() > 0.9:  # a sheet in a world plane: fold along its world axes (a square has no principal ones)
        a = np.eye(3)[[i for i in range(3) if i != int(np.argmax(np.abs(n)))]]
        a0 = a[0] - (a[0] @ n) * n
        a0 /= np.linalg.norm(a0)
        R = np.stack([a0, np.cross(n, a0), n])
        ext = np.maximum(np.ptp((v - c) @ R.T, axis=0), 1e-9)
    u = (v - c) @ R.T  # axes 0, 1 in the sheet, axis 2 its normal
    if R[2, 2] < 0:  # the normal points up: a positive fold then lowers the far side under gravity
        u[:, 2] *= -1.0
        R = R.copy()
        R[2] *= -1.0
    out = []

    def fold(w: np.ndarray, i: int, line: float, side: float, deg: float) -> np.ndarray:
        th = np.radians(deg)
        d = side * (w[:, i] - line)  # distance beyond the fold line on the turned side
        m = d > 0
        r = w.copy()
        r[m, i] = line + side * d[m] * np.cos(th)
        r[m, 2] = w[m, 2] - d[m] * np.sin(th)
        return r

    for i in (0, 1):
        lo, hi = u[:, i].min(), u[:, i].max()
        for deg in angles:
            for side in (1.0, -1.0):
                edge = lo if side > 0 else hi
                out.append(fold(u, i, edge, side, deg))  # hanging from the opposite edge
                for s in (-deg, deg):
                    for frac in (0.25, 0.5, 0.75):
                        out.append(fold(u, i, lo + frac * (hi - lo), side, s))
    r2 = (u[:, 0] / (0.5 * ext[0])) ** 2 + (u[:, 1] / (0.5 * ext[1])) ** 2
    for a in (0.15, 0.3):
        w = u.copy()
        w[:, 2] -= a * float(ext[:2].max()) * np.clip(1.0 - r2, 0.0, None)
        out.append(w)
    return np.stack([w @ R + c for w in out])


def joint_span(joint, child_vertices: np.ndarray) -> tuple[float, float]:
    """The range (lo, hi) (rad or m) a probe moves ``joint`` over: its limits, else +-pi for a continuous joint,
    +-90 deg for a revolute one, +-half the child's extent along the axis for a prismatic one (``child_vertices``
    (n, 3) m; 0.1 m when empty)."""
    j = joint
    if j.limits is not None and j.limits[1] - j.limits[0] > 1e-9:
        return j.limits
    if j.type in ("revolute", "continuous"):
        return (-np.pi, np.pi) if j.type == "continuous" else (-0.5 * np.pi, 0.5 * np.pi)
    half = 0.5 * float(np.ptp(child_vertices @ j.axis)) if len(child_vertices) else 0.1
    return (-half, half)


def articulated_probes(vertices: np.ndarray, part_ids: np.ndarray, part_names: list[str], obj,
                       n_values: int = 4, n_mixed: int = 8, seed: int = 0) -> np.ndarray:
    """Poses of a segmented mesh moved by the joints of ``obj`` (an ArticulatedObject whose part names include
    ``part_names``; vertices of part ``part_ids[i]`` follow part ``part_names[part_ids[i]]``): every movable
    joint alone at ``n_values`` values spread over its limits (continuous joints over +-pi; a joint without limits
    over +-90 deg / +-half the part's extent), then ``n_mixed`` poses with all joints at random values.

    Raises ConfigError when ``obj`` has no movable joint or a part name is unknown."""
    v = np.asarray(vertices, np.float64)
    pid = np.asarray(part_ids).reshape(-1)
    joints = obj.movable_joints
    if not joints:
        raise ConfigError(f"{obj.name}: no movable joint to probe")
    known = {p.name for p in obj.parts}
    missing = sorted(set(part_names[i] for i in np.unique(pid)) - known)
    if missing:
        raise ConfigError(f"{obj.name}: parts {missing} of the mesh are not parts of the articulation")

    def span(j):
        return joint_span(j, v[np.isin(pid, [i for i, n in enumerate(part_names) if n == j.child])])

    def pose(values):
        T = obj.part_transforms(values)
        out = np.empty_like(v)
        for i, name in enumerate(part_names):
            m = pid == i
            if m.any():
                out[m] = v[m] @ T[name][:3, :3].T + T[name][:3, 3]
        return out

    probes = []
    for j in joints:
        lo, hi = span(j)
        for t in np.linspace(0.0, 1.0, n_values + 1)[1:]:  # away from rest, both ways where the limits allow
            for end in (hi, lo):
                if abs(end) > 1e-9:
                    probes.append(pose({j.name: t * end}))
    rng = np.random.default_rng(seed)
    for _ in range(n_mixed):
        probes.append(pose({j.name: float(rng.uniform(*span(j))) for j in joints}))
    return np.stack(probes)
