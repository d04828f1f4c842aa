"""The viewer's server-side state (no browser) and, marked ``browser``, the page in headless chromium."""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from kinemesh.viz.inputs import Drawable
from kinemesh.viz.viewer import ViewerApp, ViewerConfig, ray_mesh_pick

CHROMIUM = Path("/usr/bin/chromium")


class LinearDecoder:
    """x(q) = rest + B q: a tiny differentiable stand-in for a ReducedDecoder (k = 2)."""

    def __init__(self, vertices):
        v = torch.as_tensor(np.asarray(vertices), dtype=torch.float64)
        self.rest_vertices = v
        self.rest_points = v
        self.mu_cond = torch.zeros(2, dtype=torch.float64)
        top = (v[:, 2] > 0).double()[:, None]
        # (2, N, 3): q0 slides the top vertices along x, q1 lifts them, 0.1 m per unit
        self.B = torch.stack([top * torch.tensor([0.1, 0.0, 0.0]), top * torch.tensor([0.0, 0.0, 0.1])])

    def points(self, q):
        q = torch.as_tensor(q, dtype=torch.float64)
        return self.rest_points + torch.einsum("...k,knc->...nc", q, self.B)

    def vertices(self, q):
        return self.points(q)


@pytest.fixture
def box_app(box_mesh):
    d = Drawable(frames=np.asarray(box_mesh.vertices, np.float32)[None], faces=box_mesh.faces, title="box")
    return ViewerApp(d, ViewerConfig(sim_seconds=0.5, sim_fps=10, play_fps=20))


def test_playback_scrubs_a_sequence(tiny_sequence):
    from kinemesh.viz.inputs import Drawable

    d = Drawable(frames=tiny_sequence.frames, faces=tiny_sequence.faces, fps=30.0)
    app = ViewerApp(d)
    seen = []
    app.add_listener(seen.append)
    app.set_frame(2)
    np.testing.assert_allclose(app.vertices, tiny_sequence.frames[2])
    assert app.step_frame(3) == 1  # wraps around 4 frames
    np.testing.assert_allclose(app.vertices, tiny_sequence.frames[1])
    assert seen.count("mesh") == 2


def test_ray_pick_hits_nearest_surface(box_mesh):
    v, f = np.asarray(box_mesh.vertices), np.asarray(box_mesh.faces)
    vid, point = ray_mesh_pick(v, f, [0.45, 0.2, 5.0], [0, 0, -1])  # straight down onto the top face
    np.testing.assert_allclose(point, [0.45, 0.2, 0.125], atol=1e-9)
    np.testing.assert_allclose(v[vid], [0.5, 0.25, 0.125])  # nearest corner of the hit triangle
    assert ray_mesh_pick(v, f, [3.0, 3.0, 5.0], [0, 0, -1]) is None


def test_q_sliders_drag_and_release_with_a_decoder(box_app):
    from kinemesh.errors import ConfigError

    app = box_app
    with pytest.raises(ConfigError, match="no kinematic model"):
        app.set_q(0, 1.0)
    app.attach_decoder(LinearDecoder(app.rest_vertices), status="linear test decoder")
    app.set_q(1, 2.0)
    top = app.rest_vertices[:, 2] > 0
    np.testing.assert_allclose(app.vertices[top, 2] - app.rest_vertices[top, 2], 0.2, atol=1e-6)
    np.testing.assert_allclose(app.vertices[~top], app.rest_vertices[~top], atol=1e-6)
    app.set_q_vector([0.0, 0.0])
    vid = app.pick([0.5, 0.25, 3.0], [0, 0, -1])
    assert app.rest_vertices[vid, 2] > 0
    target = app.vertices[vid] + [0.05, 0.0, 0.0]
    resid = app.drag_to(target, iters=20)
    assert resid < 5e-3
    assert app.q[0] == pytest.approx(0.5, abs=0.05)  # q0 moves top vertices by 0.1 m per unit
    frames = app.release()
    assert frames.shape[1:] == app.rest_vertices.shape and frames.shape[0] == 11  # 0.5 s at 20 fps
    np.testing.assert_allclose(frames[0], app.frames[0])
    assert app.motion_source == "dynamics"
    # Released from a displaced pose, the elastic latent term pulls the vertex back towards rest.
    offset = frames[:, vid, 0] - app.rest_vertices[vid, 0]
    assert abs(offset[-1]) < abs(offset[0])


def test_joint_sliders_pose_articulated_objects():
    import trimesh

    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.viz.inputs import articulated_sweep

    base = trimesh.creation.box(extents=(0.4, 0.4, 0.4))
    lid = trimesh.creation.box(extents=(0.4, 0.4, 0.05))
    lid.apply_translation([0, 0, 0.225])
    obj = ArticulatedObject(
        parts=[Part("base", base.vertices, base.faces), Part("lid", lid.vertices, lid.faces)],
        joints=[Joint("hinge", "revolute", "base", "lid", [0, 1, 0], [0.2, 0, 0.2], (0.0, 1.5))],
    )
    v, f, pid = obj.merged()
    configs, captions = articulated_sweep(obj, 6)
    frames = np.stack([obj.merged(c)[0] for c in configs]).astype(np.float32)
    axes = [(np.zeros((6, 3)), np.tile([0, 1.0, 0], (6, 1)))]
    d = Drawable(frames=frames, faces=f, part_ids=pid, axes=axes, articulated=obj)
    app = ViewerApp(d)
    assert app.joint_limits() == {"hinge": (0.0, 1.5)}
    app.set_joint("hinge", 9.0)  # clamped to the upper limit
    assert app.joint_values["hinge"] == 1.5
    np.testing.assert_allclose(app.vertices, obj.merged({"hinge": 1.5})[0], atol=1e-6)
    o, a = app.axes[0]
    np.testing.assert_allclose(o, [0.2, 0, 0.2])
    np.testing.assert_allclose(a, [0, 1, 0])


def test_export_glb_npz_mp4(tmp_path, tiny_sequence):
    from kinemesh.data.sequence import KinematicSequence

    d = Drawable(frames=tiny_sequence.frames, faces=tiny_sequence.faces, fps=10.0, sequence=tiny_sequence)
    app = ViewerApp(d)
    glb = app.export(tmp_path / "m.glb")
    assert glb.read_bytes()[:4] == b"glTF"
    seq = KinematicSequence.load(app.export(tmp_path / "m.npz"))
    np.testing.assert_allclose(seq.frames, tiny_sequence.frames)
    import imageio.v2 as iio

    r = iio.get_reader(app.export(tmp_path / "m.mp4", size=(64, 48)))
    assert r.count_frames() == tiny_sequence.n_frames
    r.close()


def test_view_command_degrades_without_model_and_serves(tmp_path, box_mesh):
    """``kinemesh view --no-model`` serves for a moment and exits 0; bad inputs exit 1."""
    from kinemesh.cli import main

    mesh = tmp_path / "box.obj"
    box_mesh.export(mesh)
    assert main(["view", str(mesh), "--port", "0", "--no-model", "--seconds", "0.2"]) == 0
    assert main(["view", str(tmp_path / "missing.obj"), "--port", "0", "--seconds", "0"]) == 1


def test_gui_callbacks_pick_drag_and_release_without_browser(box_mesh):
    """The viser callbacks (click -> pick, gizmo drag -> solve, release -> dynamics) drive the app."""
    from types import SimpleNamespace

    from kinemesh.viz.viewer import ViewerGUI

    d = Drawable(frames=np.asarray(box_mesh.vertices, np.float32)[None], faces=box_mesh.faces, title="box")
    app = ViewerApp(d, ViewerConfig(sim_seconds=0.3, sim_fps=10, play_fps=10))
    app.attach_decoder(LinearDecoder(app.rest_vertices), status="linear test decoder")
    gui = ViewerGUI(app, host="127.0.0.1", port=0, load_model_async=False)
    try:
        assert len(gui._q_sliders) == 2 and gui._model_md.content == "linear test decoder"
        gui._on_mesh_click(SimpleNamespace(ray_origin=(0.5, 0.25, 3.0), ray_direction=(0.0, 0.0, -1.0)))
        vid = app.selected_vertex
        assert vid is not None and gui._gizmo is not None
        target = app.vertices[vid] + [0.04, 0.0, 0.0]
        gui._on_gizmo(SimpleNamespace(phase="start", target=SimpleNamespace(position=tuple(target))))
        gui._on_gizmo(SimpleNamespace(phase="end", target=SimpleNamespace(position=tuple(target))))
        deadline = time.time() + 30
        while time.time() < deadline and (gui._drag_busy or app.motion_source != "dynamics"):
            time.sleep(0.05)
        assert app.motion_source == "dynamics" and app.n_frames == 4
        assert gui._frame is not None  # a playback slider appeared for the new motion
        gui._set_playing(False)
        app.set_frame(0)
        assert gui._meshes[0].vertices.shape == (len(app.vertices), 3)
        np.testing.assert_allclose(gui._meshes[0].vertices, app.vertices[gui._groups[0][1]])
    finally:
        gui.stop()


@pytest.mark.browser
def test_viewer_page_in_headless_chromium(box_mesh):
    """The page loads, the scene is not blank, a q slider moves the mesh server-side, no console errors."""
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium not installed (make browser)")
    sync_api = pytest.importorskip("playwright.sync_api")
    from PIL import Image

    from kinemesh.viz.viewer import ViewerGUI

    mesh = box_mesh.subdivide()
    d = Drawable(frames=np.asarray(mesh.vertices, np.float32)[None], faces=mesh.faces, title="box")
    app = ViewerApp(d)
    app.attach_decoder(LinearDecoder(app.rest_vertices), status="linear test decoder")
    gui = ViewerGUI(app, host="127.0.0.1", port=0, load_model_async=False)
    errors: list[str] = []
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=str(CHROMIUM),
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
            )
            try:
                # A small viewport keeps SwiftShader (software WebGL) cheap on a loaded 2-core machine.
                page = browser.new_page(viewport={"width": 800, "height": 560})
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(gui.url, timeout=60_000)
                page.wait_for_selector("canvas", timeout=60_000)
                page.get_by_text("q1").first.wait_for(timeout=60_000)
                time.sleep(2.0)  # let the scene arrive and render
                shot = np.asarray(Image.open(io.BytesIO(page.screenshot())).convert("RGB")).astype(int)
                scene = shot[:, : int(shot.shape[1] * 0.6)]  # left part: the 3D canvas, not the GUI panel
                assert scene.std() > 8, "the 3D view is blank"
                bluish = (scene[..., 2] - scene[..., 0] > 30).mean()
                assert bluish > 0.01, f"object not visible ({bluish:.4f} of the view)"

                before = app.vertices.copy()
                page.get_by_role("slider").first.focus()  # q1: the first slider of the panel
                for _ in range(4):  # page-level key presses skip per-press actionability waits
                    page.keyboard.press("ArrowRight")
                deadline = time.time() + 20
                while time.time() < deadline and app.q[0] == 0.0:
                    time.sleep(0.1)
                assert app.q[0] > 0.04, "moving the q1 slider did not reach the server"
                assert np.abs(app.vertices - before).max() > 1e-3, "the mesh did not change"
            finally:
                browser.close()
    finally:
        gui.stop()
    assert not errors, f"console errors: {errors}"


def test_missing_checkpoint_degrades_to_a_message(box_app, tmp_path):
    box_app.config.checkpoint = str(tmp_path / "no_such_checkpoint")
    assert box_app.load_model() is False
    assert not box_app.model_ok and "unavailable" in box_app.model_status
    assert "no_such_checkpoint" in box_app.model_status


def test_view_moves_a_part_of_three_components_as_one(tmp_path):
    """A mesh with a --labels file is loaded part by part (the working mesh of load_segmented) and the
    viewer's drag moves the door (three separate components, one part) rigidly, while without parts its
    pieces move apart."""
    from kinemesh.cli import main
    from kinemesh.geometry import metrics
    from kinemesh.viz.inputs import load_drawable
    from tests.toys import merge_meshes, moving_model, three_component_door, write_obj_groups

    v, f = merge_meshes(*[(v, f) for _, v, f in three_component_door()])
    mesh = tmp_path / "cab.obj"
    write_obj_groups(mesh, [("all", v, f)])
    np.save(tmp_path / "labels.npy", np.repeat([0, 1], [8, 24]))
    moving_model().save(tmp_path / "ck")
    # a random model: its prior basis (random posteriors of motion probes span anything)
    cfg = dict(checkpoint=str(tmp_path / "ck"), n_points=64, max_q=3, subspace_samples=8, sim_seconds=0.2,
               sim_fps=10, play_fps=10, kind="articulated", basis="prior")

    def drag(d, let_go=True):
        app = ViewerApp(d, ViewerConfig(**cfg))
        assert app.load_model(), app.model_status
        door = app.rest_vertices[:, 0] < -0.2
        vid = int(np.argmin(app.rest_vertices[:, 0] + app.rest_vertices[:, 1]))  # slab corner far from the body
        app.select_vertex(vid)
        app.drag_to(app.rest_vertices[vid] + [-0.3, -0.3, 0.1], iters=8)
        # the decoded shapes, without the rest-fit offset the viewer adds per vertex to the dragged pose
        posed = np.concatenate([app.vertices[None] - app.rest_offset, *([app.release()] if let_go else [])])
        size = np.ptp(app.rest_vertices, 0).max()
        err = metrics.within_part_rigidity(app.rest_vertices[door], posed[:, door], np.zeros(door.sum(), int))
        return err, np.linalg.norm(posed[0, door] - app.rest_vertices[door], axis=1).mean() / size

    d = load_drawable(mesh, parts=True, labels=tmp_path / "labels.npy")
    assert np.array_equal(np.bincount(d.part_ids), [8, 24]) and "2 parts: labels" in d.title
    rigid, moved = drag(d)
    assert moved > 0.02 and rigid < 1e-5
    loose, _ = drag(load_drawable(mesh, parts=True, auto_parts=False), let_go=False)  # each component alone
    assert loose > 1e-2
    # the command takes the same options; labels only go with a mesh file
    assert main(["view", str(mesh), "--labels", str(tmp_path / "labels.npy"), "--port", "0", "--no-model",
                 "--seconds", "0.1"]) == 0
    assert main(["view", str(tmp_path / "ck"), "--labels", str(tmp_path / "labels.npy"), "--port", "0",
                 "--seconds", "0"]) == 1
