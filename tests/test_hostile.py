"""Hostile and careless inputs (issue 18): each one a clean one-line error or a safe result, never a traceback,
a hang, a file written or lost outside what was asked. Tiny fixtures; the CLI is called in-process except for
the broken-pipe and SIGTERM cases, which need a real process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kinemesh.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """An OBJ box whose 6 faces have their own vertices (24, duplicates merged on a processed load) and a tiny
    untrained checkpoint."""
    import trimesh

    from kinemesh.model import untrained_model

    d = tmp_path_factory.mktemp("hostile")
    box = trimesh.creation.box(extents=(0.4, 0.3, 0.2))
    v, f = box.vertices[box.faces].reshape(-1, 3), np.arange(len(box.faces) * 3).reshape(-1, 3)
    with open(d / "split.obj", "w") as fh:
        fh.writelines(f"v {a:.6f} {b:.6f} {c:.6f}\n" for a, b, c in v)
        fh.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in f)
    untrained_model("tiny").save(d / "ckpt")
    return d


def _err(capsys) -> str:
    return capsys.readouterr().err


# ------------------------------------------------------------------------------------------ --out folders
@pytest.mark.parametrize("command", [
    ["sample", "{obj}", "--n", "1"],
    ["articulate", "{obj}"],
    ["physics", "{obj}"],
    ["demo", "--examples", "cloth"],
])
def test_existing_non_empty_out_folder_is_refused_without_force(files, tmp_path, capsys, command):
    out = tmp_path / "d"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    argv = [a.format(obj=files / "split.obj") for a in command] + ["--out", str(out)]
    assert main(argv) == 1
    assert "pass --force" in _err(capsys)
    assert (out / "keep.txt").read_text() == "x" and len(list(out.iterdir())) == 1


def test_out_places_refused_before_work(files, tmp_path, capsys, monkeypatch):
    obj = str(files / "split.obj")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir.glb").mkdir()
    for out in ("/proc/kinemesh_out", str(tmp_path / "afile" / "sub")):
        assert main(["sample", obj, "--out", out]) == 1
        assert "--out" in _err(capsys)
    monkeypatch.chdir(tmp_path)
    assert main(["articulate", obj, "--out", ".", "--force"]) == 1
    assert "working folder" in _err(capsys)
    assert (tmp_path / "afile").exists()
    assert main(["simulate", obj, "--out", str(tmp_path / "adir.glb")]) == 1
    assert "is a folder, expected a file" in _err(capsys)


def test_simulate_does_not_overwrite_files_without_force(files, tmp_path, capsys):
    out = tmp_path / "a.glb"
    out.write_text("mine")
    assert main(["simulate", str(files / "split.obj"), "--checkpoint", str(files / "ckpt"), "--out", str(out)]) == 1
    assert "pass --force" in _err(capsys) and out.read_text() == "mine"


def test_out_dir_checks_directly(tmp_path):
    from kinemesh.checks import out_dir, out_file
    from kinemesh.errors import ConfigError

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert out_dir(tmp_path / "full", force=True) == tmp_path / "full"
    assert out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checking creates nothing
    with pytest.raises(ConfigError, match="virtual file system"):
        out_file("/sys/x.png", force=True)
    with pytest.raises(ConfigError, match="is a file"):
        out_dir(tmp_path / "full" / "x")


# ------------------------------------------------------------------------------------------ decompression bombs
def _npz_with_member(path, name, header_shape=None, payload=None):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open(name + ".npy", "w") as fh:
            if header_shape is not None:
                np.lib.format.write_array_header_1_0(
                    fh, {"descr": "<f4", "fortran_order": False, "shape": header_shape})
            else:
                np.save(fh, payload)


def test_npz_bomb_and_huge_header_refused(tmp_path, capsys, monkeypatch):
    import kinemesh.data.arrays as arrays

    monkeypatch.setattr(arrays, "MAX_ARRAY_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.npz"
    _npz_with_member(bomb, "frames", payload=np.zeros((4, 100000, 3), np.float32))  # 4.8 MB in ~5 kB
    assert bomb.stat().st_size < 100000
    assert main(["info", str(bomb)]) == 1
    assert "bound" in _err(capsys)
    monkeypatch.setattr(arrays, "MAX_ARRAY_BYTES", 4 << 30)
    huge = tmp_path / "huge.npz"
    _npz_with_member(huge, "frames", header_shape=(10**12, 4, 3))
    assert main(["info", str(huge)]) == 1
    assert "frames" in _err(capsys)


def test_npy_header_checked(tmp_path):
    from kinemesh.data.arrays import load_npy
    from kinemesh.errors import InputFileError

    p = tmp_path / "t.npy"
    with open(p, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**9, 3)})
    with pytest.raises(InputFileError, match="declares"):
        load_npy(p)
    np.save(p, np.ones((5, 3)))
    assert load_npy(p).shape == (5, 3)


# ------------------------------------------------------------------------------------------ options
@pytest.mark.parametrize("argv, option", [
    (["convert", "{obj}", "{tmp}/o.npz", "--fps", "0"], "--fps"),
    (["convert", "{obj}", "{tmp}/o.npz", "--fps", "nan"], "--fps"),
    (["convert", "{obj}", "{tmp}/o.npz", "--frames", "10000000"], "--frames"),
    (["physics", "{obj}", "--out", "{tmp}/p", "--height", "nan"], "--height"),
    (["simulate", "{obj}", "--out", "{tmp}/o.glb", "--to=nan,0,0"], "--to"),
    (["render", "{obj}", "--out", "{tmp}/o.png", "--fps", "inf"], "--fps"),
    (["simulate", "{obj}", "--out", "{tmp}/o.glb", "--stiffness", "-1"], "--stiffness"),
])
def test_bad_numbers_blame_the_option(files, tmp_path, capsys, argv, option):
    with pytest.raises(SystemExit) as exc:
        main([a.format(obj=files / "split.obj", tmp=tmp_path) for a in argv])
    err = _err(capsys)
    assert exc.value.code == 2 and f"argument {option}" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_train_set_nan_is_one_line(tmp_path, capsys):
    assert main(["train", "--data", str(tmp_path), "--out", str(tmp_path / "run"), "--set", "train.lr=nan"]) == 1
    assert "train.lr must be a finite number" in _err(capsys)


def test_render_memory_bound(files, tmp_path, capsys):
    out = tmp_path / "o.png"
    assert main(["render", str(files / "split.obj"), "--out", str(out), "--size", "8192x8192",
                 "--supersample", "8"]) == 1
    assert "GiB" in _err(capsys) and not out.exists()


def test_view_host(capsys):
    from kinemesh.commands.view import check_host
    from kinemesh.errors import ConfigError

    with pytest.raises(ConfigError, match="every network interface"):
        check_host("", 8080)
    check_host("127.0.0.1", 8080)
    check_host("localhost", 8080)
    assert _err(capsys) == ""
    check_host("0.0.0.0", 8080)
    assert "warning" in _err(capsys)


def test_missing_viewer_names_the_extra():
    from kinemesh.errors import MissingDependencyError

    assert "pip install 'kinemesh[viewer]'" in str(MissingDependencyError("viser", "kinemesh view", extra="viewer"))
    assert "extra=\"viewer\"" in (ROOT / "kinemesh" / "viz" / "viewer.py").read_text()


# ------------------------------------------------------------------------------------------ checkpoints
def test_bad_checkpoints_are_one_line(files, tmp_path):
    import json
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from kinemesh.errors import InputFileError, KinemeshError
    from kinemesh.model import load_model

    def copy(name):
        d = tmp_path / name
        shutil.copytree(files / "ckpt", d)
        return d, json.loads((d / "config.json").read_text())

    d, cfg = copy("mismatch")
    cfg["model"]["width"] = 64  # the weights are width 32
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputFileError, match="does not match config.json"):
        load_model(d)
    d, cfg = copy("absurd")
    cfg["model"]["width"] = 10**6
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(KinemeshError, match="parameters"):
        load_model(d)
    d, _ = copy("nan")
    state = load_file(str(d / "model.safetensors"))
    key = next(iter(state))
    state[key] = torch.full_like(state[key], float("nan"))
    save_file(state, str(d / "model.safetensors"))
    with pytest.raises(InputFileError, match="NaN or inf"):
        load_model(d)


def test_config_fields_checked():
    from kinemesh.errors import ConfigError
    from kinemesh.model.config import ModelConfig, TrainConfig

    for bad in (dict(lr=float("nan")), dict(batch_size=2.5), dict(kl_weight=-1.0), dict(scale_range=(2, 1))):
        with pytest.raises(ConfigError):
            TrainConfig(**bad)
    with pytest.raises(ConfigError, match="parameters"):
        ModelConfig(width=4096, heads=4, enc_self_layers=64, dec_self_layers=64)


# ------------------------------------------------------------------------------------------ vertices kept
def test_sample_keeps_the_files_vertices(files, tmp_path):
    import trimesh

    from kinemesh.data.meshes import read_obj_geometry

    v, f = read_obj_geometry(files / "split.obj")
    assert len(trimesh.Trimesh(v, f, process=True).vertices) == 8 < len(v) == 36  # merged on a plain load
    assert main(["sample", str(files / "split.obj"), "--n", "1", "--n-points", "64", "--checkpoint",
                 str(files / "ckpt"), "--out", str(tmp_path / "s")]) == 0
    for name in ("rest.obj", "sample_00.obj"):
        sv, sf = read_obj_geometry(tmp_path / "s" / name)
        assert sv.shape == v.shape and np.array_equal(sf, f)
    assert np.allclose(read_obj_geometry(tmp_path / "s" / "rest.obj")[0], v, atol=1e-6)
    out = read_obj_geometry(tmp_path / "s" / "sample_00.obj")[0]
    dup = np.all(v[:, None] == v[None], axis=-1)  # duplicates of the file move together
    i, j = np.nonzero(dup)
    assert np.allclose(out[i], out[j])


def test_physics_and_info_keep_the_files_vertices(files, tmp_path, capsys):
    from kinemesh.data.meshes import read_obj_geometry
    from kinemesh.data.sequence import KinematicSequence

    v, f = read_obj_geometry(files / "split.obj")
    assert main(["info", str(files / "split.obj")]) == 0
    assert "36 vertices (8 after merging duplicates), 12 faces" in capsys.readouterr().out
    assert main(["physics", str(files / "split.obj"), "--case", "drop", "--materials", "wood", "--duration", "0.1",
                 "--no-video", "--out", str(tmp_path / "p")]) == 0
    seq = KinematicSequence.load(tmp_path / "p" / "sequence.npz")
    assert seq.n_vertices == len(v) and np.array_equal(seq.faces, f)
    dup = np.all(v[:, None] == v[None], axis=-1)  # duplicates of the file move together, as one rigid box
    i, j = np.nonzero(dup)
    assert np.allclose(seq.frames[:, i], seq.frames[:, j])
    # the box keeps its shape: pairwise distances of the file's vertices are those of the rest pose
    d0 = np.linalg.norm(v[:, None] - v[None], axis=-1)
    d1 = np.linalg.norm(seq.frames[-1][:, None] - seq.frames[-1][None], axis=-1)
    assert np.allclose(d0, d1, atol=1e-4)


def test_working_mesh_maps_file_ids_to_the_decimated_mesh(tmp_path):
    import trimesh

    from kinemesh.data.meshes import load_working_mesh

    trimesh.creation.icosphere(subdivisions=4).export(tmp_path / "ball.obj")  # 2562 vertices
    wm = load_working_mesh(tmp_path / "ball.obj", max_vertices=500)
    assert wm.decimated and len(wm.mesh.vertices) <= 500 and len(wm.file_vertices) == 2562
    d = np.linalg.norm(np.asarray(wm.mesh.vertices)[wm.to_work] - wm.file_vertices, axis=1)
    assert d.max() < 0.2  # every file vertex maps to a nearby working vertex, not to whatever has its index
    full = load_working_mesh(tmp_path / "ball.obj", max_vertices=None)
    assert not full.decimated and np.allclose(full.to_file(np.asarray(full.mesh.vertices)), full.file_vertices)


# ------------------------------------------------------------------------------------------ folders, chains
def test_frames_folder_symlink_out_is_refused(files, tmp_path):
    from kinemesh.data.loaders import load_sequence
    from kinemesh.errors import UnsafePathError

    seq = tmp_path / "frames"
    seq.mkdir()
    (seq / "f0.obj").write_bytes((files / "split.obj").read_bytes())
    (tmp_path / "secret.obj").write_bytes((files / "split.obj").read_bytes())
    (seq / "f1.obj").symlink_to(tmp_path / "secret.obj")
    with pytest.raises(UnsafePathError, match="leading out of"):
        load_sequence(seq)


def test_sweep_of_a_5000_link_chain_is_linear(tmp_path):
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.viz.inputs import articulated_sweep, load_drawable, posed_frames

    n = 5000
    tri = np.array([[0.0, 0, 0], [0.01, 0, 0], [0, 0.01, 0]])
    parts = [Part(f"l{i}", tri + [0, 0, 0.01 * i], [[0, 1, 2]]) for i in range(n + 1)]
    joints = [Joint(f"j{i}", "revolute", f"l{i}", f"l{i + 1}", (0, 1, 0), (0, 0, 0.01 * (i + 1)), (-0.1, 0.1))
              for i in range(n)]
    obj = ArticulatedObject(parts, joints)
    configs, _ = articulated_sweep(obj, 45)
    assert len(configs) == 45 * n
    pick = [configs[i] for i in np.linspace(0, len(configs) - 1, 30).round().astype(int)]
    t0 = time.perf_counter()
    frames, _, _, axes = posed_frames(obj, pick)
    assert time.perf_counter() - t0 < 5.0
    for t in (3, 17):
        assert np.allclose(frames[t], obj.merged(pick[t])[0], atol=1e-5)
        T = obj.part_transforms(pick[t])
        k = n - 1
        assert np.allclose(axes[k][0][t], T[joints[k].parent][:3, :3] @ joints[k].origin + T[joints[k].parent][:3, 3])
    # the same path through a URDF file, frames picked before posing
    urdf = tmp_path / "chain.urdf"
    urdf.write_text("<robot name='c'>" + "".join(
        f"<link name='l{i}'><visual><geometry><box size='0.01 0.01 0.01'/></geometry></visual></link>"
        for i in range(41)) + "".join(
        f"<joint name='j{i}' type='revolute'><parent link='l{i}'/><child link='l{i + 1}'/>"
        f"<origin xyz='0 0 0.01'/><axis xyz='0 1 0'/><limit lower='-0.1' upper='0.1'/></joint>"
        for i in range(40)) + "</robot>")
    d = load_drawable(urdf, max_frames=12)
    assert d.frames.shape[0] == 12 and len(d.captions) == 12


# ------------------------------------------------------------------------------------------ small things
def test_ik_motion_explained_defined_only_for_moving_targets():
    from kinemesh.commands.ik import motion_explained

    assert motion_explained(0.01, 1e-9) is None
    assert motion_explained(0.01, 0.0) is None
    assert motion_explained(0.01, 0.1) == pytest.approx(0.9)


def test_progress_bars_only_on_a_terminal(tmp_path):
    import io

    from kinemesh.progress import tqdm

    log = io.StringIO()
    for _ in tqdm(range(3), file=log):
        pass
    assert log.getvalue() == ""
    assert tqdm(range(3), disable=True).disable
    src = "\n".join(p.read_text() for p in (ROOT / "kinemesh").rglob("*.py"))
    assert not re.search(r"^\s*from tqdm import tqdm\s*$", src, re.M)  # every bar goes through kinemesh.progress


def test_mujoco_warnings_leave_no_log_file(tmp_path, monkeypatch, caplog):
    import mujoco

    from kinemesh.commands.physics import quiet_mujoco_log

    monkeypatch.chdir(tmp_path)
    quiet_mujoco_log()
    m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body>"
                                       "</worldbody></mujoco>")
    d = mujoco.MjData(m)
    d.qpos[0] = np.nan
    mujoco.mj_step(m, d)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert "Nan" in caplog.text


def test_dependencies_are_ranges_and_pins_live_in_constraints():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = meta["dependencies"] + [d for ds in meta["optional-dependencies"].values() for d in ds]
    assert not [d for d in deps if "==" in d]
    assert "render" not in meta["optional-dependencies"] and not [d for d in deps if "pyvista" in d or "vtk" in d]
    pins = (ROOT / "constraints.txt").read_text()
    assert "torch==2.13.0" in pins and "-c constraints.txt" in (ROOT / "Makefile").read_text()


def test_remove_stale_temporaries(tmp_path):
    from kinemesh.atomic import remove_stale

    (tmp_path / "checkpoint").mkdir()
    keep = tmp_path / "checkpoint" / "model.safetensors"
    keep.write_text("w")
    stale = tmp_path / "checkpoint" / ".model.k2j4_x9a.tmp.safetensors"
    stale.write_text("half")
    (tmp_path / ".out.abcd1234.tmp").mkdir()
    removed = remove_stale(tmp_path)
    assert len(removed) == 2 and keep.exists() and not stale.exists()


# ------------------------------------------------------------------------------------------ real processes
_SLOW_WRITER = """
import sys, time
import kinemesh.commands.info as info
from kinemesh.atomic import atomic_path

def run(args):
    with atomic_path(sys.argv[1] + "/result.npz") as tmp:
        tmp.write_bytes(b"half written")
        print("ready", flush=True)
        time.sleep(60)

info.run = run
from kinemesh.cli import main
sys.exit(main(["info", "x"]))
"""


def test_sigterm_leaves_no_temporary_files(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    assert len(list(tmp_path.iterdir())) == 1  # the hidden temporary
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143 and "terminated" in err
    assert list(tmp_path.iterdir()) == []


def test_broken_pipe_is_not_a_traceback(files):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "kinemesh.cli", "info", str(files / "split.obj")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.close()  # the reader left before the first line (`| head -0`)
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and "Traceback" not in err and "BrokenPipe" not in err
