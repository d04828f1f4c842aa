"""Geometry core: normalization, sampling, transfer, dual quaternions, OBB, local Procrustes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import trimesh
from scipy.spatial.transform import Rotation

from kinemesh.errors import ConfigError
from kinemesh.geometry import dualquat as dq
from kinemesh.geometry import normalize, obb, procrustes, sampling, transfer


# ----------------------------------------------------------------------------------------------- normalize
def test_normalization_centres_and_scales_longest_side_to_one():
    v = np.array([[1.0, 2.0, 3.0], [5.0, 3.0, 3.5], [2.0, 2.5, 4.0]])
    center, scale = normalize.normalization(v)
    np.testing.assert_allclose(center, [3.0, 2.5, 3.5])
    assert scale == pytest.approx(0.25)
    out = normalize.apply(v, center, scale)
    np.testing.assert_allclose(out.max(0) + out.min(0), 0.0, atol=1e-12)
    assert (out.max(0) - out.min(0)).max() == pytest.approx(1.0)
    t = normalize.apply(torch.tensor(v, dtype=torch.float32), center, scale)
    assert t.dtype == torch.float32
    np.testing.assert_allclose(t.numpy(), out, atol=1e-6)
    np.testing.assert_allclose(normalize.invert(out, center, scale), v, atol=1e-12)
    # the renderer's option: same centre, the box diagonal (4, 1, 1) -> 1
    c_d, s_d = normalize.normalization(v, size="diagonal")
    np.testing.assert_allclose(c_d, center)
    assert s_d == pytest.approx(1.0 / np.sqrt(18.0))


def test_normalization_rejects_degenerate_input():
    with pytest.raises(ConfigError):
        normalize.normalization(np.zeros((4, 3)))
    with pytest.raises(ConfigError):
        normalize.normalization(np.array([[0.0, 0.0, np.nan], [1.0, 1.0, 1.0]]))
    with pytest.raises(ConfigError, match="size"):
        normalize.normalization(np.eye(3), size="volume")


# ------------------------------------------------------------------------------------------------- sampling
def test_sample_surface_points_lie_on_faces_and_follow_area():
    # two separate triangles, the second with 3x the area of the first
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [3, 0, 1], [0, 1, 1]], dtype=float)
    f = np.array([[0, 1, 2], [3, 4, 5]])
    pts, fid, bary = sampling.sample_surface(v, f, 20000, seed=3)
    assert pts.shape == (20000, 3) and fid.shape == (20000,) and bary.shape == (20000, 3)
    np.testing.assert_allclose(bary.sum(1), 1.0)
    assert (bary >= 0).all()
    np.testing.assert_allclose(pts[:, 2], (fid == 1).astype(float))  # each point on its own face's plane
    assert np.mean(fid == 1) == pytest.approx(0.75, abs=0.015)
    # same seed -> same samples
    pts2, _, _ = sampling.sample_surface(v, f, 20000, seed=3)
    np.testing.assert_array_equal(pts, pts2)
    # uniform within a triangle: mean of the first triangle's samples is its centroid
    np.testing.assert_allclose(pts[fid == 0].mean(0), [1 / 3, 1 / 3, 0], atol=0.01)


def test_points_from_barycentric_numpy_and_batched_torch():
    box = trimesh.creation.box()
    pts, fid, bary = sampling.sample_surface(box.vertices, box.faces, 50, seed=0)
    np.testing.assert_allclose(sampling.points_from_barycentric(box.vertices, box.faces, fid, bary), pts)
    frames = torch.stack([torch.tensor(box.vertices) * s for s in (1.0, 2.0)]).requires_grad_(True)
    out = sampling.points_from_barycentric(frames, box.faces, fid, bary)
    assert out.shape == (2, 50, 3)
    np.testing.assert_allclose(out[1].detach().numpy(), 2 * pts, atol=1e-12)
    out.sum().backward()  # differentiable
    assert frames.grad is not None and frames.grad.abs().sum() > 0


# ------------------------------------------------------------------------------------------------- transfer
def test_knn_weights_average_and_exact_hit():
    pts = np.array([[0.0, 0, 0], [1.0, 0, 0], [0.0, 1, 0], [5.0, 5, 5]])
    verts = np.array([[0.5, 0.0, 0.0], [1.0, 0.0, 0.0]])
    idx, w = transfer.knn_weights(pts, verts, k=2)
    assert idx.shape == (2, 2) and w.shape == (2, 2)
    np.testing.assert_allclose(w.sum(1), 1.0)
    assert set(idx[0]) == {0, 1}
    np.testing.assert_allclose(w[0], [0.5, 0.5])  # equidistant -> plain average
    vals = np.array([[1.0], [3.0], [7.0], [100.0]])
    out = transfer.to_vertices(vals, idx, w)
    np.testing.assert_allclose(out[0], [2.0])
    np.testing.assert_allclose(out[1], [3.0], atol=1e-6)  # coincident point dominates
    tv = transfer.to_vertices(torch.tensor(vals).expand(3, 4, 1), idx, w)
    assert tv.shape == (3, 2, 1)
    np.testing.assert_allclose(tv[2].numpy(), out)


def test_knn_weights_groups_restrict_neighbours():
    pts = np.array([[0.0, 0, 0], [0.1, 0, 0], [1.0, 0, 0], [1.1, 0, 0], [1.2, 0, 0]])
    pg = np.array([0, 0, 1, 1, 1])
    verts = np.array([[0.9, 0, 0], [0.2, 0, 0], [5.0, 0, 0]])
    vg = np.array([0, 1, 2])  # group 2 has no points -> falls back to all points
    idx, w = transfer.knn_weights(pts, verts, k=3, point_groups=pg, vertex_groups=vg)
    # vertex 0 (group 0) may only use points 0, 1 (third slot padded with weight 0)
    assert set(idx[0][w[0] > 0]) == {0, 1}
    assert w[0][2] == 0.0
    assert set(idx[1]) == {2, 3, 4}
    assert set(idx[2]) == {2, 3, 4}  # nearest overall
    np.testing.assert_allclose(w.sum(1), 1.0)
    with pytest.raises(ConfigError):
        transfer.knn_weights(pts, verts, k=3, point_groups=pg)


# ------------------------------------------------------------------------------------------- dual quaternions
def _random_rt(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, 4, generator=g, dtype=torch.float64)
    t = torch.randn(n, 3, generator=g, dtype=torch.float64)
    return q / q.norm(dim=-1, keepdim=True), t


def test_dualquat_rt_roundtrip_float64():
    q, t = _random_rt(64)
    d = dq.from_rt(q, t)
    assert d.shape == (64, 8)
    q2, t2 = dq.to_rt(d)
    sign = torch.sign((q2 * q).sum(-1, keepdim=True))
    torch.testing.assert_close(q2 * sign, q, atol=1e-13, rtol=0)
    torch.testing.assert_close(t2, t, atol=1e-13, rtol=0)
    # unit dual quaternion: |real| = 1, real . dual = 0
    torch.testing.assert_close(d[:, :4].norm(dim=-1), torch.ones(64, dtype=torch.float64))
    torch.testing.assert_close((d[:, :4] * d[:, 4:]).sum(-1), torch.zeros(64, dtype=torch.float64),
                               atol=1e-14, rtol=0)


def test_dualquat_matrix_roundtrip_and_apply_matches_matrix():
    R = torch.tensor(Rotation.random(200, random_state=4).as_matrix())
    # include the hard cases for quaternion extraction: 180 deg rotations about each axis and identity
    R = torch.cat([R, torch.diag_embed(torch.tensor([[1.0, -1, -1], [-1, 1, -1], [-1, -1, 1], [1, 1, 1]],
                                                     dtype=torch.float64))])
    T = torch.eye(4, dtype=torch.float64).repeat(len(R), 1, 1)
    T[:, :3, :3] = R
    T[:, :3, 3] = torch.randn(len(R), 3, dtype=torch.float64)
    d = dq.from_matrix(T)
    torch.testing.assert_close(dq.to_matrix(d), T, atol=1e-12, rtol=0)
    torch.testing.assert_close(dq.quat_to_matrix(dq.quat_from_matrix(R)), R, atol=1e-12, rtol=0)
    # against scipy (xyzw) up to sign
    qs = torch.tensor(Rotation.from_matrix(R[:200].numpy()).as_quat())[:, [3, 0, 1, 2]]
    qq = dq.quat_from_matrix(R[:200])
    torch.testing.assert_close(qq * torch.sign((qq * qs).sum(-1, keepdim=True)), qs, atol=1e-12, rtol=0)
    p = torch.randn(len(R), 3, dtype=torch.float64)
    expect = (T[:, :3, :3] @ p[..., None])[..., 0] + T[:, :3, 3]
    torch.testing.assert_close(dq.apply(d, p), expect, atol=1e-12, rtol=0)
    # composition and inverse
    a, b = d[:5], d[5:10]
    torch.testing.assert_close(dq.to_matrix(dq.mul(a, b)), T[:5] @ T[5:10], atol=1e-12, rtol=0)
    torch.testing.assert_close(dq.apply(dq.inverse(a), dq.apply(a, p[:5])), p[:5], atol=1e-12, rtol=0)


def test_dualquat_float32_and_broadcasting():
    q, t = _random_rt(6)
    d = dq.from_rt(q.float(), t.float())
    assert d.dtype == torch.float32
    pts = torch.randn(6, 100, 3)
    out = dq.apply(d[:, None, :], pts)  # (6, 1, 8) with (6, 100, 3)
    assert out.shape == (6, 100, 3) and out.dtype == torch.float32
    ref = dq.apply(d.double()[:, None, :], pts.double())
    assert (out.double() - ref).abs().max() < 1e-5


def test_blend_sign_invariance_and_interpolation():
    q, t = _random_rt(3, seed=1)
    d = dq.from_rt(q, t)
    w = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    flipped = d * torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)[:, None]  # -dq is the same transform
    torch.testing.assert_close(dq.blend(d, w), dq.blend(flipped, w), atol=1e-14, rtol=0)
    # a single weight reproduces the transform; equal transforms blend to themselves
    torch.testing.assert_close(dq.to_matrix(dq.blend(d, torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))),
                               dq.to_matrix(d[1]), atol=1e-13, rtol=0)
    same = d[:1].expand(3, 8)
    torch.testing.assert_close(dq.to_matrix(dq.blend(same, w)), dq.to_matrix(d[0]), atol=1e-13, rtol=0)
    # blending identity with a rotation of 90 deg about z at 0.5/0.5 gives 45 deg (DLB is exact for one axis)
    rz = dq.from_rt(torch.tensor([np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)], dtype=torch.float64),
                    torch.zeros(3, dtype=torch.float64))
    mid = dq.blend(torch.stack([dq.identity(dtype=torch.float64), rz]), torch.tensor([0.5, 0.5], dtype=torch.float64))
    ang = 2 * torch.atan2(mid[1:4].norm(), mid[0])
    assert float(ang) == pytest.approx(np.pi / 4, abs=1e-12)
    # batched blend (..., K, 8)
    out = dq.blend(d.expand(4, 3, 8), w.expand(4, 3))
    assert out.shape == (4, 8)


def test_dualquat_gradcheck_apply_and_blend():
    q, t = _random_rt(3, seed=2)
    d = dq.from_rt(q, t).requires_grad_(True)
    p = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(dq.apply, (d, p))
    w = torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(dq.blend, (d, w))
    R = torch.tensor(Rotation.random(2, random_state=5).as_matrix(), requires_grad=True)
    assert torch.autograd.gradcheck(dq.quat_from_matrix, (R,))


def test_dualquat_forward_mode_jvp():
    q, t = _random_rt(4, seed=3)
    d = dq.from_rt(q, t)
    w = torch.rand(4, dtype=torch.float64)
    p = torch.randn(10, 3, dtype=torch.float64)

    def f(weights):
        return dq.apply(dq.blend(d, weights), p)

    v = torch.randn(4, dtype=torch.float64)
    _, jv = torch.func.jvp(f, (w,), (v,))
    eps = 1e-6
    fd = (f(w + eps * v) - f(w - eps * v)) / (2 * eps)
    torch.testing.assert_close(jv, fd, atol=1e-7, rtol=0)


# ------------------------------------------------------------------------------------------------------ OBB
def test_obb_recovers_rotated_box():
    R = Rotation.random(random_state=1).as_matrix()
    box = trimesh.creation.box(extents=(3.0, 2.0, 1.0))
    p = box.vertices @ R.T + [1.0, 2.0, 3.0]
    b = obb.oriented_bounding_box(p)
    np.testing.assert_allclose(b.extents, [3.0, 2.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(b.center, [1.0, 2.0, 3.0], atol=1e-9)
    np.testing.assert_allclose(np.abs(b.axes @ R), np.eye(3), atol=1e-9)
    assert np.linalg.det(b.axes) == pytest.approx(1.0)
    corners = b.corners()
    assert corners.shape == (8, 3)
    # every corner is a box vertex
    d = np.linalg.norm(corners[:, None] - p[None], axis=2).min(1)
    np.testing.assert_allclose(d, 0.0, atol=1e-9)
    fc = b.face_centers()
    assert fc.shape == (6, 3)
    np.testing.assert_allclose(np.linalg.norm(fc - b.center, axis=1), [1.5, 1.5, 1.0, 1.0, 0.5, 0.5], atol=1e-9)
    e = b.edges()
    assert e.shape == (12, 2, 3)
    np.testing.assert_allclose(np.sort(np.linalg.norm(e[:, 0] - e[:, 1], axis=1)), [1] * 4 + [2] * 4 + [3] * 4,
                               atol=1e-9)
    assert b.volume() == pytest.approx(6.0)


def test_obb_planar_and_pca():
    rng = np.random.default_rng(0)
    p = np.column_stack([rng.random((40, 2)) * [2.0, 1.0], np.zeros(40)])
    for method in ("auto", "pca"):
        b = obb.oriented_bounding_box(p, method=method)
        assert b.extents[2] == pytest.approx(0.0, abs=1e-9)
        local = b.to_local(p)
        assert (np.abs(local) <= 0.5 * b.extents + 1e-9).all()


# ------------------------------------------------------------------------------------------------ procrustes
def test_kabsch_and_local_rigid_transforms_recover_rigid_motion():
    rng = np.random.default_rng(0)
    rest = rng.random((60, 3))
    Rt = Rotation.random(3, random_state=2).as_matrix()
    tt = rng.normal(size=(3, 3))
    frames = np.einsum("tij,pj->tpi", Rt, rest) + tt[:, None]
    R, t = procrustes.local_rigid_transforms(rest, frames, k=8)
    assert R.shape == (3, 60, 3, 3) and t.shape == (3, 60, 3)
    np.testing.assert_allclose(R, np.broadcast_to(Rt[:, None], R.shape), atol=1e-10)
    np.testing.assert_allclose(t, np.broadcast_to(tt[:, None], t.shape), atol=1e-10)
    # reflections are never returned
    Rk, _ = procrustes.kabsch(rest[:10], rest[:10] * [1, 1, -1])
    assert np.linalg.det(Rk) == pytest.approx(1.0)


def test_kabsch_weights_batch_and_matrix_recover_known_motion():
    rng = np.random.default_rng(3)
    src = rng.normal(size=(30, 3))
    Rt = Rotation.from_rotvec([0.3, -1.1, 0.7]).as_matrix()
    tt = np.array([0.5, -2.0, 0.25])
    dst = src @ Rt.T + tt
    dst[:5] += rng.normal(size=(5, 3))  # outliers: zero weight must ignore them exactly
    w = np.r_[np.zeros(5), rng.uniform(0.5, 2.0, 25)]
    R, t = procrustes.kabsch(src, dst, weights=w)
    np.testing.assert_allclose(R, Rt, atol=1e-12)
    np.testing.assert_allclose(t, tt, atol=1e-12)
    assert np.abs(procrustes.kabsch(src, dst)[0] - Rt).max() > 1e-3  # unweighted: the outliers pull it off
    # a rest (k, 3) against frames (T, k, 3), as homogeneous transforms
    Rs = Rotation.random(4, random_state=5).as_matrix()
    frames = np.einsum("tij,kj->tki", Rs, src) + tt
    T = procrustes.kabsch_matrix(src, frames)
    assert T.shape == (4, 4, 4)
    np.testing.assert_allclose(T[:, :3, :3], Rs, atol=1e-12)
    np.testing.assert_allclose(T[:, :3, 3], np.broadcast_to(tt, (4, 3)), atol=1e-12)
    np.testing.assert_array_equal(T[:, 3], np.broadcast_to([0, 0, 0, 1.0], (4, 4)))


def test_local_rigid_transforms_two_parts():
    rng = np.random.default_rng(1)
    a = rng.random((50, 3))
    b = rng.random((50, 3)) + [10.0, 0, 0]  # far apart: neighbourhoods never mix
    rest = np.concatenate([a, b])
    Rz = Rotation.from_euler("z", 30, degrees=True).as_matrix()
    posed = np.concatenate([a, b @ Rz.T])
    R, _ = procrustes.local_rigid_transforms(rest, posed, k=6)
    np.testing.assert_allclose(R[:50], np.broadcast_to(np.eye(3), (50, 3, 3)), atol=1e-10)
    np.testing.assert_allclose(R[50:], np.broadcast_to(Rz, (50, 3, 3)), atol=1e-10)
    with pytest.raises(ConfigError):
        procrustes.local_rigid_transforms(rest, posed[:10], k=6)


def test_transfer_and_barycentric_work_under_forward_mode_jvp():
    box = trimesh.creation.box()
    pts, fid, bary = sampling.sample_surface(box.vertices, box.faces, 30, seed=1)
    idx, w = transfer.knn_weights(pts, box.vertices, k=4)
    base = torch.tensor(box.vertices)

    def f(s):
        p = sampling.points_from_barycentric(base * s, box.faces, fid, bary)  # (30, 3), linear in s
        return transfer.to_vertices(p, idx, w)

    s0 = torch.tensor(1.5, dtype=torch.float64)
    out, jv = torch.func.jvp(f, (s0,), (torch.tensor(1.0, dtype=torch.float64),))
    torch.testing.assert_close(jv, out / 1.5, atol=1e-12, rtol=0)


# ------------------------------------------------------------------------------------------------- validity
def test_inside_mesh_depth_and_rigid_groups():
    import trimesh

    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.geometry.validity import inside_mesh, rigid_groups

    box = trimesh.creation.box(extents=(2.0, 2.0, 2.0))  # [-1, 1]^3
    pts = np.array([[0.0, 0, 0], [0.95, 0, 0], [0.999, 0, 0], [1.5, 0, 0], [0, 0, -3.0]])
    np.testing.assert_array_equal(inside_mesh(box, pts), [True, True, True, False, False])
    np.testing.assert_array_equal(inside_mesh(box, pts, tolerance=0.01), [True, True, False, False, False])
    # welded parts share the group of the topmost part reached through fixed joints, also below a hinge
    v, f = np.asarray(box.vertices), np.asarray(box.faces)
    parts = [Part(n, v + [3.0 * i, 0, 0], f) for i, n in enumerate(("body", "plate", "door", "handle", "knob"))]
    joints = [Joint("j0", "fixed", "body", "plate", (0, 0, 1), (0, 0, 0)),
              Joint("j1", "revolute", "plate", "door", (0, 0, 1), (1, 1, 0), (0.0, 1.0)),
              Joint("j2", "fixed", "door", "handle", (0, 0, 1), (0, 0, 0)),
              Joint("j3", "fixed", "handle", "knob", (0, 0, 1), (0, 0, 0))]
    assert rigid_groups(ArticulatedObject(parts, joints)) == {"body": "body", "plate": "body", "door": "door",
                                                              "handle": "door", "knob": "door"}


def test_sample_surface_gives_every_face_group_its_minimum():
    """min_per_group: a box of 1e-4 of the area gets 16 of 256 points (by area alone: none), drawn on its own
    faces; the total stays n, the same seed gives the same samples, and n // groups caps the minimum."""
    from kinemesh.geometry import sampling
    from tests.toys import box, merge_meshes

    v, f = merge_meshes(box([0, 0, 0], [1, 1, 1]), box([2, 0, 0], [2.01, 0.01, 0.01]))
    groups = np.repeat([0, 1], 12)
    assert (groups[sampling.sample_surface(v, f, 256, seed=0)[1]] == 1).sum() == 0
    pts, fid, bary = sampling.sample_surface(v, f, 256, seed=0, face_groups=groups, min_per_group=16)
    assert len(pts) == 256 and (groups[fid] == 1).sum() == 16 and (groups[fid] == 0).sum() == 240
    assert np.allclose(pts, sampling.points_from_barycentric(v, f, fid, bary)) and (pts[groups[fid] == 1, 0] >= 2).all()
    assert np.array_equal(fid, sampling.sample_surface(v, f, 256, seed=0, face_groups=groups, min_per_group=16)[1])
    assert (groups[sampling.sample_surface(v, f, 20, seed=0, face_groups=groups, min_per_group=16)[1]] == 1).sum() == 10
