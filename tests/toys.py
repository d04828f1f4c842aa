"""Test fixtures with known structure, shared by the tests and the benchmarks (``bench/``).

* ``ToyCabinetDecoder``: a small analytic InstanceDecoder. A box body with a hinged lid and a sliding drawer;
  only a planted 2-dimensional subspace of the latent moves anything: with s = A^T (z - mu_cond) (A (D, 2)
  orthonormal), the lid turns by ``max_angle * tanh(s_0)`` about its back edge and the drawer slides
  ``max_slide * tanh(s_1)`` along +x. Parts move rigidly, so the ground truth of every fit is known exactly.
* ``write_toy_dataset``: a tiny dataset of hinged boxes and bending bars for smoke runs of training (not
  training data for a real model: ``kinemesh synth`` generates that).
* ``chamfer_reference``: the dense O(B P M) Chamfer distance the fast k-d tree one is checked against.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from kinemesh.atomic import write_text
from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.data.manifest import entry_for
from kinemesh.data.sequence import KinematicSequence


def box(lo, hi):
    """Vertices (8, 3) and outward triangles (12, 3) of an axis-aligned box."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    f = np.array([
        [0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
        [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3],
    ])
    return v, f


def subdivide(v, f, times):
    """Midpoint subdivision (each triangle -> 4), to get meshes of a chosen size."""
    for _ in range(times):
        edges = {}
        nv = [*v]
        newf = []
        for a, b, c in f:
            m = []
            for i, j in ((a, b), (b, c), (c, a)):
                key = (min(i, j), max(i, j))
                if key not in edges:
                    edges[key] = len(nv)
                    nv.append((v[i] + v[j]) / 2)
                m.append(edges[key])
            ab, bc, ca = m
            newf += [[a, ab, ca], [ab, b, bc], [ca, bc, c], [ab, bc, ca]]
        v, f = np.array(nv), np.array(newf)
    return v, f


def merge_meshes(*meshes):
    """One (vertices, faces) of several (vertices, faces), in order."""
    vs, fs, n = [], [], 0
    for v, f in meshes:
        vs.append(v)
        fs.append(np.asarray(f) + n)
        n += len(v)
    return np.concatenate(vs), np.concatenate(fs)


def write_obj_groups(path, groups) -> None:
    """An OBJ with one ``o`` group per (name, vertices, faces) of ``groups``."""
    lines, n = [], 0
    for name, v, f in groups:
        lines.append(f"o {name}")
        lines += [f"v {float(x)!r} {float(y)!r} {float(z)!r}" for x, y, z in v]
        lines += [f"f {a + 1 + n} {b + 1 + n} {c + 1 + n}" for a, b, c in f]
        n += len(v)
    Path(path).write_text("\n".join(lines) + "\n")


def three_component_door():
    """Body box (8 vertices) and a door given as three separate components (slab, glass, handle; 24 vertices)
    that do not touch, the door at -x: [(name, vertices, faces)]."""
    body = box([0, 0, 0], [1, 1, 1])
    slab = box([-0.3, 0, 0], [-0.25, 0.6, 1])
    glass = box([-0.35, 0.2, 0.3], [-0.34, 0.4, 0.7])
    handle = box([-0.45, 0.5, 0.45], [-0.4, 0.55, 0.55])
    return [("body", *body), ("door_slab", *slab), ("door_glass", *glass), ("door_handle", *handle)]


def moving_model(seed: int = 0):
    """A tiny untrained KinematicModel with large random weights (N(0, 0.3)): an untrained model barely moves
    anything, this one moves parts far, so that a part that is not rigid shows."""
    from kinemesh.model import untrained_model

    torch.manual_seed(seed)
    model = untrained_model("tiny")
    with torch.no_grad():
        for prm in model.net.parameters():
            prm.normal_(0.0, 0.3)
    return model


def toy_cabinet(subdivisions: int = 0):
    """(vertices (n, 3), faces (m, 3), part_ids (n,)) of the rest mesh: 0 body, 1 lid, 2 drawer (metres)."""
    parts = [
        box([-0.4, -0.25, 0.0], [0.4, 0.25, 0.6]),
        box([-0.4, -0.25, 0.6], [0.4, 0.25, 0.64]),
        box([0.4, -0.2, 0.1], [0.7, 0.2, 0.3]),
    ]
    vs, fs, ids, off = [], [], [], 0
    for i, (v, f) in enumerate(parts):
        v, f = subdivide(v, f, subdivisions)
        vs.append(v)
        fs.append(f + off)
        ids.append(np.full(len(v), i))
        off += len(v)
    return np.concatenate(vs), np.concatenate(fs), np.concatenate(ids)


class ToyCabinetDecoder:
    """InstanceDecoder with a planted 2-D active subspace (see module docstring).

    Parameters
    ----------
    latent_dim : D >= 2.
    n_points : sampled surface points P.
    subdivisions : mesh refinement (vertex count grows ~4x per level).
    seed : seeds the planted subspace A, mu_cond and the point samples.
    """

    def __init__(self, latent_dim: int = 8, n_points: int = 512, subdivisions: int = 1, seed: int = 0,
                 max_angle: float = 1.2, max_slide: float = 0.25):
        rng = np.random.default_rng(seed)
        v, f, ids = toy_cabinet(subdivisions)
        self.faces = f
        self.part_ids = ids
        self.latent_dim = latent_dim
        A, _ = np.linalg.qr(rng.normal(size=(latent_dim, 2)))
        self.A = torch.as_tensor(A, dtype=torch.float32)
        self.mu_cond = torch.as_tensor(rng.normal(scale=0.3, size=latent_dim), dtype=torch.float32)
        self.max_angle, self.max_slide = max_angle, max_slide
        # area-weighted surface samples
        tri = v[f]
        area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
        fid = rng.choice(len(f), n_points, p=area / area.sum())
        r1, r2 = np.sqrt(rng.random(n_points)), rng.random(n_points)
        bary = np.stack([1 - r1, r1 * (1 - r2), r1 * r2], 1)
        pts = np.einsum("pk,pkj->pj", bary, tri[fid])
        self.point_part = torch.as_tensor(ids[f[fid, 0]])
        self.point_groups = ids[f[fid, 0]]  # part of every sampled point (as NeuralInstanceDecoder exposes)
        self.vertex_part = torch.as_tensor(ids)
        self.rest_points = torch.as_tensor(pts, dtype=torch.float32)
        self.rest_vertices = torch.as_tensor(v, dtype=torch.float32)

    def coords(self, z: torch.Tensor) -> torch.Tensor:
        """The planted coordinates s = A^T (z - mu): (..., D) -> (..., 2)."""
        return (z - self.mu_cond) @ self.A

    def joint_values(self, z: torch.Tensor) -> torch.Tensor:
        """(lid angle rad, drawer slide m): (..., D) -> (..., 2)."""
        s = torch.tanh(self.coords(z))
        return torch.stack([self.max_angle * s[..., 0], self.max_slide * s[..., 1]], -1)

    def _deform(self, x: torch.Tensor, part: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        jv = self.joint_values(z)
        ang, slide = jv[..., 0, None], jv[..., 1, None]  # (..., 1)
        # lid: rotation about the y axis through its back edge (x=-0.4, z=0.6); opens upward for ang > 0
        px, pz = x[:, 0] + 0.4, x[:, 2] - 0.6
        c, s = torch.cos(ang), torch.sin(ang)
        lx = c * px - s * pz - 0.4
        lz = s * px + c * pz + 0.6
        lid = torch.stack([lx, x[:, 1].expand_as(lx), lz], -1)
        zero = torch.zeros_like(slide)
        drawer = x + torch.cat([slide, zero, zero], -1)[..., None, :]
        base = x.expand(*ang.shape[:-1], *x.shape)
        out = torch.where((part == 1)[:, None], lid, base)
        out = torch.where((part == 2)[:, None], drawer, out)
        return out

    def points(self, z: torch.Tensor) -> torch.Tensor:
        """z (..., D) -> (..., P, 3) metres."""
        return self._deform(self.rest_points.to(z), self.point_part, z)

    def vertices(self, z: torch.Tensor) -> torch.Tensor:
        """z (..., D) -> (..., N, 3) metres."""
        return self._deform(self.rest_vertices.to(z), self.vertex_part, z)

    def latent_for(self, angle: float, slide: float) -> torch.Tensor:
        """A latent (D,) whose pose is (lid ``angle`` rad, drawer ``slide`` m)."""
        s = torch.tensor([np.arctanh(angle / self.max_angle), np.arctanh(slide / self.max_slide)],
                         dtype=self.A.dtype)
        return self.mu_cond + self.A @ s


def hinged_box(rng: np.random.Generator, subdivisions: int = 1) -> ArticulatedObject:
    """A box body with a lid on a revolute hinge along the back top edge (metres, Z up)."""
    import trimesh

    w, d, h = rng.uniform(0.3, 0.6), rng.uniform(0.2, 0.4), rng.uniform(0.15, 0.3)
    body = trimesh.creation.box(extents=(w, d, h))
    body.apply_translation((0, 0, h / 2))
    lid = trimesh.creation.box(extents=(w, d, 0.02))
    lid.apply_translation((0, 0, h + 0.014))
    for _ in range(subdivisions):
        body, lid = body.subdivide(), lid.subdivide()
    hinge = Joint("hinge", "revolute", "body", "lid", (1, 0, 0), (0, d / 2, h + 0.004), (0.0, 1.6))
    return ArticulatedObject([Part("body", body.vertices, body.faces, "body"),
                              Part("lid", lid.vertices, lid.faces, "lid")], [hinge], category="toybox",
                             name="toybox")


def bending_bar(rng: np.random.Generator, n_frames: int) -> KinematicSequence:
    """A soft bar clamped at x = 0 bending about Y by a random amount per frame."""
    import trimesh

    L = rng.uniform(0.5, 0.8)
    bar = trimesh.creation.box(extents=(L, 0.08, 0.08))
    bar.apply_translation((L / 2, 0, 0.04))
    bar = bar.subdivide().subdivide()
    rest = np.asarray(bar.vertices)
    frames = []
    for _ in range(n_frames):
        k = rng.uniform(-1.2, 1.2) / L  # curvature
        x = rest[:, 0]
        ang = k * x
        r = 1.0 / k if abs(k) > 1e-6 else 1e9
        z0 = rest[:, 2] - 0.04
        px = (r - z0) * np.sin(ang) if abs(k) > 1e-6 else x
        pz = r - (r - z0) * np.cos(ang) + 0.04 if abs(k) > 1e-6 else rest[:, 2]
        frames.append(np.stack([px, rest[:, 1], pz], 1))
    return KinematicSequence(rest, bar.faces, np.stack(frames), np.arange(n_frames) / 30.0,
                             meta={"category": "toybar", "kind": "elastic", "source": "tests/toys.py"})


def write_toy_dataset(folder: str | os.PathLike, n_train: int = 6, n_val: int = 2, n_frames: int = 6,
                      seed: int = 0) -> Path:
    """Write ``folder/manifest.jsonl`` (complete entries) and npz sequences (hinged boxes and bending bars)."""
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n_train + n_val):
        split = "train" if i < n_train else "val"
        if i % 2 == 0:
            obj = hinged_box(rng)
            configs = [obj.sample_values(rng) for _ in range(n_frames)]
            seq = obj.to_sequence(configs, source="tests/toys.py")
        else:
            seq = bending_bar(rng, n_frames)
        rel = f"{seq.kind}/{seq.category}/{i:04d}.npz"
        seq.save(folder / rel)
        lines.append(json.dumps(entry_for(seq, folder / rel, folder, split=split)))
    write_text(folder / "manifest.jsonl", "\n".join(lines) + "\n")
    return folder


def chamfer_reference(pred: torch.Tensor, target: torch.Tensor, one_sided: bool = False,
                      squared: bool = True) -> torch.Tensor:
    """Dense reference Chamfer. pred (B, P, 3), target (M, 3) -> (B,). O(B P M) memory; for tests.

    Symmetric: 0.5 * (mean_p min_t d(p,t) + mean_t min_p d(p,t)); one-sided: mean_t min_p d(p,t), with
    d = |p - t|^2 (``squared``) or |p - t|.
    """
    d = torch.cdist(pred, target.expand(pred.shape[0], -1, -1))
    if squared:
        d = d.pow(2)
    t2p = d.min(1).values.mean(-1)
    if one_sided:
        return t2p
    return 0.5 * (d.min(2).values.mean(-1) + t2p)
