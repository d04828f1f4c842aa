"""Inverse kinematics on a toy decoder with known answers; targets; baselines; bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinemesh.data.articulated import Joint
from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import ConfigError, KinemeshError
from kinemesh.ik import IKConfig, chamfer, make_target, solve
from kinemesh.ik import baselines as B
from kinemesh.reduce import ReducedDecoder, fit
from toys import ToyCabinetDecoder, chamfer_reference

FAST = IKConfig(n_candidates=16, n_starts=2, adam_steps=60, lbfgs_steps=15)


@pytest.fixture(scope="module")
def toy():
    return ToyCabinetDecoder(latent_dim=8, n_points=384, subdivisions=1, seed=0)


@pytest.fixture(scope="module")
def reduced(toy):
    return ReducedDecoder(toy, fit(toy, k_q=2, n_samples=32))


def _joints():
    return [
        Joint("lid", "revolute", "body", "lid", [0, -1, 0], [-0.4, 0, 0.6], (-1.2, 1.2)),
        Joint("drawer", "prismatic", "body", "drawer", [1, 0, 0], [0, 0, 0], (-0.25, 0.25)),
    ]


def test_chamfer_matches_dense_reference():
    g = torch.Generator().manual_seed(0)
    pred = torch.randn(3, 50, 3, generator=g, requires_grad=True)
    tgt = torch.randn(70, 3, generator=g)
    for one_sided in (False, True):
        for squared in (False, True):
            a = chamfer(pred, tgt, one_sided, squared)
            b = chamfer_reference(pred, tgt, one_sided, squared)
            assert torch.allclose(a, b, atol=1e-6)
            (ga,) = torch.autograd.grad(a.sum(), pred)
            (gb,) = torch.autograd.grad(b.sum(), pred)
            assert torch.allclose(ga, gb, atol=1e-6)


@pytest.mark.parametrize("correspondences", [True, False])
def test_recovers_known_q(toy, reduced, correspondences):
    z_true = toy.latent_for(0.7, -0.15)
    target = make_target(toy.vertices(z_true).numpy(), toy.faces, toy.rest_vertices.numpy(), toy.faces,
                         correspondences=correspondences)
    res = solve(reduced, target, FAST)
    jv = toy.joint_values(torch.as_tensor(res.z))
    assert abs(float(jv[0]) - 0.7) < 0.02 and abs(float(jv[1]) + 0.15) < 0.01
    q_true = reduced.subspace.q(z_true)
    assert np.allclose(res.latent, q_true.numpy(), atol=0.05)
    err = np.linalg.norm(res.vertices - toy.vertices(z_true).numpy(), axis=1).mean()
    assert err < 0.01  # metres, on a 1.1 m object (the rest pose is ~0.14 m off)
    if correspondences:
        assert res.errors["vertex_error"] < 1e-3


def test_full_latent_polish_recovers_what_the_subspace_truncates(toy):
    """k_q = 1 keeps one of the two planted directions: the reduced fit alone cannot move both parts, the
    z polish (IKConfig.refine_z_steps) starts from it and recovers both joints; ``latent`` stays q."""
    one = ReducedDecoder(toy, fit(toy, k_q=1, n_samples=32))
    z_true = toy.latent_for(0.6, 0.2)
    target = make_target(toy.vertices(z_true).numpy(), toy.faces, toy.rest_vertices.numpy(), toy.faces)
    q_only = solve(one, target, IKConfig(n_candidates=16, n_starts=2, adam_steps=60, refine_z_steps=0))
    polished = solve(one, target, IKConfig(n_candidates=16, n_starts=2, adam_steps=60, refine_z_steps=80,
                                           refine_z_lr=0.05))
    assert q_only.latent.shape == polished.latent.shape == (1,)
    assert polished.z.shape == (8,)
    truth = toy.vertices(z_true).numpy()
    err_q = np.linalg.norm(q_only.vertices - truth, axis=1).mean()
    err_p = np.linalg.norm(polished.vertices - truth, axis=1).mean()
    assert err_q > 0.01 and err_p < 0.2 * err_q
    assert np.allclose(toy.joint_values(torch.as_tensor(polished.z)).numpy(), [0.6, 0.2], atol=0.03)
    assert polished.loss <= q_only.loss


def test_no_reduction_fits_z(toy):
    z_true = toy.latent_for(-0.5, 0.2)
    target = make_target(toy.vertices(z_true).numpy(), toy.faces, toy.rest_vertices.numpy())
    res = solve(toy, target, FAST)
    assert res.z.shape == (8,)
    assert np.allclose(toy.joint_values(torch.as_tensor(res.z)).numpy(), [-0.5, 0.2], atol=0.02)


def test_scaled_and_partial_targets(toy, reduced):
    z_true = toy.latent_for(0.6, 0.1)
    tv = toy.vertices(z_true).numpy()
    # another scale and position: normalization + similarity fit, result back in the target frame
    moved = tv * 2.5 + np.array([3.0, -1.0, 0.5])
    target = make_target(moved, toy.faces, toy.rest_vertices.numpy(), normalize=True, correspondences=False)
    res = solve(reduced, target, IKConfig(**{**FAST.__dict__, "fit_similarity": True}))
    assert np.allclose(toy.joint_values(torch.as_tensor(res.z)).numpy(), [0.6, 0.1], atol=0.05)
    assert np.linalg.norm(res.vertices_target_frame - moved, axis=1).mean() < 0.05 * 2.5
    # partial cloud (one side of the object only): one-sided Chamfer
    pts = make_target(tv, toy.faces, n_points=4000).points.numpy()
    half = pts[pts[:, 1] < 0]
    target = make_target(half, None, toy.rest_vertices.numpy(), partial=True)
    res = solve(reduced, target, FAST)
    assert np.allclose(toy.joint_values(torch.as_tensor(res.z)).numpy(), [0.6, 0.1], atol=0.05)


def test_rigidity_term_and_prior_barrier(toy, reduced):
    z_true = toy.latent_for(0.3, 0.0)
    target = make_target(toy.vertices(z_true).numpy(), toy.faces, toy.rest_vertices.numpy(), correspondences=False)
    # pairs are restricted to the same part (point_groups), so the term does not fight the hinge
    res = solve(reduced, target, IKConfig(**{**FAST.__dict__, "rigidity_weight": 1.0}))
    assert abs(float(toy.joint_values(torch.as_tensor(res.z))[0]) - 0.3) < 0.03
    from kinemesh.ik.solver import Objective

    obj = Objective(toy, target, IKConfig(rigidity_weight=1.0, prior_weight=0.0), None)
    obj0 = Objective(toy, target, IKConfig(rigidity_weight=0.0, prior_weight=0.0), None)
    z = toy.latent_for(0.3, 0.0)[None]
    assert torch.allclose(obj(z, None), obj0(z, None), atol=1e-7)  # rigid motion: zero rigidity energy
    bent = toy.points

    def stretched(zz):
        return bent(zz) * torch.tensor([1.3, 1.0, 1.0])

    toy.points = stretched
    try:
        assert float(obj(z, None) - obj0(z, None)) > 1e-4  # stretching the parts costs energy
    finally:
        del toy.points
    # an unreachable target (lid opened beyond the model's range) must not push q far past 3 std
    far = toy.vertices(toy.latent_for(1.1999, 0.0)).numpy()
    far[toy.part_ids == 1] += np.array([0.0, 0.0, 2.0])
    target = make_target(far, toy.faces, toy.rest_vertices.numpy(), correspondences=True)
    res = solve(reduced, target, IKConfig(**{**FAST.__dict__, "prior_weight": 1.0}))
    assert np.abs(res.latent).max() < 4.0


def test_bad_targets(toy):
    rv = toy.rest_vertices.numpy()
    with pytest.raises(KinemeshError, match="empty"):
        make_target(np.zeros((0, 3)), None, rv)
    bad = rv.copy()
    bad[3, 1] = np.nan
    with pytest.raises(KinemeshError, match="NaN"):
        make_target(bad, toy.faces, rv)
    with pytest.raises(KinemeshError, match="shape"):
        make_target(np.zeros((5, 2)), None, rv)
    with pytest.raises(KinemeshError, match="out of range"):
        make_target(rv, np.array([[0, 1, 10**6]]), rv)
    tgt = make_target(rv, None, rv, correspondences=False)
    with pytest.raises(ConfigError):
        solve(toy, tgt, IKConfig(loss="vertex"))
    with pytest.raises(ConfigError):
        solve(toy, tgt, IKConfig(n_starts=0))


def test_baselines_on_tiny_set(toy):
    train = ToyCabinetDecoder(latent_dim=8, n_points=128, subdivisions=2, seed=1)  # another mesh
    g = torch.Generator().manual_seed(0)
    frames = train.vertices(train.mu_cond + torch.randn(30, 8, generator=g)).numpy()
    seq = KinematicSequence(train.rest_vertices.numpy(), train.faces, frames, np.arange(30) / 30.0, None,
                            {"kind": "articulated", "category": "toy"})
    rv = toy.rest_vertices.numpy()
    tv = toy.vertices(toy.latent_for(0.7, -0.15)).numpy()
    target = make_target(tv, toy.faces, rv, correspondences=False)

    def verr(v):
        return float(np.linalg.norm(v - tv, axis=1).mean())

    rest_err = verr(rv)
    pool = B.transferred_pool(rv, [seq], max_fields=30)
    assert pool.shape == (30, len(rv), 3)
    # transfer of a same-shaped mesh is exact up to vertex matching: rigid parts stay rigid
    pca = B.pca_decoder(rv, toy.faces, pool, n_points=256)
    assert 2 <= pca.latent_dim <= 8
    assert verr(solve(pca, target, FAST).vertices) < 0.5 * rest_err
    v, i, e = B.nearest_pose(rv, toy.faces, pool, target, n_points=256)
    assert 0 <= i < 30 and verr(v) < rest_err
    ffd = B.FreeFormDecoder(rv, toy.faces, n_points=256)
    res = solve(ffd, target, IKConfig(prior_weight=0, n_candidates=1, n_starts=1, adam_steps=60, adam_lr=0.01,
                                      lbfgs_steps=10), regularizer=ffd.regularizer)
    assert res.errors["chamfer_l1"] < solve(ffd, target, IKConfig(prior_weight=0, n_candidates=1, n_starts=1,
                                                                  adam_steps=0, lbfgs_steps=0)).errors["chamfer_l1"]
    orc = B.ArticulationDecoder(rv, toy.faces, toy.part_ids, ["body", "lid", "drawer"], _joints(), n_points=256)
    assert torch.allclose(orc.vertices(orc.mu_cond[None])[0], toy.rest_vertices, atol=1e-5)
    res = solve(orc, target, IKConfig(**{**FAST.__dict__, "candidate_std": 2.0}))
    assert verr(res.vertices) < 0.005
    assert np.allclose(orc.joint_values(torch.as_tensor(res.latent)[None])[0].numpy(), [0.7, -0.15], atol=0.01)


def test_freeform_regularizer_gradient_fd():
    """float64 finite differences of the hand-written Laplacian/edge regularizer's autograd gradient."""
    toy0 = ToyCabinetDecoder(subdivisions=0, n_points=16)
    dec = B.FreeFormDecoder(toy0.rest_vertices.numpy(), toy0.faces, n_points=16)
    dec.rest_vertices = dec.rest_vertices.double()
    dec.rest_len = dec.rest_len.double()
    dec._deg = dec._deg.double()
    g = torch.Generator().manual_seed(0)
    d = (0.05 * torch.randn(1, dec.latent_dim, generator=g, dtype=torch.float64)).requires_grad_(True)
    (grad,) = torch.autograd.grad(dec.regularizer(d).sum(), d)
    h = 1e-6
    for i in [0, 5, 17, dec.latent_dim - 1]:
        e = torch.zeros_like(d)
        e[0, i] = h
        fd = (dec.regularizer(d + e) - dec.regularizer(d - e)).item() / (2 * h)
        assert abs(fd - grad[0, i].item()) < 1e-6 * max(1.0, abs(fd))


def test_posterior_starts_register_a_moved_object_without_correspondences():
    """The encoder-as-registration starts: an untrained model's direct region-motion path already encodes a
    rigid shift of a single-part object, found by nearest-point matching alone (no correspondences)."""
    import trimesh

    from kinemesh.ik.solver import posterior_starts
    from kinemesh.model import KinematicModel, preset
    from kinemesh.model.network import KinematicVAE

    cfg = preset("tiny")
    torch.manual_seed(0)
    model = KinematicModel(KinematicVAE(cfg.model), cfg)  # default init: zero token head, direct paths only
    box = trimesh.creation.box(extents=(0.4, 0.3, 0.2)).subdivide()
    v, f = np.asarray(box.vertices), np.asarray(box.faces)
    inst = model.instance(v, f, n_points=512, seed=0)
    moved = v + np.array([0.03, -0.02, 0.01])
    target = make_target(moved, f, v, f, correspondences=False, seed=0)
    starts = posterior_starts(inst, target, iters=4)
    assert starts.shape == (4, inst.latent_dim)
    rest_err = np.linalg.norm(moved - v, axis=1).mean()
    with torch.no_grad():
        fit_err = [np.linalg.norm(inst.vertices(z[None])[0].double().numpy() - moved, axis=1).mean() for z in starts]
    assert fit_err[-1] < 0.5 * rest_err and fit_err[-1] < fit_err[0]  # ICP-like: each iterate gets closer
    # a reduced decoder gets the same starts projected onto its subspace; baselines without an encoder get none
    red = ReducedDecoder(inst, fit(inst, k_q=4, n_samples=16))
    assert posterior_starts(red, target, iters=2).shape == (2, 4)
    assert posterior_starts(B.FreeFormDecoder(v, f, seed=0), target) is None


class _TwoPartDecoder:
    """z (..., 2) -> a body turned by z[0] about +Z and a lid turned by z[1] about +X, each after a fixed rigid
    'reconstruction error' E_p, so the decoded rest pose (z = 0) is off the true rest mesh."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.rest_vertices = torch.rand(40, 3, generator=g, dtype=torch.float64)
        self.rest_vertices[:20] *= 2.0  # the body, the larger part
        self.rest_vertices[20:, 2] += 2.0  # the lid above it
        self.rest_points = self.rest_vertices[::2].clone()
        self.vertex_groups = np.repeat([0, 1], 20)
        self.point_groups = self.vertex_groups[::2]
        self.mu_cond, self.latent_dim = torch.zeros(2, dtype=torch.float64), 2
        self.err = [(self._rot(0.05, 2), torch.tensor([0.01, -0.02, 0.0])), (self._rot(-0.08, 0), torch.tensor(
            [0.0, 0.015, 0.02]))]

    @staticmethod
    def _rot(a, axis):
        a = torch.as_tensor(a, dtype=torch.float64)
        c, s, o, z = torch.cos(a), torch.sin(a), torch.ones_like(a), torch.zeros_like(a)
        rows = {2: [[c, -s, z], [s, c, z], [z, z, o]], 0: [[o, z, z], [z, c, -s], [z, s, c]]}[axis]
        return torch.stack([torch.stack(r, -1) for r in rows], -2)

    def motion(self, z, part):  # T_p(z): (..., 3, 3), turning about the part's own axis through the origin
        return self._rot(z[..., 0], 2) if part == 0 else self._rot(z[..., 1], 0)

    def _decode(self, z, rest, groups):
        out = []
        for p in (0, 1):
            E, t = self.err[p]
            x = rest[groups == p] @ E.T + t
            out.append(x @ self.motion(z, p).transpose(-1, -2))
        return torch.cat(out, -2)

    def points(self, z):
        return self._decode(z, self.rest_points, self.point_groups)

    def vertices(self, z):
        return self._decode(z, self.rest_vertices, self.vertex_groups)


def test_rest_anchored_decoder_moves_the_true_rest_mesh():
    """Anchored to the decoded rest pose, the parts are exactly the rest mesh at z0 and the rest mesh moved by each
    part's own motion elsewhere (the reconstruction error E_p is gone); smooth in z (float64 finite differences);
    with the base held too, the body (the larger part) stays put and only the lid turns."""
    from kinemesh.ik.pipeline import RestAnchoredDecoder, base_fixed

    dec = _TwoPartDecoder()
    anch = RestAnchoredDecoder(dec, torch.zeros(2, dtype=torch.float64))
    z0 = torch.zeros(1, 2, dtype=torch.float64)
    assert (dec.vertices(z0)[0] - dec.rest_vertices).abs().max() > 0.01  # the model's rest is off
    assert torch.allclose(anch.vertices(z0)[0], dec.rest_vertices, atol=1e-12)
    assert torch.allclose(anch.points(z0)[0], dec.rest_points, atol=1e-12)
    z = torch.tensor([[0.3, -0.7], [1.1, 0.4]], dtype=torch.float64)
    want = torch.cat([dec.rest_vertices[dec.vertex_groups == p] @ dec.motion(z, p).transpose(-1, -2)
                      for p in (0, 1)], -2)
    assert torch.allclose(anch.vertices(z), want, atol=1e-10)
    zz = torch.tensor([[0.3, -0.7]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q: anch.points(q), (zz,), eps=1e-6, atol=1e-6)
    held = base_fixed(anch)
    v = held.vertices(z)
    body = torch.as_tensor(dec.vertex_groups == 0)
    assert torch.allclose(v[:, body], dec.rest_vertices[body].expand(2, -1, -1), atol=1e-10)
    assert not torch.allclose(v[:, ~body], dec.rest_vertices[~body], atol=1e-3)


class _DriftingToy(ToyCabinetDecoder):
    """ToyCabinetDecoder whose lid also slides off its hinge by 0.1 m (along x) per radian it turns, as the network
    does on real objects."""

    def _deform(self, x, part, z):
        out = super()._deform(x, part, z)
        drift = torch.zeros_like(out)
        drift[..., 0] = 0.1 * self.joint_values(z)[..., 0, None]
        return torch.where((part == 1)[:, None], out + drift, out)


@pytest.mark.parametrize("correspondences", [True, False])
def test_joint_bound_fit_recovers_the_angle_and_keeps_the_lid_on_its_hinge(correspondences):
    """URDFBinding(joints=True)'s decoder (kinemesh.ik.pipeline.joint_bound): fitted to the lid turned 0.7 rad and
    the drawer out 0.1 m, the joint values are recovered, the body (the root) is exactly at rest and every lid
    vertex keeps its distance to the hinge line, although the wrapped decoder drifts; off (the base held, parts
    as decoded) the fit still runs but the lid leaves its hinge."""
    from kinemesh.data.articulated import ArticulatedObject, Part
    from kinemesh.dynamics.joints import JointDecoder
    from kinemesh.ik.pipeline import base_fixed, joint_bound

    toy = _DriftingToy(latent_dim=8, n_points=384, subdivisions=1, seed=0)
    exact = ToyCabinetDecoder(latent_dim=8, n_points=384, subdivisions=1, seed=0)
    names = ["body", "lid", "drawer"]
    art = ArticulatedObject([Part(n, np.zeros((0, 3)), np.zeros((0, 3), np.int64)) for n in names],
                            _joints(), name="toy")
    sub = fit(toy, k_q=2, n_samples=32)
    on = ReducedDecoder(joint_bound(toy, sub, art, names), sub)
    assert isinstance(on.decoder, JointDecoder)
    rest, ids = toy.rest_vertices.numpy(), toy.vertex_part.numpy()
    truth = exact.vertices(exact.latent_for(0.7, 0.1)).numpy()
    target = make_target(truth, toy.faces, rest, toy.faces, correspondences=correspondences)
    res = solve(on, target, FAST)
    assert on.decoder.joint_values(torch.as_tensor(res.z)).numpy() == pytest.approx([0.7, 0.1], abs=0.02)
    assert np.abs(res.vertices[ids == 0] - rest[ids == 0]).max() < 1e-6

    def hinge_distance(v):  # lid vertices to the hinge line (along y through x = -0.4, z = 0.6)
        return np.hypot(v[ids == 1, 0] + 0.4, v[ids == 1, 2] - 0.6)

    assert np.abs(hinge_distance(res.vertices) - hinge_distance(rest)).max() < 1e-5
    assert np.linalg.norm(res.vertices - truth, axis=1).mean() < 0.005
    off = solve(ReducedDecoder(base_fixed(toy), sub), target, FAST)
    assert np.linalg.norm(off.vertices - truth, axis=1).mean() < 0.5 * np.linalg.norm(rest - truth, axis=1).mean()
    assert np.abs(hinge_distance(off.vertices) - hinge_distance(rest)).max() > 0.02


def test_urdf_binding_keeps_at_least_the_simulators_eight_probe_coordinates():
    """bind_ik of an object with its joints: at least 8 reduced coordinates from the motion probes
    (URDFBinding.min_k, as ``kinemesh simulate`` binds it), more where 99 % of the probes needs them, unless the
    reduction fixes k_q; ``min_k=1`` keeps the 99 % rule alone."""
    from dataclasses import replace

    from kinemesh.data.articulated import ArticulatedObject, Part
    from kinemesh.ik.pipeline import IK_REDUCTION, URDFBinding, bind_ik
    from toys import moving_model, toy_cabinet

    v, f, ids = toy_cabinet(1)
    names = ["body", "lid", "drawer"]
    art = ArticulatedObject([Part(n, np.zeros((0, 3)), np.zeros((0, 3), np.int64)) for n in names],
                            _joints(), name="toy")
    model = moving_model()
    red = replace(IK_REDUCTION, n_samples=4)
    assert IK_REDUCTION.k_q is None and URDFBinding().min_k == 8
    _, sub, _ = bind_ik(v, f, model, red, ids, names, art)
    assert sub.method == "probes" and sub.k == 8
    assert bind_ik(v, f, model, replace(red, k_q=3), ids, names, art)[1].k == 3  # an explicit k_q wins
    rule = bind_ik(v, f, model, red, ids, names, art, URDFBinding(min_k=1))[1]
    k99 = int(np.searchsorted(np.cumsum(rule.eigenvalues) / rule.eigenvalues.sum(), 0.99 - 1e-12) + 1)
    assert rule.k == k99 < 8
    assert bind_ik(v, f, model, red, ids, names, art, URDFBinding(min_k=k99 - 1))[1].k == k99  # a floor, not a cap


def test_urdf_binding_gives_joints_of_their_own_the_coordinates_simulate_gives_them(monkeypatch):
    """Joints whose motion the network cannot deliver (here: every joint, MIN_REACH raised past any reach) get
    coordinates of their own in inverse kinematics too, as ``kinemesh simulate`` binds them: appended to the probe
    coordinates (q = [q_network, d]) and to z for the polish, so a pose along them is fitted exactly, and the joint
    values of the fit are its d."""
    from dataclasses import replace

    from kinemesh.data.articulated import ArticulatedObject, Part
    from kinemesh.dynamics import joints
    from kinemesh.ik.pipeline import IK_REDUCTION, bind_ik
    from kinemesh.reduce.active_subspace import AppendedSubspace
    from toys import moving_model, toy_cabinet

    v, f, ids = toy_cabinet(1)
    names = ["body", "lid", "drawer"]
    art = ArticulatedObject([Part(n, np.zeros((0, 3)), np.zeros((0, 3), np.int64)) for n in names],
                            _joints(), name="toy")
    T = art.part_transforms({"lid": 0.5, "drawer": 0.1})
    tv = v.copy()
    for i, n in enumerate(names):
        tv[ids == i] = v[ids == i] @ T[n][:3, :3].T + T[n][:3, 3]
    target = make_target(tv, f, v, f, correspondences=True)
    red = replace(IK_REDUCTION, n_samples=4)
    cfg = IKConfig(loss="vertex", adam_steps=60, lbfgs_steps=30)
    model = moving_model()
    monkeypatch.setattr(joints, "MIN_REACH", 1e9)
    dec, sub, _ = bind_ik(v, f, model, red, ids, names, art)
    jd = dec.decoder
    assert isinstance(dec.subspace, AppendedSubspace) and sorted(jd.direct) == ["drawer", "lid"]
    assert dec.latent_dim == sub.k + 2 and jd.latent_dim == sub.latent_dim + 2
    res = solve(dec, target, cfg)
    assert res.z.shape == (sub.latent_dim + 2,)
    assert jd.joint_values(torch.as_tensor(res.z).to(jd.mu_cond)).numpy() == pytest.approx([0.5, 0.1], abs=2e-3)
    assert res.errors["vertex_error"] < 1e-3
    # the appended coordinates pass through the reduction; an encoder's latent (D) gets them at 0
    q = torch.randn(3, dec.latent_dim, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(dec.subspace.z(q)[:, -2:], q[:, -2:])
    assert torch.allclose(dec.subspace.q(dec.subspace.z(q)), q, atol=1e-4)
    assert dec.subspace.q(sub.z(q[:, :sub.k]))[:, -2:].abs().max() == 0
