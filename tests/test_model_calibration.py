"""Prior calibration: aggregate posterior per kind, checkpoint file, calibrated instances and samples."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinemesh.errors import ConfigError, InputFileError
from kinemesh.model import untrained_model
from kinemesh.model.api import KinematicModel
from kinemesh.geometry.kind import guess_kind
from kinemesh.model.calibration import aggregate_posterior
from kinemesh.model.checkpoint import CALIBRATION_FILE, load_calibration, save_calibration, sqrt_factor
from kinemesh.model.data import read_manifest_entries, select_split
from toys import write_toy_dataset


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    return write_toy_dataset(tmp_path_factory.mktemp("toy"), n_train=4, n_val=2, n_frames=4, seed=0)


def test_sqrt_factor_reproduces_the_covariance():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 6))
    cov = A @ A.T + 0.1 * np.eye(6)
    L = sqrt_factor(cov)
    assert np.allclose(L @ L.T, cov, atol=1e-10) and np.allclose(L, L.T)
    # a singular covariance is floored, never NaN
    L0 = sqrt_factor(np.zeros((3, 3)), floor=1e-2)
    assert np.allclose(L0 @ L0.T, 1e-2 * np.eye(3))


def test_aggregate_posterior_and_calibrated_checkpoint(toy_data, tmp_path):
    model = untrained_model("tiny", seed=0)
    D = model.latent_dim
    entries = select_split(read_manifest_entries(toy_data), "train")
    covs, counts = aggregate_posterior(model, entries, per_kind=2, frames_per_sequence=2, n_points=128,
                                       progress=False)
    assert set(covs) == {"articulated", "elastic", "all"} and counts["all"] == 8
    for c in covs.values():
        assert c.shape == (D, D) and np.allclose(c, c.T) and np.linalg.eigvalsh(c).min() > 0
    # the pooled covariance is the count-weighted mean of the per-kind ones (second moments around mu_cond)
    pooled = (counts["articulated"] * covs["articulated"] + counts["elastic"] * covs["elastic"]) / counts["all"]
    assert np.allclose(covs["all"], pooled, atol=1e-6)

    model.save(tmp_path / "ck")
    assert not (tmp_path / "ck" / CALIBRATION_FILE).exists()
    save_calibration(tmp_path / "ck", covs, {"test": True})
    loaded = KinematicModel.load(tmp_path / "ck")
    assert set(loaded.prior_factors) == set(covs)
    from kinemesh.data.sequence import KinematicSequence

    seq = KinematicSequence.load(entries[0]["_path"])
    inst = loaded.instance(seq.rest_vertices, seq.faces, n_points=64, kind="articulated")
    assert inst.prior_kind == "articulated"
    L = inst.prior_factor.double()
    assert np.allclose((L @ L.T).numpy(), covs["articulated"], atol=1e-4)
    z = inst.prior_sample(20000, seed=1).double()
    emp = torch.cov((z - inst.mu_cond.double()).T).numpy()
    assert np.abs(emp - covs["articulated"]).max() < 0.08 * np.abs(covs["articulated"]).max()
    # kind=None and an uncalibrated checkpoint use N(mu_cond, I)
    assert loaded.instance(seq.rest_vertices, seq.faces, n_points=64, kind=None).prior_factor is None
    assert model.instance(seq.rest_vertices, seq.faces, n_points=64).prior_factor is None
    with pytest.raises(ConfigError):
        loaded.instance(seq.rest_vertices, seq.faces, n_points=64, kind="granular")
    # saving a calibrated model keeps the calibration
    loaded.save(tmp_path / "ck2")
    again = load_calibration(tmp_path / "ck2", D)
    assert np.allclose(again["all"], loaded.prior_factors["all"], atol=1e-4)


def test_bad_calibration_files(tmp_path):
    (tmp_path / CALIBRATION_FILE).write_bytes(b"not safetensors")
    with pytest.raises(InputFileError, match=CALIBRATION_FILE):
        load_calibration(tmp_path, 4)
    save_calibration(tmp_path, {"all": np.eye(3)}, {})
    with pytest.raises(InputFileError, match="not a finite symmetric"):
        load_calibration(tmp_path, 4)
    save_calibration(tmp_path, {"articulated": np.eye(4)}, {})
    with pytest.raises(InputFileError, match="pooled"):
        load_calibration(tmp_path, 4)
    assert load_calibration(tmp_path / "missing", 4) is None


def test_calibrate_cli(toy_data, tmp_path):
    from kinemesh.cli import main

    untrained_model("tiny").save(tmp_path / "ck")
    assert main(["calibrate", str(tmp_path / "ck"), "--data", str(toy_data), "--per-kind", "2",
                 "--no-progress"]) == 0
    assert load_calibration(tmp_path / "ck", untrained_model("tiny").latent_dim) is not None
    assert main(["calibrate", str(tmp_path / "nothing"), "--data", str(toy_data)]) == 1


def test_guess_kind_uses_given_parts():
    import trimesh

    a = trimesh.creation.box((1, 1, 1))
    b = trimesh.creation.box((1, 1, 1))
    b.apply_translation((1.0, 0, 0))  # touching boxes: coincident vertices make them one component
    m = trimesh.util.concatenate([a, b])
    ids = np.repeat([0, 1], [len(a.vertices), len(b.vertices)])
    assert guess_kind(m.vertices, m.faces) == "elastic"  # one welded component
    assert guess_kind(m.vertices, m.faces, ids) == "articulated"  # two given parts
    cloth = trimesh.creation.box((1, 1, 0.001))
    cloth.faces = cloth.faces[:2]
    assert guess_kind(cloth.vertices, cloth.faces) == "cloth"
