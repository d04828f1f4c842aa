"""Load what ``kinemesh articulate`` wrote in real simulators and push every joint.

    python scripts/check_exports.py ART_DIR [ART_DIR ...] [--seconds 1]

For each folder (``object.urdf``, ``object.xml`` and, with ``--usd``, ``object.usda``): the URDF loads in
yourdfpy, the MJCF in MuJoCo and runs ``--seconds`` at rest (it must stay finite and still: nothing is pushed,
gravity is off in the export), then every hinge / slide joint is pushed alone from rest by a constant
generalized force towards its larger limit (20 x its rest inertia + 2 x its damping x that excursion per second)
for ``--seconds``; the share of that excursion it reaches is printed (1.00 = its limit; a part another part
blocks reads less: a dishwasher's rack against its closed door; a joint without limits that turns a radian
reads "spins"); the USD opens in usd-core with one UsdPhysics
joint per link. Prints one line per folder and exits non-zero when a file fails to load or the rest pose moves.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def check(folder: Path, seconds: float) -> tuple[bool, str]:
    import mujoco
    import yourdfpy

    ok, msg = True, []
    try:
        urdf = yourdfpy.URDF.load(str(folder / "object.urdf"))
        msg.append(f"URDF {len(urdf.actuated_joint_names)} joints")
    except Exception as e:  # noqa: BLE001 - report any loader failure
        return False, f"URDF does not load: {e}"
    try:
        m = mujoco.MjModel.from_xml_path(str(folder / "object.xml"))
    except Exception as e:  # noqa: BLE001
        return False, f"MJCF does not load: {e}"
    d = mujoco.MjData(m)
    steps = int(seconds / m.opt.timestep)
    for _ in range(steps):
        mujoco.mj_step(m, d)
    still = bool(np.all(np.isfinite(d.qpos)) and (m.nv == 0 or np.abs(d.qvel).max() < 1e-3))
    ok &= still
    reached = []
    for j in range(m.njnt):
        if int(m.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            continue
        lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-1.0, 1.0)
        target = hi if abs(hi) >= abs(lo) else lo
        mujoco.mj_resetData(m, d)
        dof = m.jnt_dofadr[j]
        force = np.sign(target) * (20.0 * m.dof_M0[dof] + 2.0 * m.dof_damping[dof] * abs(target))
        for _ in range(steps):
            d.qfrc_applied[:] = 0.0
            d.qfrc_applied[dof] = force
            mujoco.mj_step(m, d)
        share = abs(d.qpos[m.jnt_qposadr[j]]) / max(abs(target), 1e-9)
        reached.append(f"{share:.2f}" if m.jnt_limited[j] else "spins" if share >= 1.0 else f"{share:.2f}")
    msg.append(f"MJCF {'still' if still else 'MOVES AT REST'}, pushed joints reach " + (" ".join(reached) or "-"))
    usd = folder / "object.usda"
    if usd.exists():
        try:
            from pxr import Usd, UsdPhysics

            stage = Usd.Stage.Open(str(usd))
            msg.append(f"USD {sum(p.IsA(UsdPhysics.Joint) for p in stage.Traverse())} joints")
        except Exception as e:  # noqa: BLE001
            ok = False
            msg.append(f"USD does not open: {e}")
    return ok, ", ".join(msg)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args(argv)
    failed = 0
    for f in args.folders:
        ok, line = check(f, args.seconds)
        failed += not ok
        print(f"{f}: {line}", flush=True)
    print(f"{len(args.folders) - failed} of {len(args.folders)} folders load and stay still at rest")
    return int(failed > 0)


if __name__ == "__main__":
    sys.exit(main())
