"""The benchmarks as a library: ``evaluate(Config(...))`` in-process on a tiny toy dataset and an untrained tiny
model, the rows' values, the config checks, and the command's options equal to the config defaults."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from kinemesh.errors import ConfigError
from kinemesh.eval import articulation, dynamics, ik, model, real
from data_fixtures import make_partnet_folder
from toys import write_toy_dataset


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """(dataset folder: val = a hinged box and a bending bar, tiny untrained checkpoint folder)."""
    from kinemesh.model import untrained_model

    root = tmp_path_factory.mktemp("evallib")
    untrained_model("tiny").save(root / "ckpt")
    return write_toy_dataset(root / "data", n_train=2, n_val=2, n_frames=3), root / "ckpt"


def test_model_rows(toy):
    from kinemesh.data.sequence import KinematicSequence

    data, ckpt = toy
    res = model.evaluate(model.ModelEvalConfig(data=str(data), checkpoint=str(ckpt), split="val", frames=2,
                                               samples=2, n_points=128))
    assert res.model_info == {"trained": False}
    rows = {r["kind"]: r for r in res.rows}
    assert set(rows) == {"articulated", "elastic"}  # balanced by kind
    box, bar = rows["articulated"], rows["elastic"]
    assert box["size_m"] == pytest.approx(np.ptp(KinematicSequence.load(data / box["path"]).rest_vertices, 0).max())
    assert box["data_rigidity"] < 1e-6 and box["rigidity"] < 1e-4  # rigid parts in the data and the prior
    # bending stretches the top and squeezes the bottom: the area changes, a little
    assert 1e-5 < bar["data_area_change"] < 0.01 and "rigidity" not in bar and "area_change" not in box
    assert all(r["chamfer_l1_rest"] > 0 and np.isfinite(r["rel_vertex_error"]) for r in res.rows)
    table = model.render(res.rows)
    assert "| articulated | 1 |" in table and "| elastic | 1 |" in table and "| all | 2 |" in table


def test_ik_rows_and_resume(toy, tmp_path):
    data, ckpt = toy
    cfg = ik.IKEvalConfig(data=str(data), checkpoint=str(ckpt), split="val", methods="rest,oracle",
                          fit_loss="vertex", max_targets=2, frames_per_seq=1, metric_samples=300, iou_points=500,
                          rows=str(tmp_path / "rows.jsonl"))
    assert cfg.methods == ("rest", "oracle")
    res = ik.evaluate(cfg)
    by = {(r["category"], r["method"]): r for r in res.rows}
    assert set(by) == {("toybox", "rest"), ("toybox", "oracle"), ("toybar", "rest")}  # no joints, no oracle
    rest, oracle = by[("toybox", "rest")], by[("toybox", "oracle")]
    assert rest["vertex_error"] == pytest.approx(rest["rest_vertex_error"]) and rest["rigidity"] == 0
    assert oracle["vertex_error"] < 0.2 * rest["vertex_error"]  # the true hinge recovers the pose
    again = ik.evaluate(cfg)  # every target is in the rows file: nothing is recomputed
    assert again.rows == ik.read_rows([cfg.rows]) and [r["seconds"] for r in again.rows] == \
        [r["seconds"] for r in res.rows]
    text = ik.render(res.rows, "kinemesh eval ik ...", res.notes, ik.header(cfg, res.model_info))
    assert "UNTRAINED" in text and "| oracle articulation (GT joints) |" in text


def test_ik_real_validation_objects_bound_by_links(toy, tmp_path):
    """--real-val: a seeded sample of the objects `synth --from-urdf` holds out for validation; real objects are
    bound with their links as parts (the door and its separate handle are one part), cached bindings add no
    setup time, and the probe basis comes from the URDF's joints."""
    from kinemesh.model import load_model
    from kinemesh.synth.real import hash_split

    ids = [str(i) for i in range(1000, 1060)]
    val = [i for i in ids if hash_split(i, 0.2) == "val"]
    for i in ids:
        (tmp_path / "train" / f"kitchenmodels__{i}").mkdir(parents=True)
    picked = ik.validation_objects(tmp_path / "train", 4, seed=0)
    assert len(val) > 4 and len(picked) == 4 and picked == sorted(picked)
    assert {p.name.split("__")[1] for p in picked} <= set(val) and picked == ik.validation_objects(
        tmp_path / "train", 4, seed=0) and picked != ik.validation_objects(tmp_path / "train", 4, seed=1)
    assert len(ik.validation_objects(tmp_path / "train", 100, seed=0)) == len(val)

    cab = make_partnet_folder(tmp_path / "val" / f"kitchenmodels__{val[0]}")
    (t,) = ik.real_targets(tmp_path / "val", 1, 10000, 0, 5, "real_val", [cab])
    assert t.group == "real_val" and t.model_part_names == ["link_0", "link_1", "link_2", "link_2_helper", "link_3"]
    groups = {}
    for parts, basis in (("links", "probes"), ("components", "prior")):
        cfg = ik.IKEvalConfig(real_val=str(tmp_path / "val"), checkpoint=str(toy[1]), real_parts=parts,
                              real_basis=basis)
        runner = ik.Runner(cfg, {"default": load_model(str(toy[1]))}, None)
        dec, sub, setup = runner._neurok("default", t, reduced=True)
        assert setup > 0 and runner._neurok("default", t, reduced=True)[2] == 0.0  # bound once
        groups[parts] = len(np.unique(dec.decoder.point_groups))
        assert (sub.scale is not None) == (basis == "probes")  # probe coordinates are scaled to the probes' spread
    assert groups == {"links": 4, "components": 5}  # the handle is a component of its own, part of the door link
    from kinemesh.ik.pipeline import URDFBinding

    default = ik.IKEvalConfig(real="r")  # the eval measures what `kinemesh ik` does with a URDF input
    assert URDFBinding() == URDFBinding(basis=default.real_basis, fixed_base=default.real_base == "fixed",
                                        anchored=default.real_rest == "anchored")
    res = ik.evaluate(ik.IKEvalConfig(real_val=str(tmp_path / "val"), checkpoint=str(toy[1]), methods="rest,oracle",
                                      fit_loss="vertex", real_configs=2, metric_samples=300))
    assert {r["group"] for r in res.rows} == {"real_val"} and len(res.rows) == 4
    assert "## real PartNet-Mobility, validation objects (2 targets" in ik.render(res.rows, "cmd", [])


def test_dynamics_rows(toy, tmp_path):
    _, ckpt = toy
    cfg = dynamics.DynamicsEvalConfig(data=str(tmp_path / "gt"), checkpoint=str(ckpt), per_scenario=1,
                                      scenarios="door", frames=3, k_q=2, points=64, samples=200)
    res = dynamics.evaluate(cfg)
    (row,) = res.rows
    assert row["scenario"] == "door" and row["index"] == 0 and row["kinemesh_s"] > 0
    for k in ("kinemesh", "pca", "rest"):
        assert row[k].shape == (3,) and np.all(row[k] >= 0)
    assert row["rest"][0] > 1e-3  # the ground truth starts with the door 55 % open
    cached = tmp_path / "gt" / "door_00.npz"
    stamp = cached.stat().st_mtime_ns
    gt = dynamics.ground_truth("door", 0, 3, cached.parent)  # read back, not simulated again
    assert cached.stat().st_mtime_ns == stamp and gt.frames.shape[0] == 3
    doc = dynamics.report(res, cfg, "kinemesh eval dynamics ...")
    assert "| **door mean** | 1 objects |" in doc and '"door_0": {"kinemesh"' in doc and "k_q = 2" in doc


def test_dynamics_validation_split(toy, tmp_path):
    """--split val evaluates other objects (other generator seeds) than the test split, to choose settings on."""
    _, ckpt = toy
    cfg = dynamics.DynamicsEvalConfig(data=str(tmp_path / "gt"), checkpoint=str(ckpt), per_scenario=1, split="val",
                                      scenarios="door", frames=3, k_q=2, points=64, samples=200)
    (row,) = dynamics.evaluate(cfg).rows
    assert row["index"] == dynamics.VAL_OFFSET and (tmp_path / "gt" / f"door_{dynamics.VAL_OFFSET}.npz").is_file()
    test_gt = dynamics.ground_truth("door", 0, 3, tmp_path / "gt")
    val_gt = dynamics.ground_truth("door", dynamics.VAL_OFFSET, 3, tmp_path / "gt")
    assert test_gt.meta["conditions"]["seed"] != val_gt.meta["conditions"]["seed"]
    with pytest.raises(ConfigError, match="--split"):
        dynamics.DynamicsEvalConfig(split="train")


@pytest.mark.parametrize("gravity", [False, True])
def test_real_rows(toy, tmp_path, gravity, monkeypatch):
    """The drag test on the tiny PartNet-Mobility-style cabinet: a drag per movable part, asked from its limits
    (the screw lid once, along its turn); ``--gravity`` drags under gravity."""
    import kinemesh.dynamics.scene as scene

    specs = []
    simulate = scene.simulate_mesh
    monkeypatch.setattr(scene, "simulate_mesh", lambda d, v, f, spec, **kw: specs.append(spec) or simulate(
        d, v, f, spec, **kw))
    make_partnet_folder(tmp_path / "objects" / "cab")
    res = real.evaluate(real.RealEvalConfig(real=str(tmp_path / "objects"), checkpoint=str(toy[1]), frames=3,
                                            points=64, samples=2, gravity=gravity))
    assert len(specs) == 3 and all(s.gravity == gravity and s.hold for s in specs)
    (row,) = res.rows
    assert row["object"] == "cab" and row["parts"] == 5
    assert row["probes"] == "predicted"  # joints predicted from the object as `kinemesh simulate` loads it
    asked = {d["joint"]: d["asked"] for d in row["drags"]}
    assert sorted(asked) == ["door_hinge", "drawer_slide", "lid_spin"]
    assert all(np.isfinite(d["follow"]) for d in row["drags"])
    assert asked["door_hinge"] == pytest.approx(np.pi / 3)  # 60 deg within [0, 90 deg]
    assert asked["drawer_slide"] == pytest.approx(-0.15)  # half the travel, to the side with more room
    assert "1 objects, 3 movable parts" in real.render(res.rows)
    # every movable joint of the (predicted) articulation is moved either by the network or by its own coordinate
    assert row["joints_network"] + row["joints_own"] >= 3 and row["joints_own"] >= 0
    assert f"| {row['joints_network']} / {row['joints_own']} |" in real.render(res.rows)


def test_articulation_rows(tmp_path, monkeypatch):
    """One synthetic cabinet, no held-out category, the tiny PartNet-Mobility cabinet as the real set: the motion
    fit recovers the true joints from 6 observed poses (vertex correspondences)."""
    import kinemesh.articulation.dataset as dataset
    import kinemesh.synth.categories as categories

    monkeypatch.setattr(categories, "CATEGORIES", {"cabinet": categories.CATEGORIES["cabinet"]})
    monkeypatch.setattr(dataset, "HOLDOUT_CATEGORIES", ())
    make_partnet_folder(tmp_path / "objects" / "cab")
    cfg = articulation.ArticulationEvalConfig(n_objects=1, real=str(tmp_path / "objects"), no_heuristic=True,
                                              no_unlike=True)
    res = articulation.evaluate(cfg)
    by = {(r["object"], r["method"]): r for r in res.rows}
    ours, motion = "ours (pretrained + fine-tuned)", articulation.MOTION
    assert {o for o, _ in by} == {"cabinet/0", "cab"} and (("cab", motion) in by) and (("cab", ours) in by)
    cab = by[("cab", motion)]
    assert cab["section"] == "real PartNet-Mobility objects (1, %s)" % cfg.real and cab["breakdown"] == "object"
    recs = {r["part"]: r for r in cab["records"]}  # door (revolute), drawer (prismatic), lid (continuous)
    assert [recs[p]["true"] for p in ("link_0", "link_1", "link_2")] == ["revolute", "prismatic", "revolute"]
    assert all(r["pred"] == r["true"] and r["axis"] < 1e-3 and r.get("origin", 0.0) < 1e-3 for r in recs.values())
    assert by[("cabinet/0", ours)]["breakdown"] is None
    summary = articulation.summarize([r for r in res.rows if r["object"] == "cab"])
    assert summary[motion]["n"] == 3 and summary[motion]["n_mov"] == 3 and summary[motion]["axis"] < 1e-3
    doc = articulation.report(res, cfg, "OUT.md")
    assert "--n-objects 1 --real %s --no-unlike --no-heuristic --out OUT.md --seed 0" % cfg.real in doc
    assert "#### real PartNet-Mobility objects (1, %s): %s, per object" % (cfg.real, ours) in doc
    # a fold's report names its held-out categories, its weights and --real-only, so the command reruns it
    fold = articulation.ArticulationEvalConfig(n_objects=1, real_val="r", holdout_categories="Oven,Box",
                                               weights="runs/fold/x", real_only=True, no_heuristic=True)
    assert ("--real-val r --holdout-categories Oven,Box --weights runs/fold/x --real-only --no-heuristic"
            in articulation.report(res, fold, "F.md"))


@pytest.mark.parametrize("make,message", [
    (lambda: model.ModelEvalConfig(), "give --data"),
    (lambda: model.ModelEvalConfig(data="d", max_instances=0), "--max-instances must be >= 1"),
    (lambda: ik.IKEvalConfig(), "--real DIR"),
    (lambda: ik.IKEvalConfig(data="d", methods="rest,magic"), "unknown ['magic']"),
    (lambda: ik.IKEvalConfig(data="d", ablation=["nofolder"]), "NAME=DIR"),
    (lambda: ik.IKEvalConfig(data="d", fit_loss="l3"), "--fit-loss 'l3'"),
    (lambda: dynamics.DynamicsEvalConfig(scenarios="door,moon"), "choose from door,beam,cloth"),
    (lambda: dynamics.DynamicsEvalConfig(frames=1), "--frames must be >= 2"),
    (lambda: real.RealEvalConfig(), "--real"),
    (lambda: real.RealEvalConfig(real="r", points=10**6), "--points must be <= 100000"),
    (lambda: articulation.ArticulationEvalConfig(n_objects=0), "--n-objects must be >= 1"),
])
def test_bad_configs_raise_config_error(make, message):
    with pytest.raises(ConfigError) as err:
        make()
    assert message in str(err.value)


@pytest.mark.parametrize("config,required", [(model.ModelEvalConfig, "data"), (ik.IKEvalConfig, "data"),
                                             (dynamics.DynamicsEvalConfig, "data"), (real.RealEvalConfig, "real"),
                                             (articulation.ArticulationEvalConfig, "real")])
def test_command_options_are_the_config_fields(config, required):
    from kinemesh.commands.eval import add_config, config_from

    p = argparse.ArgumentParser()
    add_config(p, config)
    assert config_from(p.parse_args([f"--{required}", "d"]), config) == config(**{required: "d"})


def test_boolean_options_of_a_config_parse_both_ways():
    """A False field is a flag; a True one is a --x / --no-x pair (as type=bool, '--x False' would read True)."""
    from dataclasses import dataclass

    from kinemesh.commands.eval import add_config, config_from
    from kinemesh.eval import option

    @dataclass
    class Flags:
        fast: bool = option(False, "a flag")
        polish: bool = option(True, "on unless --no-polish")

    p = argparse.ArgumentParser()
    add_config(p, Flags)
    assert config_from(p.parse_args([]), Flags) == Flags(False, True)
    assert config_from(p.parse_args(["--fast", "--no-polish"]), Flags) == Flags(True, False)
    assert config_from(p.parse_args(["--polish"]), Flags) == Flags(False, True)
    with pytest.raises(SystemExit):
        p.parse_args(["--polish", "False"])


def test_attachment_is_scored_between_joined_parts():
    """Two doors hinged on a body meet at a seam: opening one 60 deg about its true hinge leaves the other door
    (a touching pair that no joint connects) but not the body, so it is attached on the joined pairs
    (``real.joint_pairs``), detached on every touching pair; sliding the door off its hinge detaches it."""
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part, axis_angle_matrix
    from tests.toys import box, merge_meshes

    v, f = merge_meshes(box([0.0, 0.0, 0.0], [1.0, 0.5, 1.0]), box([0.0, -0.02, 0.0], [0.5, 0.0, 1.0]),
                        box([0.5, -0.02, 0.0], [1.0, 0.0, 1.0]))
    pid = np.repeat([0, 1, 2], 8)
    parts = [Part(n, v[pid == i], np.zeros((0, 3), np.int64)) for i, n in enumerate(("body", "left", "right"))]
    obj = ArticulatedObject(parts, [
        Joint("hinge_l", "revolute", "body", "left", np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0]), (-2, 0)),
        Joint("hinge_r", "revolute", "body", "right", np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0]), (0, 2))],
        name="two doors")
    joined = real.joint_pairs(obj, ["body", "left", "right"])
    assert joined == [(0, 1), (0, 2)]
    posed = v.copy()
    R = axis_angle_matrix(np.array([0.0, 0.0, 1.0]), -np.pi / 3)
    posed[pid == 1] = v[pid == 1] @ R.T  # the left door opens about its hinge at the origin
    assert model.attachment(v, posed[None], pid, 1.0, joined)[0] == 1.0
    assert model.attachment(v, posed[None], pid, 1.0)[0] < 1.0  # the seam opens
    off = posed.copy()
    off[pid == 1] += [-0.1, -0.1, 0.0]  # the door leaves its hinge
    assert model.attachment(v, off[None], pid, 1.0, joined)[0] < 1.0
    # between surfaces: a plate lying on the body's top face, 0.2 from its corners, slides 0.3 along it: by vertices
    # the pair is not even seen touching (nan); its surfaces touch and keep touching; lifted 0.1 it is detached
    plate_v, plate_f = box([0.2, 0.1, 1.0], [0.3, 0.2, 1.01])
    v2, f2 = merge_meshes(box([0.0, 0.0, 0.0], [1.0, 0.5, 1.0]), (plate_v, plate_f))
    pid2 = np.repeat([0, 1], 8)
    slid = v2.copy()
    slid[pid2 == 1] += [0.3, 0.0, 0.0]
    assert np.isnan(model.attachment(v2, slid[None], pid2, 3.0, [(0, 1)])[0])  # tolerances 6 cm
    assert model.attachment(v2, slid[None], pid2, 3.0, [(0, 1)], faces=f2)[0] == 1.0
    slid[pid2 == 1] += [0.0, 0.0, 0.1]
    assert model.attachment(v2, slid[None], pid2, 3.0, [(0, 1)], faces=f2)[0] == 0.0


def test_attachment_allows_the_gap_of_the_asked_pose():
    """A drawer touching its carcass only at the front frame (clear of the walls inside) leaves that frame as soon
    as it slides: pulled out along its true joint it is detached by the rest gap alone, attached when the asked
    pose (the same slide) is the reference; pulled further sideways than the asked pose it is detached again."""
    from tests.toys import box, merge_meshes

    # carcass: a frame plate at x = 1.0 (the front), the drawer's front panel just outside it at x in [1.0, 1.02],
    # its body 0.1 clear inside; size 1 (tolerance 0.02)
    v, f = merge_meshes(box([0.9, -0.5, -0.5], [1.0, 0.5, 0.5]), box([1.0, -0.4, -0.4], [1.02, 0.4, 0.4]))
    pid = np.repeat([0, 1], 8)
    pulled = v.copy()
    pulled[pid == 1] += [0.3, 0.0, 0.0]  # the asked pose: 0.3 out along the slide
    assert model.attachment(v, pulled[None], pid, 1.0, [(0, 1)], faces=f)[0] == 0.0
    assert model.attachment(v, pulled[None], pid, 1.0, [(0, 1)], faces=f, reference=pulled)[0] == 1.0
    further = pulled.copy()
    further[pid == 1] += [0.1, 0.0, 0.0]
    assert model.attachment(v, further[None], pid, 1.0, [(0, 1)], faces=f, reference=pulled)[0] == 0.0
