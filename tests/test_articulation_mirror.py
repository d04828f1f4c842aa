"""Mirror augmentation of articulated objects (``kinemesh.articulation.realism.mirror``): joints carried
exactly across the reflection, side hinges stay opposite their handle and keep opening outward."""

from __future__ import annotations

import numpy as np
import pytest

from articulation_fixtures import handle_samples_in_door_context
from kinemesh.data.articulated import ArticulatedObject, Joint, Part

M = np.array([-1.0, 1.0, 1.0])


def _box(name, lo, hi, label=None) -> Part:
    import trimesh

    m = trimesh.creation.box(extents=np.subtract(hi, lo))
    m.apply_translation(0.5 * np.add(lo, hi))
    return Part(name, np.asarray(m.vertices, np.float64), np.asarray(m.faces), label or name)


def _all_types() -> ArticulatedObject:
    """Revolute (oblique axis, off-centre line), continuous, prismatic (oblique) and fixed joints, chained."""
    parts = [_box("base", [-0.3, -0.2, 0], [0.2, 0.2, 0.1]), _box("arm", [0.05, -0.02, 0.1], [0.12, 0.3, 0.14]),
             _box("slider", [0.06, 0.2, 0.14], [0.11, 0.26, 0.18]), _box("knob", [-0.2, -0.21, 0.03], [-0.15, -0.2, 0.07]),
             _box("cap", [0.07, 0.22, 0.18], [0.1, 0.24, 0.2])]
    joints = [Joint("hinge", "revolute", "base", "arm", (0.6, 0.3, 0.2), (0.08, 0.01, 0.12), (-1.0, 1.5)),
              Joint("slide", "prismatic", "arm", "slider", (0.3, 1, 0.1), (0.08, 0.23, 0.16), (-0.1, 0.05)),
              Joint("spin", "continuous", "base", "knob", (0.1, -1, 0.05), (-0.17, -0.2, 0.05)),
              Joint("weld", "fixed", "slider", "cap", (0, 0, 1), (0.0, 0.0, 0.0))]
    return ArticulatedObject(parts, joints, "test", "all_types")


def test_posing_the_mirror_equals_mirroring_the_posed_object():
    from kinemesh.articulation.realism import mirror

    obj = _all_types()
    mir = mirror(obj)
    rng = np.random.default_rng(0)
    for _ in range(10):
        v = obj.sample_values(rng)
        a, b = obj.posed_parts(v), mir.posed_parts(v)
        for name in a:
            np.testing.assert_allclose(b[name], a[name] * M, atol=1e-12)
    # limits unchanged, axes: revolute/continuous -(M a) (pseudo-vector), prismatic M a
    j = {x.name: x for x in mir.joints}
    o = {x.name: x for x in obj.joints}
    np.testing.assert_allclose(j["hinge"].axis, -(o["hinge"].axis * M))
    np.testing.assert_allclose(j["spin"].axis, -(o["spin"].axis * M))
    np.testing.assert_allclose(j["slide"].axis, o["slide"].axis * M)
    assert j["hinge"].limits == o["hinge"].limits and j["slide"].limits == o["slide"].limits
    # an involution: mirroring twice gives the object back
    back = mirror(mir)
    for p, q in zip(back.parts, obj.parts):
        np.testing.assert_array_equal(p.vertices, q.vertices)
        np.testing.assert_array_equal(p.faces, q.faces)
    for p, q in zip(back.joints, obj.joints):
        np.testing.assert_allclose(p.axis, q.axis, atol=0)
        np.testing.assert_allclose(p.origin, q.origin, atol=0)
    assert mir.meta["mirrored"] and not back.meta["mirrored"]


def test_mirror_keeps_outward_normals():
    """Faces are re-wound: every closed part keeps a positive signed volume (outward normals)."""
    from kinemesh.articulation.realism import mirror

    def signed_volume(p):
        t = p.vertices[p.faces]
        return float(np.einsum("ij,ij->i", t[:, 0], np.cross(t[:, 1], t[:, 2])).sum() / 6.0)

    obj = _all_types()
    for p, q in zip(obj.parts, mirror(obj).parts):
        assert signed_volume(p) > 0
        assert signed_volume(q) == pytest.approx(signed_volume(p), rel=1e-12)


def test_mirrored_microwave_hinges_opposite_its_handle_and_opens_outward():
    """The microwave's door is always hinged on the left with its handle at the right (free) edge. In the
    mirror the hinge is on the right, the handle on the left, the door still swings out of the front (-Y),
    and the swept validity check accepts the mirrored hinge and rejects opening it the other way."""
    from kinemesh.articulation.candidates import Candidate
    from kinemesh.articulation.dataset import build_object
    from kinemesh.articulation.realism import mirror
    from kinemesh.articulation.validity import OccupancyGrid, ValidityConfig, check_candidates

    obj = build_object("microwave", 0)
    for o, hinge_right in ((obj, False), (mirror(obj), True)):
        j = next(x for x in o.joints if x.child == "door")
        door = o.part("door").vertices
        handle = o.part("door_handle").vertices.mean(0)
        mid = 0.5 * (door[:, 0].min() + door[:, 0].max())
        assert (j.origin[0] > mid) == hinge_right
        assert (handle[0] < mid) == hinge_right  # the handle is on the other side of the door
        assert abs(j.origin[0] - mid) > 0.4 * np.ptp(door[:, 0])  # the hinge line is on the door's edge
        posed = o.posed_parts({j.name: 0.5 * j.limits[1]})
        assert posed["door"].mean(0)[1] < door.mean(0)[1] - 0.05  # swings out towards -Y
        assert posed["door_handle"].mean(0)[1] < handle[1]
        right = Candidate("revolute", j.axis, j.origin, (0, j.limits[1]), 2, 1)
        wrong = Candidate("revolute", j.axis, j.origin, (0, -j.limits[1]), 2, 1)
        check_candidates(OccupancyGrid(o, ValidityConfig(n_points=400, steps=6, swept=True, collision_fraction=0.02)),
                         ["door", "door_handle"], [right, wrong])
        assert right.valid, right.info
        assert not wrong.valid and wrong.info["collision"] > 0.1


def test_augment_mirror_option_and_unchanged_default():
    """``p_mirror`` = 1 always mirrors; the default (0) draws nothing, so the validation protocol's
    realism-augmented objects (``augment(obj, rng)``) are unchanged."""
    from kinemesh.articulation.realism import RealismConfig, augment, mirror

    obj = _all_types()
    out = augment(obj, np.random.default_rng(1), RealismConfig(p_yaw=0, p_repose=0, p_stretch=0, p_open=0,
                                                                p_mirror=1.0))
    ref = mirror(obj)
    for p, q in zip(out.parts, ref.parts):
        np.testing.assert_array_equal(p.vertices, q.vertices)
    assert RealismConfig().p_mirror == 0.0
    ref = np.random.default_rng(5).random(5)
    for p_mirror, draws in ((0.0, 3), (1.0, 4)):  # 3 draws: repose, stretch, yaw; the mirror only when on
        rng = np.random.default_rng(5)
        augment(obj, rng, RealismConfig(p_yaw=0, p_repose=0, p_stretch=0, p_open=0, p_mirror=p_mirror))
        assert rng.random() == ref[draws]
    a, b = augment(obj, np.random.default_rng(7)), augment(obj, np.random.default_rng(7), RealismConfig())
    for p, q in zip(a.parts, b.parts):
        np.testing.assert_array_equal(p.vertices, q.vertices)


def test_training_data_mirrors_about_half_the_objects(monkeypatch):
    """``TrainConfig.p_mirror`` reaches the data generator: with 0.5 about half of the canonical objects are
    mirrored; with 0 none is and no random number is drawn for it."""
    import kinemesh.articulation.train as train

    seen = []
    monkeypatch.setattr(train, "part_samples", lambda obj, rng, cfg, **kw: seen.append(obj.meta.get("mirrored", False)) or [])
    monkeypatch.setattr(train, "build_object", lambda kind, seed: _all_types())
    jobs = [("x", s) for s in range(200)]
    train._gen(jobs, np.random.default_rng(0), None, False, "t", 0, None, 0.5)
    assert 70 < sum(seen) < 130
    seen.clear()
    rng = np.random.default_rng(0)
    train._gen(jobs, rng, None, False, "t", 0, None, 0.0)
    assert not any(seen) and rng.random() == np.random.default_rng(0).random()


@pytest.mark.parametrize("uniform, lo, hi", [(0.0, 0, 8), (0.5, 15, 192)])
def test_shape_context_sees_the_door_handle(uniform, lo, hi):
    """The hinge side of a door is read from its handle, a tiny part: by surface area alone it gets about 1
    of the 192 context samples; with ``shape_uniform`` = 0.5 (shipped) half the context is spread equally
    over the other parts, and the microwave's handle gets tens of samples."""
    from kinemesh.articulation.predictor import PredictorConfig

    counts = handle_samples_in_door_context(PredictorConfig(shape_uniform=uniform), range(5))
    assert lo <= np.mean(counts) <= hi, counts
