"""Real objects, part by part: the drag test and prior-sample plausibility on real PartNet-Mobility objects.

Every object (a URDF / PartNet-Mobility folder) is bound to the model with its links as parts
(``kinemesh.geometry.segments``, ``kinemesh.reduce.bind``; articulated, as ``kinemesh simulate`` takes a URDF /
PartNet-Mobility input, with its base part held: ``SimulationSpec.fixed_base``). Then:

- drag test (issue 16): for every movable part (its joint, ``drag_joints``), the vertex of the part itself (the
  joint's child with what is welded to it, not the parts below it: on a chain such as a stapler's two arms or a
  robot arm, the farthest point of the whole subtree lies on the last link, and the drag, which moves the least
  mass that reaches its target, reached it with the last link's own joint) farthest from the TRUE axis is
  dragged along the true motion (the parts below it carried rigidly), 60 deg
  about the axis (or the joint's range if smaller), or 50% of a slide's travel, with the latent dynamics and a
  holding spring (the pipeline of ``kinemesh simulate --action drag --hold``, NeuROK Sec. 5.3; joints predicted
  from the object as ``kinemesh simulate`` loads it, ``predicted_full``; without gravity unless ``--gravity``).
  At the last frame: ``follow`` = the
  motion of the part's own best-fit rigid motion (Kabsch) along the asked one (angle about the true axis, or
  translation along it) / the asked motion; ``rest_motion`` = mean displacement of the vertices outside the
  part and the parts it carries / the
  object's size (longest side of its rest bounding box); ``attached`` = every pair of parts a joint connects
  that touch at rest stays within 2% of the size of its gap at rest or, if larger, in the asked pose (the part
  moved along its true joint: a real drawer, clear of its carcass inside, leaves the frame it touches at rest
  as it slides), measured between their surfaces (``kinemesh.eval.model.attachment`` on ``joint_pairs``: two
  doors meeting at a seam are not joined, and one opening leaves the other) and every connected component stays
  on its part's rigid motion within 2% of the size;
- prior samples z ~ the kind's calibrated prior, decoded two ways: by the network itself ("prior", the raw
  network), and as ``kinemesh sample`` writes them ("joint prior": every part along the joints the drags use,
  predicted by default or the URDF's with ``--joints given``, calibrated, joint values clipped to their limits,
  ``JointDecoder.vertices_within_limits``, joints the network does not move drawn over half their range,
  ``JointDecoder.prior_states``; the raw network again with ``--free-parts``); and samples of the
  reduced state space (q ~ N(0, I), the coordinates the dynamics move in; for an articulated object spanned by
  motion probes along those joints, ``kinemesh.articulation.probes``): parts attached
  (``kinemesh.eval.model.attachment``) and within-part rigidity error
  (``kinemesh.geometry.metrics.within_part_rigidity``); and for the joint prior the share of the joints that
  move by at least 10% of their range in some sample (``joints_moving``); the reduced samples are also posed
  along the joints, as ``kinemesh sample --space reduced`` writes them.

Inverse kinematics of real poses is ``kinemesh eval ik --real DIR``.

    kinemesh eval real --real DIR [--split all|val] [--frames 30] [--points 512] [--gravity] [--out FILE.json]
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinemesh.checks import number
from kinemesh.errors import ConfigError, InputFileError, KinemeshError, SimulationDivergedError
from kinemesh.eval import Result, check, option

log = logging.getLogger(__name__)
DRAG_DEG = 60.0
SLIDE_FRACTION = 0.5
DETACH_TOL = 0.02  # a component off its part's rigid motion by more than this (fraction of size) is detached
TARGETS = {"follow": 0.8, "follow_share": 0.9, "rest_motion": 0.02, "attached": 1.0, "prior_attached": 0.99,
           "prior_rigidity": 0.01, "joint_prior_attached": 0.99, "joint_prior_rigidity": 0.01}


@dataclass
class RealEvalConfig:
    """Options of ``kinemesh eval real``. Raises ConfigError."""

    real: str | None = option(None, "folder of real objects (URDF / PartNet-Mobility folders)", required=True)
    split: str = option("all", "all objects of the folder (a test split), or only the real validation split's "
                        "(kinemesh.eval.articulation.is_real_validation)", choices=("all", "val"))
    checkpoint: str | None = option(None, "model checkpoint folder (default: the shipped model)")
    frames: int = option(30, "frames of each drag (default 30)", type=number(int, 2, 1000), min=2, max=1000)
    points: int = option(512, "surface points carrying the deformation (default 512)", type=number(int, 16, 100000),
                         min=16, max=100000)
    samples: int = option(8, "prior samples per object (default 8)", type=number(int, 1, 1000), min=1, max=1000)
    max_vertices: int = option(5000, "vertex budget of an object", type=number(int, 100), min=100)
    max_objects: int | None = option(None, "evaluate at most this many objects", type=number(int, 1), min=1)
    joints: str = option("predicted", "joints the motion probes follow: predicted from the static shape (what "
                         "simulate does on a segmented mesh) or given by the URDF (what simulate does on a URDF)",
                         choices=("predicted", "given"))
    free_parts: bool = option(False, "move the parts as the network decodes them, not along those joints "
                              "(what simulate --free-parts does; the ablation of kinemesh.dynamics.joints)")
    gravity: bool = option(False, "drag under gravity (the parts hang on their joints while the hand holds the "
                           "dragged vertex, as kinemesh simulate --gravity)")
    seed: int = option(0)

    def __post_init__(self):
        check(self)
        if self.real is None:
            raise ConfigError("--real: give the folder of real objects")


def subtree_mask(obj, part_ids: np.ndarray, child: str, part_names: list[str] | None = None) -> np.ndarray:
    """(N,) bool: vertices of ``child`` and every part below it (``part_ids`` index ``part_names``, default
    the names of ``obj.parts``)."""
    from kinemesh.geometry.validity import subtree

    parents = {j.child: j.parent for j in obj.joints}
    names = set(subtree(parents, child))
    part_names = [p.name for p in obj.parts] if part_names is None else part_names
    return np.isin(part_ids, [i for i, n in enumerate(part_names) if n in names])


def own_mask(part_ids: np.ndarray, child: str, part_names: list[str], moving: np.ndarray) -> np.ndarray:
    """(N,) bool: the vertices of the part ``child`` itself (with what is welded to it: ``part_names`` are the
    segmented object's parts), not the parts it carries; ``moving`` (its subtree, :func:`subtree_mask`) when it
    has fewer than 3 vertices of its own (a link without geometry)."""
    own = np.asarray(part_ids) == part_names.index(child) if child in part_names else moving
    return own if own.sum() >= 3 else moving


def drag_vertex(vertices: np.ndarray, mask: np.ndarray, joint) -> int:
    """The vertex among ``mask`` farthest from the joint's axis line: the one the drag test drags."""
    o = np.asarray(joint.origin, np.float64)
    a = np.asarray(joint.axis, np.float64) / np.linalg.norm(joint.axis)
    rel = np.asarray(vertices, np.float64)[mask] - o
    radial = np.linalg.norm(rel - np.outer(rel @ a, a), axis=1)
    return int(np.flatnonzero(mask)[np.argmax(radial)])


def joint_pairs(obj, part_names: list[str]) -> list[tuple[int, int]]:
    """(parent, child) part indices (sorted pairs) of every movable joint of ``obj``: the parts a joint connects,
    whose attachment the drag test and the prior samples score (a link welded by a fixed joint, or without
    geometry, counts as the part it hangs from)."""
    from kinemesh.geometry.validity import rigid_groups

    group, up = rigid_groups(obj), {j.child: j.parent for j in obj.joints}
    index = {n: i for i, n in enumerate(part_names)}

    def part(name):
        while name is not None:
            name = group.get(name, name)
            if name in index:
                return index[name]
            name = up.get(name)
        return None

    pairs = set()
    for j in obj.movable_joints:
        a, b = part(j.parent), part(j.child)
        if a is not None and b is not None and a != b:
            pairs.add((min(a, b), max(a, b)))
    return sorted(pairs)


def drag_joints(obj) -> list:
    """The movable joints the drag test drags: one per movable part. A joint into a link without geometry that
    carries the part on a movable joint of its own (the helper link of a screw cap: prismatic, then continuous)
    is left out; the part is dragged along the joint it hangs from, the turn, as the articulation scores it."""
    below = {j.parent for j in obj.movable_joints}
    return [j for j in obj.movable_joints if len(obj.part(j.child).vertices) or j.child not in below]


def asked_motion(joint) -> float:
    """The drag's asked joint value: +-60 deg (within the limits, to the side with more room) or half a slide's
    travel, in rad or m."""
    lo, hi = joint.limits if joint.limits is not None else (-math.inf, math.inf)
    if joint.type == "prismatic":
        return SLIDE_FRACTION * (hi - lo) * (1.0 if abs(hi) >= abs(lo) else -1.0)
    room = hi if abs(hi) >= abs(lo) else lo
    return math.copysign(min(math.radians(DRAG_DEG), abs(room)), room)


def followed(rest: np.ndarray, posed: np.ndarray, joint, asked: float) -> float:
    """Fraction of the asked motion the part's best-fit rigid motion makes: rotation angle about the true axis
    (revolute / continuous) or translation of the centroid along it (prismatic), divided by ``asked``.
    ``rest``, ``posed``: (n, 3) the moving part's vertices, metres."""
    from scipy.spatial.transform import Rotation

    from kinemesh.geometry.procrustes import kabsch

    axis = np.asarray(joint.axis, np.float64) / np.linalg.norm(joint.axis)
    if joint.type == "prismatic":
        return float((posed.mean(0) - rest.mean(0)) @ axis / asked)
    R, _ = kabsch(rest, posed)
    rotvec = Rotation.from_matrix(R).as_rotvec()
    return float(rotvec @ axis / asked)


def component_detachment(rest: np.ndarray, posed: np.ndarray, part_ids: np.ndarray, components: np.ndarray,
                         size: float) -> float:
    """Largest mean distance (fraction of ``size``) of a connected component from its part's best-fit rigid
    motion; (N, 3) rest and posed vertices, (N,) part and component ids."""
    from kinemesh.geometry.procrustes import kabsch

    worst = 0.0
    for p in np.unique(part_ids):
        sel = part_ids == p
        if sel.sum() < 3:
            continue
        R, t = kabsch(rest[sel], posed[sel])
        off = np.linalg.norm(rest[sel] @ R.T + t - posed[sel], axis=1)
        comp = components[sel]
        worst = max(worst, max(float(off[comp == c].mean()) for c in np.unique(comp)))
    return worst / size


def predicted_full(path: Path, seed: int = 0):
    """The articulation predicted from the static shape of the object in ``path`` as ``kinemesh simulate`` loads it
    (``load_segmented``, its default vertex budget; ``kinemesh.articulation.probes.predicted_object``), or None
    when it has fewer than two parts with geometry."""
    from kinemesh.articulation.probes import predicted_object
    from kinemesh.geometry.segments import load_segmented

    wf = load_segmented(path)
    try:
        return predicted_object(np.asarray(wf.mesh.vertices), np.asarray(wf.mesh.faces), wf.part_ids, wf.part_names,
                                seed=seed)
    except KinemeshError as exc:
        log.info("%s: no articulation (%s)", path.name, exc)
        return None


def evaluate_object(path: Path, model, cfg: RealEvalConfig) -> dict:
    """The drag-test and prior-sample row of one object (see module doc)."""
    import torch

    from kinemesh.data.partnet import load_articulated
    from kinemesh.dynamics.joints import JointDecoder
    from kinemesh.dynamics.scene import SimulationSpec, simulate_mesh
    from kinemesh.eval.model import attachment
    from kinemesh.geometry import metrics
    from kinemesh.geometry.kind import connected_components
    from kinemesh.articulation.probes import motion_probes
    from kinemesh.geometry.kind import resolve_kind
    from kinemesh.geometry.segments import segmented_object
    from kinemesh.reduce import ReductionConfig, bind

    t0 = time.perf_counter()
    obj = load_articulated(path, max_vertices=cfg.max_vertices)
    wm = segmented_object(obj, cfg.max_vertices, name=str(path))
    v, f, pid = np.asarray(wm.mesh.vertices), np.asarray(wm.mesh.faces), wm.part_ids
    size = float(np.ptp(v, axis=0).max())
    comps = connected_components(len(v), f)
    kind = "articulated" if obj.movable_joints else resolve_kind("auto", v, f, pid)  # as kinemesh simulate
    # reduced coordinates from motion probes along joints predicted from the static shape (default: the true
    # joints then only ask for the drags and score them) or given by the URDF (cfg.joints). Joints are predicted
    # on the object as `kinemesh simulate` loads it (50k-vertex budget): --max-vertices only makes the dynamics
    # cheaper (predicted at 5000 vertices a dishwasher's door read 90 deg off)
    joints = obj if cfg.joints == "given" or kind != "articulated" else predicted_full(path, seed=cfg.seed)
    probes, joints_from, art = motion_probes(v, f, pid, wm.part_names, joints, seed=cfg.seed) \
        if kind == "articulated" else (None, "-", None)
    joints_from = cfg.joints if joints is not None and art is not None else joints_from
    b = bind(v, f, model, kind=kind, part_ids=pid, reduction=ReductionConfig(k_q=8), n_points=cfg.points,
             seed=cfg.seed, probes=probes)
    row = {"object": path.name, "category": obj.category, "kind": b.kind, "vertices": len(v),
           "parts": int(pid.max() + 1), "probes": joints_from, "drags": []}
    with torch.no_grad():  # the model's (calibrated) prior, and the reduced state space the dynamics move in
        z = b.instance.prior_sample(cfg.samples, seed=cfg.seed)
        samples = b.instance.vertices(z).double().numpy()
        if art is None or cfg.free_parts:
            joint_samples = samples
        else:  # as kinemesh sample writes them
            jd = JointDecoder(b.instance, art, wm.part_names, direct=True)
            qj, joint_samples = jd.prior_samples(z, seed=cfg.seed)
            joint_samples = joint_samples.double().numpy()
            row["joint_prior_moving"] = joints_moving(jd, qj)
        q = torch.randn(cfg.samples, b.decoder.latent_dim, generator=torch.Generator().manual_seed(cfg.seed),
                        dtype=torch.float64).to(b.decoder.mu_cond.dtype)
        reduced = b.decoder.vertices(q).double().numpy()
        if art is not None and not cfg.free_parts:  # as kinemesh sample --space reduced writes them
            jr = JointDecoder(b.decoder, art, wm.part_names, direct=True)
            qr, reduced_joint = jr.prior_samples(q, seed=cfg.seed)
            reduced_joint = reduced_joint.double().numpy()
            row["reduced_joint_moving"] = joints_moving(jr, qr)
    joined = joint_pairs(obj, wm.part_names)  # attachment is scored between the parts a joint connects
    row["prior_attached"] = attachment(v, samples, pid, size, joined, f)[0]
    row["prior_rigidity"] = metrics.within_part_rigidity(v, samples, pid, seed=cfg.seed)
    row["joint_prior_attached"] = attachment(v, joint_samples, pid, size, joined, f)[0]
    row["joint_prior_rigidity"] = metrics.within_part_rigidity(v, joint_samples, pid, seed=cfg.seed)
    row["reduced_attached"] = attachment(v, reduced, pid, size, joined, f)[0]
    if "reduced_joint_moving" in row:
        row["reduced_joint_attached"] = attachment(v, reduced_joint, pid, size, joined, f)[0]
    for j in drag_joints(obj):
        moving = subtree_mask(obj, pid, j.child, wm.part_names)
        if moving.sum() < 3 or moving.all():
            continue
        asked = asked_motion(j)
        own = own_mask(pid, j.child, wm.part_names, moving)
        vid = drag_vertex(v, own, j)
        T = j.motion(asked)
        asked_pose = v.copy()  # the object as the drag asks for it: the part along its true joint
        asked_pose[moving] = v[moving] @ T[:3, :3].T + T[:3, 3]
        target = asked_pose[vid]  # the dragged vertex is the part's own, so it moves with it
        spec = SimulationSpec(kind=b.kind, frames=cfg.frames, drag_vertex=vid, drag_to=tuple(target), hold=True,
                              seed=cfg.seed, joints=not cfg.free_parts, gravity=cfg.gravity,
                              limit_stops=joints_from == "given")  # as kinemesh simulate on a URDF
        try:
            res = simulate_mesh(b.decoder, v, f, spec, part_ids=pid, progress=False, articulation=art,
                                part_names=wm.part_names)
        except SimulationDivergedError as exc:  # a drag that blows up is a failed drag, not a skipped object
            log.warning("%s, joint %s: %s", path.name, j.name, exc)
            row["drags"].append({"joint": j.name, "type": j.type, "asked": asked, "vertex": vid, "follow": 0.0,
                                 "rest_motion": float("nan"), "parts_attached": float("nan"),
                                 "component_offset": float("nan"), "dragged_vertex_error": float("nan"),
                                 "attached": False, "diverged": True})
            continue
        row.setdefault("joints_network", len(res.info.get("joints_network", [])))
        row.setdefault("joints_own", len(res.info.get("joints_own", [])))
        last = res.sequence.frames[-1].astype(np.float64)
        row["drags"].append({
            "joint": j.name, "type": j.type, "asked": asked, "vertex": vid,
            "follow": followed(v[own], last[own], j, asked),
            "rest_motion": float(np.linalg.norm(last[~moving] - v[~moving], axis=1).mean() / size),
            "parts_attached": attachment(v, last[None], pid, size, joined, f, reference=asked_pose)[0],
            "component_offset": component_detachment(v, last, pid, comps, size),
            "dragged_vertex_error": float(np.linalg.norm(last[vid] - target) / size)})
        d = row["drags"][-1]
        d["attached"] = bool((d["parts_attached"] != d["parts_attached"] or d["parts_attached"] >= 1.0)
                             and d["component_offset"] < DETACH_TOL)
    row["seconds"] = time.perf_counter() - t0
    return row


def joints_moving(jd, q, share: float = 0.1) -> float:
    """The share of the joints ``jd`` (a JointDecoder) can move (``active`` and ``direct``) that states q (n, k)
    move by at least ``share`` of their span (``JointDecoder.spans``, the larger side) in some state, the joint
    values clipped to their limits: how much of the object prior samples show moving (nan: no such joint)."""
    names = set(jd.active) | set(jd.direct)
    idx = [i for i, j in enumerate(jd.joints) if j.name in names]
    if not idx:
        return float("nan")
    vals = jd.joint_values(q, clip=True).abs().amax(0)[idx]
    reach = jd.spans()[idx].abs().amax(1)
    return float((vals >= share * reach).double().mean())


def summarize(rows: list[dict]) -> dict:
    """Aggregate over objects (prior metrics) and over movable parts (drag metrics), with the targets met."""
    drags = [d for r in rows for d in r["drags"]]
    s = {"objects": len(rows), "movable_parts": len(drags)}
    if drags:
        fol = np.array([d["follow"] for d in drags])
        rest = np.array([d["rest_motion"] for d in drags])
        rest = rest[np.isfinite(rest)]
        s.update(follow_median=float(np.median(fol)), follow_share=float(np.mean(fol >= TARGETS["follow"])),
                 rest_motion=float(np.mean(rest)) if len(rest) else float("nan"),
                 rest_motion_max=float(np.max(rest)) if len(rest) else float("nan"),
                 attached=float(np.mean([d["attached"] for d in drags])),
                 diverged=int(sum(bool(d.get("diverged")) for d in drags)))
    def mean(key):  # over the objects that have the measure (nan: no touching parts)
        x = [r[key] for r in rows if r.get(key, np.nan) == r.get(key)]
        return float(np.mean(x)) if x else float("nan")

    net, own = (sum(int(r.get(k, 0)) for r in rows) for k in ("joints_network", "joints_own"))
    s.update(joints_network=net, joints_own=own)
    s.update({k: mean(k) for k in ("prior_attached", "joint_prior_attached", "joint_prior_moving",
                                   "reduced_attached", "reduced_joint_attached", "reduced_joint_moving",
                                   "prior_rigidity", "joint_prior_rigidity")})
    s["seconds"] = float(sum(r["seconds"] for r in rows))
    return s


def render(rows: list[dict]) -> str:
    """Markdown: per-object rows, then the aggregate (:func:`summarize`) against the targets."""
    s = summarize(rows)
    out = ["| object | category | kind | parts | drags | follow (per part) | rest moves (% size) | attached | "
           "prior attached (network) | prior attached (joints) | prior rigidity | s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fol = ", ".join(f"{d['follow']:.2f}" for d in r["drags"]) or "-"
        rm = ", ".join(f"{100 * d['rest_motion']:.1f}" for d in r["drags"]) or "-"
        att = ", ".join("yes" if d["attached"] else "no" for d in r["drags"]) or "-"
        out.append(f"| {r['object']} | {r['category']} | {r['kind']} | {r['parts']} | {len(r['drags'])} | {fol} | "
                   f"{rm} | {att} | {r['prior_attached']:.3f} | {r.get('joint_prior_attached', np.nan):.3f} | "
                   f"{r['prior_rigidity']:.4f} | {r['seconds']:.0f} |")
    out += ["", "| metric | value | target | met |", "|---|---|---|---|"]

    def line(name, key, target, fmt, ok):
        if key in s:
            out.append(f"| {name} | {fmt.format(s[key])} | {target} | {'yes' if ok(s[key]) else 'no'} |")

    line("movable parts reaching >= 80% of the asked motion", "follow_share", ">= 0.90", "{:.2f}",
         lambda x: x >= TARGETS["follow_share"])
    line("median fraction of the asked motion reached", "follow_median", "-", "{:.2f}", lambda x: True)
    line("rest of the object moves (mean, fraction of size)", "rest_motion", "< 0.02", "{:.4f}",
         lambda x: x < TARGETS["rest_motion"])
    line("drags with every component attached", "attached", "1.00", "{:.2f}", lambda x: x >= TARGETS["attached"])
    line("drags that diverged (counted as not followed, not attached)", "diverged", "0", "{:d}", lambda x: x == 0)
    line("prior samples, the network's own decoding: parts attached", "prior_attached", ">= 0.99", "{:.3f}",
         lambda x: x >= TARGETS["prior_attached"])
    line("prior samples as kinemesh sample writes them (parts along their joints): parts attached",
         "joint_prior_attached", ">= 0.99", "{:.3f}", lambda x: x >= TARGETS["joint_prior_attached"])
    line("prior samples as kinemesh sample writes them: joints moved by >= 10% of their range in some sample",
         "joint_prior_moving", "-", "{:.2f}", lambda x: True)
    line("samples of the reduced coordinates (q ~ N(0, I)): parts attached", "reduced_attached", "-", "{:.3f}",
         lambda x: True)
    line("samples of the reduced coordinates along the joints (kinemesh sample --space reduced): parts attached",
         "reduced_joint_attached", "-", "{:.3f}", lambda x: True)
    line("samples of the reduced coordinates along the joints: joints moved by >= 10% of their range in some sample",
         "reduced_joint_moving", "-", "{:.2f}", lambda x: True)
    line("prior samples, the network's own decoding: within-part rigidity error", "prior_rigidity", "< 0.01",
         "{:.4f}", lambda x: x < TARGETS["prior_rigidity"])
    line("prior samples as kinemesh sample writes them: within-part rigidity error", "joint_prior_rigidity",
         "< 0.01", "{:.4f}", lambda x: x < TARGETS["joint_prior_rigidity"])
    if s.get("joints_network", 0) + s.get("joints_own", 0):
        out.append(f"| joints the drags move by the network's reduced coordinates / by coordinates of their own | "
                   f"{s['joints_network']} / {s['joints_own']} | - | - |")
    out.append(f"\n{s['objects']} objects, {s['movable_parts']} movable parts, {s['seconds']:.0f} s")
    return "\n".join(out)


def evaluate(cfg: RealEvalConfig) -> Result:
    """One row per object of ``cfg.real`` (objects that fail to load are skipped with a warning): the drag test
    of every movable joint and the prior-sample measures (see module doc). Raises InputFileError."""
    import torch

    from kinemesh.eval.articulation import is_real_validation
    from kinemesh.model import load_model
    from kinemesh.progress import tqdm

    root = Path(cfg.real)
    if not root.is_dir():
        raise InputFileError(root, "real-objects folder not found")
    objects = sorted(p for p in root.iterdir() if p.is_dir() and (cfg.split == "all" or is_real_validation(p.name)))
    objects = objects[: cfg.max_objects] if cfg.max_objects else objects
    if not objects:
        raise InputFileError(root, f"no object folders (split {cfg.split})")
    torch.set_num_threads(1)
    model = load_model(cfg.checkpoint).to(dtype=torch.float64)
    rows = []
    for p in tqdm(objects, desc="real objects"):
        try:
            rows.append(evaluate_object(p, model, cfg))
        except KinemeshError as exc:
            log.warning("skipping %s: %s", p.name, exc)
    return Result(rows, model.info)
