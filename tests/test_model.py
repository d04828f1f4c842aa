"""Tests of the kinematic model: shapes, the InstanceDecoder contract, save/load, jvp and the DQ path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinemesh.model import InstanceDecoder, KinematicModel, preset
from kinemesh.model.network import KinematicVAE, vae_loss


def _hinged_box():
    """A box body with a separate lid part (two connected components), metres."""
    import trimesh

    body = trimesh.creation.box(extents=(0.4, 0.3, 0.2))
    lid = trimesh.creation.box(extents=(0.4, 0.3, 0.02))
    lid.apply_translation((0, 0, 0.115))  # 5 mm gap: separate components
    v = np.concatenate([body.vertices, lid.vertices])
    f = np.concatenate([body.faces, lid.faces + len(body.vertices)])
    return v, f


def _tiny_model(head="dq_skinning", seed=0) -> KinematicModel:
    cfg = preset("tiny")
    cfg.model.use_head(head)
    torch.manual_seed(seed)
    net = KinematicVAE(cfg.model)
    last = net.decoder.token_head if head == "dq_skinning" else net.decoder.point_head[-1]
    torch.nn.init.normal_(last.weight, std=0.1)  # make the untrained decoder respond to z
    return KinematicModel(net, cfg)


@pytest.mark.parametrize("head", ["dq_skinning", "per_point_dq", "displacement"])
def test_instance_shapes_and_contract(head):
    v, f = _hinged_box()
    model = _tiny_model(head)
    inst = model.instance(v, f, n_points=128, seed=0)
    assert isinstance(inst, InstanceDecoder)
    D = model.latent_dim
    assert D == 32 and inst.mu_cond.shape == (D,)
    assert inst.rest_points.shape == (128, 3) and inst.rest_vertices.shape == (len(v), 3)
    z = inst.prior_sample(5, seed=1)
    assert z.shape == (5, D)
    assert inst.points(z).shape == (5, 128, 3)
    assert inst.vertices(z.reshape(5, 1, D)).shape == (5, 1, len(v), 3)
    assert inst.points(z[0]).shape == (128, 3)
    # points stay on the object's scale (metres) and move with z
    moved = (inst.points(z) - inst.rest_points).norm(dim=-1).mean().detach()
    assert 1e-4 < float(moved) < 1.0


def test_dq_skinning_is_rigid_where_weights_are_one_hot():
    """All weight on one token -> the whole mesh moves by one rigid transform (distances preserved)."""
    v, f = _hinged_box()
    model = _tiny_model()
    head = model.net.decoder.skin_head
    with torch.no_grad():
        head.weight.zero_()
        head.bias.copy_(torch.tensor([1000.0, 0.0, 0.0, 0.0]))
    inst = model.instance(v, f, n_points=256, seed=0)
    z = inst.prior_sample(1, seed=3)[0]
    out = inst.vertices(z).detach().double().numpy()
    assert np.abs(out - v).max() > 1e-3  # it moved
    da = np.linalg.norm(v[:, None] - v[None], axis=-1)
    db = np.linalg.norm(out[:, None] - out[None], axis=-1)
    assert np.abs(da - db).max() < 1e-5


def test_save_load_round_trip(tmp_path):
    v, f = _hinged_box()
    model = _tiny_model()
    model.save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "config.json").is_file()
    back = KinematicModel.load(tmp_path / "ckpt")
    z = model.instance(v, f, n_points=64).prior_sample(2, seed=4)
    a = model.instance(v, f, n_points=64).vertices(z)
    b = back.instance(v, f, n_points=64).vertices(z)
    assert torch.equal(a, b)


def test_load_errors(tmp_path):
    from kinemesh.errors import InputFileError
    from kinemesh.model import load_model

    with pytest.raises(InputFileError):
        load_model(tmp_path / "nothing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(InputFileError):
        load_model(tmp_path / "bad")


@pytest.mark.parametrize("head", ["dq_skinning", "per_point_dq"])
def test_decoder_jvp_and_vjp_match_finite_differences_float64(head):
    v, f = _hinged_box()
    model = _tiny_model(head).to(dtype=torch.float64)
    inst = model.instance(v, f, n_points=48, seed=0)
    assert inst.rest_points.dtype == torch.float64
    g = torch.Generator().manual_seed(0)
    z = inst.mu_cond + torch.randn(inst.latent_dim, generator=g, dtype=torch.float64)
    dz = torch.randn(inst.latent_dim, generator=g, dtype=torch.float64)
    for fn in (inst.points, inst.vertices):
        _, jvp = torch.func.jvp(fn, (z,), (dz,))
        eps = 1e-6
        fd = (fn(z + eps * dz) - fn(z - eps * dz)) / (2 * eps)
        assert torch.allclose(jvp, fd, atol=1e-7, rtol=1e-5), float((jvp - fd).abs().max())
        assert float(jvp.abs().max()) > 1e-4
        # reverse mode agrees with forward mode: <w, J dz> = <J^T w, dz>
        w = torch.randn_like(jvp)
        zz = z.clone().requires_grad_(True)
        (gz,) = torch.autograd.grad((fn(zz) * w).sum(), zz)
        assert torch.allclose((gz * dz).sum(), (w * jvp).sum(), rtol=1e-8, atol=1e-10)


def test_training_forward_loss_finite_and_kl_free_bits():
    cfg = preset("tiny")
    net = KinematicVAE(cfg.model)
    pts = torch.rand(3, 64, 3) - 0.5
    delta = 0.1 * torch.randn(3, 64, 3)
    out = net(pts, delta)
    assert out["pred_delta"].shape == (3, 64, 3)
    parts = vae_loss(out, delta, kl_weight=0.01, free_bits=0.05)
    assert torch.isfinite(parts["loss"])
    # zero-initialised heads: no deformation in -> identity out at initialisation
    still = net(pts, torch.zeros_like(delta), sample=False)
    assert float(still["pred_delta"].abs().max()) < 1e-5
    # free bits: the floored KL term is at least D * free_bits
    assert float(parts["loss"] - parts["recon"]) >= 0.01 * 0.05 * cfg.model.latent_dim - 1e-6


def test_skin_blend_matches_geometry_blend_float64():
    from kinemesh.geometry import dualquat
    from kinemesh.model.network import skin_blend

    g = torch.Generator().manual_seed(0)
    raw = torch.randn(3, 5, 8, generator=g, dtype=torch.float64)
    raw[:, 1, :4] *= -1  # antipodal-ish rotations must not cancel
    dq = dualquat.normalize(raw)
    w = torch.softmax(torch.randn(3, 7, 5, generator=g, dtype=torch.float64), -1)
    ref = dualquat.blend(dq[:, None], w)
    out = skin_blend(dq, w)
    # same transform (q and -q are the same rotation)
    pts = torch.randn(3, 7, 3, generator=g, dtype=torch.float64)
    assert torch.allclose(dualquat.apply(out, pts), dualquat.apply(ref, pts), atol=1e-12)


@pytest.mark.parametrize("flip", [False, True])
def test_skin_points_equals_blend_then_apply_float64(flip):
    """The fused rational DQS (one division instead of normalise + apply) and the cached hemisphere pivots
    give the reference blend's points, with and without antipodal token rotations."""
    from kinemesh.geometry import dualquat
    from kinemesh.model.network import skin_blend, skin_points

    g = torch.Generator().manual_seed(1)
    raw = torch.randn(4, 6, 8, generator=g, dtype=torch.float64) * 0.3
    raw[..., 0] += 1.0  # real parts near the identity: all in one hemisphere (the fast path)
    if flip:
        raw[:, 2, :4] *= -1
    dq = dualquat.normalize(raw)
    w = torch.softmax(3 * torch.randn(1, 50, 6, generator=g, dtype=torch.float64), -1)
    pts = torch.randn(50, 3, generator=g, dtype=torch.float64)
    ref = dualquat.apply(dualquat.blend(dq[:, None], w.expand(4, -1, -1)), pts)
    for pivot in (None, w[0].argmax(-1)):
        assert torch.allclose(skin_points(dq, w, pts, pivot), ref, atol=1e-12)
        assert torch.allclose(skin_points(dq, w.expand(4, -1, -1), pts, pivot), ref, atol=1e-12)  # per-row weights
        assert torch.allclose(dualquat.apply(skin_blend(dq, w, pivot), pts), ref, atol=1e-12)
    # the per-coordinate planes differentiate like the reference (bind's backward passes go through them)
    d = dq.clone().requires_grad_()
    g_new = torch.autograd.grad((skin_points(d, w, pts) ** 2).sum(), d)[0]
    x_ref = dualquat.apply(dualquat.blend(d[:, None], w.expand(4, -1, -1)), pts)
    g_ref = torch.autograd.grad((x_ref ** 2).sum(), d)[0]
    assert torch.allclose(g_new, g_ref, atol=1e-10)


@pytest.mark.parametrize("head", ["dq_skinning", "per_point_dq", "displacement"])
def test_vertices_decoded_in_chunks_equal_one_block_float64(head):
    v, f = _hinged_box()
    model = _tiny_model(head).to(dtype=torch.float64)
    inst = model.instance(v, f, n_points=96, seed=0)
    z = inst.prior_sample(3, seed=2)
    whole = inst.vertices(z)
    inst.vertex_chunk = 5  # 16 vertices -> blocks of 5, 5, 5, 1
    assert len(inst._chunks()) == 4
    assert torch.allclose(inst.vertices(z), whole, atol=1e-13)
    assert float((whole - inst.rest_vertices).abs().max()) > 1e-4  # the vertices do move
    if head == "dq_skinning":  # the blocked path still is DQ skinning with the vertex weights
        from kinemesh.geometry import dualquat
        from kinemesh.model.network import skin_blend

        ref = inst._to_metres(dualquat.apply(skin_blend(inst._token_dq(z), inst._vertex_weights), inst._vn))
        assert torch.allclose(whole, ref, atol=1e-12)


def test_sample_cli_writes_objs_and_contact_sheet(tmp_path):
    import trimesh

    from kinemesh.cli import main

    v, f = _hinged_box()
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "box.obj")
    _tiny_model().save(tmp_path / "ckpt")
    out = tmp_path / "samples"
    code = main(["sample", str(tmp_path / "box.obj"), "--n", "3", "--out", str(out), "--checkpoint",
                 str(tmp_path / "ckpt"), "--n-points", "64"])
    assert code == 0
    objs = sorted(p.name for p in out.glob("sample_*.obj"))
    assert objs == ["sample_00.obj", "sample_01.obj", "sample_02.obj"]
    s0 = trimesh.load(out / "sample_00.obj", process=False)
    assert s0.vertices.shape == (len(v), 3) and not np.allclose(s0.vertices, v)
    assert (out / "contact_sheet.png").stat().st_size > 1000
    # a missing mesh is a one-line user error, nothing written
    assert main(["sample", str(tmp_path / "nope.obj"), "--out", str(tmp_path / "x")]) == 1
    assert not (tmp_path / "x").exists()


def _rot(axis, angle):
    from scipy.spatial.transform import Rotation

    return Rotation.from_rotvec(np.asarray(axis, float) / np.linalg.norm(axis) * angle).as_matrix()


def test_region_motion_recovers_planted_rigid_motions_float64():
    """Weighted Procrustes per token: two regions moved by known rigid motions -> their quaternions and
    centroid translations, zero residual and the region shares."""
    from kinemesh.geometry.dualquat import quat_from_matrix
    from kinemesh.model.network import region_motion

    rng = np.random.default_rng(0)
    x = rng.uniform(-0.5, 0.5, (1, 60, 3))
    w = np.zeros((1, 60, 2))
    w[0, :40, 0] = 1.0
    w[0, 40:, 1] = 1.0
    R0, t0 = _rot([0, 0, 1], 0.7), np.array([0.1, -0.2, 0.05])
    R1, t1 = _rot([1, 1, 0], -0.4), np.array([0.0, 0.3, 0.0])
    y = x.copy()
    y[0, :40] = x[0, :40] @ R0.T + t0
    y[0, 40:] = x[0, 40:] @ R1.T + t1
    X, Y, W = (torch.tensor(a, dtype=torch.float64) for a in (x, y - x, w))
    f = region_motion(X, Y, W)[0].numpy()
    for k, (R, t, sl) in enumerate([(R0, t0, slice(0, 40)), (R1, t1, slice(40, 60))]):
        q = quat_from_matrix(torch.tensor(R)).numpy()
        np.testing.assert_allclose(f[k, :4], q - [1, 0, 0, 0], atol=1e-9)
        c = x[0, sl].mean(0)
        np.testing.assert_allclose(f[k, 4:7], (c @ R.T + t) - c, atol=1e-9)  # centroid translation
        assert f[k, 7] < 1e-6  # rigid: no residual
    np.testing.assert_allclose(f[:, 8], [40 / 60, 20 / 60], atol=1e-12)


def test_component_rigid_weights_constant_per_component_and_smooth_on_one_component():
    v, f = _hinged_box()
    model = _tiny_model()
    assert model.net.cfg.component_rigid
    inst = model.instance(v, f, n_points=256, seed=0)
    w = inst.skin_weights.detach().numpy()
    for g in np.unique(inst.point_groups):
        sel = w[inst.point_groups == g]
        np.testing.assert_allclose(sel, np.broadcast_to(sel[0], sel.shape), atol=1e-6)
    import trimesh

    s = trimesh.creation.icosphere(subdivisions=2, radius=0.2)
    one = model.instance(np.asarray(s.vertices), np.asarray(s.faces), n_points=256, seed=0)
    spread = one.skin_weights.detach().numpy().std(0).max()
    assert spread > 1e-3  # a single component keeps per-point weights (it can bend)


def test_posterior_and_decoder_direct_paths_reconstruct_rigid_motion_at_initialisation():
    """The posterior reads each region's rigid motion and the decoder's z_skip inverts it: an untrained
    model already reconstructs a whole-object rigid motion, so training starts from a working autoencoder."""
    cfg = preset("tiny")
    torch.manual_seed(0)
    net = KinematicVAE(cfg.model).double()
    rng = np.random.default_rng(1)
    pts = torch.tensor(rng.uniform(-0.5, 0.5, (2, 100, 3)))
    R, t = _rot([0.3, 0.2, 1.0], 0.5), np.array([0.05, 0.1, -0.02])
    moved = pts.numpy() @ R.T + t
    delta = torch.tensor(moved) - pts
    out = net(pts, delta, sample=False)
    err = (out["pred_delta"] - delta).norm(dim=-1).mean() / delta.norm(dim=-1).mean()
    assert float(err) < 1e-6


def test_old_checkpoint_configs_load_without_the_new_options():
    """A config.json written before component_rigid / posterior_procrustes / prior_weight existed builds the old
    network and training (the options were off), although today's defaults turn them on."""
    from kinemesh.model.config import Config, ModelConfig, TrainConfig

    assert ModelConfig().component_rigid and ModelConfig().posterior_procrustes and TrainConfig().prior_weight > 0
    d = preset("cpu-small").to_dict()
    for key in ("component_rigid", "posterior_procrustes"):
        d["model"].pop(key)
    d["train"].pop("prior_weight")
    cfg = Config.from_dict(d)
    assert not cfg.model.component_rigid and not cfg.model.posterior_procrustes and cfg.train.prior_weight == 0
    net = KinematicVAE(cfg.model)
    assert not hasattr(net.decoder, "z_skip") and not hasattr(net.posterior, "motion_skip")


def test_plausibility_scores_detachment_and_stretch_float64():
    """A hinge rotation keeps the parts in contact (no penalty); a part flying off and a stretched sheet are
    penalised; an isometric motion of a single surface costs nothing."""
    from kinemesh.model.network import plausibility

    rng = np.random.default_rng(0)
    body = rng.uniform([-0.5, -0.5, -0.02], [0.5, 0.5, 0.0], (200, 3))  # the body's top layer
    lid = rng.uniform([-0.5, -0.5, 0.01], [0.5, 0.5, 0.03], (100, 3))
    lid[0] = [-0.5, 0.0, 0.01]  # a point on the hinge line (x = -0.5, z = 0.01), 1 cm above the body
    pts = np.concatenate([body, lid])[None]
    groups = torch.tensor(np.r_[np.zeros(200), np.ones(100)][None], dtype=torch.long)
    R = _rot([0, 1, 0], -0.8)  # open the lid about the hinge line through (-0.5, *, 0.01)
    hinge = np.array([-0.5, 0.0, 0.01])
    opened = pts.copy()
    opened[0, 200:] = (pts[0, 200:] - hinge) @ R.T + hinge
    flown = pts.copy()
    flown[0, 200:] += [0.0, 0.0, 0.3]
    P = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    a_open, _ = plausibility(P(pts), P(opened), groups)
    a_fly, _ = plausibility(P(pts), P(flown), groups)
    assert float(a_fly) > 0.05  # 0.3 of the size away: ~0.3^2 for both components
    assert float(a_open) < 0.01 * float(a_fly)  # the hinge line keeps contact (sparse samples: not exactly 0)
    sheet = np.stack(np.meshgrid(np.linspace(-0.5, 0.5, 12), np.linspace(-0.5, 0.5, 12)), -1).reshape(-1, 2)
    sheet = np.c_[sheet, np.zeros(len(sheet))][None]
    one = torch.zeros(1, sheet.shape[1], dtype=torch.long)
    _, s_rigid = plausibility(P(sheet), P(sheet @ _rot([1, 2, 3], 0.9).T + 0.2), one)
    _, s_stretched = plausibility(P(sheet), P(sheet * [1.2, 1.0, 1.0]), one)
    assert float(s_rigid) < 1e-20
    assert 0.005 < float(s_stretched) < 0.04  # 20 % stretch along x, less along diagonals


def test_training_forward_with_prior_regulariser_is_finite_and_differentiable():
    cfg = preset("tiny")
    torch.manual_seed(0)
    net = KinematicVAE(cfg.model)
    pts = torch.rand(4, 64, 3) - 0.5
    groups = torch.tensor([[0] * 32 + [1] * 32, [0] * 64, [0] * 40 + [1] * 24, [0] * 64])
    out = net(pts, 0.05 * torch.randn(4, 64, 3), groups=groups, prior_reg=True)
    parts = vae_loss(out, torch.zeros(4, 64, 3), 0.01, 0.05, 1000.0, prior_weight=100.0)
    assert torch.isfinite(parts["loss"]) and float(parts["prior_reg"]) > 0
    parts["loss"].backward()
    grads = [p.grad for p in net.decoder.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_token_cache_reuses_decoded_states_without_gradients_float64(monkeypatch):
    """``token_cache``: within it a latent state decoded again without gradients skips the network (points then
    vertices of the same states: one network pass), with the same result; with gradients it is not used; outside
    it nothing is kept."""
    v, f = _hinged_box()
    inst = _tiny_model().to(dtype=torch.float64).instance(v, f, n_points=96, seed=0)
    z = inst.prior_sample(3, seed=2)
    ref_p, ref_v = inst.points(z), inst.vertices(z)
    calls = []
    net = inst._token_dq_net
    monkeypatch.setattr(inst, "_token_dq_net", lambda zf: calls.append(len(zf)) or net(zf))
    with inst.token_cache(), torch.no_grad():
        p, v2 = inst.points(z), inst.vertices(z[1:])
        both = inst.vertices(torch.cat([z[:1], z[2:] + 0.1]))
    assert calls == [3, 1] and torch.allclose(p, ref_p, atol=1e-12) and torch.allclose(v2, ref_v[1:], atol=1e-12)
    assert torch.allclose(both[0], ref_v[0], atol=1e-12)
    with inst.token_cache():
        inst.points(z)  # gradients on: the network
    assert calls == [3, 1, 3] and inst._dq_cache is None


def test_single_precision_decodes_close_to_float64_and_keeps_gradients_and_caches_apart():
    """``single_precision``: decodes without gradients run a float32 copy of the network (within float32
    round-off of float64's points), decodes with gradients stay float64, the token cache keeps the two apart, and
    the float32 copy follows in-place weight updates."""
    from kinemesh.model.api import float32_copy

    v, f = _hinged_box()
    model = _tiny_model().to(dtype=torch.float64)
    inst = model.instance(v, f, n_points=96, seed=0)
    z = inst.prior_sample(3, seed=4)
    with torch.no_grad():
        ref_p, ref_v = inst.points(z), inst.vertices(z)
    with inst.token_cache(), inst.single_precision():
        with torch.no_grad():
            p32, v32 = inst.points(z), inst.vertices(z)
        zg = z.clone().requires_grad_()
        pg = inst.points(zg)  # with gradients: the float64 network
        assert torch.equal(pg.detach(), ref_p)
        assert pg.dtype == torch.float64 and pg.requires_grad
        with torch.no_grad():  # a double-precision decode after single ones is not served from their cache
            inst._single, saved = None, inst._single
            assert torch.equal(inst.points(z), ref_p)
            inst._single = saved
    assert inst._single is None  # the context is left
    assert p32.dtype == torch.float64
    size = float((ref_p.amax((0, 1)) - ref_p.amin((0, 1))).max())
    err = float((p32 - ref_p).abs().max()) / size
    assert 0 < err < 1e-5, err
    assert float((v32 - ref_v).abs().max()) / size < 1e-5
    # the float32 copy is kept per network and redone after an in-place update
    dec = model.net.decoder
    c1 = float32_copy(dec)
    assert float32_copy(dec) is c1
    with torch.no_grad():
        next(dec.parameters()).add_(1e-3)
    c2 = float32_copy(dec)
    assert c2 is not c1
    assert torch.equal(next(c2.parameters()), next(dec.parameters()).float())


def test_single_precision_with_gradients_differentiates_through_the_float32_copy():
    """``single_precision(gradients=True)`` (the active subspace's Monte Carlo passes): decodes with gradients run
    the float32 copy too, and their vector-Jacobian products match float64's to float32 round-off."""
    v, f = _hinged_box()
    model = _tiny_model().to(dtype=torch.float64)
    inst = model.instance(v, f, n_points=96, seed=0)
    z = inst.prior_sample(2, seed=5).requires_grad_()
    w = torch.randn(2, 96, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    (g64,) = torch.autograd.grad((inst.points(z) * w).sum(), z)
    with inst.single_precision(gradients=True):
        p32 = inst.points(z)
        (g32,) = torch.autograd.grad((p32 * w).sum(), z)
    assert p32.dtype == torch.float64 and g32.dtype == torch.float64
    assert not torch.equal(g32, g64)  # the float32 network ran
    assert float((g32 - g64).abs().max()) <= 1e-4 * float(g64.abs().max())


def test_float64_instance_conditioning_from_the_float32_copy_is_close_to_float64():
    """A float64 network's instance takes its prior mean, token features and skinning weights from the float32
    copy (``float32_copy``); they stay within float32 round-off of the float64 network's, in float64."""
    v, f = _hinged_box()
    model = _tiny_model().to(dtype=torch.float64)
    inst = model.instance(v, f, n_points=96, seed=0)
    with torch.no_grad():
        mu, h = model.net.prior(inst._qn[None])
    assert inst.mu_cond.dtype == torch.float64 and inst._h.dtype == torch.float64
    assert not torch.equal(inst.mu_cond, mu[0])
    assert torch.allclose(inst.mu_cond, mu[0], atol=1e-5) and torch.allclose(inst._h, h, atol=1e-5)
