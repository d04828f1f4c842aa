"""The articulation predictor's training plumbing: the samples file (read back only for the same data
settings), the type-class weights, and training from a samples file."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kinemesh.articulation import train as art_train
from kinemesh.articulation.predictor import PredictorConfig, finetune_loss, load_predictor


def _fake_samples(n: int, rng: np.random.Generator, pc: PredictorConfig, with_validity: bool) -> list[dict]:
    """Samples shaped like ``dataset.part_samples``' (random values; types 0, 1, 2 in a 1:3:6 ratio)."""
    p = pc.n_part + pc.n_shape
    out = []
    for i in range(n):
        t = [0, 1, 1, 1, 2, 2, 2, 2, 2, 2][i % 10]
        s = {"points": rng.normal(size=(p, 4)).astype(np.float32), "box": rng.normal(size=21).astype(np.float32),
             "type": t, "axis_cls": i % 3, "sign": i % 2, "axis_res": np.zeros(3, np.float32),
             "origin_cls": i % 9, "origin_res": np.zeros(2, np.float32),
             "limits": np.array([0.0, 1.0], np.float32), "movable": float(t > 0)}
        if with_validity:
            s["valid"] = (rng.random(60) < 0.4).astype(np.float32)
        out.append(s)
    return out


@pytest.fixture
def fake_gen(monkeypatch):
    """Replace the (slow) object generation by random samples; counts the calls."""
    calls = []

    def gen(jobs, seed, cfg, with_validity, desc, n_augment=0, realism=None, workers=1):
        calls.append(desc)
        return _fake_samples(20, np.random.default_rng(len(calls)), cfg, with_validity)

    monkeypatch.setattr(art_train, "_gen", gen)
    return calls


def test_samples_file_is_read_back_only_for_the_same_data_settings(tmp_path, fake_gen):
    pc = PredictorConfig(n_part=8, n_shape=8)
    path = tmp_path / "samples.npz"
    tc = art_train.TrainConfig(samples=str(path), n_finetune=1, n_pretrain=1)
    ft, pre, summary = art_train.generate(tc, pc)
    assert path.is_file() and len(fake_gen) == 2 and summary["n_finetune_parts"] == 20
    ft2, pre2, summary2 = art_train.generate(tc, pc)  # read back: no generation, same tensors
    assert len(fake_gen) == 2 and summary2["samples_file"] == str(path)
    for k in ft:
        assert torch.equal(ft[k], ft2[k]) and ft[k].dtype == ft2[k].dtype
    assert torch.equal(pre["valid"], pre2["valid"])
    with np.load(path) as z:  # the points travel in float16; what was trained on is what the file gives back
        assert z["ft.points"].dtype == np.float16 and z["ft.box"].dtype == np.float32
    # a schedule option does not touch the data: still read back
    art_train.generate(art_train.TrainConfig(samples=str(path), n_finetune=1, n_pretrain=1, epochs_ft=3,
                                             type_balance=1.0), pc)
    assert len(fake_gen) == 2
    # a data option does: generated anew (and the file rewritten)
    art_train.generate(art_train.TrainConfig(samples=str(path), n_finetune=2, n_pretrain=1), pc)
    assert len(fake_gen) == 4


def test_type_weights_balance_the_classes():
    types = torch.tensor([0] + [1] * 3 + [2] * 6)
    assert art_train.type_weights(types, 0.0) is None
    w = art_train.type_weights(types, 1.0)
    counts = torch.tensor([1.0, 3.0, 6.0])
    assert torch.allclose(w * counts, (w * counts)[0].expand(3))  # each class weighs alike in the sum
    w_half = art_train.type_weights(types, 0.5)
    assert w_half[0] > w_half[1] > w_half[2] and w_half[0] < w[0]
    assert art_train.type_weights(torch.tensor([1, 1, 2]), 1.0)[0] == 0  # an absent class weighs 0


def test_weighted_type_loss_equals_the_class_weighted_mean():
    torch.manual_seed(0)
    types = torch.tensor([0, 1, 1, 2, 2, 2])
    logits = torch.randn(6, 3)
    w = art_train.type_weights(types, 1.0)
    B = len(types)
    out = {"type": logits, "axis_cls": torch.randn(B, 3), "axis_res": torch.zeros(B, 3, 3),
           "sign": torch.randn(B, 3, 2), "origin_cls": torch.randn(B, 3, 9), "origin_res": torch.zeros(B, 3, 9, 2),
           "limits": torch.zeros(B, 3, 2)}
    tg = {"type": types, "movable": (types > 0).float(), "axis_cls": torch.zeros(B, dtype=torch.long),
          "axis_res": torch.zeros(B, 3), "sign": torch.zeros(B, dtype=torch.long),
          "origin_cls": torch.zeros(B, dtype=torch.long), "origin_res": torch.zeros(B, 2), "limits": torch.zeros(B, 2)}
    nll = -torch.log_softmax(logits, -1)[torch.arange(B), types]
    expect = (w[types] * nll).sum() / w[types].sum()
    assert torch.allclose(finetune_loss(out, tg, type_weight=w)[1]["type"], expect)
    assert torch.allclose(finetune_loss(out, tg)[1]["type"], nll.mean())


def test_training_from_a_samples_file_writes_loadable_predictors(tmp_path, fake_gen):
    path = tmp_path / "samples.npz"
    common = dict(samples=str(path), n_finetune=1, n_pretrain=1, epochs_pre=1, epochs_ft=1, members=2, batch=8,
                  width=16, layers=1, type_balance=1.0)
    info = art_train.train(str(tmp_path / "w"), art_train.TrainConfig(**common),
                           PredictorConfig(n_part=8, n_shape=8, width=16, layers=1))
    assert info["device"] == "cpu" and np.isfinite(info["final_loss"]["finetune"]).all()
    for folder in (tmp_path / "w", tmp_path / "w" / "no_pretrain"):
        net = load_predictor(folder)
        assert len(net.members) == 2 and net.config.width == 16 and net.config.layers == 1


def test_ablation_0_trains_and_writes_the_pretrained_networks_alone(tmp_path, fake_gen):
    common = dict(samples=str(tmp_path / "samples.npz"), n_finetune=1, n_pretrain=1, epochs_pre=1, epochs_ft=1,
                  members=1, batch=8, width=16, layers=1, ablation=0)
    (tmp_path / "w" / "no_pretrain").mkdir(parents=True)  # an earlier run's ablation: removed, not kept beside
    (tmp_path / "w" / "no_pretrain" / "config.json").write_text("{}")
    info = art_train.train(str(tmp_path / "w"), art_train.TrainConfig(**common),
                           PredictorConfig(n_part=8, n_shape=8, width=16, layers=1))
    assert info["final_loss"]["ablation"] == [] and len(info["final_loss"]["finetune"]) == 1
    assert load_predictor(tmp_path / "w").config.width == 16
    assert not (tmp_path / "w" / "no_pretrain").exists()
    # such folders merge without ablations; with a folder that has one, the merge refuses and writes nothing
    art_train.train(str(tmp_path / "w2"), art_train.TrainConfig(**{**common, "net_seed": 3}),
                    PredictorConfig(n_part=8, n_shape=8, width=16, layers=1))
    assert art_train.main(["--merge", str(tmp_path / "w"), str(tmp_path / "w2"), "--out", str(tmp_path / "m")]) == 0
    assert len(load_predictor(tmp_path / "m").members) == 2 and not (tmp_path / "m" / "no_pretrain").exists()
    art_train.train(str(tmp_path / "a"), art_train.TrainConfig(**{**common, "ablation": 1}),
                    PredictorConfig(n_part=8, n_shape=8, width=16, layers=1))
    assert art_train.main(["--merge", str(tmp_path / "a"), str(tmp_path / "w"), "--out", str(tmp_path / "bad")]) == 2
    assert not (tmp_path / "bad").exists()


def test_merged_predictor_averages_every_member_and_refuses_other_inputs(tmp_path, fake_gen):
    from kinemesh.articulation.predictor import merge_predictors
    from kinemesh.errors import InputFileError

    folders = []
    for name, seed, width, layers, n_part in (("a", 0, 16, 1, 8), ("b", 5, 16, 1, 8), ("c", 0, 8, 1, 6),
                                              ("d", 1, 24, 2, 8)):
        tc = art_train.TrainConfig(samples=str(tmp_path / f"s{n_part}.npz"), epochs_pre=1, epochs_ft=1,
                                   members=1 + (name == "b"), batch=8, width=width, layers=layers, net_seed=seed)
        art_train.train(str(tmp_path / name), tc, PredictorConfig(n_part=n_part, n_shape=8, width=width,
                                                                  layers=layers))
        folders.append(tmp_path / name)
    merged = merge_predictors(folders[:2])
    assert len(merged.members) == 3
    pts, box = torch.randn(2, 16, 4), torch.randn(2, 21)
    a, b = load_predictor(folders[0]), load_predictor(folders[1])
    with torch.no_grad():
        expect = (a(pts, box)["type"] + 2 * b(pts, box)["type"]) / 3
        assert torch.allclose(merged(pts, box)["type"], expect, atol=1e-6)
    with pytest.raises(InputFileError, match="n_part"):  # other inputs: refused
        merge_predictors([folders[0], folders[2]])
    # other network sizes: one ensemble, written with each member's size and read back alike
    mixed = merge_predictors([folders[0], folders[3]])
    assert [m.config.width for m in mixed.members] == [16, 24] and mixed.members[1].config.layers == 2
    assert art_train.main(["--merge", str(folders[0]), str(folders[3]), "--out", str(tmp_path / "mix")]) == 0
    back = load_predictor(tmp_path / "mix")
    assert [(m.config.width, m.config.layers) for m in back.members] == [(16, 1), (24, 2)]
    with torch.no_grad():
        d = load_predictor(folders[3])
        assert torch.allclose(back(pts, box)["axis_cls"], (a(pts, box)["axis_cls"] + d(pts, box)["axis_cls"]) / 2,
                              atol=1e-6)
    # the command line writes both ensembles, or nothing
    assert art_train.main(["--merge", str(folders[0]), str(folders[1]), "--out", str(tmp_path / "m")]) == 0
    assert len(load_predictor(tmp_path / "m" / "no_pretrain").members) == 3
    assert art_train.main(["--merge", str(folders[0]), str(folders[1]), "--out", str(tmp_path / "h"), "--float16"]) == 0
    half = load_predictor(tmp_path / "h")
    assert (tmp_path / "h" / "model.safetensors").stat().st_size < 0.6 * (tmp_path / "m" / "model.safetensors").stat().st_size
    with torch.no_grad():  # float16 storage rounds the weights only
        assert all(p.dtype == torch.float32 for p in half.parameters())
        assert torch.allclose(half(pts, box)["type"], expect, atol=2e-2)
    assert art_train.main(["--merge", str(folders[0]), str(folders[2]), "--out", str(tmp_path / "bad")]) == 2
    assert not (tmp_path / "bad").exists()


def test_samples_only_refuses_a_missing_or_other_samples_file(tmp_path, fake_gen):
    path = tmp_path / "s.npz"
    args = ["--samples", str(path), "--samples-only", "--epochs-pre", "1", "--epochs-ft", "1", "--members", "1",
            "--out", str(tmp_path / "w")]
    assert art_train.main(args) == 2 and not fake_gen  # missing: nothing generated
    art_train.generate(art_train.TrainConfig(samples=str(path)), PredictorConfig())
    assert art_train.main(args + ["--n-finetune", "3"]) == 2 and len(fake_gen) == 2  # other data settings
    assert not (tmp_path / "w").exists()


def test_samples_file_from_before_the_extended_assemblies_is_still_read(tmp_path, fake_gen):
    """A file whose head predates ``n_extended_*`` was made with none of them: read for 0, regenerated else."""
    import json

    pc = PredictorConfig(n_part=8, n_shape=8)
    path = tmp_path / "samples.npz"
    tc = art_train.TrainConfig(samples=str(path), n_finetune=1, n_pretrain=1)
    art_train.generate(tc, pc)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    head = json.loads(bytes(arrays.pop("head")).decode())
    for k in art_train.ADDED_DATA_FIELDS:
        del head["train"][k]
    np.savez(path, head=np.frombuffer(json.dumps(head).encode(), np.uint8), **arrays)
    art_train.generate(tc, pc)
    assert len(fake_gen) == 2  # read back
    with pytest.raises(Exception, match="n_extended_ft"):
        art_train.generate(art_train.TrainConfig(samples=str(path), n_finetune=1, n_pretrain=1, n_extended_ft=3),
                           pc, read_only=True)


def test_extended_assembly_objects_build():
    from kinemesh.articulation.dataset import build_object

    a, b = build_object("assembly+", 3), build_object("assembly", 3)
    assert a.movable_joints and b.movable_joints
    assert set(a.meta["params"]["part_kinds"]) <= set(("flap", "lever", "slider", "piston", "knob", "rotor", "wheel",
                                                        "row"))
    assert set(b.meta["params"]["part_kinds"]) <= set(("flap", "lever", "slider", "piston", "knob"))


def test_excluded_categories_leave_the_real_training_objects(tmp_path, monkeypatch):
    """TrainConfig.exclude_categories (``--exclude-categories``): the real objects of those categories are not
    trained on (a category-held-out check), and the option is a data setting (a samples file made without it is
    not read back)."""
    import json

    from tests.data_fixtures import make_partnet_folder

    real = tmp_path / "real"
    for i in (1000, 1001):  # both of the training split
        make_partnet_folder(real / f"obj__{i}")
    (real / "obj__1001" / "meta.json").write_text(json.dumps({"model_cat": "Other", "anno_id": "1"}))
    seen = {}

    def gen(jobs, seed, cfg, with_validity, desc, n_augment=0, realism=None, workers=1):
        if "real" in desc:
            seen[desc] = sorted(o.category for o in jobs)
        return _fake_samples(4, np.random.default_rng(0), cfg, with_validity)

    monkeypatch.setattr(art_train, "_gen", gen)
    pc = PredictorConfig(n_part=8, n_shape=8)
    common = dict(n_finetune=1, n_pretrain=1, real=str(real), real_cache="")
    art_train.generate(art_train.TrainConfig(**common), pc)
    assert set(map(tuple, seen.values())) == {("Other", "TinyCabinet")}
    seen.clear()
    art_train.generate(art_train.TrainConfig(**common, exclude_categories="TinyCabinet, Oven"), pc)
    assert seen and set(map(tuple, seen.values())) == {("Other",)}
    assert "exclude_categories" in art_train.DATA_FIELDS
