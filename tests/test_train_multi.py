"""Training on several datasets (weights, splits kept apart), --init fine-tuning, and part labels in training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from data_fixtures import BOX_F, box
from kinemesh.errors import ConfigError
from kinemesh.model import preset
from kinemesh.model.network import KinematicVAE
from kinemesh.model.data import Augment, PairSampler, parse_data_spec, read_datasets, select_split
from kinemesh.model.train import RunOptions, train
from toys import write_toy_dataset


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi")
    a = write_toy_dataset(root / "a", n_train=4, n_val=0, n_frames=4, seed=1)
    b = write_toy_dataset(root / "b", n_train=2, n_val=2, n_frames=4, seed=2)
    # a test-split entry of A that is not a sequence: nothing may read it (B has a val split)
    (a / "broken.npz").write_bytes(b"not an npz")
    with open(a / "manifest.jsonl", "a") as fh:
        fh.write(json.dumps({"path": "broken.npz", "split": "test", "kind": "articulated"}) + "\n")
    return a, b


def test_parse_data_spec():
    assert parse_data_spec("data/real4d:2.5") == (parse_data_spec("data/real4d")[0], 2.5)
    assert parse_data_spec("data/real4d")[1] is None
    with pytest.raises(ConfigError, match="weight"):
        parse_data_spec("data/x:-1")


def test_dataset_weights_are_respected(two_sets):
    a, b = two_sets

    def share_of_a(weights):
        entries, w = read_datasets([a, b], weights)
        s = PairSampler(select_split(entries, "train"), 16, Augment(rotate_z=False), dataset_weights=w)
        rng = np.random.default_rng(0)
        return np.mean([s.entries[s.pair(rng)[3]]["_dataset"] == str(a) for _ in range(600)])

    assert abs(share_of_a(None) - 4 / 6) < 0.06  # default: proportional to training sequences (4 vs 2)
    assert abs(share_of_a([1.0, 3.0]) - 0.25) < 0.06
    assert share_of_a([0.0, 1.0]) == 0.0
    with pytest.raises(ConfigError, match="every dataset"):
        read_datasets([a, b], [2.0, None])


def test_training_keeps_each_datasets_splits(two_sets, tmp_path):
    """Training reads only train entries and validates on the union of val splits: A's test entry (a broken
    file) is never opened, B's val entries are."""
    a, b = two_sets
    cfg = preset("tiny")
    res = train(cfg, RunOptions([a, b], tmp_path / "run", steps=12, progress=False, data_weights=[1.0, 1.0]))
    assert res["step"] == 12 and np.isfinite(res["val_recon"])
    entries, _ = read_datasets([a, b])
    assert {e["_dataset"] for e in select_split(entries, "train")} == {str(a), str(b)}
    # with A alone, the held-out fallback is its test split, and the broken file is read
    with pytest.raises(Exception, match="broken.npz"):
        train(cfg, RunOptions(a, tmp_path / "alone", steps=12, progress=False))


def test_init_loads_weights_and_refuses_other_configs(two_sets, tmp_path):
    from safetensors.torch import load_file

    from kinemesh.cli import main

    a, b = two_sets
    cfg = preset("tiny")
    train(cfg, RunOptions(b, tmp_path / "base", steps=10, progress=False))
    base = load_file(str(tmp_path / "base" / "model.safetensors"))
    cfg.train.lr, cfg.train.weight_decay = 1e-12, 0.0  # one step that cannot move the weights
    train(cfg, RunOptions(b, tmp_path / "ft", steps=1, progress=False, init=tmp_path / "base"))
    train(cfg, RunOptions(b, tmp_path / "fresh", steps=1, progress=False))
    ft = load_file(str(tmp_path / "ft" / "model.safetensors"))
    fresh = load_file(str(tmp_path / "fresh" / "model.safetensors"))
    assert max(float((ft[k] - base[k]).abs().max()) for k in base) < 1e-6
    assert max(float((fresh[k] - base[k]).abs().max()) for k in base) > 1e-3
    state = json.loads((tmp_path / "ft" / "checkpoint" / "train_state.json").read_text())
    assert state["init"] == str(tmp_path / "base")
    other = preset("tiny")
    other.model.width = 64
    with pytest.raises(ConfigError, match=r"config.json: model config differs.*width 32 \(run: 64\)"):
        train(other, RunOptions(b, tmp_path / "bad", steps=1, progress=False, init=tmp_path / "base"))
    assert not (tmp_path / "bad").exists()
    # the CLI: several --data, --init, and a clear refusal (exit 1) of mixed weights or another preset
    args = ["train", "--data", str(a), "--data", str(b), "--preset", "tiny", "--steps", "2", "--no-progress",
            "--no-calibrate", "--init", str(tmp_path / "base")]
    assert main(args + ["--out", str(tmp_path / "cli")]) == 0
    assert main(args + ["--out", str(tmp_path / "cli2"), "--set", "model.width=64"]) == 1
    assert main(args + ["--out", str(tmp_path / "cli3"), "--data", f"{a}:2"]) == 1
    assert not (tmp_path / "cli2").exists() and not (tmp_path / "cli3").exists()


def test_training_groups_points_by_part_ids(tmp_path):
    """A part made of two separate boxes is one group in training (as ``instance(part_ids=...)`` binds it);
    without part ids every connected component is its own group."""
    from kinemesh.atomic import write_text
    from kinemesh.data.sequence import KinematicSequence

    rest = np.concatenate([box([0, 0, 0], [1, 1, 1]), box([2, 0, 0], [3, 1, 1]), box([0, 0, 2], [3, 1, 3])])
    faces = np.concatenate([BOX_F, BOX_F + 8, BOX_F + 16])
    frames = np.stack([rest + np.where(np.arange(24)[:, None] >= 16, [0.0, 0.0, 0.5 * t], 0.0) for t in (1, 2)])
    lines = []
    for name, pids in (("parts", np.repeat([0, 0, 1], 8)), ("plain", None)):
        seq = KinematicSequence(rest, faces, frames, np.arange(2) / 10.0, pids,
                                {"kind": "articulated", "category": "boxes"})
        seq.save(tmp_path / f"{name}.npz")
        lines.append(json.dumps({"path": f"{name}.npz", "split": "train", "kind": "articulated"}))
    write_text(tmp_path / "manifest.jsonl", "\n".join(lines) + "\n")
    entries, _ = read_datasets([tmp_path])
    s = PairSampler(entries, 300, Augment(rotate_z=False))
    rng = np.random.default_rng(0)
    for index, n_groups in ((0, 2), (1, 3)):
        pts, _, groups, _ = s.pair(rng, index=index, frames=(0, 1))
        assert len(np.unique(groups)) == n_groups
        left, right = groups[(pts[:, 2] < 0) & (pts[:, 0] < -0.2)], groups[(pts[:, 2] < 0) & (pts[:, 0] > 0.2)]
        assert (len(np.unique(np.concatenate([left, right]))) == 1) == (index == 0)
    # the network pools skinning logits per group: both boxes of the part get identical weights
    net = KinematicVAE(preset("tiny").model)
    pts, _, groups, _ = s.pair(rng, index=0, frames=(0, 1))
    with torch.no_grad():
        w = net.decoder.skin_weights(torch.from_numpy(pts)[None], net.prior(torch.from_numpy(pts)[None])[1],
                                     torch.from_numpy(groups)[None])[0]
    part0 = torch.from_numpy(groups == groups[0])
    assert torch.allclose(w[part0], w[part0][:1].expand(int(part0.sum()), -1), atol=1e-6)


def test_eval_model_parts_binds_by_part(tmp_path):
    """`eval model --parts` binds with the sequences' part ids: a part of two separate boxes then moves as one
    body in prior samples (within-part rigidity ~0); bound by connected component, its boxes move apart."""
    from kinemesh.atomic import write_text
    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.eval.model import ModelEvalConfig, evaluate
    from kinemesh.model.checkpoint import save_weights

    rest = np.concatenate([box([0, 0, 0], [1, 1, 1]), box([2, 0, 0], [3, 1, 1]), box([0, 0, 2], [3, 1, 3])])
    faces = np.concatenate([BOX_F, BOX_F + 8, BOX_F + 16])
    frames = np.stack([rest + np.where(np.arange(24)[:, None] >= 16, [0.0, 0.0, 0.5], 0.0)])
    KinematicSequence(rest, faces, frames, np.zeros(1), np.repeat([0, 0, 1], 8),
                      {"kind": "articulated", "category": "boxes"}).save(tmp_path / "s.npz")
    write_text(tmp_path / "manifest.jsonl", json.dumps({"path": "s.npz", "split": "val", "kind": "articulated"}) + "\n")
    torch.manual_seed(0)
    save_weights(KinematicVAE(preset("tiny").model), preset("tiny"), tmp_path / "ckpt")

    def rigidity(parts: bool) -> float:
        cfg = ModelEvalConfig(data=str(tmp_path), checkpoint=str(tmp_path / "ckpt"), split="val", frames=1,
                              samples=4, n_points=256, parts=parts)
        return evaluate(cfg).rows[0]["rigidity"]

    by_part, by_component = rigidity(True), rigidity(False)
    assert by_part < 1e-5 and by_component > 1e-3


def test_kinds_keep_only_those_sequences(two_sets, tmp_path):
    """``--kinds`` (the soft checkpoint's elastic,cloth): only sequences of those kinds are read, in training
    and in the calibration at its end; a kind absent from a folder is a clear error."""
    from kinemesh.model.calibration import calibrate_checkpoint

    a, b = two_sets
    entries, _ = read_datasets([a, b], kinds=("elastic",))
    assert entries and {e["kind"] for e in entries} == {"elastic"}
    assert len(entries) < len(read_datasets([a, b])[0])
    with pytest.raises(ConfigError, match="no sequences of kind cloth"):
        read_datasets([a, b], kinds=("cloth",))
    run = tmp_path / "soft"
    res = train(preset("tiny"), RunOptions([a, b], run, steps=4, progress=False, kinds=("elastic",)))
    assert res["step"] == 4
    assert json.loads((run / "config.json").read_text())["info"]["kinds"] == ["elastic"]
    _, counts = calibrate_checkpoint(run, [a, b], per_kind=2, frames_per_sequence=1, progress=False,
                                     kinds=("elastic",))
    assert set(counts) - {"all"} == {"elastic"}  # "all": the pooled prior of the kinds trained on


def test_frozen_networks_keep_their_init_weights(two_sets, tmp_path):
    """``--freeze prior,decoder`` (train.frozen) fine-tunes the posterior alone: the prior and decoder
    weights are bit-equal to --init's, the posterior's move; freezing without --init, all three networks or
    an unknown one is a clear error."""
    from safetensors.torch import load_file

    from kinemesh.cli import main

    a, b = two_sets
    train(preset("tiny"), RunOptions(b, tmp_path / "base", steps=6, progress=False))
    args = ["train", "--data", str(b), "--preset", "tiny", "--steps", "6", "--no-progress", "--no-calibrate",
            "--init", str(tmp_path / "base")]
    assert main(args + ["--out", str(tmp_path / "post"), "--freeze", "prior,decoder"]) == 0
    base = load_file(str(tmp_path / "base" / "model.safetensors"))
    post = load_file(str(tmp_path / "post" / "model.safetensors"))
    moved = {net: max(float((post[k] - base[k]).abs().max()) for k in base if k.startswith(net + "."))
             for net in ("prior", "posterior", "decoder")}
    assert moved["prior"] == 0.0 and moved["decoder"] == 0.0 and moved["posterior"] > 1e-6
    cfg = json.loads((tmp_path / "post" / "config.json").read_text())
    assert cfg["train"]["frozen"] == ["prior", "decoder"] and cfg["info"]["init"] == str(tmp_path / "base")
    assert preset("tiny").train.frozen == ()
    tc = preset("tiny").train
    tc.frozen = " prior, decoder"  # a comma list, as --freeze and --set train.frozen=... give it
    tc.__post_init__()
    assert tc.frozen == ("prior", "decoder")
    for bad in ("prior,decoder,posterior", "encoder"):
        assert main(args + ["--out", str(tmp_path / bad), "--freeze", bad]) == 1
        assert not (tmp_path / bad).exists()
    cfg = preset("tiny")
    cfg.train.frozen = ("decoder",)
    with pytest.raises(ConfigError, match="--init"):
        train(cfg, RunOptions(b, tmp_path / "noinit", steps=1, progress=False))
