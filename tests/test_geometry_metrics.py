"""Metrics against analytic values and brute-force references."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from kinemesh.errors import ConfigError
from kinemesh.geometry import metrics


# ------------------------------------------------- brute-force references the fast metrics are checked against
def point_to_surface_distance_reference(points, vertices, faces, squared: bool = False) -> np.ndarray:
    """Brute-force reference for :func:`point_to_surface_distance` (every point against every triangle).

    O(n * M); only for small inputs (tests).
    """
    q = metrics._points(points, "points")
    v = metrics._points(vertices, "vertices")
    f = metrics._faces(faces, len(v))
    out = np.empty(len(q))
    for i, p in enumerate(q):
        pp = np.broadcast_to(p, (len(f), 3))
        out[i] = metrics.point_triangle_sqdist(pp, v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]).min()
    return out if squared else np.sqrt(out)


def chamfer_reference(
    a, b, a_faces=None, b_faces=None, n_samples: int = 10000, seed: int = 0, squared=False, one_sided=False
) -> float:
    """Brute-force numpy reference of :func:`chamfer` (same samples, exhaustive distances); small inputs only."""
    av, af = metrics._mesh_or_points(a, a_faces, "a")
    bv, bf = metrics._mesh_or_points(b, b_faces, "b")

    def dist(p, v, f):
        if f is None:
            d2 = ((p[:, None, :] - v[None, :, :]) ** 2).sum(-1).min(axis=1)
        else:
            d2 = point_to_surface_distance_reference(p, v, f, squared=True)
        return d2 if squared else np.sqrt(d2)

    d_ab = dist(metrics._samples(av, af, n_samples, seed, 0), bv, bf)
    if one_sided:
        return float(d_ab.mean())
    d_ba = dist(metrics._samples(bv, bf, n_samples, seed, 1), av, af)
    return float(0.5 * (d_ab.mean() + d_ba.mean()))


def _unit_square(z=0.0):
    v = np.array([[0, 0, z], [1, 0, z], [1, 1, z], [0, 1, z]], dtype=float)
    return v, np.array([[0, 1, 2], [0, 2, 3]])


# ---------------------------------------------------------------------------------------- point-triangle
def test_point_triangle_distance_regions():
    a, b, c = np.array([0.0, 0, 0]), np.array([1.0, 0, 0]), np.array([0.0, 1, 0])
    p = np.array([
        [0.2, 0.2, 0.5],  # above the interior -> plane distance 0.5
        [0.2, 0.2, -2.0],  # below -> 2
        [-1.0, -1.0, 0.0],  # vertex region of a -> sqrt 2
        [0.5, -1.0, 1.0],  # edge ab region -> sqrt(1 + 1)
        [1.0, 1.0, 0.0],  # edge bc region -> distance to the hypotenuse: sqrt(2)/2
        [3.0, 0.0, 0.0],  # vertex b -> 2
    ])
    n = len(p)
    d2 = metrics.point_triangle_sqdist(p, np.tile(a, (n, 1)), np.tile(b, (n, 1)), np.tile(c, (n, 1)))
    np.testing.assert_allclose(np.sqrt(d2), [0.5, 2.0, np.sqrt(2), np.sqrt(2), np.sqrt(2) / 2, 2.0], atol=1e-12)
    # a degenerate (collinear) triangle behaves like its longest segment
    d2 = metrics.point_triangle_sqdist(np.array([[0.5, 1.0, 0.0]]), a[None], b[None], np.array([[2.0, 0, 0]]))
    assert np.sqrt(d2[0]) == pytest.approx(1.0)


def test_point_to_surface_of_points_above_a_plane():
    v, f = _unit_square()
    rng = np.random.default_rng(0)
    h = rng.random(200) * 0.7
    p = np.column_stack([rng.random(200), rng.random(200), h])
    np.testing.assert_allclose(metrics.point_to_surface_distance(p, v, f), h, atol=1e-12)
    outside = np.array([[2.0, 0.5, 0.0], [-1.0, -1.0, 1.0]])
    np.testing.assert_allclose(metrics.point_to_surface_distance(outside, v, f), [1.0, np.sqrt(3)], atol=1e-12)


@pytest.mark.parametrize("kind", ["sphere", "annulus", "box", "random_soup"])
def test_fast_point_to_surface_matches_brute_force(kind):
    rng = np.random.default_rng(1)
    if kind == "sphere":
        m = trimesh.creation.icosphere(3)
    elif kind == "annulus":
        m = trimesh.creation.annulus(0.3, 0.6, 0.2)
    elif kind == "box":
        m = trimesh.creation.box(extents=(1.0, 0.2, 3.0))
    else:  # overlapping triangles of very different sizes, including degenerate ones
        v = rng.normal(size=(300, 3)) * rng.choice([0.01, 0.1, 1.0], size=(300, 1))
        f = rng.integers(0, 300, size=(200, 3))
        f[:5, 2] = f[:5, 1]
        m = trimesh.Trimesh(v, f, process=False)
    q = np.concatenate([rng.normal(size=(300, 3)), rng.normal(size=(100, 3)) * 0.05])  # far, near and inside
    fast = metrics.point_to_surface_distance(q, m.vertices, m.faces)
    ref = point_to_surface_distance_reference(q, m.vertices, m.faces)
    np.testing.assert_allclose(fast, ref, atol=1e-12)
    ref_trimesh = trimesh.proximity.closest_point(m, q)[1] if kind != "random_soup" else ref
    np.testing.assert_allclose(fast, np.abs(ref_trimesh), atol=1e-9)


# ------------------------------------------------------------------------------------------------ Chamfer
def test_chamfer_point_sets_with_known_nearest_distances():
    a = np.array([[0.0, 0, 0], [10.0, 0, 0]])
    b = np.array([[0.0, 0, 1], [10.0, 0, 3], [10.0, 0, 4]])
    # a->b: 1, 3 (mean 2); b->a: 1, 3, 4 (mean 8/3)
    assert metrics.chamfer(a, b) == pytest.approx(0.5 * (2 + 8 / 3))
    assert metrics.chamfer(a, b, squared=True) == pytest.approx(0.5 * ((1 + 9) / 2 + (1 + 9 + 16) / 3))
    assert metrics.chamfer(a, b, one_sided=True) == pytest.approx(2.0)
    assert metrics.chamfer(a, a) == 0.0


def test_chamfer_to_surface_has_no_sampling_floor():
    v, f = _unit_square()
    assert metrics.chamfer(v, v, f, f, n_samples=500) == pytest.approx(0.0, abs=1e-12)
    # a parallel square lifted by 0.1 is at distance exactly 0.1 from every sample, in both directions
    v2, f2 = _unit_square(0.1)
    assert metrics.chamfer(v, v2, f, f2, n_samples=500) == pytest.approx(0.1, abs=1e-12)
    assert metrics.chamfer(v, v2, f, f2, n_samples=500, squared=True) == pytest.approx(0.01, abs=1e-12)
    # a point cloud on the plane z = 0.25 against the mesh: one-sided distance is exactly 0.25
    pts = np.column_stack([np.random.default_rng(0).random((50, 2)), np.full(50, 0.25)])
    assert metrics.chamfer(pts, v, b_faces=f, one_sided=True) == pytest.approx(0.25, abs=1e-12)
    # accepts trimesh objects
    box = trimesh.creation.box()
    assert metrics.chamfer(box, box, n_samples=200) == pytest.approx(0.0, abs=1e-12)


def test_chamfer_fast_matches_reference():
    m1 = trimesh.creation.icosphere(2)
    m2 = trimesh.creation.box(extents=(1.0, 1.5, 0.5))
    m2.apply_translation([0.2, 0.0, 0.1])
    for kw in ({}, {"squared": True}, {"one_sided": True}):
        fast = metrics.chamfer(m1.vertices, m2.vertices, m1.faces, m2.faces, n_samples=300, seed=4, **kw)
        ref = chamfer_reference(m1.vertices, m2.vertices, m1.faces, m2.faces, n_samples=300, seed=4, **kw)
        assert fast == pytest.approx(ref, abs=1e-12)
    fast = metrics.chamfer(m1.vertices, m2.vertices, m1.faces, None, n_samples=300)
    ref = chamfer_reference(m1.vertices, m2.vertices, m1.faces, None, n_samples=300)
    assert fast == pytest.approx(ref, abs=1e-12)


# ---------------------------------------------------------------------------------------------------- IoU
def test_volumetric_iou_of_offset_unit_cubes_is_one_third():
    a = trimesh.creation.box()
    b = trimesh.creation.box()
    b.apply_translation([0.5, 0.0, 0.0])
    assert metrics.volumetric_iou(a, b, n_points=20000, seed=0) == pytest.approx(1 / 3, abs=0.01)
    assert metrics.volumetric_iou(a, b, method="voxel", voxel_resolution=30) == pytest.approx(1 / 3, abs=0.02)
    assert metrics.volumetric_iou(a, a, n_points=2000) == 1.0
    far = trimesh.creation.box()
    far.apply_translation([3.0, 0.0, 0.0])
    assert metrics.volumetric_iou(a, far, n_points=2000) == 0.0
    # (vertices, faces) tuples work too
    assert metrics.volumetric_iou((a.vertices, a.faces), (b.vertices, b.faces), n_points=20000) == pytest.approx(
        1 / 3, abs=0.01)
    with pytest.raises(ConfigError):
        metrics.volumetric_iou(a, b, method="magic")


def test_volumetric_iou_non_watertight_uses_voxels():
    a = trimesh.creation.box()
    b = trimesh.creation.box()
    b.apply_translation([0.5, 0.0, 0.0])
    sub = a.subdivide_to_size(0.03)
    open_a = trimesh.Trimesh(sub.vertices, sub.faces[:-1], process=False)  # one small triangle missing
    assert not open_a.is_watertight
    # voxel fill closes the small hole, so the analytic value is still recovered
    assert metrics.volumetric_iou(open_a, b, voxel_resolution=30) == pytest.approx(1 / 3, abs=0.03)


def test_voxel_keys_match_trimesh_subdivision_voxelizer():
    """The barycentric-grid voxelizer marks the voxels the surface crosses, as trimesh's subdivision voxelizer
    does (surface points at most pitch / 2 apart, rounded to the lattice), without subdividing: on a box of two
    huge triangles per side, a sphere and a long sliver off axis, every surface voxel touches the surface, the
    sets agree but for voxels the surface grazes, and the IoU is trimesh's."""
    from trimesh.voxel import creation

    def reference(mesh, pitch):
        surface = creation.voxelize(mesh, pitch=pitch)
        filled = surface.copy().fill()
        def keys(grid):
            idx = np.round(np.asarray(grid.points) / pitch).astype(np.int64) + (1 << 20)
            return np.unique((idx[:, 0] << 42) | (idx[:, 1] << 21) | idx[:, 2])
        return keys(surface), keys(filled)

    def centres(keys, pitch):
        return (np.stack([(keys >> 42) & 0x1FFFFF, (keys >> 21) & 0x1FFFFF, keys & 0x1FFFFF], 1) - (1 << 20)) * pitch

    box = trimesh.creation.box([1.03, 0.97, 1.11])  # sides off the voxel lattice
    box.apply_translation([0.013, 0.021, -0.007])
    sphere = trimesh.creation.icosphere(3)
    sliver = trimesh.Trimesh([[0.1, 0.2, 0.3], [1.7, 0.9, 0.5], [0.12, 0.23, 0.36]], [[0, 1, 2]], process=False)
    for mesh, pitch in ((box, 1 / 16), (sphere, 1 / 20), (sliver, 0.05)):
        surf, filled = metrics._voxel_keys(mesh, pitch)
        ref_surf, ref_filled = reference(mesh, pitch)
        d = metrics.point_to_surface_distance(centres(surf, pitch), mesh.vertices, mesh.faces)
        assert d.max() <= 0.5 * np.sqrt(3) * pitch + 1e-9  # each marked voxel touches the surface
        assert len(np.intersect1d(surf, ref_surf)) >= 0.9 * len(ref_surf)
        assert len(np.intersect1d(filled, ref_filled)) >= 0.9 * len(ref_filled)
    surf, filled = metrics._voxel_keys(box, 1 / 16)
    assert len(filled) - 0.5 * len(surf) == pytest.approx(1.03 * 0.97 * 1.11 * 16 ** 3, rel=0.05)  # inside filled
    moved = sphere.copy()
    moved.apply_translation([0.3, 0.1, 0.0])
    ours = metrics.volumetric_iou(sphere, moved, method="voxel", voxel_resolution=32)
    original = metrics._voxel_keys
    try:
        metrics._voxel_keys = reference
        assert ours == pytest.approx(metrics.volumetric_iou(sphere, moved, method="voxel", voxel_resolution=32),
                                     abs=0.01)
    finally:
        metrics._voxel_keys = original


# ------------------------------------------------------------------------------------------- joint errors
def test_axis_angle_error_is_sign_invariant():
    assert metrics.axis_angle_error_deg([0, 0, 1], [0, 0, -1]) == pytest.approx(0.0, abs=1e-12)
    assert metrics.axis_angle_error_deg([0, 0, 2], [0, 1, 0]) == pytest.approx(90.0)
    assert metrics.axis_angle_error_deg([1, 0, 0], [1, 1, 0]) == pytest.approx(45.0)
    assert metrics.axis_angle_error_deg([1, 0, 0], [-1, 1, 0]) == pytest.approx(45.0)
    small = metrics.axis_angle_error_deg([1, 0, 0], [1, 1e-9, 0])
    assert small == pytest.approx(np.degrees(1e-9), rel=1e-6)
    out = metrics.axis_angle_error_deg(np.eye(3), -np.eye(3))
    np.testing.assert_allclose(out, 0.0, atol=1e-12)
    with pytest.raises(ConfigError):
        metrics.axis_angle_error_deg([0, 0, 0], [1, 0, 0])


def test_axis_line_distance_skew_parallel_intersecting():
    # x axis and a line along y through (0, 0, 2), given at points above each other: skew, distance 2
    assert metrics.axis_line_distance([0, 0, 0], [1, 0, 0], [0, 0, 2], [0, 3, 0]) == pytest.approx(2.0)
    # ... given at points 5 m apart along x: measured near them, not where the lines pass closest
    assert metrics.axis_line_distance([0, 0, 0], [1, 0, 0], [5, 0, 2], [0, 3, 0]) == pytest.approx(np.hypot(2.5, 2))
    # parallel lines 0.5 apart (opposite directions and offset origins do not matter)
    assert metrics.axis_line_distance([0, 0, 0], [0, 0, 1], [0.3, 0.4, 7], [0, 0, -2]) == pytest.approx(0.5)
    # intersecting lines
    assert metrics.axis_line_distance([1, 1, 1], [1, 0, 0], [1, 1, 1], [0, 1, 1]) == pytest.approx(0.0)
    # prismatic origin error is the point distance
    assert metrics.joint_origin_error([0, 0, 0], [1, 0, 0], [0, 3, 4], [1, 0, 0], "prismatic") == pytest.approx(5.0)
    assert metrics.joint_origin_error([0, 0, 0], [1, 0, 0], [7, 3, 4], [1, 0, 0], "revolute") == pytest.approx(5.0)


def test_type_precision_recall_on_tiny_confusion():
    true = ["revolute", "revolute", "prismatic", "prismatic", "fixed"]
    pred = ["revolute", "prismatic", "prismatic", "prismatic", "revolute"]
    r = metrics.type_precision_recall(pred, true, ["revolute", "prismatic", "fixed"])
    assert r["revolute"]["precision"] == pytest.approx(0.5) and r["revolute"]["recall"] == pytest.approx(0.5)
    assert r["prismatic"]["precision"] == pytest.approx(2 / 3) and r["prismatic"]["recall"] == pytest.approx(1.0)
    assert r["prismatic"]["f1"] == pytest.approx(0.8)
    assert np.isnan(r["fixed"]["precision"]) and r["fixed"]["recall"] == 0.0 and r["fixed"]["support"] == 1
    with pytest.raises(ConfigError):
        metrics.type_precision_recall(pred[:2], true, ["revolute"])


# ------------------------------------------------------------------------------------------ motion metrics
def test_motion_explained_and_vertex_error():
    rest = np.zeros((4, 3))
    target = np.ones((2, 4, 3))
    assert metrics.motion_explained(target, target, rest) == pytest.approx(1.0)
    assert metrics.motion_explained(np.broadcast_to(rest, target.shape), target, rest) == pytest.approx(0.0)
    assert metrics.motion_explained(0.5 * target, target, rest) == pytest.approx(0.5)
    # one vertex of four perfect, the others untouched: a quarter of the mean error removed
    fit = np.broadcast_to(rest, target.shape).copy()
    fit[:, 0] = target[:, 0]
    assert metrics.motion_explained(fit, target, rest) == pytest.approx(0.25)
    assert np.isnan(metrics.motion_explained(target, np.zeros((2, 4, 3)), rest))
    a = np.zeros((5, 3))
    b = np.zeros((5, 3))
    b[:, 0] = [0, 1, 2, 3, 4]
    assert metrics.mean_vertex_error(a, b) == pytest.approx(2.0)
    with pytest.raises(ConfigError):
        metrics.mean_vertex_error(a, b[:4])


def test_within_part_rigidity():
    rng = np.random.default_rng(0)
    rest = rng.random((40, 3))
    rest[0] = 0.0
    rest[1] = 1.0  # bounding box longest side exactly 1
    ids = np.repeat([0, 1], 20)
    # rigid motion of each part separately -> 0
    from scipy.spatial.transform import Rotation

    R = Rotation.from_euler("z", 40, degrees=True).as_matrix()
    posed = rest.copy()
    posed[20:] = posed[20:] @ R.T + 3.0
    assert metrics.within_part_rigidity(rest, posed, ids) == pytest.approx(0.0, abs=1e-12)
    # uniform scaling by 1.1 of every part: every within-part distance grows by 10 %
    scaled = rest * 1.1
    d = []
    for p in range(2):
        x = rest[ids == p]
        dd = np.linalg.norm(x[:, None] - x[None], axis=2)
        d.append(dd[np.triu_indices(20, 1)].mean())
    val = metrics.within_part_rigidity(rest, scaled, ids, n_pairs=20000)
    assert val == pytest.approx(0.1 * np.mean(d), rel=0.05)
    # frames (T, N, 3) and ignored negative ids
    ids2 = ids.copy()
    ids2[:5] = -1
    v = metrics.within_part_rigidity(rest, np.stack([posed, posed]), ids2)
    assert v == pytest.approx(0.0, abs=1e-12)


def test_axis_line_distance_is_the_separation_where_the_joint_is():
    """Parallel lines: their separation; lines crossing at their given points: 0; skew perpendicular lines: the
    common perpendicular; nearly parallel lines on opposite edges of a door: the door's width (the skew-line
    formula |w . (d1 x d2)| / |d1 x d2| reads them a few centimetres apart)."""
    axis_line_distance = metrics.axis_line_distance
    z = [0.0, 0.0, 1.0]
    assert axis_line_distance([0, 0, 0], z, [0.3, 0.4, 2.0], z) == pytest.approx(0.5, abs=1e-12)
    assert axis_line_distance([0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 1, 1]) == pytest.approx(0.0, abs=1e-12)
    assert axis_line_distance([0, 0, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0]) == pytest.approx(1.0, abs=1e-12)
    tilt = [0.0, np.sin(np.radians(0.1)), np.cos(np.radians(0.1))]  # tilted towards the other line
    d = axis_line_distance([-0.55, 0.2, 0.7], z, [-0.53, -0.2, 0.15], tilt)
    assert d == pytest.approx(np.hypot(0.02, 0.4), abs=2e-3)
    w = np.array([-0.53, -0.2, 0.15]) - np.array([-0.55, 0.2, 0.7])
    cr = np.cross(z, tilt)
    assert abs(w @ cr) / np.linalg.norm(cr) < 0.03  # what the skew-line formula gives
    assert axis_line_distance([0, 0, 0], z, [0.3, 0.4, 2.0], [0, 0, -2.0]) == pytest.approx(0.5)  # sign, length
