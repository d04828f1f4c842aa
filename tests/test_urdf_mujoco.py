"""A URDF written by kinemesh loads in MuJoCo as it is (inertials, collision meshes) and moves when driven."""

import numpy as np
import pytest


@pytest.mark.parametrize("category", ["cabinet", "chest_of_drawers", "desk_lamp"])
def test_written_urdf_loads_in_mujoco_and_joints_move(tmp_path, category):
    import mujoco

    from kinemesh.data.partnet import write_partnet_folder
    from kinemesh.synth.categories import build

    obj = build(category, np.random.default_rng(1))
    folder = write_partnet_folder(obj, tmp_path / category)
    model = mujoco.MjModel.from_xml_path(str(folder / "mobility.urdf"))
    movable = obj.movable_joints
    assert model.njnt == len(movable)
    assert (model.body_mass[1:] > 0).all()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rest_pos, rest_mat = data.xpos.copy(), data.xmat.copy()
    for j, joint in enumerate(movable):
        lo, hi = joint.limits if joint.limits is not None else (-1.0, 1.0)
        data.qpos[model.jnt_qposadr[j]] = 0.5 * (lo + hi) if hi - lo > 1e-6 else hi
    mujoco.mj_forward(model, data)
    # every body a joint drives has left its rest pose (moved or turned)
    for b in {int(model.jnt_bodyid[j]) for j in range(model.njnt)}:
        moved = np.linalg.norm(data.xpos[b] - rest_pos[b]) > 1e-6
        turned = not np.allclose(data.xmat[b], rest_mat[b], atol=1e-6)
        assert moved or turned, model.body(b).name


def _flaps(overlap: float):
    """A box with two flaps on its top, hinged at opposite edges, meeting in the middle; ``overlap`` (m): how
    far each flap reaches past the middle (their hulls then interpenetrate at rest)."""
    import trimesh

    from kinemesh.data.articulated import ArticulatedObject, Joint, Part

    body = trimesh.creation.box(extents=(0.4, 0.4, 0.3))
    body.apply_translation((0, 0, 0.15))
    parts, joints = [Part("body", body.vertices, body.faces, "body")], []
    for name, s in (("left", -1.0), ("right", 1.0)):
        flap = trimesh.creation.box(extents=(0.2 + overlap, 0.4, 0.01))
        flap.apply_translation((s * (0.1 - overlap / 2), 0, 0.305))
        parts.append(Part(name, flap.vertices, flap.faces, name))
        joints.append(Joint(f"hinge_{name}", "revolute", "body", name, (0, -s, 0), (s * 0.2, 0, 0.31), (0.0, 2.0)))
    return ArticulatedObject(parts, joints, category="box", name="box")


@pytest.mark.parametrize("overlap", [0.0, 0.004])
def test_mjcf_excludes_parts_overlapping_at_rest_and_the_rest_pose_stays_still(overlap):
    import mujoco

    from kinemesh.synth.mjcf import MjcfOptions, articulated_spec

    obj = _flaps(overlap)
    options = MjcfOptions(gravity=False)
    spec = articulated_spec(obj, options)
    excluded = {tuple(sorted((e.bodyname1, e.bodyname2))) for e in spec.excludes}
    assert (("left", "right") in excluded) == (overlap > 0)  # flaps that only touch still collide
    model = spec.compile()
    data = mujoco.MjData(model)
    for _ in range(500):
        mujoco.mj_step(model, data)
    assert np.abs(data.qpos).max() < 1e-4  # nothing pushes the flaps open at rest
    # without the exclusion the overlapping flaps push each other open from the first step
    if overlap > 0:
        spec = articulated_spec(obj, MjcfOptions(gravity=False, rest_overlap=1.0))
        model = spec.compile()
        data = mujoco.MjData(model)
        for _ in range(500):
            mujoco.mj_step(model, data)
        assert np.abs(data.qpos).max() > 1e-3
