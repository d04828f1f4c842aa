"""Latent dynamics vs MuJoCo ground truth (door under gravity, poked soft beam, dropped cloth): per-frame Chamfer-L1.

For held-out synthetic objects (fresh random instances, seeds outside the training generator's range) MuJoCo
simulates the ground truth; kinemesh gets the same initial conditions through the boundary-condition solve
(positions of the first ground-truth frame, vertex velocities of the poke) and integrates its latent
Euler-Lagrange equations. Baselines: the same integrator on a linear PCA subspace of the same instance
(the classical modal reduction) and the rest pose (do nothing). Chamfer-L1 (point-to-triangle, both
directions, x0.5 each) after normalising the rest shape to a unit bounding box, averaged over the frames.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinemesh.errors import ConfigError
from kinemesh.eval import Result, check, option

log = logging.getLogger(__name__)

SCENARIOS = ("door", "beam", "cloth")
KINDS = {"door": "articulated", "beam": "elastic", "cloth": "cloth"}  # object kind (and calibrated prior)
SEED_BASE = 7_000_000  # well outside the seeds the dataset generator uses
VAL_OFFSET = 100  # ``--split val``: objects 100, 101, ... of each scenario (test: 0, 1, ...), to choose settings on


@dataclass
class DynamicsEvalConfig:
    """Options of ``kinemesh eval dynamics``; ``scenarios`` may be a comma list. Raises ConfigError."""

    data: str = option("eval_data/dynamics", "folder caching the MuJoCo ground-truth sequences (generated when "
                       "missing)", metavar="DIR")
    checkpoint: str | None = option(None, "model checkpoint (default: shipped one)", metavar="DIR")
    per_scenario: int = option(2, "objects per scenario (default 2)", min=1)
    split: str = option("test", "test: objects 0, 1, ... of each scenario (the reported numbers); val: objects "
                        f"{VAL_OFFSET}, {VAL_OFFSET + 1}, ... (other seeds), to choose settings on",
                        choices=("test", "val"))
    scenarios: tuple | str = option(",".join(SCENARIOS), "comma-separated subset of door,beam,cloth")
    frames: int = option(24, "ground-truth frames per rollout (default 24)", min=2)
    k_q: int = option(8, "reduced coordinates of both models (default 8)", min=1)
    points: int = option(512, min=1)
    barrier_radius: float | None = option(None, "soft barrier radius in prior std for both models (default: the "
                                          "kind's, articulated 2, elastic and cloth 3)", type=float, metavar="STD")
    samples: int = option(2000, "surface samples per Chamfer evaluation", min=1)
    basis: str = option("auto", "what spans the reduced coordinates (kinemesh simulate --basis); a door's probes "
                        "follow joints predicted from its static shape", choices=("auto", "probes", "prior"))
    integrator: str = option("auto", "time integrator of both models (kinemesh simulate --integrator; auto: local "
                             "for the doors, midpoint for the beam and cloth)", choices=("auto", "midpoint", "rk4", "local", "distilled"))

    def __post_init__(self):
        check(self)
        if isinstance(self.scenarios, str):
            self.scenarios = tuple(s.strip() for s in self.scenarios.split(",") if s.strip())
        if not self.scenarios or any(s not in SCENARIOS for s in self.scenarios):
            raise ConfigError(f"--scenarios {','.join(self.scenarios)!r}: choose from {','.join(SCENARIOS)}")


# ---------------------------------------------------------------- ground truth
def _door_gt(seed: int, n_frames: int, duration: float = 1.2):
    """An oven door / chest lid released from an open angle under gravity (MuJoCo, rigid)."""
    import mujoco

    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.synth.categories import build
    from kinemesh.synth.mjcf import MjcfOptions, body_transforms, load_model

    rng = np.random.default_rng(seed)
    category = ("oven", "chest")[seed % 2]
    obj = build(category, rng)
    joint = next(j for j in obj.movable_joints if j.type == "revolute" and abs(float(j.axis[2])) < 0.3)
    opts = MjcfOptions(timestep=0.002, damping=0.5, contacts="none")
    model = load_model(obj, opts)
    data = mujoco.MjData(model)
    jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint.name)
    lo, hi = joint.limits
    q0 = float(lo + 0.55 * (hi - lo))
    data.qpos[model.jnt_qposadr[jid]] = q0
    mujoco.mj_forward(model, data)
    rest, faces, part_ids = obj.merged(None)
    steps = int(round(duration / opts.timestep))
    every = max(1, steps // (n_frames - 1))

    def frame():
        T = body_transforms(model, data, obj)
        return np.concatenate([p.vertices @ T[p.name][:3, :3].T + T[p.name][:3, 3] for p in obj.parts
                               if len(p.vertices)])

    frames, times = [frame()], [0.0]
    for s in range(steps):
        mujoco.mj_step(model, data)
        if (s + 1) % every == 0 and len(frames) < n_frames:
            frames.append(frame())
            times.append((s + 1) * opts.timestep)
    meta = {"category": category, "kind": "articulated", "source": "kinemesh.eval.dynamics/mujoco", "units": "m",
            "up": "z", "conditions": {"scenario": "door", "joint": joint.name, "initial_value": q0,
                                      "gravity": True, "seed": seed}}
    return KinematicSequence(rest, faces, np.stack(frames), np.asarray(times), part_ids, meta)


def _beam_gt(seed: int, n_frames: int):
    from kinemesh.synth.elastic import elastic_sequence

    seq = elastic_sequence("beam", np.random.default_rng(seed), action="poke", n_frames=n_frames, duration=1.2)
    seq.meta["conditions"]["scenario"] = "beam"
    seq.meta["conditions"]["seed"] = seed
    return seq


def _cloth_gt(seed: int, n_frames: int):
    from kinemesh.synth.cloth import cloth_sequence

    seq = cloth_sequence("towel", np.random.default_rng(seed), n_frames=n_frames, duration=1.2)
    seq.meta["conditions"]["scenario"] = "cloth"
    seq.meta["conditions"]["seed"] = seed
    return seq


def ground_truth(scenario: str, index: int, n_frames: int, folder: Path):
    """Load or generate (and cache) ground-truth sequence ``index`` of ``scenario``."""
    from kinemesh.data.sequence import KinematicSequence

    path = folder / f"{scenario}_{index:02d}.npz"
    if path.is_file():
        seq = KinematicSequence.load(path)
        if seq.n_frames == n_frames:
            return seq
    seed = SEED_BASE + 1000 * SCENARIOS.index(scenario) + index
    seq = {"door": _door_gt, "beam": _beam_gt, "cloth": _cloth_gt}[scenario](seed, n_frames)
    seq.save(path)
    return seq


# ---------------------------------------------------------------- simulation with the same conditions
def _conditions(scenario: str, gt, fps: float):
    """(SimulationSpec, initial positions (N, 3) or None, (vertex ids, impulses (h, 3) N s, pulse duration s)
    or None) matching the ground-truth set-up."""
    import trimesh

    from kinemesh.dynamics.scene import SimulationSpec

    c = gt.meta.get("conditions", {})
    n = gt.n_frames
    rest = gt.rest_vertices.astype(np.float64)
    if scenario == "door":
        return SimulationSpec(kind="articulated", frames=n, fps=fps, gravity=True), gt.frames[0], None
    if scenario == "beam":
        size = float(np.max(np.ptp(rest, axis=0)))
        tgt, d = np.asarray(c["point"]), np.asarray(c["direction"])
        # the synth poke: a total impulse spread evenly over the region within 0.4 size of the point
        ids = np.where(np.linalg.norm(rest - tgt, axis=1) < 0.4 * size)[0]
        if len(ids) > 256:
            ids = np.sort(np.random.default_rng(0).choice(ids, 256, replace=False))
        impulses = np.tile(d * float(c["impulse"]) / len(ids), (len(ids), 1))
        mat = gt.meta.get("material", {})
        mass = None
        if "density" in mat:
            mass = float(mat["density"]) * abs(float(trimesh.Trimesh(rest, gt.faces, process=False).volume))
        # resting on the scene's floor (its contact surface is where the rest mesh lies), same friction
        young = float(mat["young"]) if "young" in mat else None
        return (SimulationSpec(kind="elastic", frames=n, fps=fps, gravity=True, mass=mass, young=young,
                               floor=float(rest[:, 2].min()), friction=float(mat.get("friction", 0.8))), None,
                (ids, impulses, float(c.get("duration", 0.0))))
    pins = tuple(int(i) for i in c.get("pinned_corners", ()))
    mat = gt.meta.get("material", {})
    return (SimulationSpec(kind="cloth", frames=n, fps=fps, gravity=True, pins=pins, floor=0.0,
                           friction=float(mat.get("friction", 0.8))), None, None)


def rollout(decoder, gt, scenario: str, fps: float, barrier_radius: float | None = None, articulation=None,
            part_names=None, integrator: str = "auto"):
    """(Vertices (T, N, 3), Rollout) of a latent rollout of ``decoder`` with the GT's initial conditions; an
    articulated object's parts along ``articulation``'s joints when given (``build_system``)."""
    import torch

    from kinemesh.dynamics.boundary import impulse_velocity, solve_positions
    from kinemesh.dynamics.integrators import integrate
    from kinemesh.dynamics.scene import build_system, decode_vertices, rest_offset, stiffen_barrier, torch_threads
    from kinemesh.dynamics.system import PointForce, State, make_handles

    spec, x0, poke = _conditions(scenario, gt, fps)
    spec.integrator = integrator
    spec.barrier_radius = None if barrier_radius is None else float(barrier_radius)
    rest = gt.rest_vertices.astype(np.float64)
    with torch_threads(1):
        system, info = build_system(decoder, rest, gt.faces, spec, articulation=articulation, part_names=part_names)
        q0 = system.q_rest.clone()
        if x0 is not None:
            ids = np.sort(np.random.default_rng(0).choice(len(rest), size=min(256, len(rest)), replace=False))
            q0, _ = solve_positions(system, make_handles(system.decoder, ids), x0[ids], q_init=system.q_rest)
        qd0 = torch.zeros_like(q0)
        if poke is not None:  # the same force pulse as MuJoCo's: impulse / duration during ``duration`` s
            ids, impulses, duration = poke
            if duration > 0:
                system.forces.append(PointForce(make_handles(system.decoder, ids),
                                                torch.as_tensor(impulses / duration), 0.0, duration))
            else:
                qd0 = impulse_velocity(system, make_handles(system.decoder, ids), q0, impulses)
        stiffen_barrier(system, State(q0, qd0))
        roll = integrate(system, State(q0, qd0), gt.n_frames, fps=fps, substeps=spec.substeps,
                         integrator=info["integrator"])
        # same rest correction as ``kinemesh simulate``: the motion is added to the exact rest mesh
        frames = decode_vertices(system.decoder, roll.q, rest_offset=rest_offset(system.decoder, system.q_rest))
    return frames, roll


def _chamfer_frames(pred, gt, samples: int) -> np.ndarray:
    from kinemesh.geometry.metrics import chamfer
    from kinemesh.geometry.normalize import apply, normalization

    center, scale = normalization(gt.rest_vertices)
    return np.asarray([chamfer(apply(pred[t], center, scale), apply(gt.frames[t], center, scale), gt.faces,
                               gt.faces, n_samples=samples, seed=t) for t in range(gt.n_frames)])


def evaluate(cfg: DynamicsEvalConfig) -> Result:
    """One row per ground-truth object: scenario, index, object, vertices, the per-frame Chamfer-L1 (T,) of kinemesh,
    the PCA baseline and the rest pose (NaN where a rollout diverged) and kinemesh's rollout seconds. Writes the
    ground truth it generates to ``cfg.data``."""
    import torch

    from kinemesh.articulation.probes import motion_probes
    from kinemesh.dynamics.linear import LinearDecoder
    from kinemesh.dynamics.scene import torch_threads
    from kinemesh.model import load_model
    from kinemesh.progress import tqdm
    from kinemesh.reduce import ReductionConfig, bind

    model = load_model(cfg.checkpoint).to(dtype=torch.float64)
    folder = Path(cfg.data)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    t_all = time.perf_counter()
    first = VAL_OFFSET if cfg.split == "val" else 0
    jobs = [(s, first + i) for s in cfg.scenarios for i in range(cfg.per_scenario)]
    for scenario, i in tqdm(jobs, desc="eval dynamics", unit="object"):
        gt = ground_truth(scenario, i, cfg.frames, folder)
        fps = float((gt.n_frames - 1) / max(float(gt.times[-1] - gt.times[0]), 1e-9))
        rest = gt.rest_vertices.astype(np.float64)
        probes = art = names = None
        if cfg.basis != "prior" and KINDS[scenario] == "articulated" and gt.part_ids is not None:
            names = [f"part_{p}" for p in range(int(gt.part_ids.max()) + 1)]
            probes, _, art = motion_probes(rest, gt.faces, gt.part_ids, names, None)  # joints predicted, not the truth
        with torch_threads(1):
            dec = bind(rest, gt.faces, model, kind=KINDS[scenario], part_ids=gt.part_ids, n_points=cfg.points,
                       reduction=ReductionConfig(k_q=min(cfg.k_q, model.latent_dim), basis=cfg.basis),
                       probes=probes).decoder
        res = {"scenario": scenario, "index": i, "object": f"{gt.meta['category']} #{i}", "vertices": len(rest)}
        t0 = time.perf_counter()
        try:
            pred, roll = rollout(dec, gt, scenario, fps, cfg.barrier_radius, art, names, cfg.integrator)
            res["kinemesh"] = _chamfer_frames(pred, gt, cfg.samples)
        except Exception as exc:  # a diverged rollout is a result, not a crash of the benchmark
            log.warning("%s %d: kinemesh rollout failed: %s", scenario, i, exc)
            res["kinemesh"] = np.full(gt.n_frames, np.nan)
        res["kinemesh_s"] = time.perf_counter() - t0
        lin = LinearDecoder(dec, k=dec.latent_dim, n_samples=128)
        try:
            pred_lin, _ = rollout(lin, gt, scenario, fps, cfg.barrier_radius, integrator=cfg.integrator)
            res["pca"] = _chamfer_frames(pred_lin, gt, cfg.samples)
        except Exception as exc:
            log.warning("%s %d: PCA rollout failed: %s", scenario, i, exc)
            res["pca"] = np.full(gt.n_frames, np.nan)
        res["rest"] = _chamfer_frames(np.broadcast_to(gt.rest_vertices, gt.frames.shape), gt, cfg.samples)
        rows.append(res)
    return Result(rows, getattr(model, "info", {}), seconds=time.perf_counter() - t_all)


def render(rows: list[dict]) -> str:
    """The markdown table: per object the mean (and final-frame) Chamfer-L1 of each method, then per scenario."""

    def fmt(x):
        return "n/a" if not np.isfinite(x) else f"{x:.4f}"

    lines = ["| scenario | object | vertices | kinemesh (latent, ours) | PCA subspace, same integrator | "
             "rest pose | kinemesh final frame | PCA final frame |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['scenario']} | {r['object']} | {r['vertices']} | {fmt(np.mean(r['kinemesh']))} | "
                     f"{fmt(np.mean(r['pca']))} | {fmt(np.mean(r['rest']))} | {fmt(r['kinemesh'][-1])} | "
                     f"{fmt(r['pca'][-1])} |")
    for s in dict.fromkeys(r["scenario"] for r in rows):
        sel = [r for r in rows if r["scenario"] == s]
        m = {k: float(np.mean([np.mean(r[k]) for r in sel])) for k in ("kinemesh", "pca", "rest")}
        lines.append(f"| **{s} mean** | {len(sel)} objects | | **{fmt(m['kinemesh'])}** | **{fmt(m['pca'])}** | "
                     f"**{fmt(m['rest'])}** | | |")
    return "\n".join(lines)


def report(res: Result, cfg: DynamicsEvalConfig, command: str) -> str:
    """The markdown report of :func:`evaluate`'s result: set-up, table and the per-frame curves as JSON."""
    from kinemesh.model.checkpoint import DEFAULT_CHECKPOINT

    curves = {f"{r['scenario']}_{r['index']}": {k: np.asarray(r[k]).tolist() for k in ("kinemesh", "pca", "rest")}
              for r in res.rows}
    ck_info = json.dumps(res.model_info, default=str)[:300]
    barrier_text = ("the kind's default (articulated 2, elastic and cloth 3)" if cfg.barrier_radius is None
                    else f"{cfg.barrier_radius:g}")
    return f"""# Dynamics vs MuJoCo ground truth

Command: `{command}` ({res.seconds:.0f} s on 2 CPU cores, no GPU; checkpoint `{cfg.checkpoint or DEFAULT_CHECKPOINT}`, info {ck_info}).

Held-out synthetic objects (fresh random instances, generator seeds from {SEED_BASE}, never used for
training) simulated by MuJoCo 4: **door** = an oven door or chest lid released from 55 % open under gravity
(rigid, joint damping 0.5, joint limits); **beam** = a soft beam (flexcomp, linear elastic) resting on the floor and
poked by a short force pulse; **cloth** = a towel pinned at two corners, released from horizontal under gravity.
kinemesh gets the same conditions: vertex positions of the first frame through the boundary-condition solve
(door; NeuROK Sec. 5.3), the same force pulse on the same region, the same mass, Young's modulus and floor
friction, gravity and a floor under the beam (beam), the pinned corners, gravity and the scene's floor (cloth).
Beam and towel are free bodies: six rigid-body coordinates are added to the latent ones (floating frame,
`kinemesh/dynamics/floating.py`); the door's parts cannot pass through the surfaces they touch at rest (part
stops). Both models use k_q = {cfg.k_q} latent coordinates in the calibrated prior of the object's kind, a
soft barrier beyond {barrier_text} prior std, the default stiffness/damping of the object kind (the beam's from
its Young's modulus; nothing fitted to the ground truth) and the implicit-midpoint integrator; the PCA baseline
is a linear subspace of the same instance's decoded prior samples with the same rigid coordinates, contacts and
forces. Metric: Chamfer-L1 (point-to-triangle, both directions x0.5, rest shape normalised to a unit bounding
box), mean over the {cfg.frames} frames of the rollout (lower is better).

{render(res.rows)}

Per-frame curves are in the JSON block below (keys: scenario_index -> kinemesh / pca / rest).

<details><summary>per-frame Chamfer-L1</summary>

```json
{json.dumps(curves)}
```
</details>
"""
