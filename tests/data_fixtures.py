"""Tiny data fixtures written by the data tests themselves (PartNet-Mobility-style folder, .anime, frames).

The PartNet-Mobility-style object (Y-up file frame, like the real dataset):

* ``link_3`` body: the unit cube [0, 1]^3 (file frame), label ``furniture_body``, attached to ``base`` by the
  PartNet fixed joint rpy = (pi/2, 0, -pi/2);
* ``link_0`` door: hinge (revolute) at file point (1, 0, 1) about file axis (0, 2, 0) (NOT unit length),
  limits [0, pi/2]; two visuals (door slab and a handle whose visual origin has a yaw);
* ``link_1`` drawer: slider along file (0, 0, 1) with a negative range [-0.4, -0.1];
* ``link_2`` lid: screw = prismatic ``link_3 -> link_2_helper`` along file (0, 1, 0), [0, 0.1] at
  (0.5, 1, 0.5), plus continuous ``link_2_helper -> link_2`` about the same axis.

In the kinemesh frame (x, y, z)_file -> (x, -z, y): door axis (0, 0, 1) through (1, -1, 0); drawer axis
(0, -1, 0); lid axis (0, 0, 1) through (0.5, -0.5, 1).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

BOX_V = np.array(
    [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], float
)
BOX_F = np.array(
    [
        [0, 2, 1],
        [0, 3, 2],
        [4, 5, 6],
        [4, 6, 7],
        [0, 1, 5],
        [0, 5, 4],
        [1, 2, 6],
        [1, 6, 5],
        [2, 3, 7],
        [2, 7, 6],
        [3, 0, 4],
        [3, 4, 7],
    ]
)


def box(lo, hi) -> np.ndarray:
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    return lo + BOX_V * (hi - lo)


def write_obj(path: Path, vertices, faces=BOX_F, with_material: bool = False) -> None:
    lines = []
    if with_material:
        lines.append(f"mtllib {path.stem}.mtl")
        (path.parent / f"{path.stem}.mtl").write_text(
            "newmtl m0\nKd 0.8 0.2 0.2\nmap_Kd missing_texture.png\n"
        )
    lines += ["v %r %r %r" % tuple(map(float, v)) for v in vertices]
    if with_material:
        lines += ["vt 0 0", "vt 1 0", "vt 1 1", "usemtl m0"]
        lines += [f"f {a + 1}/1 {b + 1}/2 {c + 1}/3" for a, b, c in faces]
    else:
        lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
    path.write_text("\n".join(lines) + "\n")


# Geometry in the Y-up file frame.
BODY = box([0, 0, 0], [1, 1, 1])
DOOR = box([0, 0, 1], [1, 1, 1.05])
HANDLE_LOCAL = box([0, 0, 0], [0.1, 0.02, 0.02])  # placed by a visual origin with a yaw of pi/2
DRAWER = box([0.2, 0.2, 0.5], [0.8, 0.4, 1.0])
LID = box([0.3, 1.0, 0.3], [0.7, 1.1, 0.7])

URDF = """<?xml version="1.0" ?>
<robot name="tiny_cabinet">
  <link name="base"/>
  <link name="link_0">
    <visual name="door-1">
      <origin xyz="-1 0 -1"/>
      <geometry><mesh filename="textured_objs/door.obj"/></geometry>
    </visual>
    <visual name="handle-2">
      <origin xyz="-0.2 0.5 0.05" rpy="0 0 1.5707963267948966"/>
      <geometry><mesh filename="textured_objs/handle.obj"/></geometry>
    </visual>
  </link>
  <joint name="door_hinge" type="revolute">
    <origin xyz="1 0 1"/>
    <axis xyz="0 2 0"/>
    <child link="link_0"/>
    <parent link="link_3"/>
    <limit lower="0.0" upper="1.5707963267948966"/>
  </joint>
  <link name="link_1">
    <visual name="drawer-3">
      <origin xyz="-0.5 -0.5 -0.5"/>
      <geometry><mesh filename="textured_objs/drawer.obj"/></geometry>
    </visual>
  </link>
  <joint name="drawer_slide" type="prismatic">
    <origin xyz="0.5 0.5 0.5"/>
    <axis xyz="0 0 1"/>
    <child link="link_1"/>
    <parent link="link_3"/>
    <limit lower="-0.4" upper="-0.1"/>
  </joint>
  <link name="link_2">
    <visual name="lid-4">
      <origin xyz="-0.5 -1 -0.5"/>
      <geometry><mesh filename="textured_objs/lid.obj"/></geometry>
    </visual>
  </link>
  <link name="link_2_helper"/>
  <joint name="lid_spin" type="continuous">
    <origin xyz="0 0 0"/>
    <axis xyz="0 1 0"/>
    <child link="link_2"/>
    <parent link="link_2_helper"/>
  </joint>
  <joint name="lid_lift" type="prismatic">
    <origin xyz="0.5 1 0.5"/>
    <axis xyz="0 1 0"/>
    <child link="link_2_helper"/>
    <parent link="link_3"/>
    <limit lower="0" upper="0.1"/>
  </joint>
  <link name="link_3">
    <visual name="body-5">
      <origin xyz="0 0 0"/>
      <geometry><mesh filename="textured_objs/body.obj"/></geometry>
    </visual>
  </link>
  <joint name="joint_fixed" type="fixed">
    <origin rpy="1.570796326794897 0 -1.570796326794897" xyz="0 0 0"/>
    <child link="link_3"/>
    <parent link="base"/>
  </joint>
</robot>
"""

MOBILITY = [
    {
        "id": 0,
        "parent": 3,
        "joint": "hinge",
        "name": "door",
        "parts": [{"id": 1, "name": "door", "children": []}],
        "jointData": {
            "axis": {"origin": [1, 0, 1], "direction": [0, 1, 0]},
            "limit": {"a": 0, "b": 90, "noLimit": False},
        },
    },
    {
        "id": 1,
        "parent": 3,
        "joint": "slider",
        "name": "drawer",
        "parts": [],
        # the opposite direction with negated limits describes the same motion
        "jointData": {
            "axis": {"origin": [0.5, 0.5, 0.5], "direction": [0, 0, -1]},
            "limit": {"a": 0.1, "b": 0.4, "noLimit": False},
        },
    },
    {
        "id": 2,
        "parent": 3,
        "joint": "slider",
        "name": "lid",
        "parts": [],
        "jointData": {
            "axis": {"origin": [0.5, 1, 0.5], "direction": [0, 1, 0]},
            "limit": {"a": 0, "b": 0.1, "noLimit": False, "rotates": True, "noRotationLimit": True},
        },
    },
    {"id": 3, "parent": -1, "joint": "heavy", "name": "body", "parts": [], "jointData": {}},
]

SEMANTICS = (
    "link_0 hinge rotation_door\nlink_1 slider drawer\nlink_2 slider+ lid\nlink_3 heavy furniture_body\n"
)


def make_partnet_folder(folder: Path, urdf: str = URDF) -> Path:
    """Write the tiny PartNet-Mobility-style object (plus an ignored extra folder) into ``folder``."""
    objs = folder / "textured_objs"
    objs.mkdir(parents=True, exist_ok=True)
    write_obj(objs / "body.obj", BODY, with_material=True)
    write_obj(objs / "door.obj", DOOR, with_material=True)
    write_obj(objs / "handle.obj", HANDLE_LOCAL)
    write_obj(objs / "drawer.obj", DRAWER)
    write_obj(objs / "lid.obj", LID)
    (folder / "mobility.urdf").write_text(urdf)
    (folder / "mobility_v2.json").write_text(json.dumps(MOBILITY))
    (folder / "semantics.txt").write_text(SEMANTICS)
    (folder / "meta.json").write_text(json.dumps({"model_cat": "TinyCabinet", "anno_id": "1"}))
    (folder / "point_sample").mkdir(exist_ok=True)
    (folder / "point_sample" / "junk.txt").write_text("not used")
    return folder


def write_anime(path: Path, v0: np.ndarray, faces: np.ndarray, frames: np.ndarray, truncate: int = 0) -> Path:
    """A DeformingThings4D .anime file from absolute ``frames`` (T, n, 3) (offsets stored vs frame 0)."""
    data = struct.pack("<3i", len(frames), len(v0), len(faces))
    data += np.asarray(v0, "<f4").tobytes() + np.asarray(faces, "<i4").tobytes()
    data += (np.asarray(frames[1:], "<f4") - np.asarray(v0, "<f4")[None]).astype("<f4").tobytes()
    path.write_bytes(data[: len(data) - truncate] if truncate else data)
    return path


def make_frame_folder(folder: Path, n_frames: int = 12) -> tuple[Path, np.ndarray]:
    """A folder of OBJ frames named so that lexical order is wrong (frame_2 < frame_10 naturally)."""
    folder.mkdir(parents=True, exist_ok=True)
    frames = np.stack([BODY + [0.1 * t, 0.0, 0.01 * t * t] for t in range(n_frames)])
    for t in range(n_frames):
        write_obj(folder / f"frame_{t}.obj", frames[t])
    return folder, frames
