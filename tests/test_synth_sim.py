"""Short MuJoCo simulations of every kind: finite, moving frames; limits; stretch; volume; divergence."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from kinemesh.errors import SimulationDivergedError
from kinemesh.synth.articulated_motion import dynamic_sequence, kinematic_sequence
from kinemesh.synth.categories import build
from kinemesh.synth.cloth import grid_sheet, max_edge_stretch, cloth_sequence
from kinemesh.synth.elastic import ACTIONS, LEGACY_SHAPES, elastic_sequence
from kinemesh.synth.flexsim import FlexRun, simulate_flex
from kinemesh.synth.mjcf import flexcomp_spec, new_spec
from kinemesh.synth.tetra import build_cage


def _moving(seq, min_motion: float) -> float:
    assert np.isfinite(seq.frames).all()
    motion = float(np.linalg.norm(seq.frames - seq.rest_vertices[None], axis=-1).max())
    assert motion > min_motion, f"frames barely move ({motion:.4f} m)"
    return motion


@pytest.mark.parametrize("category", ["cabinet", "chest", "chest_of_drawers", "desk_lamp", "assembly"])
def test_dynamic_articulated_moves_within_limits(category):
    if category == "assembly":
        from kinemesh.synth.assemblies import random_assembly

        obj = random_assembly(np.random.default_rng(3))
    else:
        obj = build(category, np.random.default_rng(3), check=False)
    seq = dynamic_sequence(obj, np.random.default_rng(4), duration=1.0, n_frames=10).validate()
    _moving(seq, 0.01)
    assert seq.meta["motion"] == "dynamic" and "conditions" in seq.meta
    for j in obj.movable_joints:
        vals = np.array([c[j.name] for c in seq.meta["joint_values"]])
        if j.limits is not None:  # MuJoCo limits are soft: allow a small overshoot
            tol = 0.03 if j.type == "revolute" else 0.005
            assert vals.min() >= j.limits[0] - tol and vals.max() <= j.limits[1] + tol, (j.name, vals)
    # frames are rigid per part: pairwise distances within a part are preserved
    for pid in np.unique(seq.part_ids):
        idx = np.where(seq.part_ids == pid)[0][:50]
        d0 = np.linalg.norm(seq.rest_vertices[idx, None] - seq.rest_vertices[None, idx], axis=-1)
        d1 = np.linalg.norm(seq.frames[-1][idx, None] - seq.frames[-1][None, idx], axis=-1)
        assert np.abs(d1 - d0).max() < 1e-4


def test_kinematic_configurations_within_limits():
    obj = build("oven", np.random.default_rng(0), check=False)
    seq = kinematic_sequence(obj, np.random.default_rng(1), n_frames=12).validate()
    _moving(seq, 0.01)
    for cfg in seq.meta["joint_values"]:
        for j in obj.movable_joints:
            if j.limits is not None:
                assert j.limits[0] <= cfg[j.name] <= j.limits[1]


def test_gravity_closes_a_released_lid():
    obj = build("chest", np.random.default_rng(0), check=False)
    for seed in range(20):  # find a run whose lid action is "gravity"
        seq = dynamic_sequence(obj, np.random.default_rng(seed), duration=1.5, n_frames=15)
        (cond,) = seq.meta["conditions"]["joints"].values()
        if cond["action"] == "gravity":
            break
    else:
        pytest.skip("no gravity action drawn")
    (name,) = [j.name for j in obj.movable_joints]
    q = np.array([c[name] for c in seq.meta["joint_values"]])
    q0 = cond["initial_value"]
    lo, hi = obj.movable_joints[0].limits
    # released below vertical it falls shut onto the lower limit; beyond vertical it falls open to the upper
    target = lo if q0 < np.pi / 2 else hi
    assert abs(q[-1] - target) < 0.05, (q0, q[-1])


def test_elastic_drop_is_finite_and_moving():
    seq = elastic_sequence(
        "blob", np.random.default_rng(0), action="drop", duration=0.4, n_frames=8, resolution=4
    ).validate()
    _moving(seq, 0.01)
    assert seq.kind == "elastic" and seq.meta["material"]["young"] > 0
    assert seq.frames[:, :, 2].min() > -0.02  # the floor stops it


@pytest.mark.parametrize("shape,action", [(s, a) for s in LEGACY_SHAPES for a in ACTIONS[s]])  # soft set: test_synth_soft
def test_every_elastic_shape_and_action_is_finite_and_moving(shape, action):
    seq = elastic_sequence(
        shape, np.random.default_rng(0), action=action, duration=0.3, n_frames=4, resolution=4
    ).validate()
    _moving(seq, 1e-3)
    assert seq.meta["conditions"]["action"] == action
    assert {"young", "poisson", "damping"} <= set(seq.meta["material"])


def test_stiff_soft_body_keeps_its_volume():
    """A stiff (E = 1 MPa), nearly incompressible (nu = 0.45) blob poked on the floor keeps its enclosed
    volume within 3%."""
    seq = elastic_sequence(
        "blob",
        np.random.default_rng(1),
        action="poke",
        young=1e6,
        poisson=0.45,
        duration=0.4,
        n_frames=8,
        resolution=4,
    )
    v0 = trimesh.Trimesh(seq.rest_vertices, seq.faces, process=False).volume
    vols = np.array([trimesh.Trimesh(f, seq.faces, process=False).volume for f in seq.frames])
    assert np.abs(vols / v0 - 1).max() < 0.03


def test_pinned_stem_bends_in_wind_but_base_stays():
    seq = elastic_sequence(
        "stem", np.random.default_rng(2), action="wind", young=3e4, duration=0.5, n_frames=6, resolution=5
    )
    base = seq.rest_vertices[:, 2] < seq.rest_vertices[:, 2].min() + 1e-4
    assert base.any()
    assert np.abs(seq.frames[:, base] - seq.rest_vertices[base]).max() < 2e-3
    _moving(seq, 0.005)


@pytest.mark.parametrize("scene", ["flag", "tablecloth", "curtain", "towel"])
def test_cloth_moves_with_bounded_stretch(scene):
    seq = cloth_sequence(scene, np.random.default_rng(0), resolution=10, duration=0.5, n_frames=6).validate()
    _moving(seq, 0.02)
    assert max_edge_stretch(seq.rest_vertices, seq.frames, seq.faces) < 0.15
    assert seq.meta["simulation"]["max_edge_stretch"] < 0.15


def test_grid_sheet_and_stretch_metric():
    v, f = grid_sheet(3, 4, 2.0, 3.0)
    assert v.shape == (12, 3) and f.shape == (12, 3)
    assert max_edge_stretch(v, v[None], f) == pytest.approx(0.0)
    assert max_edge_stretch(v, (v * 1.1)[None], f) == pytest.approx(0.1)


def test_tet_cage_embeds_surface_exactly():
    mesh = trimesh.creation.icosphere(2, radius=0.1)
    cage = build_cage(mesh, resolution=5)
    np.testing.assert_allclose(cage.surface(cage.nodes), mesh.vertices, atol=1e-9)
    c = cage.nodes[cage.tets]
    vol = np.einsum("ij,ij->i", np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0]), c[:, 3] - c[:, 0]) / 6
    assert (vol > 0).all()
    assert vol.sum() >= 0.9 * mesh.volume  # the cage covers the body
    # an affine motion of the nodes moves the embedded surface by the same affine map
    A = np.array([[1.1, 0.2, 0], [0, 0.9, 0.1], [0, 0, 1.2]])
    np.testing.assert_allclose(cage.surface(cage.nodes @ A.T), mesh.vertices @ A.T, atol=1e-9)


def test_exploding_simulation_is_detected_not_returned():
    mesh = trimesh.creation.box(extents=(0.1, 0.1, 0.1))
    cage = build_cage(mesh, resolution=2)
    nodes = cage.nodes + [0, 0, 0.5]

    def scene(dt):
        spec = flexcomp_spec("s", {"type": "direct", "dim": 3, "radius": 0.001, "mass": 0.1, "point": nodes,
                                   "element": cage.tets}, {"elasticity": {"young": 1e4, "poisson": 0.3}})
        return new_spec("s", dt, "discrete", spec=spec)

    def blast(model, data, t, vert_body):
        data.xfrc_applied[vert_body[0], 2] = 1e9  # one node is shot away

    run = FlexRun(scene, duration=0.05, n_frames=5, controller=blast, size=0.1, tets=cage.tets)
    with pytest.raises(SimulationDivergedError):
        simulate_flex(run, 0.004)
