"""Inverse-kinematics benchmark (NeuROK Table 1) on held-out data, with baselines side by side.

For every target (a held-out sequence's rest mesh and one of its frames, or a real PartNet-Mobility object
at a sampled joint configuration), every method fits the rest mesh to the target *without* using vertex
correspondences (Chamfer data term, as for a scan of any topology); correspondences are used only to score
the fit. Metrics are computed after normalizing by the rest shape (bbox centred, longest side 1, docs/architecture.md):

- Chamfer-L1 / Chamfer-L2: surface samples to the other mesh's surface (point-to-triangle), both directions;
- IoU: volumetric IoU (random-point occupancy for watertight meshes, voxels otherwise);
- vertex error: mean distance between corresponding vertices;
- motion explained: 1 - sum(fit vertex error) / sum(rest-pose vertex error) over targets (ratio of means,
  so targets that barely move do not dominate);
- rigidity: mean change of within-part distances of the fit, fraction of object size (0 = rigid parts).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kinemesh.errors import ConfigError, InputFileError, KinemeshError
from kinemesh.eval import Result, check, option

log = logging.getLogger(__name__)

METHODS = ("rest", "neurok", "neurok_q", "neurok_z", "pca", "nearest", "ffd", "oracle")
LABELS = {
    "rest": "rest pose (do nothing)",
    "neurok": "NeuROK (ours: reduced q, then z polish)",
    "neurok_q": "NeuROK, reduced q only (no z polish)",
    "neurok_z": "NeuROK w/o model reduction (z)",
    "pca": "PCA of training deformations",
    "nearest": "nearest training pose",
    "ffd": "free-form + Laplacian/edge reg.",
    "oracle": "oracle articulation (GT joints)",
}
PROTOCOLS = {
    "vertex": "target = a pose of the same mesh, vertex correspondences known (the paper's setting)",
    "chamfer": "target = a scan: Chamfer data term, no correspondences",
}
GROUPS = {"val": "validation instances", "test": "held-out instances", "test_category": "held-out categories",
          "real_val": "real PartNet-Mobility, validation objects", "real": "real PartNet-Mobility"}
PAPER = "| NeuROK (paper, PartNet-Mobility, GPU) | 0.028 | 0.028 | 0.764 | - | - | - | - |"


@dataclass
class IKEvalConfig:
    """Options of ``kinemesh eval ik``; ``methods`` may be a comma list. Raises ConfigError."""

    data: str | None = option(None, "dataset folder with manifest.jsonl (synthetic held-out splits)")
    split: str = option("all", "held-out instances (test), held-out categories (test_category) or both (all); val = "
                        "the validation split, for choosing IK settings without looking at the test splits",
                        choices=("all", "test", "test_category", "val"))
    checkpoint: str | None = option(None, "model checkpoint folder (default: the shipped model)")
    real: str | None = option(None, "folder of real PartNet-Mobility objects (never trained on)")
    real_val: str | None = option(None, "folder of real training objects (data/real_train): the same protocol as --real "
                                  "on a fixed validation subset of them (--real-val-objects), for choosing settings")
    real_val_objects: int = option(12, "objects of --real-val: a seeded sample (--seed) of those whose id falls in "
                                   "the validation split of `kinemesh synth --from-urdf` (hash of the id)", min=1)
    real_configs: int = option(2, "sampled joint configurations per real object", min=1)
    real_max_vertices: int = option(10000, "vertex budget of a real object", min=1)
    real_parts: str = option("links", "parts the model is bound with on a real object: its URDF links (a link on a "
                             "fixed joint merged into its parent), as `kinemesh ik` binds a URDF input, or the mesh's "
                             "connected components (the protocol before 2026-11-24)", choices=("links", "components"))
    real_basis: str = option("probes", "NeuROK's reduced coordinates on a real object: the active subspace of prior "
                             "samples (IK_REDUCTION), or motion probes along its URDF joints (probes) or along joints "
                             "predicted from the static shape (predicted-probes)",
                             choices=("prior", "probes", "predicted-probes"))
    real_base: str = option("fixed", "NeuROK on a real object: the whole object may move (free), or its base part "
                            "(the largest) stays at rest (fixed), as `kinemesh simulate` holds it",
                            choices=("free", "fixed"))
    real_rest: str = option("decoded", "NeuROK on a real object: parts move from the model's reconstruction of the "
                            "rest pose (decoded) or relative to it, applied to the true rest mesh (anchored: "
                            "kinemesh.ik.pipeline.RestAnchoredDecoder)", choices=("decoded", "anchored"))
    real_motion: str = option("joints", "NeuROK on a real object: parts move as the network decodes them (decoded) "
                              "or only along the object's joints, its root held (joints: kinemesh.dynamics.joints."
                              "JointDecoder, as `kinemesh simulate` moves them; --real-rest then does not apply)",
                              choices=("decoded", "joints"))
    max_targets: int = option(30, "targets per split group (seeded subset)", min=1)
    frames_per_seq: int = option(2, "target frames per held-out sequence", min=1)
    methods: tuple | str = option(",".join(METHODS), f"comma list of {', '.join(METHODS)}")
    ablation: list = option([], "also evaluate NeuROK with another checkpoint (repeatable)", metavar="NAME=DIR",
                            action="append")
    pool_size: int = option(200, "training deformations per PCA/nearest pool", min=1)
    calibrated_prior: bool = option(False, "reduce in the calibrated prior (kinemesh calibrate) instead of "
                                    "N(mu_cond, I)")
    subspace_method: str = option("jacobian", choices=("jacobian", "gradient"))
    k_q: int | None = option(None, "fixed reduced dimension (default: 99%% explained; on real objects bound with "
                              "their joints at least 8, URDFBinding.min_k)", type=int, min=1)
    rigidity: float = option(0.0, "IK rigidity weight for NeuROK")
    fit_loss: str = option("both", "data term of every method: vertex (the target is a pose of the same mesh, vertex "
                           "correspondences known: the paper's setting), chamfer (no correspondences, as for a "
                           "scan), or both protocols side by side (default)", choices=("both", "vertex", "chamfer"))
    ik_steps: int | None = option(None, "override the Adam steps of every method (L-BFGS gets half); for quick runs",
                                  type=int, min=1)
    metric_samples: int = option(10000, "surface samples per side for Chamfer", min=1)
    iou_points: int = option(20000, "query points for volumetric IoU (watertight)", min=1)
    iou_voxels: int = option(32, "voxel grid resolution of IoU for meshes that are not watertight (real objects, "
                             "cloth)", min=2)
    spectrum: str | None = option(None, "PNG of the active-subspace eigen-spectrum of the first evaluated instance")
    seed: int = option(0)
    rows: str | None = option(None, "per-target rows as JSON lines, rewritten after every target; targets already in "
                              "it are skipped (resume)")
    device: str = option("cpu", choices=("cpu",))

    def __post_init__(self):
        check(self)
        if self.data is None and self.real is None and self.real_val is None:
            raise ConfigError("give --data DIR (synthetic held-out splits) and/or --real DIR / --real-val DIR")
        if isinstance(self.methods, str):
            self.methods = tuple(m.strip() for m in self.methods.split(",") if m.strip())
        bad = [m for m in self.methods if m not in METHODS]
        if bad:
            raise ConfigError(f"--methods: unknown {bad}, expected some of {METHODS}")
        bad = [a for a in self.ablation if "=" not in a]
        if bad:
            raise ConfigError(f"--ablation {bad[0]!r}: expected NAME=DIR")


# ------------------------------------------------------------------------------------------------ targets
@dataclass
class EvalTarget:
    """One IK problem: fit ``rest_vertices`` to ``target_vertices`` (same topology, used for scoring only)."""

    group: str
    kind: str
    category: str
    name: str
    rest_vertices: np.ndarray
    faces: np.ndarray
    target_vertices: np.ndarray
    part_ids: np.ndarray | None = None
    part_names: list | None = None
    joints: list | None = None
    instance_key: str = ""
    extra: dict = field(default_factory=dict)
    model_part_ids: np.ndarray | None = None
    """(N,) the part of every vertex the model is bound with, as ``kinemesh ik`` binds a URDF input (its links,
    a link on a fixed joint merged into its parent), indexing ``model_part_names``; None = the mesh's own
    connected components."""
    model_part_names: list | None = None
    articulation: object = None
    """The ArticulatedObject of a real target (its joints make the motion probes)."""


def synthetic_targets(data: Path, splits, max_targets: int, frames_per_seq: int, seed: int):
    """Held-out targets from a dataset folder: {split: [EvalTarget]} and the training entries."""
    from kinemesh.data.manifest import read_manifest
    from kinemesh.data.sequence import KinematicSequence

    entries = read_manifest(data / "manifest.jsonl")
    train = [e for e in entries if e["split"] == "train"]
    out = {}
    for split in splits:
        ents = sorted((e for e in entries if e["split"] == split), key=lambda e: e["path"])
        rng = random.Random(seed)
        rng.shuffle(ents)
        # round-robin over categories so a few big categories do not take every slot
        by_cat: dict[str, list] = {}
        for e in ents:
            by_cat.setdefault(str(e["category"]), []).append(e)
        order = []
        while any(by_cat.values()):
            for c in sorted(by_cat):
                if by_cat[c]:
                    order.append(by_cat[c].pop(0))
        targets = []
        for e in order:
            if len(targets) >= max_targets:
                break
            seq = KinematicSequence.load(data / e["path"])
            motion = np.linalg.norm(seq.frames - seq.rest_vertices[None], axis=-1).mean(-1)  # (T,)
            moving = np.flatnonzero(motion > 1e-6 * max(float(np.ptp(seq.rest_vertices, 0).max()), 1e-9))
            if len(moving) == 0:
                continue
            r = np.random.default_rng([seed, len(targets)])
            picks = r.choice(moving, min(frames_per_seq, len(moving), max_targets - len(targets)), replace=False)
            parts = seq.meta.get("parts") or []
            for t in sorted(picks):
                targets.append(EvalTarget(
                    group=split, kind=seq.kind, category=seq.category, name=f"{e['path']}#{t}",
                    rest_vertices=seq.rest_vertices.astype(np.float64), faces=seq.faces.astype(np.int64),
                    target_vertices=seq.frames[t].astype(np.float64), part_ids=seq.part_ids,
                    part_names=[p["name"] for p in parts] if parts else None,
                    joints=seq.meta.get("joints"), instance_key=e["path"]))
        out[split] = targets
    return out, train


def validation_objects(folder: Path, n: int, seed: int) -> list[Path]:
    """The real validation objects of a folder of training objects (``is_real_validation``: the objects
    `kinemesh synth --from-urdf` holds out, as `kinemesh eval articulation --real-val` uses), a seeded sample of
    ``n`` of them (all when fewer), sorted by name."""
    from kinemesh.eval.articulation import is_real_validation

    subs = sorted(p for p in folder.iterdir() if p.is_dir() and is_real_validation(p.name))
    return sorted(random.Random(seed).sample(subs, min(n, len(subs))))


def real_targets(folder: Path, n_configs: int, max_vertices: int, seed: int, max_targets: int,
                 group: str = "real", objects: list[Path] | None = None):
    """Real PartNet-Mobility objects (the sub-folders of ``folder``, or ``objects``) at sampled joint
    configurations; the model is bound with the objects' links as parts (``EvalTarget.model_part_ids``)."""
    from kinemesh.data.partnet import load_articulated
    from kinemesh.geometry.segments import link_parts

    targets = []
    for sub in objects if objects is not None else sorted(p for p in folder.iterdir() if p.is_dir()):
        if len(targets) >= max_targets:
            break
        try:
            obj = load_articulated(sub, max_vertices=max_vertices)
        except KinemeshError as exc:
            log.warning("skipping real object %s: %s", sub.name, exc)
            continue
        if not obj.movable_joints:
            continue
        rest, faces, pids = obj.merged(None)
        to_part, kept = link_parts(obj)
        rng = np.random.default_rng([seed, len(targets)])
        for c in range(n_configs):
            vals = obj.sample_values(rng)
            tv = obj.merged(vals)[0]
            targets.append(EvalTarget(
                group=group, kind="articulated", category=obj.category, name=f"{sub.name}#{c}",
                rest_vertices=rest, faces=faces, target_vertices=tv, part_ids=pids,
                part_names=[p.name for p in obj.parts], joints=[j.to_dict() for j in obj.joints],
                instance_key=sub.name, model_part_ids=to_part[pids], model_part_names=kept, articulation=obj))
    return targets


# ------------------------------------------------------------------------------------------------ pools
class TrainingPools:
    """Training sequences by category (fallback: same kind) for the PCA and nearest-pose baselines."""

    def __init__(self, data: Path | None, train_entries: list, max_seqs: int = 24, seed: int = 0):
        self.data, self.entries, self.max_seqs, self.seed = data, train_entries, max_seqs, seed
        self._cache: dict[tuple, list] = {}

    def sequences(self, category: str, kind: str):
        """(sequences, how) with how = "category" or "kind" (fallback when the category is unseen)."""
        from kinemesh.data.sequence import KinematicSequence

        def norm(c):  # "Microwave" (PartNet-Mobility) matches "microwave" (synthetic)
            return str(c).lower().replace(" ", "_")

        ents = [e for e in self.entries if norm(e["category"]) == norm(category)]
        how = "category"
        if not ents:
            ents = [e for e in self.entries if str(e["kind"]) == kind]
            how = "kind"
        key = (how, category if how == "category" else kind)
        if key not in self._cache:
            ents = sorted(ents, key=lambda e: e["path"])
            random.Random(self.seed).shuffle(ents)
            self._cache[key] = [KinematicSequence.load(self.data / e["path"]) for e in ents[: self.max_seqs]]
        return self._cache[key], how


# ------------------------------------------------------------------------------------------------ metrics
class Scorer:
    """Metrics of fits of one target (see module docstring), normalized by the rest shape; what depends on the
    target alone (its surface samples, its surface index) is computed once for all methods."""

    def __init__(self, t: EvalTarget, n_samples: int, iou_points: int, seed: int, iou_voxels: int = 32):
        from kinemesh.geometry import metrics
        from kinemesh.geometry.normalize import normalization
        from kinemesh.geometry.sampling import sample_surface

        self.t, self.n, self.iou_points, self.seed, self.iou_voxels = t, n_samples, iou_points, seed, iou_voxels
        self.c, self.s = normalization(t.rest_vertices)
        self.tv, self.rv = (t.target_vertices - self.c) * self.s, (t.rest_vertices - self.c) * self.s
        # the samples and distances of metrics.chamfer (same seed streams), computed once for L1 and L2
        self.pt = sample_surface(self.tv, t.faces, n_samples, seed=np.random.default_rng([int(seed), 1]))[0]
        self.target_index = metrics.surface_index(self.tv, t.faces)

    def __call__(self, fit_v: np.ndarray) -> dict:
        from kinemesh.geometry import metrics
        from kinemesh.geometry.sampling import sample_surface

        t = self.t
        fv = (np.asarray(fit_v, dtype=np.float64) - self.c) * self.s
        pf = sample_surface(fv, t.faces, self.n, seed=np.random.default_rng([int(self.seed), 0]))[0]
        d_ft = np.sqrt(self.target_index.sqdist(pf))
        d_tf = metrics.point_to_surface_distance(self.pt, fv, t.faces)
        out = {
            "chamfer_l1": float(0.5 * (d_ft.mean() + d_tf.mean())),
            "chamfer_l2": float(0.5 * ((d_ft ** 2).mean() + (d_tf ** 2).mean())),
            "vertex_error": metrics.mean_vertex_error(fv, self.tv),
            "rest_vertex_error": metrics.mean_vertex_error(self.rv, self.tv),
        }
        try:
            out["iou"] = metrics.volumetric_iou((fv, t.faces), (self.tv, t.faces), n_points=self.iou_points,
                                                seed=self.seed, voxel_resolution=self.iou_voxels)
        except Exception as exc:  # noqa: BLE001 - IoU needs a usable volume; report NaN, never abort the table
            log.debug("IoU failed for %s: %s", t.name, exc)
            out["iou"] = float("nan")
        if t.part_ids is not None and len(np.unique(t.part_ids)) > 1:
            out["rigidity"] = metrics.within_part_rigidity(self.rv, fv, t.part_ids, seed=self.seed)
        else:
            out["rigidity"] = float("nan")
        return out


# ------------------------------------------------------------------------------------------------ methods
def _ik_configs(steps: int | None = None, loss: str = "chamfer"):
    """Per-method IK settings (same harness and data term ``loss``; free-form gets more steps for its many
    unknowns)."""
    from kinemesh.ik import IKConfig

    cfgs = {
        "neurok": IKConfig(loss=loss),
        "pca": IKConfig(loss=loss, prior_weight=0.01),
        "ffd": IKConfig(loss=loss, prior_weight=0.0, n_candidates=1, n_starts=1, adam_steps=100,
                        adam_lr=0.005, lbfgs_steps=30),
        "oracle": IKConfig(loss=loss, prior_weight=0.0, n_candidates=1),  # + uniform joint-value starts
    }
    if steps is not None:  # the oracle has a handful of unknowns: it keeps its settings
        for name, c in cfgs.items():
            if name == "oracle":
                continue
            c.adam_steps, c.lbfgs_steps = steps, steps // 2
            c.n_candidates = min(c.n_candidates, 8)
    return cfgs


class Runner:
    """Runs every method on targets, caching per-instance work (model binding, subspace, pool)."""

    def __init__(self, cfg: IKEvalConfig, models: dict, pools: TrainingPools | None):
        self.cfg, self.models, self.pools = cfg, models, pools
        self.protocols = list(PROTOCOLS) if cfg.fit_loss == "both" else [cfg.fit_loss]
        self.cfgs = {p: _ik_configs(cfg.ik_steps, p) for p in self.protocols}
        self._inst: dict = {}
        self._pool: dict = {}
        self.notes: set[str] = set()
        self._plotted = False

    def _neurok(self, model_name: str, t: EvalTarget, reduced: bool):
        from kinemesh.ik.pipeline import IK_REDUCTION, URDFBinding, bind_ik

        key = (model_name, t.instance_key, reduced)
        if key not in self._inst:
            if len(self._inst) > 8:
                self._inst.clear()
            red = replace(IK_REDUCTION, enabled=reduced, k_q=self.cfg.k_q,
                          method=self.cfg.subspace_method, calibrated_prior=self.cfg.calibrated_prior)
            t0 = time.perf_counter()
            real = t.model_part_ids is not None and self.cfg.real_parts == "links"
            how = URDFBinding(basis=self.cfg.real_basis, fixed_base=self.cfg.real_base == "fixed",
                              anchored=self.cfg.real_rest == "anchored", joints=self.cfg.real_motion == "joints")
            dec, sub, _ = bind_ik(t.rest_vertices, t.faces, self.models[model_name], red,
                                  t.model_part_ids if real else None, t.model_part_names,
                                  t.articulation if real else None, how, seed=self.cfg.seed)
            if sub is not None and self.cfg.spectrum and not self._plotted:
                from kinemesh.viz.plots import plot_spectrum

                plot_spectrum(self.cfg.spectrum, sub.eigenvalues, sub.k)
                self._plotted = True
                self.notes.add(f"eigen-spectrum of {t.name} ({sub.method}, k_q = {sub.k}, "
                               f"{sub.explained:.3f} explained): {self.cfg.spectrum}")
            self._inst[key] = (dec, sub, time.perf_counter() - t0)
            return self._inst[key]
        return self._inst[key][:2] + (0.0,)  # bound before: no setup time to take off this fit's

    def _pool_for(self, t: EvalTarget):
        from kinemesh.ik import baselines as B

        if t.instance_key not in self._pool:
            self._pool.clear()
            seqs, how = self.pools.sequences(t.category, t.kind)
            if how == "kind":
                self.notes.add(f"PCA/nearest pools for '{t.category}' ({GROUPS.get(t.group, t.group)}) use all "
                               f"training sequences of kind '{t.kind}' (category unseen in training)")
            self._pool[t.instance_key] = B.transferred_pool(t.rest_vertices, seqs, self.cfg.pool_size, self.cfg.seed)
        return self._pool[t.instance_key]

    def run(self, t: EvalTarget) -> list[dict]:
        """Rows of every method on ``t``, for each fitting protocol."""
        rows, rest_metrics = [], {}  # the rest pose is the same under every protocol: scored once
        scorer = Scorer(t, self.cfg.metric_samples, self.cfg.iou_points, self.cfg.seed, self.cfg.iou_voxels)
        for proto in self.protocols:
            rows += self._run(t, proto, rest_metrics, scorer)
        return rows

    def _run(self, t: EvalTarget, proto: str, rest_metrics: dict, scorer: Scorer) -> list[dict]:
        from kinemesh.ik import baselines as B
        from kinemesh.ik import make_target, solve

        target = make_target(t.target_vertices, t.faces, t.rest_vertices, t.faces,
                             correspondences=proto == "vertex", seed=self.cfg.seed)
        cfgs = self.cfgs[proto]
        rows = []
        jobs = list(self.cfg.methods) + [f"ablation:{n}" for n in self.models if n != "default"]
        for m in jobs:
            t0 = time.perf_counter()
            setup = 0.0
            try:
                if m == "rest":
                    fit = t.rest_vertices
                elif m in ("neurok", "neurok_q", "neurok_z") or m.startswith("ablation:"):
                    name = m.split(":", 1)[1] if m.startswith("ablation:") else "default"
                    dec, sub, setup = self._neurok(name, t, reduced=m != "neurok_z")
                    cfg = replace(cfgs["neurok"], rigidity_weight=self.cfg.rigidity,
                                  refine_z_steps=0 if m == "neurok_q" else cfgs["neurok"].refine_z_steps)
                    fit = solve(dec, target, cfg).vertices
                elif m in ("pca", "nearest"):
                    if self.pools is None:
                        continue
                    pool = self._pool_for(t)
                    if m == "pca":
                        dec = B.pca_decoder(t.rest_vertices, t.faces, pool, seed=self.cfg.seed)
                        fit = solve(dec, target, cfgs["pca"]).vertices
                    else:
                        fit = B.nearest_pose(t.rest_vertices, t.faces, pool, target, seed=self.cfg.seed)[0]
                elif m == "ffd":
                    dec = B.FreeFormDecoder(t.rest_vertices, t.faces, seed=self.cfg.seed)
                    fit = solve(dec, target, cfgs["ffd"], regularizer=dec.regularizer).vertices
                elif m == "oracle":
                    if t.kind != "articulated" or not t.joints or t.part_ids is None or not t.part_names:
                        continue
                    dec = B.ArticulationDecoder(t.rest_vertices, t.faces, t.part_ids, t.part_names, t.joints,
                                                seed=self.cfg.seed)
                    cfg = cfgs["oracle"]
                    init = dec.sample_latents(max(cfg.n_candidates - 1, 1), seed=self.cfg.seed)
                    fit = solve(dec, target, cfg, init=init).vertices
                else:
                    raise ConfigError(f"unknown IK method {m!r}")
            except KinemeshError as exc:
                log.warning("%s on %s failed: %s", m, t.name, exc)
                self.notes.add(f"{m} failed on some targets (e.g. {t.name}: {exc})")
                continue
            sec = time.perf_counter() - t0 - setup
            row = {"group": t.group, "kind": t.kind, "category": t.category, "target": t.name, "method": m,
                   "fit_loss": proto, "seconds": sec, "setup_seconds": setup}
            if m == "rest" and rest_metrics:
                metrics = rest_metrics
            else:
                metrics = scorer(fit)
                if m == "rest":
                    rest_metrics.update(metrics)
            row.update(metrics)
            rows.append(row)
        return rows


# ------------------------------------------------------------------------------------------------ tables
def _nanmean(x):
    x = np.asarray([v for v in x if v is not None and math.isfinite(v)], dtype=np.float64)
    return float(x.mean()) if len(x) else float("nan")


def _fmt(x, nd=4):
    return "-" if x is None or not math.isfinite(x) else f"{x:.{nd}f}"


def summarize(rows: list[dict]) -> dict:
    """(group, method) -> aggregated metrics (and (group, kind, method))."""
    agg = {}
    keys = {(r["group"], r["method"]) for r in rows} | {(r["group"], r["kind"], r["method"]) for r in rows}
    for key in keys:
        sel = [r for r in rows if (r["group"], r["method"]) == key or (r["group"], r["kind"], r["method"]) == key]
        fit_err = sum(r["vertex_error"] for r in sel)
        rest_err = sum(r["rest_vertex_error"] for r in sel)
        agg[key] = {
            "n": len(sel),
            "chamfer_l1": _nanmean(r["chamfer_l1"] for r in sel),
            "chamfer_l2": _nanmean(r["chamfer_l2"] for r in sel),
            "iou": _nanmean(r["iou"] for r in sel),
            "vertex_error": _nanmean(r["vertex_error"] for r in sel),
            "motion_explained": 1.0 - fit_err / rest_err if rest_err > 0 else float("nan"),
            "rigidity": _nanmean(r["rigidity"] for r in sel),
            "seconds": _nanmean(r["seconds"] for r in sel),
        }
    return agg


def method_label(m: str) -> str:
    if m.startswith("ablation:"):
        return f"NeuROK ablation: {m.split(':', 1)[1]}"
    return LABELS.get(m, m)


def _baselines(proto: str) -> tuple[str, ...]:
    """Non-oracle baselines of the "2x" comparison. With known correspondences the free-form fit is handed
    every target vertex (3N free unknowns, no model): it copies the target and is reported, not compared."""
    return ("pca", "nearest") if proto == "vertex" else ("pca", "nearest", "ffd")


def render(rows: list[dict], command: str, notes: list[str], header: str = "") -> str:
    lines = ["# Inverse kinematics (NeuROK Table 1 protocol)", "", header, "", "Command:", "", "```",
             command, "```", ""]
    protos = [p for p in PROTOCOLS if any(r.get("fit_loss", "chamfer") == p for r in rows)]
    for proto in protos:
        sel = [r for r in rows if r.get("fit_loss", "chamfer") == proto]
        lines += [f"# Protocol '{proto}': {PROTOCOLS[proto]}", ""]
        lines += _render_protocol(sel, proto)
    if notes:
        lines += ["Notes:", ""] + [f"- {n}" for n in sorted(notes)] + [""]
    lines += PROTOCOL
    return "\n".join(lines)


def _render_protocol(rows: list[dict], proto: str) -> list[str]:
    agg = summarize(rows)
    groups = [g for g in GROUPS if any(r["group"] == g for r in rows)]
    methods = []
    for r in rows:
        if r["method"] not in methods:
            methods.append(r["method"])
    lines = []
    cols = ("| method | Chamfer-L1 | Chamfer-L2 | IoU | vertex err | motion expl. | rigidity | s/target |\n"
            "|---|---|---|---|---|---|---|---|")
    for g in groups:
        n_t = len({r["target"] for r in rows if r["group"] == g})
        lines += [f"## {GROUPS[g]} ({n_t} targets, protocol '{proto}')", "", cols]
        for m in methods:
            a = agg.get((g, m))
            if a is None:
                continue
            label = method_label(m)
            if m == "ffd" and proto == "vertex":
                label += " (given every target vertex)"
            lines.append(f"| {label} | {_fmt(a['chamfer_l1'])} | {_fmt(a['chamfer_l2'], 5)} | "
                         f"{_fmt(a['iou'], 3)} | {_fmt(a['vertex_error'])} | {_fmt(100 * a['motion_explained'], 1)}% | "
                         f"{_fmt(a['rigidity'], 4)} | {_fmt(a['seconds'], 2)} |")
        if g == "test":
            lines.append(PAPER)
        lines.append("")
        kinds = sorted({r["kind"] for r in rows if r["group"] == g})
        n_kind = {k: len({r["target"] for r in rows if r["group"] == g and r["kind"] == k}) for k in kinds}
        lines += [f"Per kind ({GROUPS[g]}, protocol '{proto}'): Chamfer-L1 / motion explained", "",
                  "| method | " + " | ".join(f"{k} (n={n_kind[k]})" for k in kinds) + " |",
                  "|---|" + "---|" * len(kinds)]
        for m in methods:
            cells = []
            for k in kinds:
                a = agg.get((g, k, m))
                cells.append("-" if a is None else
                             f"{_fmt(a['chamfer_l1'])} / {_fmt(100 * a['motion_explained'], 1)}%")
            lines.append(f"| {method_label(m)} | " + " | ".join(cells) + " |")
        lines.append("")
        if g in ("real", "real_val"):
            lines += _per_object(rows, g, proto, [m for m in ("neurok", "oracle") if m in methods])
        # headline checks for this group
        if "neurok" in methods and (g, "neurok") in agg and (g, "rest") in agg:
            a, rest = agg[(g, "neurok")], agg[(g, "rest")]
            base = {m: agg[(g, m)]["chamfer_l1"] for m in methods
                    if m in _baselines(proto) and (g, m) in agg and math.isfinite(agg[(g, m)]["chamfer_l1"])}
            best = min(base, key=base.get) if base else None
            ratio = f"{base[best] / a['chamfer_l1']:.2f}x ({method_label(best)})" if best else "-"
            lines += [f"Targets ({GROUPS[g]}, protocol '{proto}'): motion explained {100 * a['motion_explained']:.1f}% "
                      f"(goal >= 80%); Chamfer-L1 {a['chamfer_l1'] / rest['chamfer_l1']:.2f}x the rest pose's "
                      f"(goal <= 0.2x); best non-oracle baseline / ours = {ratio} (goal >= 2x).", ""]
    return lines


def _per_object(rows: list[dict], group: str, proto: str, methods: list[str]) -> list[str]:
    """Per real object (its targets together): the rest pose's Chamfer-L1, and per method its Chamfer-L1 as a
    multiple of the rest pose's and the motion explained."""
    objects = sorted({r["target"].split("#")[0] for r in rows if r["group"] == group})
    lines = [f"Per object ({GROUPS[group]}, protocol '{proto}'): rest Chamfer-L1; per method Chamfer-L1 / rest's, "
             "motion explained", "", "| object | category | targets | rest Chamfer-L1 | "
             + " | ".join(method_label(m) for m in methods) + " |", "|---|---|---|---|" + "---|" * len(methods)]
    for o in objects:
        agg = summarize([dict(r, group=o) for r in rows if r["group"] == group and r["target"].split("#")[0] == o])
        rest = agg[(o, "rest")]
        cells = ["-" if (o, m) not in agg else f"{agg[(o, m)]['chamfer_l1'] / rest['chamfer_l1']:.2f}x / "
                 f"{_fmt(100 * agg[(o, m)]['motion_explained'], 1)}%" for m in methods]
        cat = next(r["category"] for r in rows if r["target"].split("#")[0] == o)
        lines.append(f"| {o} | {cat} | {rest['n']} | {_fmt(rest['chamfer_l1'], 5)} | " + " | ".join(cells) + " |")
    return lines + [""]


PROTOCOL = [
    "## Protocol", "",
    "- Targets: a held-out sequence's rest mesh and one of its moving frames (seeded choice, round-robin over "
    "categories), or a real PartNet-Mobility object (never trained on) at a uniformly sampled joint configuration.",
    "- Every method fits the rest mesh to the target with the same harness (`kinemesh.ik.solve`: screen 32 "
    "prior samples plus 3 posterior-encoder starts, Adam on the best 4, L-BFGS on the best) and the same data "
    "term, by protocol: 'vertex' = mean squared distance of corresponding vertices (the target is a pose of the "
    "same mesh, as in the paper's 'target pose of the same object'); 'chamfer' = squared Chamfer between 1024 "
    "decoded surface samples and 2048 target samples, no correspondences (as for a scan of any topology). "
    "Correspondences are always used to score (vertex error, motion explained). With known correspondences the "
    "free-form baseline is handed every target vertex and copies it, so the '2x' comparison of that protocol is "
    "against PCA and the nearest training pose.",
    "- Metrics after normalizing by the rest shape (bbox centred, longest side 1): Chamfer-L1 / L2 = mean "
    "(squared) point-to-triangle distance of 10k surface samples of each mesh to the other surface, averaged "
    "over both directions; IoU = volumetric IoU (occupancy of random points for watertight meshes, 32^3 voxels "
    "otherwise); motion explained = 1 - sum of fit vertex errors / sum of rest-pose vertex errors over the "
    "targets; rigidity = mean change of within-part vertex distances of the fit (fraction of object size, "
    "0 = rigid). s/target = IK wall time per target (model binding and active subspace, once per mesh, excluded).",
    "- NeuROK: the model bound to the rest mesh, reduced per instance by the active subspace (k_q: 99% of trace(C), at most 32) "
    "(`kinemesh.reduce`), q fitted, then the best q mapped to z and polished in the full latent (40 Adam steps "
    "at lr 0.02 + L-BFGS, same objective; chosen on validation objects, see docs/results/ik.md); 'reduced q only' "
    "skips the polish; 'w/o model reduction' fits the full latent z (D = 128) from the start with the same "
    "harness. Ablation checkpoints go through the same pipeline.",
    "- Real objects (`--real`, and `--real-val`: a seeded sample of the real training objects that `kinemesh synth "
    "--from-urdf` holds out for validation): bound as `kinemesh ik` binds a URDF input (`kinemesh.ik.pipeline."
    "bind_ik`): the links as parts (a link on a fixed joint merged into its parent), articulated, reduced "
    "coordinates from motion probes along the URDF's joints (`--real-basis`; 99% of the probes' norm but at least "
    "8 since 2026-11-27, `URDFBinding.min_k`: 99% alone gave 2-3 for one or two doors), the parts moved only along those "
    "joints with the root link held at rest (`--real-motion joints`: `kinemesh.dynamics.joints.JointDecoder`, its "
    "joint calibration fitted through q, and the joints the network does not move through q, or moves only with "
    "their neighbours, given coordinates of their own as `kinemesh simulate` gives them; `decoded`: as the network "
    "decodes them, the largest part held, "
    "`--real-base`); the oracle is handed the same joints, with their values unknown and fitted directly.",
    "- PCA: principal components (99% variance, <= 32) of up to 200 training deformation fields of the same "
    "category (same kind when the category is unseen), transferred to the test mesh by nearest neighbours in "
    "normalized space; coefficients fitted. Nearest pose: the best of the same transferred fields. Free-form: "
    "per-vertex displacements with a uniform-Laplacian + edge-length (ARAP-style) regularizer, no prior. "
    "Oracle: ground-truth parts and joints, only the joint values fitted (within limits).",
    "",
]


# ------------------------------------------------------------------------------------------------ run
def evaluate(cfg: IKEvalConfig) -> Result:
    """Rows (one per target, method and protocol) of every method on the held-out targets; with ``cfg.rows``
    the rows file is rewritten after every target and targets already in it are skipped. Raises
    InputFileError, KinemeshError."""
    from kinemesh.atomic import write_text
    from kinemesh.model import load_model
    from kinemesh.progress import tqdm

    data = Path(cfg.data) if cfg.data else None
    if data is not None and not (data / "manifest.jsonl").is_file():
        raise InputFileError(data / "manifest.jsonl", "dataset manifest not found")
    for folder in (cfg.real, cfg.real_val):
        if folder and not Path(folder).is_dir():
            raise InputFileError(folder, "real-objects folder not found")
    models = {"default": load_model(cfg.checkpoint, device=cfg.device)}
    models.update({name: load_model(folder, device=cfg.device)
                   for name, folder in (a.split("=", 1) for a in cfg.ablation)})
    targets, train = [], []
    if data is not None:
        splits = ("test", "test_category") if cfg.split == "all" else (cfg.split,)
        by_split, train = synthetic_targets(data, splits, cfg.max_targets, cfg.frames_per_seq, cfg.seed)
        targets = [t for s in splits for t in by_split[s]]
    if cfg.real_val:
        folder = Path(cfg.real_val)
        targets += real_targets(folder, cfg.real_configs, cfg.real_max_vertices, cfg.seed, cfg.max_targets, "real_val",
                                validation_objects(folder, cfg.real_val_objects, cfg.seed))
    if cfg.real:
        targets += real_targets(Path(cfg.real), cfg.real_configs, cfg.real_max_vertices, cfg.seed, cfg.max_targets)
    if not targets:
        raise KinemeshError("no held-out targets found (empty splits?)")
    pools = TrainingPools(data, train, seed=cfg.seed) if (data is not None and train) else None
    runner = Runner(cfg, models, pools)
    if pools is None and any(m in cfg.methods for m in ("pca", "nearest")):
        runner.notes.add("PCA / nearest-pose baselines skipped: no training split available")
    rows = read_rows([cfg.rows]) if cfg.rows and Path(cfg.rows).is_file() else []
    if rows:
        done = {r["target"] for r in rows}
        log.info("resuming: %d targets already in %s", len(done), cfg.rows)
        targets = [t for t in targets if t.name not in done]
    for t in tqdm(targets, desc="eval ik", unit="target"):
        rows += runner.run(t)
        if cfg.rows:
            write_text(cfg.rows, "".join(json.dumps(r) + "\n" for r in rows))
    return Result(rows, models["default"].info, sorted(runner.notes))


def read_rows(paths) -> list[dict]:
    """Rows of saved JSON-lines files, without the rows several files share (e.g. the rest pose of the same
    targets). Raises InputFileError, KinemeshError (no rows)."""
    seen, rows = set(), []
    for f in map(Path, paths):
        if not f.is_file():
            raise InputFileError(f, "rows file not found")
        for r in (json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()):
            key = (r["group"], r["target"], r["method"], r.get("fit_loss", "chamfer"))
            if key not in seen:
                seen.add(key)
                rows.append(r)
    if not rows:
        raise KinemeshError("the rows files hold no rows")
    return rows


def header(cfg: IKEvalConfig, model_info: dict) -> str:
    """The line above the tables: checkpoint (and whether it is trained), subspace, normalization."""
    trained = bool(model_info.get("trained", True))
    return (
        f"Checkpoint: {cfg.checkpoint or 'default (kinemesh/assets/checkpoints/default)'}"
        f"{'' if trained else ' -- UNTRAINED model, numbers are meaningless'}; "
        f"active subspace: {cfg.subspace_method}, k_q {'auto (99% explained, <= 32)' if cfg.k_q is None else cfg.k_q}. "
        "Metrics after normalizing the rest shape to a unit longest bbox side. Paper numbers are on "
        "PartNet-Mobility with an unspecified normalization (the "
        "anchor row), not directly comparable."
    )
