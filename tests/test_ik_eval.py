"""`kinemesh eval ik` and `kinemesh ik` end to end on a tiny dataset and a tiny untrained model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kinemesh.cli import main
from kinemesh.data.articulated import ArticulatedObject, Joint, Part
from kinemesh.data.exporters import export_obj
from kinemesh.data.meshes import read_face_parts
from kinemesh.data.manifest import entry_for, write_manifest
from toys import box


def _cabinet(rng, category="cabinet", scale=1.0):
    w = scale * rng.uniform(0.7, 0.9)
    body = box([-w / 2, -0.25, 0.0], [w / 2, 0.25, 0.6])
    lid = box([-w / 2, -0.25, 0.6], [w / 2, 0.25, 0.64])
    drawer = box([w / 2, -0.2, 0.1], [w / 2 + 0.3, 0.2, 0.3])
    parts = [Part("body", *body, "body"), Part("lid", *lid, "lid"), Part("drawer", *drawer, "drawer")]
    joints = [Joint("hinge", "revolute", "body", "lid", [0, -1, 0], [-w / 2, 0, 0.6], (0.0, 1.2)),
              Joint("slide", "prismatic", "body", "drawer", [1, 0, 0], [0, 0, 0], (0.0, 0.25))]
    return ArticulatedObject(parts, joints, category=category, name=f"{category}")


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("ikdata")
    rng = np.random.default_rng(0)
    entries = []
    for i, (cat, split) in enumerate([("cabinet", "train")] * 3 + [("cabinet", "test"), ("chest", "test_category")]):
        obj = _cabinet(rng, cat)
        configs = [{}] + [obj.sample_values(rng) for _ in range(4)]
        seq = obj.to_sequence(configs)
        path = root / "articulated" / cat / f"{i}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        seq.save(path)
        entries.append(entry_for(seq, path, root, split=split))
    write_manifest(entries, root / "manifest.jsonl")
    return root


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from kinemesh.model import untrained_model

    folder = tmp_path_factory.mktemp("ckpt") / "tiny"
    untrained_model("tiny").save(folder)
    return folder


def test_eval_ik_end_to_end(tiny_dataset, tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "ik.md"
    rows = tmp_path / "rows.jsonl"
    code = main(["eval", "ik", "--data", str(tiny_dataset), "--checkpoint", str(tiny_checkpoint),
                 "--max-targets", "2", "--frames-per-seq", "1", "--metric-samples", "500", "--iou-points",
                 "2000", "--pool-size", "8", "--ik-steps", "4", "--ablation", f"tiny_copy={tiny_checkpoint}", "--out", str(out),
                 "--rows", str(rows), "--spectrum", str(tmp_path / "spec.png")])
    assert code == 0
    assert (tmp_path / "spec.png").read_bytes()[:4] == b"\x89PNG"
    text = out.read_text()
    assert "held-out instances" in text and "held-out categories" in text
    assert "kinemesh eval ik" in text and "0.764" in text
    recs = [json.loads(line) for line in rows.read_text().splitlines()]
    methods = {r["method"] for r in recs}
    assert {"rest", "neurok", "neurok_q", "neurok_z", "pca", "nearest", "ffd", "oracle",
            "ablation:tiny_copy"} <= methods
    # both fitting protocols by default, each with every method, in their own sections of the table
    assert {r["fit_loss"] for r in recs} == {"vertex", "chamfer"}
    assert len([r for r in recs if r["fit_loss"] == "vertex"]) == len([r for r in recs if r["fit_loss"] == "chamfer"])
    assert "# Protocol 'vertex'" in text and "# Protocol 'chamfer'" in text
    assert "free-form + Laplacian/edge reg. (given every target vertex)" in text
    by = {(r["target"], r["method"]): r for r in recs if r["fit_loss"] == "vertex"}
    for r in recs:
        assert np.isfinite(r["chamfer_l1"]) and r["chamfer_l1"] >= 0
        if r["method"] == "rest":
            assert r["vertex_error"] == pytest.approx(r["rest_vertex_error"])
            assert r["rigidity"] == pytest.approx(0.0, abs=1e-9)
        if r["method"] == "oracle":  # ground-truth joints recover the pose almost exactly
            assert r["vertex_error"] < 0.2 * by[(r["target"], "rest")]["vertex_error"]
    # the held-out category is unseen, so its pools fall back to same-kind training data (and say so)
    assert "use all training sequences of kind 'articulated'" in text
    assert "held-out instances" in capsys.readouterr().out
    # resume: every target is already in the rows file, nothing is recomputed, the table is the same
    assert main(["eval", "ik", "--data", str(tiny_dataset), "--checkpoint", str(tiny_checkpoint), "--max-targets",
                 "2", "--frames-per-seq", "1", "--rows", str(rows), "--out", str(tmp_path / "again.md")]) == 0
    assert len(rows.read_text().splitlines()) == len(recs)
    # render only, from saved rows
    assert main(["eval", "ik", "--from-rows", str(rows), "--out", str(tmp_path / "rendered.md"),
                 "--histogram", str(tmp_path / "hist.png")]) == 0
    assert (tmp_path / "hist.png").read_bytes()[:4] == b"\x89PNG"
    rendered = (tmp_path / "rendered.md").read_text()
    table = [ln for ln in text.splitlines() if ln.startswith("| oracle")]
    assert table and all(ln in rendered for ln in table)


def test_eval_ik_bad_inputs(tmp_path, tiny_checkpoint):
    assert main(["eval", "ik", "--checkpoint", str(tiny_checkpoint)]) == 1
    assert main(["eval", "ik", "--data", str(tmp_path), "--checkpoint", str(tiny_checkpoint)]) == 1
    assert main(["eval", "ik", "--data", str(tmp_path), "--methods", "magic"]) == 1


def test_ik_command(tmp_path, tiny_checkpoint, capsys):
    obj = _cabinet(np.random.default_rng(1))
    rest, faces, _ = obj.merged(None)
    target, _, _ = obj.merged({"hinge": 0.5, "slide": 0.1})
    export_obj(rest, faces, tmp_path / "rest.obj")
    export_obj(target * 3.0 + 1.0, faces, tmp_path / "target.obj")
    np.save(tmp_path / "cloud.npy", target[target[:, 1] < 0])
    common = ["--checkpoint", str(tiny_checkpoint), "--steps", "5", "--starts", "1"]
    assert main(["ik", "--rest", str(tmp_path / "rest.obj"), "--target", str(tmp_path / "target.obj"),
                 "--out", str(tmp_path / "fit.obj"), "--normalize-target", "--json", str(tmp_path / "fit.json"),
                 "--save-subspace", str(tmp_path / "sub"), "--spectrum", str(tmp_path / "spec.png"), *common]) == 0
    from kinemesh.reduce import Subspace

    sub = Subspace.load(tmp_path / "sub")
    assert sub.latent_dim == 32 and 1 <= sub.k <= 32  # the tiny preset has D = 4 tokens x 8
    assert (tmp_path / "spec.png").stat().st_size > 1000
    out = capsys.readouterr().out
    assert "fit error: Chamfer-L1" in out and "motion explained" in out
    import trimesh

    fit = trimesh.load(tmp_path / "fit.obj", process=False)
    assert fit.vertices.shape == rest.shape
    assert np.ptp(fit.vertices, 0).max() > 2.0  # written back in the target's (3x larger) frame
    fit_json = json.loads((tmp_path / "fit.json").read_text())
    assert fit_json["reduced"] is True and isinstance(fit_json["polished"], bool)
    assert main(["ik", "--rest", str(tmp_path / "rest.obj"), "--target", str(tmp_path / "cloud.npy"),
                 "--out", str(tmp_path / "fit2.obj"), "--partial", "--no-reduction", *common]) == 0
    (tmp_path / "empty.xyz").write_text("")
    assert main(["ik", "--rest", str(tmp_path / "rest.obj"), "--target", str(tmp_path / "empty.xyz"),
                 "--out", str(tmp_path / "fit3.obj"), *common]) == 1
    bad = target.copy()
    bad[2] = np.inf
    np.save(tmp_path / "bad.npy", bad)
    assert main(["ik", "--rest", str(tmp_path / "rest.obj"), "--target", str(tmp_path / "bad.npy"),
                 "--out", str(tmp_path / "fit3.obj"), *common]) == 1
    err = capsys.readouterr().err
    assert "empty target" in err and "NaN or infinite" in err
    assert not (tmp_path / "fit3.obj").exists()


def test_eval_model_end_to_end_and_rerender(tiny_dataset, tiny_checkpoint, tmp_path, capsys):
    """`kinemesh eval model` on a held-out split: per-kind table with posterior and prior-sample measures,
    JSON rows, and the same table re-rendered from the JSON."""
    out = tmp_path / "model.json"
    assert main(["eval", "model", "--data", str(tiny_dataset), "--checkpoint", str(tiny_checkpoint), "--split",
                 "test", "--max-instances", "1", "--frames", "2", "--samples", "2", "--n-points", "256",
                 "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    (row,) = res["rows"]
    assert row["kind"] == "articulated" and np.isfinite(row["rel_vertex_error"])
    # a decoder with rigid-by-construction parts keeps prior samples' parts rigid
    assert row["rigidity"] < 1e-4 and 0.0 <= row["attached"] <= 1.0
    table = out.with_suffix(".md").read_text()
    assert "motion explained (median)" in table and "| articulated | 1 |" in table
    capsys.readouterr()
    again = tmp_path / "again.json"
    assert main(["eval", "model", "--from-json", str(out), "--out", str(again)]) == 0
    assert again.with_suffix(".md").read_text() == table
    assert main(["eval", "model", "--data", str(tiny_dataset), "--checkpoint", str(tiny_checkpoint),
                 "--split", "nope"]) != 0
    # --kinds: only that kind's sequences (the test split holds an articulated one: nothing of kind cloth)
    assert main(["eval", "model", "--data", str(tiny_dataset), "--checkpoint", str(tiny_checkpoint), "--split",
                 "test", "--kinds", "cloth"]) != 0
    assert "no entries" in capsys.readouterr().err
    assert main(["eval", "model", "--data", str(tiny_dataset), "--kinds", "granular"]) != 0


def test_ik_command_on_a_urdf_input_moves_parts_along_their_joints(tmp_path, tiny_checkpoint, capsys):
    """A PartNet-Mobility folder as the rest: bound with its links, reduced along its joints, the parts moved only
    along the URDF's joints with the root held (the default), so even with an untrained model the body is exactly
    the rest body and the door turns rigidly about its hinge; --free-parts moves them as decoded (largest part
    held)."""
    import json

    import trimesh

    from data_fixtures import make_partnet_folder
    from kinemesh.data.partnet import load_articulated
    from kinemesh.geometry.segments import link_parts
    from kinemesh.reduce import Subspace

    folder = make_partnet_folder(tmp_path / "cab")
    obj = load_articulated(folder)
    rest, faces, pids = obj.merged({})
    target = obj.merged({"door_hinge": 0.8, "drawer_slide": -0.3})[0]
    export_obj(target, faces, tmp_path / "target.obj")
    to_part, names = link_parts(obj)
    body, door = to_part[pids] == names.index("link_3"), to_part[pids] == names.index("link_0")

    hj = next(j for j in obj.joints if j.name == "door_hinge")
    axis, origin = hj.axis, hj.origin

    def hinge(v):  # door vertices: distance to the hinge line and height along it
        r = v[door] - origin
        return np.linalg.norm(np.cross(r, axis), axis=1), r @ axis

    fits = {}
    for flag in ([], ["--free-parts"]):
        out = tmp_path / f"fit{len(flag)}.obj"
        assert main(["ik", "--rest", str(folder), "--target", str(tmp_path / "target.obj"), "--out", str(out),
                     "--json", str(out.with_suffix(".json")), "--checkpoint", str(tiny_checkpoint), "--steps", "5",
                     "--starts", "1", "--save-subspace", str(tmp_path / f"sub{len(flag)}"), *flag]) == 0
        fit = np.asarray(trimesh.load(out, process=False).vertices)
        assert fit.shape == rest.shape and np.abs(fit[body] - rest[body]).max() < 1e-4
        assert read_face_parts(out)[2] == "groups"  # the fitted OBJ keeps the folder's links
        assert np.abs(fit[~body] - rest[~body]).max() > 1e-3  # the other parts were fitted
        fits[len(flag)] = fit, json.loads(out.with_suffix(".json").read_text())["joints"]
    printed = capsys.readouterr().out
    assert "motion explained" in printed and "joint values: door_hinge" in printed
    fit, joints = fits[0]
    assert set(joints) >= {"door_hinge", "drawer_slide"}
    assert all(np.allclose(a, b, atol=1e-4) for a, b in zip(hinge(fit), hinge(rest)))
    assert fits[1][1] == {}  # --free-parts: no joints to report
    assert Subspace.load(tmp_path / "sub0").scale is not None  # probe coordinates (scaled to the probes' spread)


def test_eval_model_rest_corrected_soft_bodies(tiny_checkpoint, tmp_path):
    """Elastic rows carry the rest-corrected posterior (as kinemesh simulate decodes a soft body), articulated
    rows do not; ``--kinds`` keeps one kind."""
    from toys import write_toy_dataset

    data = write_toy_dataset(tmp_path / "toy", n_train=2, n_val=4, n_frames=3, seed=3)
    out = tmp_path / "soft.json"
    assert main(["eval", "model", "--data", str(data), "--checkpoint", str(tiny_checkpoint), "--split", "val",
                 "--kinds", "elastic", "--frames", "2", "--samples", "2", "--n-points", "128",
                 "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert rows and {r["kind"] for r in rows} == {"elastic"}
    assert all(np.isfinite(r["chamfer_l1_rest_corrected"]) and "motion_explained_rest_corrected" in r for r in rows)
    assert "rest-corrected: Chamfer-L1" in out.with_suffix(".md").read_text()
    assert main(["eval", "model", "--data", str(data), "--checkpoint", str(tiny_checkpoint), "--split", "val",
                 "--kinds", "articulated", "--frames", "2", "--samples", "2", "--n-points", "128",
                 "--out", str(out)]) == 0
    assert not any("chamfer_l1_rest_corrected" in r for r in json.loads(out.read_text())["rows"])


def test_ik_of_a_mesh_with_parts_fits_along_predicted_joints_and_by_the_prior_basis(tmp_path, capsys,
                                                                                     tiny_checkpoint):
    """An OBJ whose groups are a URDF's links (`kinemesh convert FOLDER rest.obj`): --binding auto fits the parts
    along joints predicted from the static shape and by the prior basis, and keeps the fit nearer the target;
    --binding joints / prior run one of them; a plain mesh (automatic grouping) gets no predicted joints."""
    from data_fixtures import make_partnet_folder
    from kinemesh.data.partnet import load_articulated

    folder = make_partnet_folder(tmp_path / "cab")
    assert main(["convert", str(folder), str(tmp_path / "rest.obj")]) == 0
    obj = load_articulated(folder)
    rest, faces, _ = obj.merged({})
    export_obj(obj.merged({"door_hinge": 0.8, "drawer_slide": -0.3})[0], faces, tmp_path / "target.obj")
    export_obj(rest, faces, tmp_path / "plain.obj")  # no groups
    capsys.readouterr()
    base = ["--target", str(tmp_path / "target.obj"), "--checkpoint", str(tiny_checkpoint), "--steps", "5",
            "--starts", "1", "--polish-steps", "0", "--force"]
    runs = {}
    for binding in ("auto", "joints", "prior"):
        out = tmp_path / f"fit_{binding}.obj"
        assert main(["ik", "--rest", str(tmp_path / "rest.obj"), "--out", str(out), "--json",
                     str(out.with_suffix(".json")), "--binding", binding, *base]) == 0
        runs[binding] = json.loads(out.with_suffix(".json").read_text()), capsys.readouterr().out
    auto, printed = runs["auto"]
    assert "parts moved" in printed and "prior basis" in printed and "predicted joints" in printed
    # the rest pose's Chamfer beside the fit's, with as many samples: the door opened and the drawer slid
    assert f"(rest pose {auto['rest_chamfer_l1']:.5f})" in printed and auto["rest_chamfer_l1"] > 0.01
    errors = {b: runs[b][0]["errors"]["vertex_error"] for b in ("joints", "prior")}
    assert runs["joints"][0]["joints_from"] == "predicted" and runs["prior"][0]["joints_from"] == "none"
    assert "parts moved" not in runs["joints"][1] and "parts moved" not in runs["prior"][1]
    assert auto["errors"]["vertex_error"] == pytest.approx(min(errors.values()), abs=1e-9)
    assert auto["joints_from"] == min(errors, key=errors.get).replace("joints", "predicted").replace("prior", "none")
    assert main(["ik", "--rest", str(tmp_path / "plain.obj"), "--out", str(tmp_path / "fit_plain.obj"), "--json",
                 str(tmp_path / "fit_plain.json"), *base]) == 0
    assert json.loads((tmp_path / "fit_plain.json").read_text())["joints_from"] == "none"
    assert "parts moved" not in capsys.readouterr().out
