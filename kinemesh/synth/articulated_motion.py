"""Motions of articulated objects recorded as fixed-topology meshes (KinematicSequence).

Two sources: *kinematic* (random joint configurations within limits, the (rest, state) pairs NeuROK trains on)
and *dynamic* (MuJoCo trajectories: doors and lids falling under gravity with damping and limits, motors
driving drawers and doors, impulses on parts). Frames of dynamic sequences come from MuJoCo body poses applied
to the part meshes, so they are exactly rigid per part.
"""

from __future__ import annotations

import numpy as np

from kinemesh.data.articulated import ArticulatedObject
from kinemesh.data.sequence import KinematicSequence
from kinemesh.errors import SimulationDivergedError
from kinemesh.synth.mjcf import MjcfOptions, body_transforms, load_model


def kinematic_sequence(
    obj: ArticulatedObject,
    rng: np.random.Generator,
    n_frames: int = 16,
    p_closed: float = 0.25,
    fps: float = 10.0,
) -> KinematicSequence:
    """Random joint configurations within limits; each joint stays at rest with probability ``p_closed``
    (its value nearest to 0 within the limits: real objects may rest outside their own range)."""
    rest = {j.name: rest_value(j) for j in obj.movable_joints}
    configs = []
    for _ in range(n_frames):
        vals = obj.sample_values(rng)
        for k in vals:
            if rng.random() < p_closed:
                vals[k] = rest[k]
        configs.append(vals)
    return obj.to_sequence(
        configs,
        fps=fps,
        source="kinemesh.synth",
        extra_meta={"motion": "kinematic", "conditions": {"p_closed": p_closed}},
    )


def rest_value(joint) -> float:
    """The joint value nearest to the rest pose (0) within the joint's limits (rad or m)."""
    return float(np.clip(0.0, *joint.limits)) if joint.limits is not None else 0.0


def _horizontal(axis: np.ndarray) -> bool:
    return abs(float(axis[2])) < 0.3


def dynamic_sequence(
    obj: ArticulatedObject,
    rng: np.random.Generator,
    duration: float = 2.0,
    n_frames: int = 24,
    timestep: float = 0.002,
    sim_obj: ArticulatedObject | None = None,
) -> KinematicSequence:
    """Simulate ``obj`` in MuJoCo with a random action per joint and record ``n_frames`` frames.

    ``sim_obj`` (same parts and joints, other meshes) is what MuJoCo simulates when given, e.g. with flat
    parts thickened so that MuJoCo can build their convex hulls; the frames always pose ``obj``'s meshes.

    Actions (recorded in ``meta.conditions``): ``gravity`` (a horizontal-axis door/lid released from a random
    opening, falls under gravity with damping, stopped by its limit), ``motor`` (a constant joint force for part
    of the time, e.g. opening a drawer), ``impulse`` (an initial joint velocity), ``still``.
    Raises SimulationDivergedError when the state becomes non-finite or MuJoCo reports a bad acceleration.
    """
    import mujoco

    opts = MjcfOptions(timestep=timestep, damping=float(rng.uniform(0.2, 2.0)), contacts="none")
    model = load_model(sim_obj or obj, opts)
    data = mujoco.MjData(model)
    actions = {}
    T_on = float(rng.uniform(0.4, 1.2))
    movable = obj.movable_joints
    forced = int(rng.integers(len(movable))) if movable else -1  # at least one joint always acts
    for ji, j in enumerate(movable):
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j.name)
        qa, da = model.jnt_qposadr[jid], model.jnt_dofadr[jid]
        lo, hi = j.limits if j.limits is not None else (-np.pi, np.pi)
        span = hi - lo
        q0 = data.qpos[qa] = rest_value(j)  # a real joint may rest outside its range: start inside it
        choices = ["motor", "motor", "impulse"] + ([] if ji == forced else ["still", "still"])
        if j.type == "revolute" and _horizontal(j.axis):
            choices += ["gravity", "gravity"]
        act = str(rng.choice(choices))
        # effective inertia of the child's subtree about this dof sets the force scale
        mujoco.mj_forward(model, data)
        M = np.zeros((model.nv, model.nv))
        mujoco.mj_fullM(model, data, M)
        inertia = max(float(M[da, da]), 1e-6)
        cond = {"action": act}
        if act == "gravity":
            q0 = float(rng.uniform(lo + 0.3 * span, hi))
            data.qpos[qa] = q0
            cond["initial_value"] = q0
        elif act == "motor":
            # away from the limit the joint starts at (a motor pushing into its limit moves nothing)
            sign = 1.0 if q0 <= lo else -1.0 if q0 >= hi else (1.0 if rng.random() < 0.7 else -1.0)
            # accelerate through about half the range in T_on
            f = sign * inertia * span / T_on**2 * float(rng.uniform(0.8, 3.0))
            cond.update(force=f, duration=T_on, lo=lo, hi=hi)
            if j.type != "prismatic" and _horizontal(j.axis):
                f += sign * 2.0 * _gravity_torque_bound(obj, j)
                cond["force"] = f
        elif act == "impulse":
            v = float(rng.uniform(0.8, 3.0)) * span / duration * (1 if rng.random() < 0.75 else -1)
            if (v < 0 and q0 <= lo) or (v > 0 and q0 >= hi):
                data.qpos[qa] = float(rng.uniform(lo, hi))
                cond["initial_value"] = float(data.qpos[qa])
            data.qvel[da] = v
            cond["initial_velocity"] = v
        actions[j.name] = (jid, qa, da, cond)

    steps = int(round(duration / timestep))
    every = max(1, steps // n_frames)
    rest, faces, part_ids = obj.merged(None)
    frames, times, values = [], [], []
    for s in range(steps):
        t = s * timestep
        data.qfrc_applied[:] = 0.0
        for _jid, qa, da, cond in actions.values():
            if cond["action"] == "motor" and t < cond["duration"]:
                # the motor lets go near the end of the range instead of pushing into the limit
                frac = (data.qpos[qa] - cond["lo"]) / max(cond["hi"] - cond["lo"], 1e-9)
                if (cond["force"] > 0 and frac < 0.9) or (cond["force"] < 0 and frac > 0.1):
                    data.qfrc_applied[da] = cond["force"]
        mujoco.mj_step(model, data)
        if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0 or not np.all(np.isfinite(data.qpos)):
            raise SimulationDivergedError(f"{obj.name}: rigid simulation diverged at t={t:.3f} s")
        if (s + 1) % every == 0 and len(frames) < n_frames:
            mujoco.mj_kinematics(model, data)  # mj_step leaves xpos/xmat at the qpos before its update
            T = body_transforms(model, data, obj)
            verts = [
                p.vertices @ T[p.name][:3, :3].T + T[p.name][:3, 3] for p in obj.parts if len(p.vertices)
            ]
            frames.append(np.concatenate(verts))
            times.append(t + timestep)
            values.append({n: float(data.qpos[qa]) for n, (jid, qa, da, c) in actions.items()})
    frames = np.stack(frames).astype(np.float32)
    if not np.isfinite(frames).all() or np.abs(frames).max() > 100:
        raise SimulationDivergedError(f"{obj.name}: rigid simulation produced non-finite or exploding frames")
    meta = obj.to_sequence([{}], source="kinemesh.synth").meta
    meta.update(
        motion="dynamic",
        joint_values=values,
        conditions={
            "damping_scale": opts.damping,
            "timestep": timestep,
            "gravity": [0, 0, -9.81],
            "joints": {n: c for n, (_, _, _, c) in actions.items()},
        },
    )
    return KinematicSequence(rest, faces, frames, np.asarray(times), part_ids, meta)


def _gravity_torque_bound(obj: ArticulatedObject, joint) -> float:
    """Upper bound of the gravity torque (N m) on ``joint``'s child about its axis (density 500 kg/m^3)."""
    p = obj.part(joint.child)
    if len(p.vertices) == 0:
        return 0.0
    import trimesh

    m = trimesh.Trimesh(p.vertices, p.faces, process=False)
    mass = abs(m.volume) * 500.0
    r = float(np.max(np.linalg.norm(p.vertices - joint.origin, axis=1)))
    return mass * 9.81 * r
