"""Offscreen renderer, plots and the ``kinemesh render`` command (tiny meshes, CPU, a few seconds)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kinemesh.viz import plots, render
from kinemesh.viz.raster import rasterize


def _brute_force(xy, z, W, H):
    """Reference rasterizer: every pixel centre against every triangle (perspective-correct depth)."""
    fid = np.full(W * H, -1)
    dep = np.full(W * H, np.inf)
    for j in range(H):
        for i in range(W):
            cx, cy = i + 0.5, j + 0.5
            for t in range(len(xy)):
                (x0, y0), (x1, y1), (x2, y2) = xy[t]
                area = (x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0)
                if abs(area) < 1e-12:
                    continue
                w0 = ((x1 - cx) * (y2 - cy) - (x2 - cx) * (y1 - cy)) / area
                w1 = ((x2 - cx) * (y0 - cy) - (x0 - cx) * (y2 - cy)) / area
                w2 = 1 - w0 - w1
                if min(w0, w1, w2) < -1e-9:
                    continue
                d = 1 / (w0 / z[t, 0] + w1 / z[t, 1] + w2 / z[t, 2])
                if d < dep[j * W + i]:
                    dep[j * W + i], fid[j * W + i] = d, t
    return fid, dep


def test_rasterizer_matches_brute_force_reference():
    rng = np.random.default_rng(1)
    W, H = 32, 24
    xy = rng.uniform(-10, 42, size=(20, 3, 2))
    xy[:4] = rng.uniform(0, 32, size=(4, 3, 2)) * [1, 0.05] + [0, 8]  # long thin slivers
    z = rng.uniform(1, 5, size=(20, 3))
    frags = rasterize(xy, z, W, H)
    fid, dep = _brute_force(xy, z, W, H)
    assert (fid >= 0).sum() > 200
    np.testing.assert_array_equal(frags.face_id, fid)
    hit = fid >= 0
    np.testing.assert_allclose(frags.depth[hit], dep[hit], rtol=1e-9)
    # Barycentrics are convex weights that reproduce the perspective-correct depth.
    b = frags.bary[hit].astype(np.float64)
    np.testing.assert_allclose(b.sum(1), 1.0, atol=1e-5)
    np.testing.assert_allclose((b * z[fid[hit]]).sum(1), dep[hit], rtol=1e-4)


def test_back_face_culling_keeps_the_image_of_a_closed_mesh(box_mesh):
    r = render.SceneRenderer(box_mesh.vertices, box_mesh.faces, size=(96, 72))
    assert r.closed
    culled = r.render(box_mesh.vertices)
    r.closed = False
    assert np.abs(culled.astype(int) - r.render(box_mesh.vertices)).max() == 0
    assert not render._closed_outward(box_mesh.vertices, box_mesh.faces[:-1])  # open
    assert not render._closed_outward(box_mesh.vertices, box_mesh.faces[:, ::-1])  # inside out


def test_known_mesh_renders_non_blank_and_centred(box_mesh):
    style = render.RenderStyle(floor=False)
    v = box_mesh.vertices + [5.0, -3.0, 2.0]
    img = render.render_image(v, box_mesh.faces, size=(160, 120), style=style)
    assert img.shape == (120, 160, 3) and img.dtype == np.uint8
    # Background is the smooth grey sky gradient: the object is where the colour is bluish/saturated or dark.
    rgb = img.astype(int)
    obj = (rgb[..., 2] - rgb[..., 0] > 40) | (rgb.sum(-1) < 300)
    frac = obj.mean()
    assert 0.08 < frac < 0.8, frac
    ys, xs = np.nonzero(obj)
    cy, cx = ys.mean() / 120, xs.mean() / 160
    assert abs(cx - 0.5) < 0.1 and abs(cy - 0.5) < 0.1, (cx, cy)
    # Nothing touches the border: the whole object is in frame.
    assert not obj[0].any() and not obj[-1].any() and not obj[:, 0].any() and not obj[:, -1].any()


def test_part_colours_and_axes_show(box_mesh):
    v = np.asarray(box_mesh.vertices)
    pid = (v[:, 0] > 0).astype(int)  # two halves share faces across the split: still two colours
    plain = render.render_image(v, box_mesh.faces, size=(128, 96))
    parts = render.render_image(v, box_mesh.faces, part_ids=pid, size=(128, 96))
    axis = render.render_image(v, box_mesh.faces, axes=[([0.5, 0.25, 0.0], [0, 0, 1])], size=(128, 96))

    def orange(im):
        return ((im[..., 0].astype(int) - im[..., 2]) > 60).sum()

    def red(im):
        return ((im[..., 0].astype(int) > 110) & (im[..., 1] < 80) & (im[..., 2] < 80)).sum()

    assert orange(parts) > 50 and orange(plain) == 0
    assert red(axis) > 10 and red(plain) == 0


def test_mp4_has_requested_frame_count(tmp_path, box_mesh):
    import imageio.v2 as iio

    T = 7
    v = np.asarray(box_mesh.vertices)
    frames = np.stack([v + [0.05 * t, 0, 0.02 * t] for t in range(T)])
    out = render.render_frames(
        frames, box_mesh.faces, tmp_path / "m.mp4", fps=12, size=(96, 72), progress=False
    )
    reader = iio.get_reader(out)
    try:
        assert reader.count_frames() == T
        meta = reader.get_meta_data()
        assert tuple(meta["size"]) == (96, 72)
        assert abs(meta["fps"] - 12) < 1e-6
        first = reader.get_data(0)
    finally:
        reader.close()
    assert first.std() > 5  # not a blank video


def test_gif_png_views_and_contact_sheet(tmp_path, box_mesh):
    import imageio.v3 as iio

    v = np.asarray(box_mesh.vertices)
    frames = np.stack([v * [1, 1, 1 + 0.2 * t] for t in range(3)])
    gif = render.render_frames(
        frames, box_mesh.faces, tmp_path / "a.gif", size=(64, 48), views=2, progress=False
    )
    arr = iio.imread(gif)
    assert arr.shape[:3] == (3, 48, 128)
    png = render.render_frames(frames, box_mesh.faces, tmp_path / "a.png", size=(64, 48), progress=False)
    assert iio.imread(png).shape[0] > 48  # a grid of the frames
    sheet = render.contact_sheet(
        [(v, box_mesh.faces, None, "box"), (v * 0.5, box_mesh.faces, (v[:, 2] > 0).astype(int), "half")],
        tmp_path / "sheet.png", cols=2, size=(80, 60),
    )
    assert iio.imread(sheet).shape[1] >= 160
    assert not list(tmp_path.glob(".*tmp*"))  # atomic writes leave no temporaries


def test_bad_inputs_raise_config_errors(tmp_path, box_mesh):
    from kinemesh.errors import ConfigError

    v = np.asarray(box_mesh.vertices)
    with pytest.raises(ConfigError, match="unsupported extension"):
        render.render_frames(v[None], box_mesh.faces, tmp_path / "x.avi", progress=False)
    bad = v.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ConfigError, match="NaN"):
        render.render_frames(bad[None], box_mesh.faces, tmp_path / "x.png", progress=False)
    with pytest.raises(ConfigError, match="outside"):
        render.render_frames(v[None], box_mesh.faces + 100, tmp_path / "x.png", progress=False)
    assert not (tmp_path / "x.png").exists()


def test_plots_write_pngs(tmp_path):
    import imageio.v3 as iio

    t = np.linspace(0, 1, 20)
    paths = [
        plots.plot_curves(tmp_path / "e.png", t, {"kinetic": t**2, "potential": 1 - t**2}, ylabel="E (J)"),
        plots.plot_spectrum(tmp_path / "s.png", np.exp(-np.arange(16.0)), k_selected=4),
        plots.plot_histogram(tmp_path / "h.png", np.r_[np.linspace(-1, 1, 50), np.nan], "x (m)"),
    ]
    rows = "".join(f"{i},{1 / (i + 1)},{0.1},{1e-3}\n" for i in range(10))
    (tmp_path / "log.csv").write_text("step,loss,kl,lr\n" + rows)
    paths.append(plots.plot_training_curves(tmp_path / "t.png", tmp_path / "log.csv"))
    for p in paths:
        im = iio.imread(p)
        assert im.ndim == 3 and im.shape[0] > 100 and im.std() > 5
    with pytest.raises(ValueError):
        plots.plot_curves(tmp_path / "bad.png", t, {"x": t[:3]})


def test_training_curves_rejects_empty_csv(tmp_path):
    from kinemesh.errors import InputFileError

    (tmp_path / "empty.csv").write_text("step,loss\n")
    with pytest.raises(InputFileError, match="empty.csv"):
        plots.plot_training_curves(tmp_path / "t.png", tmp_path / "empty.csv")


def test_cli_render_sequence_and_articulation_json(tmp_path, tiny_sequence, box_mesh):
    import imageio.v2 as iio

    from kinemesh.cli import main

    seq_path = tmp_path / "seq.npz"
    tiny_sequence.save(seq_path)
    out = tmp_path / "seq.mp4"
    assert main(["render", str(seq_path), "--out", str(out), "--size", "64x48", "--fps", "8"]) == 0
    reader = iio.get_reader(out)
    assert reader.count_frames() == tiny_sequence.n_frames
    reader.close()
    before = out.read_bytes()
    assert main(["render", str(seq_path), "--out", str(out), "--size", "32x24"]) == 1  # exists: needs --force
    assert out.read_bytes() == before
    assert main(["render", str(seq_path), "--out", str(out), "--size", "32x24", "--force"]) == 0
    assert out.read_bytes() != before

    mesh_path = tmp_path / "box.obj"
    box_mesh.export(mesh_path)
    art = {"parts": [{"name": "lid", "type": "revolute", "axis": [0, 1, 0], "origin": [0.5, 0, 0.125],
                      "limits": [0, 1.5], "parent": "base", "confidence": 0.9}], "units": "m", "up": "z"}
    (tmp_path / "art.json").write_text(json.dumps(art))
    png = tmp_path / "art.png"
    art_json = str(tmp_path / "art.json")
    args = ["render", art_json, "--mesh", str(mesh_path), "--out", str(png), "--size", "64x48"]
    assert main(args) == 0
    assert png.exists()
    assert main(["render", str(tmp_path / "art.json"), "--out", str(png)]) == 1  # no mesh given
    assert main(["render", str(seq_path), "--out", str(tmp_path / "x.avi")]) == 1


def test_cli_render_articulated_folder(tmp_path):
    """A synthetic URDF object: every joint swept, one arrow per joint."""
    from kinemesh.data.articulated import ArticulatedObject, Joint, Part
    from kinemesh.viz.inputs import load_drawable

    import trimesh

    base = trimesh.creation.box(extents=(0.4, 0.4, 0.4))
    lid = trimesh.creation.box(extents=(0.4, 0.4, 0.05))
    lid.apply_translation([0, 0, 0.225])
    obj = ArticulatedObject(
        parts=[Part("base", base.vertices, base.faces, "body"), Part("lid", lid.vertices, lid.faces, "lid")],
        joints=[Joint("hinge", "revolute", "base", "lid", [0, 1, 0], [0.2, 0, 0.2], (0.0, 1.2))],
        category="box",
        name="toybox",
    )
    try:
        from kinemesh.data.partnet import write_partnet_folder
    except ImportError:
        pytest.skip("kinemesh.data.partnet not available")
    folder = write_partnet_folder(obj, tmp_path / "toybox")
    d = load_drawable(folder, frames_per_joint=5)
    assert d.frames.shape[0] == 5 and len(d.axes) == 1 and d.articulated is not None
    # The hinge swings the lid: its highest point changes over the sweep while the base stays.
    assert np.ptp(d.frames[:, :, 2].max(1)) > 0.05
    from kinemesh.cli import main

    out = tmp_path / "toy.png"
    assert main(["render", str(folder), "--out", str(out), "--size", "64x48", "--frames-per-joint", "4"]) == 0
    assert out.exists()


def test_cli_render_side_by_side(tmp_path, tiny_sequence, box_mesh):
    """Several inputs become tiles of one GIF; the still mesh turns while the sequence plays (and holds)."""
    import imageio.v3 as iio

    from kinemesh.cli import main

    seq_path = tmp_path / "seq.npz"
    tiny_sequence.save(seq_path)
    mesh_path = tmp_path / "box.obj"
    box_mesh.export(mesh_path)
    out = tmp_path / "both.png"
    assert main(["render", str(seq_path), str(mesh_path), "--out", str(out), "--size", "64x48"]) == 0
    # a PNG grid of the 4 frames, each frame two 64x48 tiles side by side, 4 px padding
    assert iio.imread(out).shape == (48 + 2 * 4, 4 * 128 + 5 * 4, 3)
    gif = tmp_path / "both.gif"
    assert main(["render", str(seq_path), str(mesh_path), "--out", str(gif), "--size", "48x32",
                 "--no-captions"]) == 0
    frames = iio.imread(gif)
    assert frames.shape[1:] == (32, 96, 3) and frames.shape[0] > tiny_sequence.n_frames  # 72-frame turntable
    assert main(["render", str(seq_path), str(mesh_path), "--out", str(gif), "--views", "2"]) == 1


def test_train_command_plots_training_curves(tmp_path, monkeypatch, capsys):
    """`kinemesh train` writes training_curves.png from its log.csv (training itself is stubbed here)."""
    import kinemesh.model.train as model_train
    from kinemesh.cli import main

    def fake_train(config, opts):
        opts.out.mkdir(parents=True, exist_ok=True)
        rows = "".join(f"{i},{1 / (i + 1)},{0.1}\n" for i in range(1, 11))
        (opts.out / "log.csv").write_text("step,loss,kl\n" + rows)
        return {"step": 10}

    monkeypatch.setattr(model_train, "train", fake_train)
    out = tmp_path / "run"
    assert main(["train", "--data", str(tmp_path), "--out", str(out), "--preset", "tiny",
                 "--no-calibrate"]) == 0
    assert (out / "training_curves.png").is_file()
    assert "training_curves.png" in capsys.readouterr().out


def test_sequence_axes_follow_the_moving_parent():
    """Joint arrows of a chain (desk lamp) follow their parent part's Kabsch-fitted motion in every frame."""
    from kinemesh.synth.categories import build
    from kinemesh.viz.inputs import sequence_axes

    obj = build("desk_lamp", np.random.default_rng(0), check=False)
    rng = np.random.default_rng(1)
    cfgs = [obj.sample_values(rng) for _ in range(3)]
    axes, names = sequence_axes(obj.to_sequence(cfgs))
    assert names == [j.name for j in obj.movable_joints]
    for (o, d), j in zip(axes, obj.movable_joints):
        for t, c in enumerate(cfgs):
            T = obj.part_transforms(c)[j.parent]
            np.testing.assert_allclose(o[t], T[:3, :3] @ j.origin + T[:3, 3], atol=1e-6)
            np.testing.assert_allclose(d[t], T[:3, :3] @ (j.axis / np.linalg.norm(j.axis)), atol=1e-6)


def test_render_rasterizes_only_the_object_box_and_leaves_the_rest_sky(box_mesh):
    """The renderer rasterizes the object's screen box (plus its outline) only: the picture is the same as with
    the whole frame rasterized, everything outside the box is the sky, and an object leaving the frame is
    clipped, not an error."""
    v = np.asarray(box_mesh.vertices)
    style = render.RenderStyle(floor=False, shadow=False)
    r = render.SceneRenderer(np.concatenate([v, 3 * v]), box_mesh.faces, size=(160, 120), style=style)
    cam = r.cameras[0]
    right, up, _ = cam.basis()
    edge = 80 / cam.focal * np.linalg.norm(cam.target - cam.eye)  # half the frame's width at the box, metres
    img = r.render(v)  # a third of the framed size: a small box in the middle
    # arrows beyond all four borders widen the rasterized box to the whole frame and draw nothing
    far = [(cam.target + 3 * edge * d, up) for d in (right, -right, up, -up)]
    np.testing.assert_array_equal(img, r.render(v, axes=far))
    sky = r.render(v + 100 * up)  # far above the view: nothing of it drawn
    assert (sky == sky[:, :1]).all() and sky[-1, 0].sum() < sky[0, 0].sum()  # the sky gradient, row by row
    xy, _ = cam.project(v)
    (x0, y0), (x1, y1) = np.floor(xy.min(0)).astype(int) - 1, np.ceil(xy.max(0)).astype(int) + 1
    outside = np.ones(img.shape[:2], bool)
    outside[y0:y1, x0:x1] = False
    assert (img[outside] == sky[outside]).all() and (img[~outside] != sky[~outside]).any(-1).mean() > 0.5
    drawn = (r.render(v + edge * right) != sky).any(-1)  # centred on the right border: half out of the frame
    assert drawn[:, -1].any() and drawn[:, 140:].mean() > 0.05 and not drawn[:, :100].any()


def test_contact_sheet_tiles_of_one_motion_share_its_camera(tmp_path, box_mesh):
    """Tiles given the motion as ``framing`` keep one camera and floor, so a box lifted over the motion is drawn
    higher in its last tile; framed on their own, the two tiles are the same picture."""
    import imageio.v3 as iio

    v = np.asarray(box_mesh.vertices)
    frames = np.stack([v, v + [0.0, 0.0, 1.0]])
    size = (80, 60)

    def tiles(*framing):
        path = render.contact_sheet([(frames[0], box_mesh.faces, None, "", *framing),
                                     (frames[1], box_mesh.faces, None, "", *framing)],
                                    tmp_path / "sheet.png", cols=2, size=size)
        img = iio.imread(path).astype(int)
        a, b = img[4:64, 4:84], img[4:64, 88:168]  # the grid's 4-pixel padding
        row = lambda t: np.flatnonzero((t.sum(-1) < 200).any(1)).mean()  # noqa: E731  mean row of the outline
        return a, b, row

    a, b, row = tiles()
    np.testing.assert_array_equal(a, b)
    a, b, row = tiles(frames)
    assert row(b) < row(a) - 5  # lifted: higher in the picture
    with pytest.raises(render.ConfigError, match="framing"):
        render.contact_sheet([(v, box_mesh.faces, None, "", frames, frames)], tmp_path / "x.png")


def test_facing_turn_points_the_camera_at_the_side_that_moves():
    """``facing_turn``: a cabinet whose -x front moves gets its cameras turned to face -x (the first preset then
    sits 30 deg round from that side, as it sits from -y unturned); motion on the preset's own side, no motion
    and central motion (a whole toy squashed) leave the preset."""
    from kinemesh.viz.render import _VIEW_PRESETS, facing_turn

    rng = np.random.default_rng(0)
    rest = rng.uniform([-0.3, -0.4, 0.0], [0.3, 0.4, 0.8], size=(2000, 3))
    front = rest[:, 0] < -0.25
    opened = rest.copy()
    opened[front, 0] -= 0.2  # the front (a door) swings out towards -x
    frames = np.stack([rest, opened])
    turn = facing_turn(rest, frames)
    cam = np.radians(_VIEW_PRESETS[0][0] + turn)
    assert abs(turn - (-90.0)) < 10.0 and np.cos(cam) < -0.8  # the camera looks from the -x side
    side = rest.copy()
    side[rest[:, 1] < -0.35, 1] -= 0.2  # the -y side moves: the preset already faces it
    assert abs(facing_turn(rest, np.stack([rest, side]))) < 10.0
    assert facing_turn(rest, np.stack([rest, rest])) == 0.0
    assert facing_turn(rest, np.stack([rest, rest * [1.0, 1.0, 0.7]])) == 0.0  # squashed: central
