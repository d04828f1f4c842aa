"""Training tests on a toy dataset (hinged boxes, bending bars): loss decreases, resume, CLI, DDP."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from kinemesh.model import preset
from kinemesh.model.data import Augment, PairSampler, read_manifest_entries, select_split
from kinemesh.model.network import KinematicVAE, vae_loss
from toys import write_toy_dataset


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    return write_toy_dataset(tmp_path_factory.mktemp("toy"), n_train=4, n_val=2, n_frames=4, seed=0)


def test_pairs_are_normalised_correspondences(toy_data):
    entries = read_manifest_entries(toy_data)
    assert len(select_split(entries, "train")) == 4 and len(select_split(entries, "heldout")) == 2
    s = PairSampler(select_split(entries, "train"), 256, Augment(rotate_z=False))
    rng = np.random.default_rng(0)
    pts, delta, groups, idx = s.pair(rng, index=0, frames=(1, 2))
    seq = s.sequence(0)
    # normalised: points lie in the unit bbox of M0 (longest side 1)
    ext = pts.max(0) - pts.min(0)
    assert ext.max() <= 1.0 + 1e-5 and ext.max() > 0.9
    # the deformation is the true one: the body of the hinged box does not move, the lid does
    assert seq.kind == "articulated"
    moving = np.linalg.norm(delta, axis=1) > 1e-6
    assert 0.05 < moving.mean() < 0.95
    # two components (body, lid); the lid's points are exactly the moving ones
    assert set(groups.tolist()) == {0, 1}
    lid = groups == groups[np.argmax(np.linalg.norm(delta, axis=1))]
    assert np.array_equal(lid, moving)
    # rotation augmentation preserves deformation magnitudes
    s2 = PairSampler(select_split(entries, "train"), 256, Augment(rotate_z=True))
    _, d2, _, _ = s2.pair(np.random.default_rng(0), index=0, frames=(1, 2))
    assert np.isclose(np.linalg.norm(d2, axis=1).sum(), np.linalg.norm(delta, axis=1).sum(), rtol=0.2)


def test_loss_decreases_on_a_toy_batch(toy_data):
    cfg = preset("tiny")
    torch.manual_seed(0)
    net = KinematicVAE(cfg.model)
    entries = select_split(read_manifest_entries(toy_data), "train")
    pts, dls, grp = PairSampler(entries, 64, Augment(rotate_z=False)).batch(np.random.default_rng(0), 4)
    pts, dls, grp = torch.from_numpy(pts), torch.from_numpy(dls), torch.from_numpy(grp)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        parts = vae_loss(net(pts, dls, groups=grp), dls, 0.01, 0.05, 100.0)
        opt.zero_grad()
        parts["loss"].backward()
        opt.step()
        losses.append(float(parts["recon"]))
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])


def test_train_cli_resume_and_load(toy_data, tmp_path):
    from kinemesh.cli import main
    from kinemesh.model import load_model

    out = tmp_path / "run"
    args = ["train", "--data", str(toy_data), "--out", str(out), "--preset", "tiny", "--no-progress"]
    assert main(args + ["--steps", "10"]) == 0
    for name in ("config.json", "model.safetensors", "log.csv", "val.csv", "checkpoint/optimizer.safetensors",
                 "checkpoint/train_state.json"):
        assert (out / name).is_file(), name
    assert json.loads((out / "checkpoint/train_state.json").read_text())["step"] == 10
    assert list((out / "tb").iterdir())
    # an existing run is not overwritten without --resume
    assert main(args + ["--steps", "20"]) == 1
    assert main(args + ["--steps", "20", "--resume"]) == 0
    assert json.loads((out / "checkpoint/train_state.json").read_text())["step"] == 20
    steps = [int(r["step"]) for r in csv.DictReader(open(out / "log.csv"))]
    assert steps == sorted(steps) and steps[-1] == 20
    model = load_model(out)
    assert model.config.preset == "tiny" and model.info["step"] == 20


def test_resume_continues_identically(toy_data, tmp_path):
    """10 steps + resume to 20 gives the same weights as 20 steps straight (same data and optimiser state)."""
    from safetensors.torch import load_file

    from kinemesh.model.train import RunOptions, train

    cfg = preset("tiny")
    cfg.train.val_every = 1000
    train(cfg, RunOptions(toy_data, tmp_path / "a", steps=20, progress=False))
    train(cfg, RunOptions(toy_data, tmp_path / "b", steps=20, stop_at=10, progress=False))
    train(cfg, RunOptions(toy_data, tmp_path / "b", steps=20, resume=True, progress=False))
    a = load_file(str(tmp_path / "a" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "model.safetensors"))
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5


def test_remove_rigid_motion_undoes_rotation_and_translation():
    from kinemesh.data.articulated import axis_angle_matrix
    from kinemesh.model.data import remove_rigid_motion

    rng = np.random.default_rng(0)
    a = rng.normal(size=(50, 3))
    R = axis_angle_matrix(np.array([1.0, 2.0, 3.0]) / np.sqrt(14.0), 0.7)
    b = a @ R.T + [1.0, 2.0, 3.0]
    assert np.abs(remove_rigid_motion(a, b) - a).max() < 1e-9
    # a non-rigid change survives (a stretch is not removed)
    c = a * [1.2, 1.0, 1.0]
    assert np.abs(remove_rigid_motion(a, c) - a).max() > 0.1
