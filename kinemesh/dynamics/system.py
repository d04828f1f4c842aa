"""The latent mechanical system: generalized coordinates q, decoded points x(q), masses, potentials, forces.

NeuROK Sec. 5 treats the (reduced) latent state as generalized coordinates of the object. Here the map
x(q) (P, 3) is an ``InstanceDecoder.points`` (or a ``kinemesh.reduce.ReducedDecoder`` in reduced
coordinates q (k,)), every sampled surface point carries a mass m_p, and

    T(q, qd) = 1/2 sum_p m_p |J_p(q) qd|^2 + 1/2 m_reg |qd|^2          (kinetic energy, J = dx/dq)
    V(q)     = -sum_p m_p g . (x_p(q) - x_p(q_rest))                     (gravity)
             + 1/2 k |P (q - q_rest)|^2                                  (latent elastic term)
             + k_b / 3 sum_i P_i relu(|q_i - mu_i| - r)^3                (soft barrier beyond r = 3 std)
             + sum_springs 1/2 k_s |x_h(q) - target|^2                   (pins, held drags)
             + sum_e k / 2 (|x_i(q) - x_j(q)| - L_e)^2 / L_e             (cloth: stretching, ``Stretch``)

m_reg is a tiny latent inertia so M(q) = J^T diag(m) J + m_reg I is invertible even when a latent direction
moves no point; it is part of T, so energy is still conserved exactly. Non-conservative terms: external
point forces, wind and floor contact (projected with J^T) and Rayleigh damping -(alpha P M(q) P + beta k P) qd.
P = diag(``elastic_mask``) selects the latent (deformation) coordinates; the rigid-body coordinates a
``kinemesh.dynamics.floating.FloatingDecoder`` adds (rotation, translation) carry no elastic term, barrier or
Rayleigh damping (a free body keeps its momentum).

Everything is plain data (dataclasses); the functions in :mod:`kinemesh.dynamics.eom` evaluate it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from kinemesh.errors import ConfigError

def dtype_of(decoder) -> torch.dtype:
    """The floating dtype ``decoder`` computes in (its prior mean's; float32 when it has none)."""
    mu = getattr(decoder, "mu_cond", None)
    return mu.dtype if isinstance(mu, torch.Tensor) and mu.is_floating_point() else torch.float32


def as_numpy(x) -> np.ndarray:
    """x (a tensor or array) as float64 numpy (a view where it can)."""
    if isinstance(x, torch.Tensor):
        if x.dtype is torch.float64 and x.is_cpu and not x.requires_grad:  # the rollouts' case, ~25 calls a frame:
            return x.numpy()  # without the detach and cast calls (1.7 instead of 2.4 us)
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def object_size(decoder) -> float:
    """The longest side of the bounding box of ``decoder.rest_points``, metres (1 for a single point)."""
    rp = decoder.rest_points.detach().double()
    return float((rp.max(0).values - rp.min(0).values).max()) or 1.0


FD_STEP = {torch.float64: 1e-4, torch.float32: 5e-3}
"""Finite-difference step (q units, prior std) of ``derivatives="fd"`` per decoder dtype. Rounding of a float32
network (relative 6e-8) over a 1e-4 step left noise of about 1e-3 in J and of order 1 m per unit q^2 in the
second derivatives (velocity product, the ``local`` model's H), so with a float32 model (``kinemesh view``'s, a
library user's; the other commands run float64) held drags of real objects under gravity diverged even at 128
substeps per frame (3 real validation objects: 11 of 14; none at 5e-3; the viewer's drag-and-let-go under
gravity, midpoint rule: 7 of 8 diverged, none at 5e-3). Float64 decoders keep the small step."""


@dataclass
class Handles:
    """Selected mesh vertices, followed through the decoded points.

    A handle moves with the weighted displacement of its nearest sampled points:
    ``x_h(q) = rest_h + sum_j w_hj (x_{idx_hj}(q) - rest_points_{idx_hj})``, so its Jacobian is a fixed
    linear combination of rows of J (no extra network evaluation).

    Attributes
    ----------
    vertex_ids : (h,) int64 numpy, the mesh vertex ids.
    idx : (h, k) int64 tensor, point indices.
    w : (h, k) float64 tensor, weights (rows sum to 1).
    rest : (h, 3) float64 tensor, rest positions of the vertices, metres.
    """

    vertex_ids: np.ndarray
    idx: torch.Tensor
    w: torch.Tensor
    rest: torch.Tensor

    def __len__(self) -> int:
        return int(len(self.vertex_ids))

    def positions(self, x: torch.Tensor, rest_points: torch.Tensor) -> torch.Tensor:
        """Handle positions (..., h, 3) from points x (..., P, 3)."""
        d = x[..., self.idx, :] - rest_points[self.idx].to(x)  # (..., h, k, 3)
        return self.rest.to(x) + (self.w.to(x)[..., None] * d).sum(-2)

    def jacobian(self, J: torch.Tensor) -> torch.Tensor:
        """Handle Jacobian (k_q, h, 3) from the point Jacobian J (k_q, P, 3)."""
        return (self.w.to(J)[None, :, :, None] * J[:, self.idx, :]).sum(-2)

    def spread(self, f: torch.Tensor, n_points: int) -> torch.Tensor:
        """Point forces (P, 3) equivalent to handle forces f (h, 3) (transpose of the interpolation)."""
        out = torch.zeros(n_points, 3, dtype=f.dtype)
        out.index_add_(0, self.idx.reshape(-1), (self.w.to(f)[..., None] * f[:, None, :]).reshape(-1, 3))
        return out


def make_handles(decoder, vertex_ids, k: int = 4) -> Handles:
    """Handles for mesh vertices ``vertex_ids`` (h,) of ``decoder`` (an InstanceDecoder).

    Uses the decoder's ``handle_weights`` when it has them (``JointDecoder``: exact for parts posed rigidly),
    else its own vertex->point transfer (``knn_idx``, ``knn_w``) when it has one, else the ``k``
    nearest rest points (restricted to the vertex's part when the decoder exposes ``point_groups`` and
    ``vertex_groups``/``vertex_part``) with inverse-distance weights.

    Raises
    ------
    ConfigError for an empty selection or a vertex id out of range.
    """
    rest_vertices = decoder.rest_vertices.detach().double()
    n = int(rest_vertices.shape[0])
    ids = np.atleast_1d(np.asarray(vertex_ids)).reshape(-1)
    if ids.size == 0:
        raise ConfigError("no vertices selected")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ConfigError(f"vertex ids must be integers, got {ids.dtype}")
    bad = ids[(ids < 0) | (ids >= n)]
    if bad.size:
        raise ConfigError(f"vertex id {int(bad[0])} is out of range: the mesh has {n} vertices (ids 0..{n - 1})")
    ids = ids.astype(np.int64)
    knn_idx = getattr(decoder, "knn_idx", None)
    knn_w = getattr(decoder, "knn_w", None)
    exact = getattr(decoder, "handle_weights", None)
    if exact is not None:  # parts posed rigidly along joints: weights that carry the vertex exactly
        i, wt = exact(ids)
        idx, w = torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(wt, dtype=torch.float64)
    elif knn_idx is not None and knn_w is not None:
        idx = torch.as_tensor(np.asarray(knn_idx)[ids], dtype=torch.int64)
        w = torch.as_tensor(np.asarray(knn_w)[ids], dtype=torch.float64)
    else:
        from kinemesh.geometry.transfer import knn_weights

        pg = getattr(decoder, "point_groups", None)
        vg = getattr(decoder, "vertex_groups", None)
        if vg is None:
            vg = getattr(decoder, "vertex_part", None)
        if pg is None or vg is None:
            pg = vg = None
        else:
            pg, vg = np.asarray(pg).reshape(-1), np.asarray(vg).reshape(-1)[ids]
        i, wt = knn_weights(decoder.rest_points.detach().double().numpy(), rest_vertices[ids].numpy(), k=k,
                            point_groups=pg, vertex_groups=vg)
        idx = torch.as_tensor(np.asarray(i), dtype=torch.int64)
        w = torch.as_tensor(np.asarray(wt), dtype=torch.float64)
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-12)
    return Handles(ids, idx, w, rest_vertices[ids].clone())


@dataclass
class Spring:
    """A zero-length spring pulling handles to fixed targets (pins, held drags): V = 1/2 k |x_h - target|^2.

    Attributes
    ----------
    handles : Handles (h vertices).
    target : (h, 3) float64 tensor, anchor positions, metres.
    stiffness : float, N/m per handle.
    """

    handles: Handles
    target: torch.Tensor
    stiffness: float


@dataclass
class PointForce:
    """A constant external force on handles while ``t_start <= t < t_end``.

    Attributes
    ----------
    handles : Handles.
    force : (h, 3) float64 tensor, newtons per handle.
    t_start, t_end : seconds.
    """

    handles: Handles
    force: torch.Tensor
    t_start: float = 0.0
    t_end: float = float("inf")


@dataclass
class Wind:
    """Wind drag on the sampled surface points: f_p = 1/2 rho C_d a_p |n_p . u| |w| w (two-sided) or with
    ``max(-n_p . u, 0)`` (closed surfaces: only faces turned towards the wind), u = w / |w|.

    The normals are the rest normals of the sampled points (not re-rotated while deforming).

    Attributes
    ----------
    velocity : (3,) float64 tensor, wind velocity w, m/s.
    normals : (P, 3) float64 tensor, unit rest normals of the points.
    areas : (P,) float64 tensor, surface area per point, m^2.
    air_density : kg/m^3.
    drag_coefficient : C_d (dimensionless).
    two_sided : cloth-like sheets catch wind on both sides.
    """

    velocity: torch.Tensor
    normals: torch.Tensor
    areas: torch.Tensor
    air_density: float = 1.2
    drag_coefficient: float = 1.0
    two_sided: bool = False

    def point_forces(self) -> torch.Tensor:
        """(P, 3) newtons."""
        speed = float(torch.linalg.norm(self.velocity))
        if speed == 0.0:
            return torch.zeros_like(self.normals)
        u = self.velocity / speed
        c = self.normals @ u
        c = c.abs() if self.two_sided else (-c).clamp_min(0.0)
        return (0.5 * self.air_density * self.drag_coefficient * speed * self.areas * c)[:, None] * self.velocity


@dataclass
class Floor:
    """A horizontal floor z = ``height`` acting on the sampled points by penalty contact with friction.

    Per point p of mass m_p below the floor (penetration d = height - z_p > 0):
    normal force f_n = m_p max(k d - c vz, 0) (k = g / ``depth`` per kg: the object's weight is carried at
    about ``depth`` of penetration; c = 2 zeta sqrt(k)), friction f_t = -mu f_n v_t / sqrt(|v_t|^2 + v_eps^2)
    (regularised Coulomb). Forces (P, 3) in newtons, positions in metres.

    Attributes
    ----------
    height : float, metres.
    friction : mu (dimensionless).
    depth : penetration (m) at which the contact carries a point's weight.
    damping_ratio : zeta of the normal contact.
    slip_speed : v_eps (m/s), below which friction is viscous rather than Coulomb.
    """

    height: float
    friction: float = 0.8
    depth: float = 0.002
    damping_ratio: float = 0.7
    slip_speed: float = 0.05

    @property
    def stiffness(self) -> float:
        """k (N/m per kg)."""
        return 9.81 / self.depth

    def contact_forces(self, x: torch.Tensor, xd: torch.Tensor | None, point_mass: torch.Tensor) -> torch.Tensor:
        """(P, 3) forces on points at positions x (P, 3) with velocities xd (P, 3) (None = at rest)."""
        pen = (self.height - x[:, 2]).clamp_min(0.0)
        f = torch.zeros_like(x)
        if not bool((pen > 0).any()):
            return f
        vz = torch.zeros_like(pen) if xd is None else xd[:, 2]
        k = self.stiffness
        c = 2.0 * self.damping_ratio * k ** 0.5
        fn = point_mass * (k * pen - c * vz * (pen > 0)).clamp_min(0.0)
        f[:, 2] = fn
        if xd is not None and self.friction > 0:
            vt = xd[:, :2]
            f[:, :2] = -self.friction * fn[:, None] * vt / torch.sqrt((vt * vt).sum(-1, keepdim=True)
                                                                      + self.slip_speed ** 2)
        return f

    def gauss_newton(self, x: torch.Tensor, xd: torch.Tensor | None, J: torch.Tensor,
                     point_mass: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stiffness and damping (k, k) of the contacts for the implicit solve's preconditioner:
        K = sum_p m_p k Jz Jz^T, C = sum_p m_p c Jz Jz^T + mu f_n / s (Jx Jx^T + Jy Jy^T) over the points in
        contact (J (k, P, 3))."""
        k = J.shape[0]
        K = torch.zeros(k, k, dtype=torch.float64)
        C = torch.zeros(k, k, dtype=torch.float64)
        inside = (self.height - x[:, 2]) > 0
        if not bool(inside.any()):
            return K, C
        m = point_mass[inside]
        Jz = J[:, inside, 2]
        kf = self.stiffness
        M = torch.einsum("ip,p,jp->ij", Jz, m, Jz)
        K = K + kf * M
        C = C + 2.0 * self.damping_ratio * kf ** 0.5 * M
        if self.friction > 0:
            fn = self.contact_forces(x, xd, point_mass)[inside, 2]
            vt = torch.zeros(int(inside.sum()), 2, dtype=torch.float64) if xd is None else xd[inside, :2]
            w = self.friction * fn / torch.sqrt((vt * vt).sum(-1) + self.slip_speed ** 2)
            Jt = J[:, inside, :2]
            C = C + torch.einsum("ipc,p,jpc->ij", Jt, w, Jt)
        return K, C


class NormalPenalty:
    """The law of one-sided normal penalty contacts (``PartContacts``, ``kinemesh.dynamics.joints.JointStops``):
    a contact of mass m at penetration p (m) closing at rate pd (m/s) pushes with m (k p - 2 zeta sqrt(k) pd), never
    pulling, k = g / ``depth`` per kg (a point's weight is carried at ``depth`` m), zeta = ``damping_ratio``."""

    depth: float
    damping_ratio: float

    @property
    def stiffness(self) -> float:
        """k (N/m per kg)."""
        return 9.81 / self.depth

    def normal_forces(self, pen: torch.Tensor, rate: torch.Tensor, mass: torch.Tensor) -> torch.Tensor:
        """(c,) force magnitudes (N) at penetrations ``pen`` (c,) m, closing rates ``rate`` (c,) m/s (the gap's
        growth rate) and masses ``mass`` (c,) kg."""
        k = self.stiffness
        return mass * (k * pen - 2.0 * self.damping_ratio * k ** 0.5 * rate * (pen > 0)).clamp_min(0.0)

    def penalty_matrices(self, Jg: torch.Tensor, mass: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stiffness and damping (k, k) of the contacts with gap Jacobians ``Jg`` (k, c) and masses (c,), for the
        implicit solve's preconditioner: K = sum m k Jg Jg^T, C = sum m c Jg Jg^T."""
        M = torch.einsum("ic,c,jc->ij", Jg, mass, Jg)
        return self.stiffness * M, 2.0 * self.damping_ratio * self.stiffness ** 0.5 * M


@dataclass
class PartContacts(NormalPenalty):
    """Contacts between the parts of an object as they touch at rest: joint stops for a fixed-base object.

    Pairs (i, j) of sampled points on different parts that are within a small distance at rest; n_j is the
    outward rest normal at j. The gap g = (x_i - x_j) . n_j may grow (a door opens) but not drop more than
    ``slack`` below its rest value (a lid closing past its seat, a drawer pushed through its back):
    f_i = m_i (k p - c gd) n_j with p the excess penetration, f_j = -f_i (normal only, no friction). The rest
    normals are kept fixed, which is right for the fixed base that every pair here has on one side.

    Attributes
    ----------
    i, j : (c,) int64 tensors, point indices.
    normals : (c, 3) float64 tensor, n_j at rest.
    gap0 : (c,) float64 tensor, rest gaps (m), clamped to <= 0.
    slack : m of penetration allowed before the stop acts.
    depth : m of penetration at which a point's weight is carried (k = g / depth per kg).
    damping_ratio : zeta of the contact.
    """

    i: torch.Tensor
    j: torch.Tensor
    normals: torch.Tensor
    gap0: torch.Tensor
    slack: float
    depth: float
    damping_ratio: float = 0.7

    def _penetration(self, x: torch.Tensor) -> torch.Tensor:
        """(c,) excess penetration (m) of every pair at points x (P, 3)."""
        g = ((x[self.i] - x[self.j]) * self.normals).sum(-1)
        return (self.gap0 - self.slack - g).clamp_min(0.0)

    def subset(self, keep) -> "PartContacts | None":
        """The pairs where ``keep`` (c,) bool is True, built at rest (None when none is)."""
        keep = torch.as_tensor(np.asarray(keep, dtype=bool))
        if not bool(keep.any()):
            return None
        return PartContacts(self.i[keep], self.j[keep], self.normals[keep], self.gap0[keep], self.slack,
                            self.depth, self.damping_ratio)

    def relax(self, x: torch.Tensor) -> None:
        """Let the pairs start at points x (P, 3) (the released state): a pair that already penetrates there
        (the model cannot turn a part exactly about its hinge) is stopped from going deeper, not pushed out, so
        the stops add no energy at release."""
        if not hasattr(self, "_gap_rest"):
            self._gap_rest = self.gap0.clone()
        g = ((x[self.i] - x[self.j]) * self.normals).sum(-1).detach().to(self.gap0)
        self.gap0 = torch.minimum(self._gap_rest, g + self.slack)

    def contact_forces(self, x: torch.Tensor, xd: torch.Tensor | None, point_mass: torch.Tensor) -> torch.Tensor:
        """(P, 3) forces on points at x (P, 3) with velocities xd (P, 3) (None = at rest)."""
        pen = self._penetration(x)
        f = torch.zeros_like(x)
        if not bool((pen > 0).any()):
            return f
        gd = torch.zeros_like(pen) if xd is None else ((xd[self.i] - xd[self.j]) * self.normals).sum(-1)
        fn = self.normal_forces(pen, gd, torch.minimum(point_mass[self.i], point_mass[self.j]))
        fi = fn[:, None] * self.normals
        f.index_add_(0, self.i, fi)
        f.index_add_(0, self.j, -fi)
        return f

    def gauss_newton(self, x: torch.Tensor, xd: torch.Tensor | None, J: torch.Tensor,
                     point_mass: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Stiffness and damping (k, k) of the pairs in contact for the implicit solve's preconditioner:
        K = sum m k Jg Jg^T, C = sum m c Jg Jg^T with Jg = (J_i - J_j) . n_j (J (k, P, 3))."""
        k = J.shape[0]
        on = self._penetration(x) > 0
        if not bool(on.any()):
            return torch.zeros(k, k, dtype=torch.float64), torch.zeros(k, k, dtype=torch.float64)
        i, j = self.i[on], self.j[on]
        Jg = ((J[:, i] - J[:, j]) * self.normals[on]).sum(-1)  # (k, c)
        return self.penalty_matrices(Jg, torch.minimum(point_mass[i], point_mass[j]))


def part_contacts(decoder, faces=None, vertices=None, radius: float = 0.02, slack: float = 0.004,
                  depth: float = 2e-4, base=None) -> PartContacts | None:
    """The PartContacts of ``decoder`` (needs ``point_groups`` (P,) and ``face_ids`` (P,), as a
    NeuralInstanceDecoder or wrappers of it expose): pairs within ``radius`` x the object size at rest, or 1.5
    sample spacings if that is more; slack and depth are fractions of the size too. ``base``: the group of a
    held base part; then only pairs against its surface are kept (its rest normals stay right; two doors that
    touch at rest may pass each other's rest planes once one opens). None when the decoder has no part labels
    or no parts touch."""
    import trimesh
    from scipy.spatial import cKDTree

    groups = getattr(decoder, "point_groups", None)
    face_ids = getattr(decoder, "face_ids", None)
    if groups is None or face_ids is None or faces is None or vertices is None:
        return None
    groups = np.asarray(groups).reshape(-1)
    if len(np.unique(groups)) < 2:
        return None
    rp = decoder.rest_points.detach().double().numpy()
    size = float(np.ptp(rp, axis=0).max()) or 1.0
    normals = np.asarray(trimesh.Trimesh(vertices, faces, process=False).face_normals)[np.asarray(face_ids)]
    tree = cKDTree(rp)
    spacing = float(np.median(tree.query(rp, k=2)[0][:, 1]))
    reach = max(radius * size, 1.5 * spacing)  # at least the sampling density's neighbour distance
    ii, jj = [], []
    for a, b in tree.query_pairs(reach, output_type="ndarray"):
        if groups[a] != groups[b]:
            for u, w in ((a, b), (b, a)):
                if base is None or groups[w] == base:
                    ii.append(u)
                    jj.append(w)
    if not ii:
        return None
    i, j = np.asarray(ii), np.asarray(jj)
    gap = ((rp[i] - rp[j]) * normals[j]).sum(-1)
    keep = gap > -0.25 * reach  # i starts outside (or on) j's surface
    if not keep.any():
        return None
    i, j, gap = i[keep], j[keep], gap[keep]
    t = lambda a, dt=torch.float64: torch.as_tensor(a, dtype=dt)  # noqa: E731
    return PartContacts(t(i, torch.int64), t(j, torch.int64), t(normals[j]), t(np.minimum(gap, 0.0)),
                        slack * size, depth * size)


@dataclass
class Stretch:
    """The stretching energy of a sheet (cloth): springs on the edges (i, j) of a graph of the sampled points,

        V = sum_e k / 2 (|x_i - x_j| - L_e)^2 / L_e,

    a mass-spring cloth (Provot 1995, "Deformation constraints in a mass-spring model to describe rigid cloth
    behavior", Graphics Interface) whose edge e is a linear spring of constant k / L_e, so a uniform strain s costs
    k / 2 s^2 sum_e L_e and a finer graph is not stiffer per edge. Positions in metres, k in newtons.

    Attributes
    ----------
    i, j : (e,) int64 tensors, point indices of the edges.
    length : (e,) float64 tensor, rest lengths L_e (m).
    stiffness : k (N).
    """

    i: torch.Tensor
    j: torch.Tensor
    length: torch.Tensor
    stiffness: float

    def _edges(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(edge vectors x_i - x_j (e, 3), lengths (e,)) at points x (P, 3)."""
        d = x[self.i] - x[self.j]
        return d, torch.linalg.norm(d, dim=-1).clamp_min(1e-12)

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """V (J) at points x (P, 3)."""
        s = self._edges(x)[1] - self.length
        return 0.5 * self.stiffness * (s * s / self.length).sum()

    def gradient(self, x: torch.Tensor) -> torch.Tensor:
        """dV/dx (P, 3) at points x (P, 3): k (l - L) / L u_e on x_i and its negative on x_j (u = unit edge)."""
        d, l = self._edges(x)
        g = (self.stiffness * (l - self.length) / (self.length * l))[:, None] * d
        out = torch.zeros_like(x)
        out.index_add_(0, self.i, g)
        out.index_add_(0, self.j, -g)
        return out

    def stiffness_matrix(self, x: torch.Tensor, J) -> torch.Tensor:
        """sum_e J_e^T H_e J_e (k, k) with J_e = J_i - J_j (J (k, P, 3) or a ``local.ModelJacobian``) and H_e the
        edge's Hessian k / L ((L / l) u u^T + (1 - L / l) I) (the exact d2V/dx2 of a stretched edge; the second term
        is clamped at 0 for a compressed one, so the matrix stays positive semi-definite): d2V/dq2 less the
        decoder's curvature terms, for the implicit solve's preconditioner."""
        d, l = self._edges(x)
        Je = J[:, self.i] - J[:, self.j]  # (k, e, 3)
        Ju = (Je * (d / l[:, None])).sum(-1)  # (k, e)
        a = self.stiffness / l
        b = (self.stiffness / self.length * (1.0 - self.length / l)).clamp_min(0.0)
        Jb = (Je * b[:, None]).reshape(len(Je), -1)
        return (Ju * a) @ Ju.T + Jb @ Je.reshape(len(Je), -1).T


def stretch_graph(points: np.ndarray, neighbours: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """The edges (i, j) (e,) each of the undirected graph joining every point (P, 3) to its ``neighbours``
    nearest others (``Stretch``'s springs; i < j, each edge once)."""
    from scipy.spatial import cKDTree

    n = min(int(neighbours) + 1, len(points))
    nbr = np.asarray(cKDTree(points).query(points, k=n)[1]).reshape(len(points), n)[:, 1:]
    e = np.sort(np.stack([np.repeat(np.arange(len(points)), n - 1), nbr.reshape(-1)], 1), axis=1)
    e = np.unique(e[e[:, 0] != e[:, 1]], axis=0)
    return e[:, 0], e[:, 1]


@dataclass
class System:
    """A latent mechanical system (see the module docstring for T and V).

    Attributes
    ----------
    decoder : object with ``points(q (..., k)) -> (..., P, 3)`` metres, ``rest_points`` (P, 3) and
        ``mu_cond`` (k,) (an InstanceDecoder or a ReducedDecoder).
    point_mass : (P,) float64 tensor, kg per sampled point.
    q_rest : (k,) float64 tensor, the state of the rest shape (elastic term centre).
    gravity : (3,) float64 tensor, m/s^2 (zeros = no gravity).
    stiffness : k, latent elastic stiffness (J per unit q^2); 0 = no restoring force (free hinge).
    barrier_radius : r, prior standard deviations before the soft barrier acts (|q_i - mu_i| > r).
    barrier_stiffness : k_b (J per unit q^3).
    damping_mass : alpha (1/s), Rayleigh mass-proportional damping.
    damping_stiffness : beta (s), Rayleigh stiffness-proportional damping (times k).
    latent_inertia : m_reg (kg m^2 per unit q^2), keeps M invertible.
    springs : conservative springs on handles (pins, held drags).
    stretch : the cloth's stretching energy on the points (``Stretch``), or None.
    forces : external non-conservative forces (PointForce, Wind).
    derivatives : "jvp" (exact forward-mode J and JVP-of-JVP) or "fd" (batched central differences; see
        :func:`kinemesh.dynamics.eom.kinematics`).
    elastic_mask : (k,) bool tensor, True for latent coordinates (elastic term, barrier, Rayleigh damping),
        False for rigid-body ones; None = all latent.
    prior_mask : (k,) bool tensor, True for the coordinates the soft barrier keeps within ``barrier_radius`` of
        the prior mean (the network's); None = ``elastic_mask``. A joint's own coordinate (a wheel's turn,
        ``JointDecoder.direct``) has no prior: it is False there.
    fd_step : finite-difference step in q units for ``derivatives="fd"``; None = ``FD_STEP`` for the decoder's dtype.
    """

    decoder: object
    point_mass: torch.Tensor
    q_rest: torch.Tensor
    gravity: torch.Tensor = field(default_factory=lambda: torch.zeros(3, dtype=torch.float64))
    stiffness: float = 0.0
    barrier_radius: float = 3.0
    barrier_stiffness: float = 0.0
    damping_mass: float = 0.0
    damping_stiffness: float = 0.0
    latent_inertia: float = 0.0
    springs: list = field(default_factory=list)
    forces: list = field(default_factory=list)
    stretch: Stretch | None = None
    derivatives: str = "jvp"
    fd_step: float | None = None
    elastic_mask: torch.Tensor | None = None
    prior_mask: torch.Tensor | None = None

    def __post_init__(self):
        if self.derivatives not in ("jvp", "fd"):
            raise ConfigError(f"derivatives must be 'jvp' or 'fd', got {self.derivatives!r}")
        if self.fd_step is None:
            self.fd_step = FD_STEP.get(dtype_of(self.decoder), FD_STEP[torch.float32])  # (half: the float32 step)
        self.point_mass = torch.as_tensor(self.point_mass, dtype=torch.float64).reshape(-1)
        self.q_rest = torch.as_tensor(self.q_rest, dtype=torch.float64).reshape(-1)
        self.gravity = torch.as_tensor(self.gravity, dtype=torch.float64).reshape(3)
        P = int(self.decoder.rest_points.shape[0])
        if self.point_mass.shape[0] != P:
            raise ConfigError(f"point_mass has {self.point_mass.shape[0]} entries, the decoder has {P} points")
        if not torch.isfinite(self.point_mass).all() or (self.point_mass < 0).any() or self.point_mass.sum() <= 0:
            raise ConfigError("point masses must be finite, non-negative and not all zero")
        for name in ("stiffness", "barrier_stiffness", "damping_mass", "damping_stiffness", "latent_inertia"):
            v = float(getattr(self, name))
            if not np.isfinite(v) or v < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {v}")
        if not self.barrier_radius > 0:
            raise ConfigError(f"barrier_radius must be > 0, got {self.barrier_radius}")
        if self.elastic_mask is None:
            self.elastic_mask = torch.ones(self.q_rest.shape[0], dtype=torch.bool)
        self.elastic_mask = torch.as_tensor(self.elastic_mask, dtype=torch.bool).reshape(-1)
        if self.elastic_mask.shape != self.q_rest.shape:
            raise ConfigError(f"elastic_mask has {self.elastic_mask.shape[0]} entries, q has {self.q_rest.shape[0]}")
        self.prior_mask = torch.as_tensor(self.elastic_mask if self.prior_mask is None else self.prior_mask,
                                          dtype=torch.bool).reshape(-1).clone()
        if self.prior_mask.shape != self.q_rest.shape:
            raise ConfigError(f"prior_mask has {self.prior_mask.shape[0]} entries, q has {self.q_rest.shape[0]}")

    @property
    def dim(self) -> int:
        """k, the number of generalized coordinates."""
        return int(self.q_rest.shape[0])

    @property
    def n_points(self) -> int:
        return int(self.point_mass.shape[0])

    @property
    def prior_mean(self) -> torch.Tensor:
        """(k,) float64 centre of the soft barrier (the decoder's mu_cond)."""
        return torch.as_tensor(self.decoder.mu_cond, dtype=torch.float64).detach().reshape(-1)

    @property
    def latent(self) -> torch.Tensor:
        """(k,) float64: 1 for latent coordinates, 0 for rigid-body ones (``elastic_mask``)."""
        return self.elastic_mask.to(torch.float64)

    @property
    def prior(self) -> torch.Tensor:
        """(k,) float64: 1 for the coordinates the soft barrier acts on (``prior_mask``), else 0."""
        return self.prior_mask.to(torch.float64)

    @property
    def total_mass(self) -> float:
        return float(self.point_mass.sum())

    @property
    def conservative(self) -> bool:
        """True when no damping and no external non-conservative force acts (energy must be conserved)."""
        return not self.forces and self.damping_mass == 0 and self.damping_stiffness == 0


@dataclass
class State:
    """State of a latent system: q (k,), qd (k,) float64 and time t (s). ``qdd`` caches the last
    acceleration (used as the predictor of implicit steps)."""

    q: torch.Tensor
    qd: torch.Tensor
    t: float = 0.0
    qdd: torch.Tensor | None = None

    def __post_init__(self):
        self.q = torch.as_tensor(self.q, dtype=torch.float64).reshape(-1)
        self.qd = torch.as_tensor(self.qd, dtype=torch.float64).reshape(-1)
        if self.q.shape != self.qd.shape:
            raise ConfigError(f"q {tuple(self.q.shape)} and qd {tuple(self.qd.shape)} differ in shape")
