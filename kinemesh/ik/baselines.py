"""IK baselines, each fitted in the same harness (:func:`kinemesh.ik.solver.solve`) as NeuROK.

Every baseline is an ``InstanceDecoder``-like object (latent -> points / vertices), so the comparison uses
the same targets, objective, optimiser and metrics:

- :class:`LinearDecoder` / :func:`pca_decoder`: a classic linear reduced-order model, the PCA of training
  deformation fields of the same category. Training meshes differ from the test mesh, so each training
  displacement field is first *transferred* to the test mesh: both rest meshes are normalized (bbox centred,
  longest side 1) and every test vertex takes the displacement of its nearest training rest vertex (in
  normalized units, rescaled to the test mesh's size). This assumes category-consistent orientation, which
  holds for our synthetic categories and PartNet-Mobility's canonical frames.
- :func:`nearest_pose`: the transferred training deformation (same pool) with the lowest objective.
- :class:`FreeFormDecoder`: free-form per-vertex displacements regularised by a uniform-Laplacian
  smoothness term and an edge-length (as-rigid-as-possible-style isometry) term, in the spirit of Neural
  Deformation Graphs; no learned prior at all.
- :class:`ArticulationDecoder`: the oracle: ground-truth parts and joints (axis, origin, limits), only the
  joint values are optimised. An upper bound for articulated objects.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from kinemesh.errors import KinemeshError
from kinemesh.geometry.normalize import normalization
from kinemesh.geometry.sampling import sample_surface


class _VertexDecoder:
    """Base: a decoder defined by ``vertices(latent)``; points are barycentric samples of those vertices."""

    def __init__(self, rest_vertices, faces, n_points: int = 2048, seed: int = 0):
        v = np.asarray(rest_vertices, dtype=np.float64)
        f = np.asarray(faces, dtype=np.int64)
        self.faces = f
        self.rest_vertices = torch.as_tensor(v, dtype=torch.float32)
        _, fid, bary = sample_surface(v, f, n_points, seed=seed)
        self._tri = torch.as_tensor(f[fid])  # (P, 3)
        self._bary = torch.as_tensor(bary, dtype=torch.float32)  # (P, 3)
        self.rest_points = self._interp(self.rest_vertices)

    def _interp(self, verts: torch.Tensor) -> torch.Tensor:
        """(..., N, 3) -> (..., P, 3)."""
        return (verts[..., self._tri, :] * self._bary[..., None]).sum(-2)

    def points(self, z: torch.Tensor) -> torch.Tensor:
        return self._interp(self.vertices(z))


class LinearDecoder(_VertexDecoder):
    """vertices(c) = rest + mean + sum_i c_i * std_i * basis_i; latent c (..., k), prior N(0, I).

    basis : (k, N, 3) orthonormal (as flattened vectors) displacement modes; std : (k,) their standard
    deviations over the training fields; mean : (N, 3) mean displacement.
    """

    def __init__(self, rest_vertices, faces, mean, basis, std, n_points: int = 2048, seed: int = 0):
        super().__init__(rest_vertices, faces, n_points, seed)
        self.mean = torch.as_tensor(np.asarray(mean), dtype=torch.float32)
        self.basis = torch.as_tensor(np.asarray(basis), dtype=torch.float32)
        self.std = torch.as_tensor(np.asarray(std), dtype=torch.float32)
        self.latent_dim = int(self.basis.shape[0])
        self.mu_cond = torch.zeros(self.latent_dim)

    def vertices(self, c: torch.Tensor) -> torch.Tensor:
        disp = torch.einsum("...k,knj->...nj", c * self.std, self.basis)
        return self.rest_vertices + self.mean + disp


def transfer_displacements(rest_vertices: np.ndarray, source_rest: np.ndarray, source_disp: np.ndarray,
                           k: int = 1) -> np.ndarray:
    """Transfer displacement fields from a source mesh to ``rest_vertices`` by nearest neighbours in
    normalized space (see module docstring).

    rest_vertices (N, 3), source_rest (S, 3), source_disp (F, S, 3) metres -> (F, N, 3) metres.
    """
    from scipy.spatial import cKDTree

    c_t, s_t = normalization(rest_vertices)
    c_s, s_s = normalization(source_rest)
    tree = cKDTree((source_rest - c_s) * s_s)
    _, idx = tree.query((rest_vertices - c_t) * s_t, k=k)
    d = np.asarray(source_disp)[:, idx] * (s_s / s_t)
    return d if k == 1 else d.mean(2)


def transferred_pool(rest_vertices: np.ndarray, sequences, max_fields: int = 400, seed: int = 0) -> np.ndarray:
    """The pool of training deformation fields transferred to the rest mesh: (F, N, 3) metres.

    sequences : iterable of KinematicSequence (training split). At most ``max_fields`` frames in total,
    spread evenly over the sequences (seeded).
    """
    seqs = list(sequences)
    if not seqs:
        raise KinemeshError("baseline: no training sequences to build a deformation pool from")
    rng = np.random.default_rng(seed)
    per = max(1, max_fields // len(seqs))
    out = []
    for s in seqs:
        T = s.frames.shape[0]
        pick = np.sort(rng.choice(T, min(per, T), replace=False))
        disp = s.frames[pick].astype(np.float64) - s.rest_vertices[None].astype(np.float64)
        out.append(transfer_displacements(rest_vertices, s.rest_vertices.astype(np.float64), disp))
    return np.concatenate(out)[:max_fields]


def pca_decoder(rest_vertices, faces, pool: np.ndarray, k: int | None = None, explained: float = 0.99,
                max_k: int = 32, n_points: int = 2048, seed: int = 0) -> LinearDecoder:
    """PCA of a transferred deformation pool (F, N, 3) as a :class:`LinearDecoder` (k modes: fixed, or the
    fewest holding ``explained`` of the variance, at most ``max_k``)."""
    F, N, _ = pool.shape
    X = pool.reshape(F, -1)
    mean = X.mean(0)
    U, S, Vt = np.linalg.svd(X - mean, full_matrices=False)
    var = S ** 2 / max(F - 1, 1)
    if k is None:
        tot = var.sum()
        k = int(np.searchsorted(np.cumsum(var) / tot, explained - 1e-12) + 1) if tot > 0 else 1
        k = min(k, max_k)
    k = max(1, min(k, len(S)))
    std = np.sqrt(np.maximum(var[:k], 1e-12))
    return LinearDecoder(rest_vertices, faces, mean.reshape(N, 3), Vt[:k].reshape(k, N, 3), std, n_points, seed)


class PoolDecoder(_VertexDecoder):
    """The pool as a decoder with one-hot 'latent' (used by :func:`nearest_pose`): vertices(i) = rest + pool[i]."""

    def __init__(self, rest_vertices, faces, pool, n_points: int = 2048, seed: int = 0):
        super().__init__(rest_vertices, faces, n_points, seed)
        self.pool = torch.as_tensor(pool, dtype=torch.float32)
        self.latent_dim = 1
        self.mu_cond = torch.zeros(1)

    def vertices(self, i: torch.Tensor) -> torch.Tensor:
        """i (..., 1) pool indices (as floats) -> (..., N, 3)."""
        return self.rest_vertices + self.pool[i.long().reshape(i.shape[:-1])]


def nearest_pose(rest_vertices, faces, pool: np.ndarray, target, n_points: int = 2048, seed: int = 0,
                 batch: int = 16):
    """The transferred training deformation with the lowest IK objective (same data term as the solver).

    Returns (vertices (N, 3) float64 metres, index into the pool, objective value).
    """
    from kinemesh.ik.solver import IKConfig, Objective

    dec = PoolDecoder(rest_vertices, faces, pool, n_points, seed)
    obj = Objective(dec, target, IKConfig(prior_weight=0.0), None)
    best, best_i = math.inf, -1
    with torch.no_grad():
        for s in range(0, len(pool), batch):
            idx = torch.arange(s, min(s + batch, len(pool)), dtype=torch.float32)[:, None]
            e = obj(idx, None)
            j = int(torch.argmin(e))
            if float(e[j]) < best:
                best, best_i = float(e[j]), s + j
    verts = (dec.rest_vertices + dec.pool[best_i]).numpy().astype(np.float64)
    return verts, best_i, best


class FreeFormDecoder(_VertexDecoder):
    """Free-form deformation: latent = per-vertex displacement in normalized units (..., 3N).

    Use :meth:`regularizer` as the solver's ``regularizer``, a prior_weight of 0, and one start.
    """

    def __init__(self, rest_vertices, faces, n_points: int = 2048, seed: int = 0,
                 laplacian_weight: float = 1.0, edge_weight: float = 10.0):
        super().__init__(rest_vertices, faces, n_points, seed)
        N = len(self.rest_vertices)
        _, s = normalization(self.rest_vertices.numpy())
        self.s = float(s)
        self.latent_dim = 3 * N
        self.mu_cond = torch.zeros(3 * N)
        f = torch.as_tensor(self.faces)
        e = torch.cat([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
        e = torch.unique(torch.sort(e, 1).values, dim=0)
        self.edges = e
        deg = torch.zeros(N).index_add_(0, e.reshape(-1), torch.ones(e.numel()))
        self._deg = deg.clamp_min(1)
        rv = self.rest_vertices * self.s
        self.rest_len = (rv[e[:, 0]] - rv[e[:, 1]]).norm(dim=-1)
        self.laplacian_weight, self.edge_weight = laplacian_weight, edge_weight

    def vertices(self, d: torch.Tensor) -> torch.Tensor:
        return self.rest_vertices + d.reshape(*d.shape[:-1], -1, 3) / self.s

    def laplacian(self, x: torch.Tensor) -> torch.Tensor:
        """Uniform graph Laplacian: x_i - mean of neighbours; (..., N, 3) -> (..., N, 3)."""
        i, j = self.edges[:, 0], self.edges[:, 1]
        acc = torch.zeros_like(x)
        acc = acc.index_add(-2, i, x[..., j, :]).index_add(-2, j, x[..., i, :])
        return x - acc / self._deg[:, None]

    def regularizer(self, d: torch.Tensor) -> torch.Tensor:
        """Laplacian smoothness of the displacement + squared edge-length change, (B, 3N) -> (B,)."""
        disp = d.reshape(*d.shape[:-1], -1, 3)
        lap = self.laplacian(disp).pow(2).sum(-1).mean(-1)
        x = self.rest_vertices * self.s + disp
        ln = (x[..., self.edges[:, 0], :] - x[..., self.edges[:, 1], :]).norm(dim=-1)
        edge = (ln - self.rest_len).pow(2).mean(-1)
        return self.laplacian_weight * lap + self.edge_weight * edge


def _rodrigues(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """(3,) unit axis, (B,) angle -> (B, 3, 3)."""
    K = torch.zeros(3, 3, dtype=angle.dtype)
    K[0, 1], K[0, 2], K[1, 0], K[1, 2], K[2, 0], K[2, 1] = -axis[2], axis[1], axis[2], -axis[0], -axis[1], axis[0]
    s, c = torch.sin(angle)[:, None, None], torch.cos(angle)[:, None, None]
    return torch.eye(3, dtype=angle.dtype) + s * K + (1 - c) * (K @ K)


class ArticulationDecoder(_VertexDecoder):
    """Oracle: ground-truth joints, latent u (..., J) unconstrained per movable joint.

    Joint value = lo + (hi - lo) * sigmoid(u) for limited joints (so limits always hold), u itself
    (radians / metres) for continuous or unlimited ones. ``mu_cond`` is the u of the rest pose (value 0,
    clamped inside the limits).

    Parameters
    ----------
    rest_vertices (N, 3), faces (M, 3), part_ids (N,) int: index into ``part_names``.
    part_names : list of part names (as named by the joints' parent/child).
    joints : list of ``kinemesh.data.articulated.Joint`` or joint dicts (``meta.joints`` contract).
    """

    def __init__(self, rest_vertices, faces, part_ids, part_names, joints, n_points: int = 2048, seed: int = 0):
        from kinemesh.data.articulated import Joint

        super().__init__(rest_vertices, faces, n_points, seed)
        js = [j if isinstance(j, Joint) else Joint.from_dict(j) for j in joints]
        self.part_ids = np.asarray(part_ids, dtype=np.int64)
        names = list(part_names)
        if self.part_ids.max() >= len(names):
            raise KinemeshError(f"oracle: part id {self.part_ids.max()} but only {len(names)} part names")
        children = {j.child for j in js}
        known = set(names) | {j.parent for j in js} | children
        roots = [n for n in known if n not in children]
        if len(roots) != 1:
            raise KinemeshError(f"oracle: joints do not form one tree (roots {roots})")
        by_parent: dict[str, list] = {}
        for j in js:
            by_parent.setdefault(j.parent, []).append(j)
        order, stack = [], [roots[0]]
        while stack:
            n = stack.pop()
            for j in by_parent.get(n, []):
                order.append(j)
                stack.append(j.child)
        self.root, self.order, self.names = roots[0], order, names
        self.movable = [j for j in order if j.movable]
        self.latent_dim = max(1, len(self.movable))
        mu = []
        for j in self.movable:
            if j.limits is not None and j.limits[1] - j.limits[0] > 1e-9:
                lo, hi = j.limits
                fr = min(max((0.0 - lo) / (hi - lo), 1e-3), 1 - 1e-3)
                mu.append(math.log(fr / (1 - fr)))
            else:
                mu.append(0.0)
        self.mu_cond = torch.tensor(mu if mu else [0.0], dtype=torch.float32)

    def sample_latents(self, n: int, seed: int = 0) -> torch.Tensor:
        """n starting latents (n, J) with joint values uniform within the limits (continuous: [-pi, pi]).

        Prior samples around ``mu_cond`` would stay near the rest pose when 0 is a limit (sigmoid saturation).
        """
        rng = np.random.default_rng(seed)
        cols = []
        for j in self.movable:
            if j.limits is not None and j.limits[1] - j.limits[0] > 1e-9:
                fr = rng.uniform(0.02, 0.98, n)
                cols.append(np.log(fr / (1 - fr)))
            else:
                cols.append(rng.uniform(-np.pi, np.pi, n) if j.type != "prismatic" else rng.normal(0, 0.1, n))
        if not cols:
            return torch.zeros(n, self.latent_dim)
        return torch.as_tensor(np.stack(cols, 1), dtype=torch.float32)

    def joint_values(self, u: torch.Tensor) -> torch.Tensor:
        """u (B, J) -> joint values (B, J), radians / metres."""
        out = []
        for i, j in enumerate(self.movable):
            if j.limits is not None and j.limits[1] - j.limits[0] > 1e-9:
                lo, hi = j.limits
                out.append(lo + (hi - lo) * torch.sigmoid(u[:, i]))
            else:
                out.append(u[:, i])
        return torch.stack(out, -1) if out else u[:, :0]

    def vertices(self, u: torch.Tensor) -> torch.Tensor:
        shape = u.shape[:-1]
        u = u.reshape(-1, self.latent_dim)
        B = u.shape[0]
        vals = self.joint_values(u)
        eye = torch.eye(3).expand(B, 3, 3)
        R = {self.root: eye}
        t = {self.root: torch.zeros(B, 3)}
        mi = {j.name: i for i, j in enumerate(self.movable)}
        for j in self.order:
            a = torch.as_tensor(j.axis, dtype=torch.float32)
            o = torch.as_tensor(j.origin, dtype=torch.float32)
            if j.type in ("revolute", "continuous"):
                Rj = _rodrigues(a, vals[:, mi[j.name]])
                tj = o - Rj @ o
            elif j.type == "prismatic":
                Rj, tj = eye, a * vals[:, mi[j.name], None]
            else:
                Rj, tj = eye, torch.zeros(B, 3)
            R[j.child] = R[j.parent] @ Rj
            t[j.child] = (R[j.parent] @ tj[..., None])[..., 0] + t[j.parent]
        Rs = torch.stack([R.get(n, eye) for n in self.names], 1)  # (B, n_parts, 3, 3)
        ts = torch.stack([t.get(n, torch.zeros(B, 3)) for n in self.names], 1)
        pid = torch.as_tensor(self.part_ids)
        v = torch.einsum("bnij,nj->bni", Rs[:, pid], self.rest_vertices) + ts[:, pid]
        return v.reshape(*shape, -1, 3)
