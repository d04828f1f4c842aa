"""Articulation on real-asset-like input: open-shell validity sweeps, asset-realism augmentation, and
validity-filtered decoding across motion types."""

from __future__ import annotations

import numpy as np
import pytest

from kinemesh.data.articulated import ArticulatedObject, Joint, Part


# ---------------------------------------------------------------------------------------------- fixtures
def _quad(c, u, v) -> tuple[np.ndarray, np.ndarray]:
    """A single-sided rectangle (an open shell of zero thickness) centred at ``c`` with half-sides ``u``, ``v``."""
    c, u, v = (np.asarray(x, float) for x in (c, u, v))
    return np.array([c - u - v, c + u - v, c + u + v, c - u + v]), np.array([[0, 1, 2], [0, 2, 3]])


def _sheets(quads) -> tuple[np.ndarray, np.ndarray]:
    vs, fs, off = [], [], 0
    for v, f in quads:
        vs.append(v)
        fs.append(f + off)
        off += len(v)
    return np.concatenate(vs), np.concatenate(fs)


def shell_drawer_cabinet() -> ArticulatedObject:
    """A carcass and a drawer made of zero-thickness sheets (as real PartNet-Mobility parts often are):
    0.6 x 0.5 x 0.3 m carcass open at -Y, a drawer (front + open tray) sliding out along -Y."""
    W, D, H = 0.6, 0.5, 0.3
    body = _sheets([_quad([0, 0, 0], [W / 2, 0, 0], [0, D / 2, 0]), _quad([0, 0, H], [W / 2, 0, 0], [0, D / 2, 0]),
                    _quad([-W / 2, 0, H / 2], [0, D / 2, 0], [0, 0, H / 2]),
                    _quad([W / 2, 0, H / 2], [0, D / 2, 0], [0, 0, H / 2]),
                    _quad([0, D / 2, H / 2], [W / 2, 0, 0], [0, 0, H / 2])])
    w, d, h, y0 = W / 2 - 0.01, 0.2, H / 2 - 0.02, -D / 2 - 0.004
    drawer = _sheets([_quad([0, y0, H / 2], [W / 2, 0, 0], [0, 0, H / 2]),
                      _quad([0, y0 + d, H / 2 - h], [w, 0, 0], [0, d, 0]),
                      _quad([-w, y0 + d, H / 2], [0, d, 0], [0, 0, h]), _quad([w, y0 + d, H / 2], [0, d, 0], [0, 0, h]),
                      _quad([0, y0 + 2 * d, H / 2], [w, 0, 0], [0, 0, h])])
    parts = [Part("body", *body, "body"), Part("drawer", *drawer, "drawer")]
    return ArticulatedObject(parts, [Joint("slide", "prismatic", "body", "drawer", (0, -1, 0), (0, y0, H / 2),
                                           (0, 0.3))], "drawer_cabinet", "shell_drawer_cabinet")


def _drawer_candidates(obj):
    from kinemesh.articulation.candidates import Candidate, part_box

    box = part_box(obj.part("drawer").vertices)
    y0 = float(obj.part("drawer").vertices[:, 1].min())
    return {
        "out": Candidate("prismatic", np.array([0, -1.0, 0]), box.center, (0, 0.3), 1, -1),
        "into": Candidate("prismatic", np.array([0, 1.0, 0]), box.center, (0, 0.3), 1, 1),
        "side": Candidate("prismatic", np.array([1.0, 0, 0]), box.center, (0, 0.3), 0, 1),
        "up": Candidate("prismatic", np.array([0, 0, 1.0]), box.center, (0, 0.2), 2, 1),
        # the drawer read as a door hinged at its front-left edge, or as a flap hinged at its front-bottom edge
        "door": Candidate("revolute", np.array([0, 0, 1.0]), np.array([-0.3, y0, 0.15]), (0, -np.pi / 2), 2, 1),
        "flap": Candidate("revolute", np.array([1.0, 0, 0]), np.array([0, y0, 0.0]), (0, -np.pi / 2), 0, 1),
    }


# ---------------------------------------------------------------------------------------------- validity
@pytest.mark.parametrize("swept", [False, True])
def test_validity_on_open_shells_accepts_slide_rejects_rotations(swept):
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig, check_candidates

    obj = shell_drawer_cabinet()
    cands = _drawer_candidates(obj)
    check_candidates(OccupancyGrid(obj, ValidityConfig(swept=swept, collision_fraction=0.02 if swept else 0.005)),
                     ["drawer"], list(cands.values()))
    assert cands["out"].valid, cands["out"].info
    for k in ("into", "side", "up", "door", "flap"):
        assert not cands[k].valid, (k, cands[k].info)


def test_swept_validity_separates_wrong_motions_by_a_wide_margin():
    """The per-sample swept measure counts samples that newly enter the rest anywhere along a finely
    sampled sweep, so thin walls are not stepped over: on the zero-thickness cabinet every wrong motion
    collides with at least 15% of the drawer's samples (the coarse max-minus-rest measure gives a few %)."""
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig, check_candidates

    obj = shell_drawer_cabinet()
    cands = _drawer_candidates(obj)
    check_candidates(OccupancyGrid(obj, ValidityConfig(swept=True)), ["drawer"], list(cands.values()))
    assert cands["out"].info["collision"] == 0.0
    assert min(cands[k].info["collision"] for k in ("into", "side", "up", "door", "flap")) > 0.15


def test_swept_validity_accepts_the_true_hinge_of_a_watertight_door():
    from tests.test_articulation import two_door_cabinet

    from kinemesh.articulation.candidates import Candidate
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig, check_candidates

    obj = two_door_cabinet()
    j = obj.joints[0]
    hinge = Candidate("revolute", j.axis, j.origin, (0, np.pi / 2), 2, -1)
    wrong_way = Candidate("revolute", j.axis, j.origin, (0, -np.pi / 2), 2, -1)
    check_candidates(OccupancyGrid(obj, ValidityConfig(swept=True, collision_fraction=0.02)), ["door_left"],
                     [hinge, wrong_way])
    assert hinge.valid, hinge.info
    assert not wrong_way.valid and wrong_way.info["collision"] > 0.1


def flush_oven(gap: float = 0.0) -> ArticulatedObject:
    """A solid carcass (plinth, control panel, sides, back) with a thick door set flush in its front opening:
    touching its sides, its top face ``gap`` m under the control panel (real ovens and dishwashers are so)."""
    from tests.test_articulation_panel import _part

    top = 0.7 + gap
    body = _part("body", ((0, 0, 0), (0.6, 1.0, 0.2)), ((0, 0, top), (0.6, 1.0, 0.9)),
                 ((0, 0, 0.2), (0.6, 0.05, top)), ((0, 0.95, 0.2), (0.6, 1.0, top)),
                 ((0.55, 0.05, 0.2), (0.6, 0.95, top)))
    door = _part("door", ((0.0, 0.05, 0.2), (0.08, 0.95, 0.7)))
    hinge = Joint("hinge", "revolute", "body", "door", (0, 1, 0), (0, 0.5, 0.2), (-np.pi / 2, 0))
    return ArticulatedObject([body, door], [hinge], "oven", "flush_oven")


@pytest.mark.parametrize("gap", [0.0, 0.002])
def test_swept_validity_with_contact_slack_lets_a_flush_door_slide_along_what_it_touches(gap):
    """A door flush under its frame touches it at rest; turning outward about its bottom (or top) edge, its
    top face rises a fraction of a voxel while it slides out from under the frame, which the plain swept test
    counts as collision. With ``contact_slack`` a touching sample collides only when it moves more than that
    many voxels towards what it touches or enters the rest's core: outward hinges pass, inward ones do not."""
    from kinemesh.articulation.candidates import Candidate
    from kinemesh.geometry.validity import OccupancyGrid, ValidityConfig, check_candidates

    obj = flush_oven(gap)
    y, z, c = np.array([0, 1.0, 0]), np.array([0, 0, 1.0]), np.array([0.04, 0.5, 0.45])
    sweeps = {"bottom, out": Candidate("revolute", y, np.array([0.0, 0.5, 0.2]), (0, -np.pi / 2), 1, 1),
              "bottom, in": Candidate("revolute", y, np.array([0.0, 0.5, 0.2]), (0, np.pi / 2), 1, 1),
              "top, out": Candidate("revolute", y, np.array([0.0, 0.5, 0.7]), (0, np.pi / 2), 1, 1),
              "top, in": Candidate("revolute", y, np.array([0.0, 0.5, 0.7]), (0, -np.pi / 2), 1, 1),
              "slide aside": Candidate("prismatic", y, c, (0, 0.3), 1, 1),
              "slide up": Candidate("prismatic", z, c, (0, 0.3), 2, 1)}
    cfg = dict(n_points=400, steps=6, swept=True, collision_fraction=0.02)
    plain = {k: Candidate(s.type, s.axis, s.origin, s.limits, 0, 1) for k, s in sweeps.items()}
    check_candidates(OccupancyGrid(obj, ValidityConfig(**cfg)), ["door"], list(plain.values()))
    check_candidates(OccupancyGrid(obj, ValidityConfig(**cfg, contact_slack=0.5)), ["door"],
                     list(sweeps.values()))
    assert not plain["bottom, out"].valid and not plain["top, out"].valid  # contact read as collision
    assert sweeps["bottom, out"].valid and sweeps["top, out"].valid, {k: c.info for k, c in sweeps.items()}
    for k in ("bottom, in", "top, in", "slide aside", "slide up"):
        assert not sweeps[k].valid and sweeps[k].info["collision"] > 0.1, (k, sweeps[k].info)


# ---------------------------------------------------------------------------------------------- realism
def _chain() -> ArticulatedObject:
    """A root box, an arm on a revolute joint, a slider on the arm (a two-joint chain)."""
    import trimesh

    def part(name, lo, hi):
        m = trimesh.creation.box(extents=np.subtract(hi, lo))
        m.apply_translation(0.5 * np.add(lo, hi))
        return Part(name, np.asarray(m.vertices), np.asarray(m.faces), name)

    parts = [part("base", [-0.2, -0.2, 0], [0.2, 0.2, 0.1]), part("arm", [-0.02, -0.02, 0.1], [0.02, 0.3, 0.14]),
             part("slider", [-0.03, 0.2, 0.14], [0.03, 0.26, 0.18])]
    joints = [Joint("hinge", "revolute", "base", "arm", (1, 0, 0), (0, 0, 0.12), (-1.0, 1.5)),
              Joint("slide", "prismatic", "arm", "slider", (0, 1, 0), (0, 0.23, 0.16), (-0.1, 0.05))]
    return ArticulatedObject(parts, joints, "test", "chain")


def test_repose_keeps_every_configuration():
    """Re-posing at values v and then moving by u gives the original object at v + u (joints exact)."""
    from kinemesh.articulation.realism import repose

    obj = _chain()
    v = {"hinge": 0.6, "slide": -0.04}
    new = repose(obj, v)
    assert new.joints[0].limits == pytest.approx((-1.6, 0.9))
    assert new.joints[1].limits == pytest.approx((-0.06, 0.09))
    u = {"hinge": -0.3, "slide": 0.02}
    a = new.posed_parts(u)
    b = obj.posed_parts({k: v[k] + u[k] for k in v})
    for name in a:
        np.testing.assert_allclose(a[name], b[name], atol=1e-12)


def test_stretch_maps_joint_lines_and_prismatic_travel():
    from kinemesh.articulation.realism import stretch

    obj = _chain()
    s = np.array([2.0, 0.5, 1.5])
    new = stretch(obj, s)
    np.testing.assert_allclose(new.part("arm").vertices, obj.part("arm").vertices * s)
    np.testing.assert_allclose(new.joints[0].axis, [1, 0, 0])
    np.testing.assert_allclose(new.joints[0].origin, [0, 0, 0.18])
    assert new.joints[1].limits == pytest.approx((-0.05, 0.025))  # travel along Y scales by 0.5
    # the slider moved by its (scaled) joint lands where the scaled original lands
    np.testing.assert_allclose(new.posed_parts({"slide": 0.025})["slider"],
                               obj.posed_parts({"slide": 0.05})["slider"] * s, atol=1e-12)


def test_open_shell_and_sheet_make_real_asset_like_parts():
    import trimesh

    from kinemesh.articulation.candidates import part_box
    from kinemesh.articulation.realism import open_shell, sheet

    board = trimesh.creation.box(extents=(0.5, 0.02, 0.8))
    p = Part("door", np.asarray(board.vertices), np.asarray(board.faces), "door")
    shell = open_shell(p, (0, 1, 0))
    assert len(shell.faces) == 10 and not trimesh.Trimesh(shell.vertices, shell.faces).is_watertight
    flat = sheet(p, part_box(p.vertices))
    np.testing.assert_allclose(flat.vertices[:, 1], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.ptp(flat.vertices, axis=0), [0.5, 0.0, 0.8], atol=1e-12)


def test_augment_keeps_ground_truth_consistent():
    """An augmented synthetic object still moves its parts rigidly by its (transformed) joints, and its
    network samples build."""
    from kinemesh.articulation.dataset import build_object, part_samples
    from kinemesh.articulation.predictor import PredictorConfig
    from kinemesh.articulation.realism import RealismConfig, augment

    rng = np.random.default_rng(3)
    obj = build_object("cabinet", 7)
    cfg = RealismConfig(p_yaw=1.0, p_repose=1.0, p_stretch=0.0, p_open=0.5, p_sheet=0.5)
    new = augment(obj, rng, cfg)
    assert [p.name for p in new.parts] == [p.name for p in obj.parts]
    assert len(new.movable_joints) == len(obj.movable_joints)
    for j in new.movable_joints:
        lo, hi = j.limits
        assert lo <= 1e-9 <= hi + 1e-9  # the new rest pose lies inside the range
        assert abs(np.linalg.norm(j.axis) - 1) < 1e-9
    samples = part_samples(new, rng, PredictorConfig(n_part=16, n_shape=16))
    assert len(samples) == len([p for p in obj.parts if p.name != obj.root])


# ---------------------------------------------------------------------------------------------- ensemble
def test_ensemble_round_trip_averages_members(tmp_path):
    import torch

    from kinemesh.articulation.predictor import (
        BOX_FEATURES, ArticulationNet, PredictorConfig, PredictorEnsemble, load_predictor, save_predictor,
    )

    cfg = PredictorConfig(n_part=8, n_shape=8, width=16, tokens=4, layers=1, heads=2, fourier=2)
    members = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        members.append(ArticulationNet(cfg).eval())
    save_predictor(PredictorEnsemble(members), tmp_path / "ens", {"note": "test"})
    ens = load_predictor(tmp_path / "ens")
    assert isinstance(ens, PredictorEnsemble) and len(ens.members) == 2
    pts, box = torch.randn(3, 16, 4), torch.randn(3, BOX_FEATURES)
    with torch.no_grad():
        out = ens(pts, box)
        ref = [m(pts, box) for m in members]
    for k in ("type", "axis_cls", "origin_res", "limits"):
        torch.testing.assert_close(out[k], 0.5 * (ref[0][k] + ref[1][k]))


# ---------------------------------------------------------------------------------------------- decoding
def test_validity_decoding_keeps_right_axis_with_wrong_opening_sign():
    """The network's hinge line is right but its limits open the door into the carcass; a less probable
    alternative (a horizontal axis along the door's bottom edge) sweeps freely. The decoding keeps the hinge
    line and mirrors the limits instead of switching axis."""
    from tests.test_articulation import two_door_cabinet

    from kinemesh.articulation.infer import PartPrediction, _choose_valid, geometric_parts, part_tree

    obj = two_door_cabinet()
    parts = geometric_parts(obj)
    root, parents, _ = part_tree(parts)
    j = obj.joints[0]
    bottom = (np.array([1.0, 0, 0]), np.array([0.0, j.origin[1], 0.0]))
    alts = [(0.7, j.axis, j.origin, "revolute", (-2.0, 0.0)), (0.2, bottom[0], bottom[1], "revolute", (0.0, 1.5))]
    pred = PartPrediction("door_left", "revolute", j.axis.copy(), j.origin.copy(), (-2.0, 0.0), "body", 0.7, "door",
                          {"alternatives": alts})
    _choose_valid(parts, root, parents, {"door_left": pred})
    np.testing.assert_allclose(pred.axis, j.axis)
    assert pred.limits == (0.0, 2.0)  # mirrored: the door now opens outward about the same line
    assert pred.info["validity"][0]["valid"] is False and pred.info["validity"][1]["valid"] is True
