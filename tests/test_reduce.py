"""Active-subspace reduction: planted structure recovery, save/load, ReducedDecoder, bad options."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinemesh.errors import ConfigError, InputFileError
from kinemesh.reduce import ReducedDecoder, Subspace, fit, outer_product_matrix
from toys import ToyCabinetDecoder


@pytest.fixture
def toy():
    return ToyCabinetDecoder(latent_dim=8, n_points=256, subdivisions=0, seed=3)


@pytest.mark.parametrize("method", ["jacobian", "gradient"])
def test_recovers_planted_subspace(toy, method):
    sub = fit(toy, explained=0.999, n_samples=96, method=method, seed=1)
    assert sub.k == 2  # only the planted 2-D subspace moves anything
    P_true = toy.A @ toy.A.T
    assert torch.linalg.norm(sub.W @ sub.W.T - P_true) < 1e-3
    assert np.allclose(sub.W.T @ sub.W, np.eye(2), atol=1e-5)
    # spectrum: two clearly non-zero eigenvalues, the rest numerically zero
    assert sub.eigenvalues[1] > 1e-4 and abs(sub.eigenvalues[2]) < 1e-8 * sub.eigenvalues[0]
    assert sub.explained > 0.999


def test_gradient_matrix_matches_finite_differences(toy):
    """C for one sample equals g g^T with g the float64 finite-difference gradient of G = ||delta||."""
    toy.mu_cond = toy.mu_cond.double()
    toy.A = toy.A.double()
    toy.rest_points = toy.rest_points.double()
    gen = torch.Generator().manual_seed(5)
    z = toy.mu_cond + torch.randn(1, 8, generator=gen, dtype=torch.float64)
    C = outer_product_matrix(toy, n_samples=1, method="gradient", seed=5, batch=1)

    def G(zz):
        return float(torch.linalg.norm(toy.points(zz) - toy.rest_points))

    h, g = 1e-6, np.zeros(8)
    for i in range(8):
        e = torch.zeros(1, 8, dtype=torch.float64)
        e[0, i] = h
        g[i] = (G(z + e) - G(z - e)) / (2 * h)
    assert np.allclose(C.numpy(), np.outer(g, g), rtol=1e-5, atol=1e-9)


def test_jacobian_matrix_is_unbiased(toy):
    """The probe estimate of E[J^T J]/P converges to the exact value at a fixed z."""
    toy.mu_cond = toy.mu_cond.double()
    toy.A = toy.A.double()
    toy.rest_points = toy.rest_points.double()
    z0 = toy.mu_cond + 0.5

    class Fixed:  # a decoder whose prior samples all decode like z0 (zero prior scale below)
        latent_dim, mu_cond, rest_points = 8, z0, toy.rest_points

        def points(self, z):
            return toy.points(z)

    J = torch.autograd.functional.jacobian(lambda z: toy.points(z).reshape(-1), z0)
    exact = (J.T @ J / toy.rest_points.shape[0]).numpy()
    from kinemesh.reduce.active_subspace import outer_product_matrix as opm

    est = opm(Fixed(), n_samples=64, method="jacobian", n_probes=64, batch=64, seed=0, prior_scale=0.0).numpy()
    assert np.abs(est - exact).max() < 0.1 * np.abs(exact).max()


def test_fixed_k_and_reduced_decoder(toy, tmp_path):
    sub = fit(toy, k_q=3, n_samples=32)
    assert sub.W.shape == (8, 3)
    red = ReducedDecoder(toy, sub)
    assert red.latent_dim == 3 and torch.equal(red.mu_cond, torch.zeros(3))
    q = torch.randn(5, 3)
    assert torch.allclose(red.points(q), toy.points(sub.z(q)))
    assert red.vertices(q).shape == (5, len(toy.rest_vertices), 3)
    assert torch.allclose(sub.q(sub.z(q)), q, atol=1e-5)
    assert red.faces is toy.faces  # attributes of the wrapped decoder pass through
    # forward mode works through the reduction (dynamics needs JVPs)
    _, tangent = torch.func.jvp(red.points, (q[:1],), (torch.ones(1, 3),))
    assert torch.isfinite(tangent).all()

    sub.save(tmp_path / "sub")
    back = Subspace.load(tmp_path / "sub")
    assert torch.equal(back.W, sub.W) and np.allclose(back.eigenvalues, sub.eigenvalues)
    assert back.method == sub.method and back.k == 3


def test_bad_inputs(toy, tmp_path):
    with pytest.raises(ConfigError):
        fit(toy, k_q=0)
    with pytest.raises(ConfigError):
        fit(toy, k_q=99)
    with pytest.raises(ConfigError):
        fit(toy, method="hessian")
    with pytest.raises(InputFileError):
        Subspace.load(tmp_path / "nothing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "subspace.json").write_text("{}")
    (tmp_path / "bad" / "subspace.safetensors").write_bytes(b"garbage")
    with pytest.raises(InputFileError):
        Subspace.load(tmp_path / "bad")
    other = fit(ToyCabinetDecoder(latent_dim=6, n_points=64, subdivisions=0), k_q=2, n_samples=8)
    with pytest.raises(ConfigError):
        ReducedDecoder(toy, other)


def test_subspace_in_calibrated_prior_coordinates(toy, tmp_path):
    """With a prior N(mu, L L^T) the subspace lives in u (z = mu + L u): it recovers span(L^T A) there,
    z(q) moves along L W, q(z(q)) = q, q is N(0, I) under the prior, and save/load keeps L."""
    rng = np.random.default_rng(0)
    M = rng.normal(size=(8, 8))
    L = torch.as_tensor(M @ M.T / 8 + 0.3 * np.eye(8), dtype=torch.float32)  # symmetric positive definite
    toy.prior_factor = L
    sub = fit(toy, explained=0.999, n_samples=96, seed=1)
    assert sub.k == 2
    B = (L.T @ toy.A).double()
    P_true = B @ torch.linalg.pinv(B)  # projector onto span(L^T A)
    assert torch.linalg.norm(sub.W.double() @ sub.W.double().T - P_true) < 1e-3
    assert torch.allclose(sub.basis, L @ sub.W, atol=1e-6)
    q = torch.randn(4, 2)
    assert torch.allclose(sub.q(sub.z(q)), q, atol=1e-4)
    u = torch.randn(20000, 8, generator=torch.Generator().manual_seed(2))
    qs = sub.q(toy.mu_cond + u @ L.T)
    assert torch.allclose(torch.cov(qs.T), torch.eye(2), atol=0.05)
    sub.save(tmp_path / "sub")
    back = Subspace.load(tmp_path / "sub")
    assert torch.allclose(back.prior_factor, L) and torch.allclose(back.z(q), sub.z(q), atol=1e-6)


def test_bind_policy_calibrated_kind_prior_and_missing_checkpoints(tmp_path, monkeypatch):
    """bind: the kind is resolved once and picks its calibrated prior; IK's uncalibrated option and reduction off
    are explicit; a missing checkpoint (the default one included) is an InputFileError, never an untrained model."""
    import trimesh

    import kinemesh.model.api as api
    from kinemesh.model import load_model, untrained_model
    from kinemesh.model.checkpoint import save_calibration
    from kinemesh.reduce import ReductionConfig, bind

    model = untrained_model("tiny")
    D = model.latent_dim
    model.save(tmp_path / "ck")
    save_calibration(tmp_path / "ck", {"all": np.eye(D), "elastic": 4 * np.eye(D)}, {})
    ball = trimesh.creation.icosphere(subdivisions=2)
    v, f = np.asarray(ball.vertices), np.asarray(ball.faces)
    b = bind(v, f, tmp_path / "ck", reduction=ReductionConfig(k_q=3, n_samples=4), n_points=64)
    assert b.kind == "elastic" and b.instance.prior_kind == "elastic"  # a closed ball, guessed from the mesh
    assert torch.allclose(b.instance.prior_factor, 2 * torch.eye(D))  # sqrt of the elastic covariance 4 I
    assert b.subspace.k == 3 and b.decoder.vertices(torch.zeros(3)).shape == (len(v), 3)
    raw = bind(v, f, b.model, kind="articulated", n_points=64,
               reduction=ReductionConfig(enabled=False, calibrated_prior=False))
    assert raw.kind == "articulated" and raw.instance.prior_factor is None
    assert raw.subspace is None and raw.decoder is raw.instance
    assert bind(v, f, b.model, kind="cloth", n_points=64, reduction=ReductionConfig(enabled=False)
                ).instance.prior_kind == "all"  # no cloth calibration in this checkpoint: the pooled one
    with pytest.raises(ConfigError, match="granular"):
        bind(v, f, b.model, kind="granular")
    with pytest.raises(InputFileError, match="not found"):
        bind(v, f, tmp_path / "nothing")
    monkeypatch.setattr(api, "DEFAULT_CHECKPOINT", tmp_path / "missing")
    with pytest.raises(InputFileError, match="default checkpoint is missing"):
        load_model()
