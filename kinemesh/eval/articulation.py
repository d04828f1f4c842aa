"""Articulation accuracy on held-out objects: predictor vs no-pretraining ablation vs heuristic, and from motion.

Rows: held-out instances of the training categories, held-out categories, and (with ``--real``) the real
PartNet-Mobility objects (static parts from their links, joints hidden from the predictor). Metrics per
ground-truth non-root part: motion type (fixed / revolute / prismatic; continuous counts as revolute)
precision and recall (macro over the three classes), axis angular error (deg, sign-invariant) on movable
parts, origin error (distance between the axis lines near the joint, ``metrics.axis_line_distance``, / object
size) on revolute parts, parent accuracy.
From motion (ATOP stage 2): joints fitted to 6 random observed configurations (vertex correspondences).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kinemesh.errors import ConfigError
from kinemesh.eval import Result, check, option

log = logging.getLogger(__name__)

CLASS_OF = {"fixed": "fixed", "revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic"}
VALIDATION_SEED_BASE = 90_000  # between the pretraining (50000+) and test (100000+) seeds


@dataclass
class ArticulationEvalConfig:
    """Options of ``kinemesh eval articulation``. Raises ConfigError."""

    n_objects: int = option(4, "held-out instances per category", min=1)
    real: str | None = option(None, "folder of real PartNet-Mobility objects (e.g. ../shared/real_objects)")
    weights: str | None = option(None, "predictor folder (default: shipped weights)")
    no_heuristic: bool = option(False, "skip the (slow) heuristic baseline")
    clouds: bool = option(False, "also fit from point clouds without correspondences (ATOP candidate selection; "
                                 "slow)")
    only_motion: bool = option(False, "skip the static-shape predictors")
    validation: bool = option(False, "model-selection sets instead of the test sets: training categories and random "
                                     f"assemblies with seeds from {VALIDATION_SEED_BASE} (never trained or tested on), "
                                     "canonical and realism-augmented, and the held-out categories at those seeds")
    real_val: str | None = option(None, "folder of real PartNet-Mobility objects (e.g. data/real_train) whose "
                                        "validation split (is_real_validation: 1 object in 5 by hash of its id) is "
                                        "evaluated per object")
    holdout_categories: str | None = option(None, "comma list of real categories (meta.json model_cat): adds every "
                                                  "object of --real-val's folder in them (all splits), the "
                                                  "category-held-out check of weights trained with "
                                                  "kinemesh.articulation.train --exclude-categories (for weights "
                                                  "that saw them it measures memory)")
    no_unlike: bool = option(False, "skip the held-out unlike categories (kinemesh.synth.unlike)")
    real_only: bool = option(False, "only the real sets (--real, --real-val, --holdout-categories): no synthetic "
                                    "or unlike objects")
    seed: int = option(0)

    def __post_init__(self):
        check(self)
        if self.real_only and not (self.real or self.real_val):
            raise ConfigError("--real-only needs --real FOLDER or --real-val FOLDER (the real objects to evaluate)")
        if self.holdout_categories and not self.real_val:
            raise ConfigError("--holdout-categories needs --real-val FOLDER (the folder whose objects it takes)")


def is_real_validation(object_id: str, val_fraction: float = 0.2) -> bool:
    """True for the objects of the real validation split: the same rule as the real 4D data
    (:func:`kinemesh.synth.real.hash_split`, CRC32 of the PartNet-Mobility id), so a model trained on that
    data's train split is validated on objects it never saw."""
    from kinemesh.synth.real import hash_split

    return hash_split(object_id, val_fraction) == "val"


def _score(preds, gt_joints: dict, size: float) -> list[dict]:
    """Per-GT-part records for predictions (objects with .name .type .axis .origin .parent)."""
    from kinemesh.geometry.metrics import axis_angle_error_deg, axis_line_distance

    by = {p.name: p for p in preds}
    recs = []
    for child, j in gt_joints.items():
        t = CLASS_OF[j["type"]]
        p = by.get(child)
        r = {"part": child, "true": t, "pred": p.type if p is not None else "fixed",
             "parent_ok": (p is not None and p.parent == j["parent"])}
        if t != "fixed":
            if p is not None and np.linalg.norm(p.axis) > 0:
                r["axis"] = float(axis_angle_error_deg(p.axis, j["axis"]))
            else:
                r["axis"] = 90.0
            if t == "revolute":
                r["origin"] = (axis_line_distance(p.origin, p.axis, j["origin"], j["axis"]) / size
                               if p is not None else 1.0)
        recs.append(r)
    return recs


def _summ(recs: list[dict]) -> dict:
    from kinemesh.geometry.metrics import type_precision_recall

    if not recs:
        return {}
    pr = type_precision_recall([r["pred"] for r in recs], [r["true"] for r in recs],
                               ("fixed", "revolute", "prismatic"))
    prec = np.nanmean([pr[c]["precision"] for c in pr if pr[c]["support"] > 0 or not np.isnan(pr[c]["precision"])])
    rec = np.nanmean([pr[c]["recall"] for c in pr if pr[c]["support"] > 0])
    mov = [r["axis"] for r in recs if "axis" in r]
    org = [r["origin"] for r in recs if "origin" in r]
    return {"n": len(recs), "n_mov": len(mov), "axis": float(np.mean(mov)) if mov else float("nan"),
            "axis_med": float(np.median(mov)) if mov else float("nan"),
            "origin": float(np.mean(org)) if org else float("nan"), "prec": float(prec), "rec": float(rec),
            "parent": float(np.mean([r["parent_ok"] for r in recs])), "per_class": pr}


def _gt(obj) -> dict:
    return {j.child: j.to_dict() for j in obj.joints if len(obj.part(j.child).vertices)}


def _motion_records(obj, seed: int) -> list[dict]:
    from kinemesh.articulation.from_motion import fit_sequence

    rng = np.random.default_rng(seed)
    seq = obj.to_sequence([obj.sample_values(rng) for _ in range(6)])
    fits = fit_sequence(seq)
    v, _, _ = obj.merged()
    return _score(fits, _gt(obj), float(np.max(np.ptp(v, axis=0))))


def _cloud_records(obj, seed: int, n_frames: int = 3) -> list[dict]:
    """ATOP on point clouds: each movable joint moved alone to ``n_frames`` values; whole-object surface
    samples per frame (no correspondences); the joint's subtree is the articulated part."""
    from kinemesh.articulation.from_motion import fit_from_clouds
    from kinemesh.geometry.validity import moving_groups
    from kinemesh.geometry.sampling import sample_surface

    rng = np.random.default_rng(seed)
    groups = moving_groups(obj)
    v, _, _ = obj.merged()
    size = float(np.max(np.ptp(v, axis=0)))
    geo = [p for p in obj.parts if len(p.vertices)]
    recs = []
    for j in obj.movable_joints:
        if not len(obj.part(j.child).vertices):
            continue
        moving = set(groups[j.child])
        pp = np.concatenate([sample_surface(p.vertices, p.faces, 400, seed=rng)[0] for p in geo if p.name in moving])
        rest = np.concatenate([sample_surface(p.vertices, p.faces, 400, seed=rng)[0] for p in geo
                               if p.name not in moving])
        lo, hi = j.limits if j.limits is not None else (-np.pi / 2, np.pi / 2)
        clouds = []
        for f in np.linspace(0.3, 0.9, n_frames):
            posed = obj.posed_parts({j.name: lo + f * (hi - lo)})
            clouds.append(np.concatenate([sample_surface(posed[p.name], p.faces, 400, seed=rng)[0] for p in geo]))
        fit = fit_from_clouds(pp, rest, clouds, j.child)
        fit.parent = j.parent
        d = j.to_dict()
        recs += _score([fit], {j.child: d}, size)
    return recs


def _reroot_gt(obj) -> dict:
    """GT joints keyed by child, with helper links (no geometry) collapsed onto their geometric parent."""
    gt = {}
    helpers = {p.name for p in obj.parts if len(p.vertices) == 0}
    parent_of = {j.child: j.parent for j in obj.joints}
    for j in obj.joints:
        if j.child in helpers:
            continue
        d = j.to_dict()
        par = d["parent"]
        while par in helpers and par in parent_of:
            par = parent_of[par]
        d["parent"] = par
        gt[j.child] = d
    return gt


def static_parts(obj):
    """``obj`` as a static method sees it: joints stripped to fixed ones (:func:`strip_joints`) and parts
    without geometry (PartNet-Mobility helper links of sliding screws) dropped with their joints."""
    from kinemesh.articulation.dataset import strip_joints

    static = strip_joints(obj)
    static.parts = [p for p in static.parts if len(p.vertices)]
    static.joints = [j for j in static.joints if j.child in {p.name for p in static.parts}]
    return static


MOTION, CLOUDS = "from motion (ATOP stage 2)", "from motion, point clouds (ATOP Chamfer + ICP)"


def object_rows(name: str, obj, methods: dict, seed: int, motion: bool = True, clouds: bool = False) -> list[dict]:
    """Rows of one object with GT joints, one per method of ``methods`` (static parts -> predicted joints),
    then from motion and from point clouds: ``{"object", "category", "method", "records"`` (per GT part, see
    :func:`_score`), ``"seconds"}``. A method that raises is logged; its predictions count as none (a static
    method's parts then score as fixed, a motion fit scores no parts)."""
    gt = _reroot_gt(obj)
    static = static_parts(obj)
    v, _, _ = obj.merged()
    size = float(np.max(np.ptp(v, axis=0)))
    fits = [(m, lambda fn=fn: _score(fn(static), gt, size), lambda: _score([], gt, size)) for m, fn in methods.items()]
    fits += [(MOTION, lambda: _motion_records(obj, seed), list)] if motion else []
    fits += [(CLOUDS, lambda: _cloud_records(obj, seed), list)] if clouds else []
    rows = []
    for m, fit, failed in fits:
        t0 = time.time()
        try:
            recs = fit()
        except Exception as exc:  # report, do not abort the table
            log.warning("%s: %s failed: %s", name, m, exc)
            recs = failed()
        rows.append({"object": name, "category": obj.category, "method": m, "records": recs,
                     "seconds": time.time() - t0})
    return rows


def summarize(rows: list[dict]) -> dict:
    """{method: metrics of :func:`_summ` over its rows' records and the mean seconds per object ("time")}."""
    out: dict[str, dict] = {}
    for m in dict.fromkeys(r["method"] for r in rows):
        sel = [r for r in rows if r["method"] == m]
        out[m] = {**_summ([x for r in sel for x in r["records"]]), "time": float(np.mean([r["seconds"] for r in sel]))}
    return out


def _per_object(rows: list[dict]) -> dict:
    """{object: {"category": ..., "recs": {method: records}}} of ``rows``."""
    per: dict = {}
    for r in rows:
        per.setdefault(r["object"], {"category": r["category"], "recs": {}})["recs"][r["method"]] = r["records"]
    return per


def evaluate_objects(objects, methods: dict, seed: int, motion: bool = True, desc: str = "",
                     clouds: bool = False, per_object: dict | None = None) -> dict:
    """:func:`summarize` of the :func:`object_rows` of ``objects`` [(name, ArticulatedObject with GT joints)].
    With ``per_object`` (a dict), also fills it with :func:`_per_object` of the rows."""
    from kinemesh.progress import tqdm

    rows = [r for name, obj in tqdm(objects, desc=desc, unit="obj")
            for r in object_rows(name, obj, methods, seed, motion, clouds)]
    if per_object is not None:
        per_object.update(_per_object(rows))
    return summarize(rows)


def _table(title: str, res: dict) -> list[str]:
    lines = [f"### {title}", "",
             "| method | parts | movable | axis err (deg) mean / median | origin err (norm.) | type P | type R | "
             "parent acc | s/object |", "|---|---|---|---|---|---|---|---|---|"]
    for m, s in res.items():
        if not s or "n" not in s:
            continue
        lines.append(f"| {m} | {s['n']} | {s['n_mov']} | {s['axis']:.2f} / {s['axis_med']:.2f} | {s['origin']:.3f} | "
                     f"{s['prec']:.3f} | {s['rec']:.3f} | {s['parent']:.3f} | {s['time']:.2f} |")
    lines.append("")
    return lines


def _category_table(title: str, per_object: dict, method: str) -> list[str]:
    """Markdown: ``method``'s metrics per category over ``per_object`` (from :func:`evaluate_objects`)."""
    cats: dict[str, list] = {}
    for o in per_object.values():
        cats.setdefault(o["category"], []).extend(o["recs"].get(method, []))
    lines = [f"#### {title}: {method}, per category", "",
             "| category | parts | movable | axis err (deg) mean / median | origin err (norm.) | type P | type R | "
             "parent acc |", "|---|---|---|---|---|---|---|---|"]
    for c, recs in sorted(cats.items()):
        s = _summ(recs)
        if s:
            lines.append(f"| {c} | {s['n']} | {s['n_mov']} | {s['axis']:.2f} / {s['axis_med']:.2f} | {s['origin']:.3f} | "
                         f"{s['prec']:.3f} | {s['rec']:.3f} | {s['parent']:.3f} |")
    return lines + [""]


def _object_table(title: str, per_object: dict, method: str, axis_bad: float = 10.0) -> list[str]:
    """Markdown: ``method``'s metrics per object; the failures column lists the parts with a wrong motion type
    (true -> predicted), an axis error above ``axis_bad`` deg or an origin error above 0.1."""
    lines = [f"#### {title}: {method}, per object", "",
             "| object | category | parts | movable | axis err mean (deg) | origin err mean | type acc | parent acc | "
             "failures |", "|---|---|---|---|---|---|---|---|---|"]
    for name, o in per_object.items():
        recs = o["recs"].get(method, [])
        if not recs:
            continue
        ax = [r["axis"] for r in recs if "axis" in r]
        org = [r["origin"] for r in recs if "origin" in r]
        bad = []
        for r in recs:
            why = [f"{r['true']}->{r['pred']}"] if r["pred"] != r["true"] else []
            why += [f"axis {r['axis']:.0f} deg"] if r.get("axis", 0.0) > axis_bad else []
            why += [f"origin {r['origin']:.2f}"] if r.get("origin", 0.0) > 0.1 else []
            if why:
                bad.append(f"{r['part']}: " + ", ".join(why))
        fmt = lambda v, f: format(float(np.mean(v)), f) if v else "-"  # noqa: E731
        lines.append(f"| {name} | {o['category']} | {len(recs)} | {len(ax)} | {fmt(ax, '.2f')} | {fmt(org, '.3f')} | "
                     f"{np.mean([r['pred'] == r['true'] for r in recs]):.2f} | "
                     f"{np.mean([r['parent_ok'] for r in recs]):.2f} | {'; '.join(bad)} |")
    return lines + [""]


def load_real_objects(folder, validation_only: bool = False) -> list:
    """[(folder name, ArticulatedObject)] for the PartNet-Mobility / URDF object folders in ``folder`` (sorted),
    only the validation split (:func:`is_real_validation`) with ``validation_only``; unreadable objects are
    reported and skipped. Raises InputFileError when ``folder`` is not a folder."""
    from kinemesh.data.partnet import load_articulated
    from kinemesh.errors import InputFileError

    if not Path(folder).is_dir():
        raise InputFileError(folder, "not a folder of PartNet-Mobility objects")
    out = []
    for d in sorted(Path(folder).iterdir()):
        if d.is_dir() and (not validation_only or is_real_validation(d.name)):
            try:
                out.append((d.name, load_articulated(d)))
            except Exception as exc:
                log.warning("skip %s: %s", d.name, exc)
    return out


def evaluate(cfg: ArticulationEvalConfig) -> Result:
    """Rows of :func:`object_rows` over the sections (test sets, or the validation sets with ``cfg.validation``;
    the unlike categories, ``cfg.real`` and ``cfg.real_val``), each with its ``"section"`` title and the
    ``"breakdown"`` table it gets (None, "category" or "object"); model_info names the predictor weights.
    Raises InputFileError (missing weights or object folder)."""
    import torch

    from kinemesh.articulation.infer import articulate, heuristic_articulate
    from kinemesh.articulation.predictor import DEFAULT_WEIGHTS, load_predictor
    from kinemesh.progress import tqdm

    t_start = time.time()
    torch.set_num_threads(1)
    wdir = Path(cfg.weights) if cfg.weights else DEFAULT_WEIGHTS
    net = load_predictor(wdir)
    abl = load_predictor(wdir / "no_pretrain") if (wdir / "no_pretrain").is_dir() else None
    methods = {"ours (pretrained + fine-tuned)": lambda o: articulate(o, net=net, seed=cfg.seed)}
    if abl is not None:
        methods["ablation: no pretraining"] = lambda o: articulate(o, net=abl, seed=cfg.seed)
    if not cfg.no_heuristic:
        methods["heuristic: best valid box candidate"] = lambda o: heuristic_articulate(o, seed=cfg.seed)

    rows = []
    for title, objects, breakdown in sections(cfg):
        for name, obj in tqdm(objects, desc=title[:30], unit="obj"):
            rows += [{"section": title, "breakdown": None if cfg.only_motion else breakdown, **r} for r in
                     object_rows(name, obj, {} if cfg.only_motion else methods, cfg.seed, clouds=cfg.clouds)]
    return Result(rows, {"weights": str(wdir)}, seconds=time.time() - t_start)


def sections(cfg: ArticulationEvalConfig) -> list[tuple[str, list, str | None]]:
    """The evaluated sets of :func:`evaluate`: (title, [(name, ArticulatedObject)], breakdown) each; the test
    sets, or with ``cfg.validation`` the model-selection sets (seeds from ``VALIDATION_SEED_BASE``, below the
    test seeds), plus the unlike categories, ``cfg.real`` and ``cfg.real_val`` as asked; with ``cfg.real_only``
    only the real sets."""
    from kinemesh.articulation.dataset import HOLDOUT_CATEGORIES, TEST_SEED_BASE, build_object
    from kinemesh.synth.categories import CATEGORIES

    def objs(cats, base):  # n_objects instances of each category seeded base + i (a builder may give up)
        out = []
        for c in cats:
            for i in range(cfg.n_objects):
                try:
                    out.append((f"{c}/{i}", build_object(c, base + i)))
                except Exception as exc:
                    log.warning("skip %s/%d: %s", c, i, exc)
        return out

    seen = [c for c in CATEGORIES if c not in HOLDOUT_CATEGORIES]
    if cfg.real_only:
        sections = []
    elif cfg.validation:
        from kinemesh.articulation.realism import augment

        val = objs(seen + ["assembly"], VALIDATION_SEED_BASE)
        rng = np.random.default_rng(123)
        sections = [(f"validation: training categories and assemblies, seeds {VALIDATION_SEED_BASE}+", val, None),
                    ("validation: the same objects realism-augmented", [(n, augment(o, rng)) for n, o in val], None),
                    # other instances (seeds below the test's) of the categories no training data comes from:
                    # the one validation measure of reading a category never trained on
                    (f"validation: held-out categories ({', '.join(HOLDOUT_CATEGORIES)}), seeds "
                     f"{VALIDATION_SEED_BASE}+", objs(HOLDOUT_CATEGORIES, VALIDATION_SEED_BASE), None)]
    else:
        base = TEST_SEED_BASE + 1000 * cfg.seed
        sections = [("held-out instances of training categories", objs(seen, base), None),
                    ("held-out categories (" + ", ".join(HOLDOUT_CATEGORIES) + ")", objs(HOLDOUT_CATEGORIES, base),
                     None)]
    if not (cfg.validation or cfg.no_unlike or cfg.real_only):
        from kinemesh.synth.unlike import UNLIKE_CATEGORIES, build_unlike

        sections.append(("held-out unlike categories (kinemesh.synth.unlike, " + str(len(UNLIKE_CATEGORIES)) + ")",
                         [(f"{c}/{i}", build_unlike(c, TEST_SEED_BASE + 1000 * cfg.seed + i))
                          for c in UNLIKE_CATEGORIES for i in range(cfg.n_objects)], "category"))
    if cfg.real and not cfg.validation:
        real = load_real_objects(cfg.real)
        sections.append((f"real PartNet-Mobility objects ({len(real)}, {cfg.real})", real, "object"))
    if cfg.real_val:
        real_val = load_real_objects(cfg.real_val, validation_only=True)
        sections.append((f"real validation split ({len(real_val)} objects of {cfg.real_val}, CRC32 of the id, 20%)",
                         real_val, "object"))
    if cfg.holdout_categories:
        cats = [c.strip() for c in cfg.holdout_categories.split(",") if c.strip()]
        held = [(n, o) for n, o in load_real_objects(cfg.real_val) if o.category in cats]
        if not held:
            raise ConfigError(f"--holdout-categories: no object of {cats} in {cfg.real_val}")
        sections.append((f"category-held-out check ({len(held)} objects of {', '.join(cats)} in {cfg.real_val}, "
                         "all splits)", held, "object"))
    return sections


def render(rows: list[dict]) -> str:
    """Markdown: per section of ``rows`` (:func:`evaluate`) the table of :func:`summarize` and its breakdown
    per category or per object of the first method."""
    lines = []
    for title in dict.fromkeys(r["section"] for r in rows):
        sel = [r for r in rows if r["section"] == title]
        lines += _table(title, summarize(sel))
        if sel[0]["breakdown"]:
            table = _category_table if sel[0]["breakdown"] == "category" else _object_table
            lines += table(title, _per_object(sel), sel[0]["method"])
    return "\n".join(lines)


def report(res: Result, cfg: ArticulationEvalConfig, out: str) -> str:
    """The markdown file of ``kinemesh eval articulation --out OUT``: command, weights, targets and
    :func:`render` of the rows."""
    from kinemesh.articulation.dataset import HOLDOUT_CATEGORIES, TEST_SEED_BASE

    cmd = (f"kinemesh eval articulation --n-objects {cfg.n_objects}" + (f" --real {cfg.real}" if cfg.real else "")
           + (f" --real-val {cfg.real_val}" if cfg.real_val else "")
           + (f" --holdout-categories {cfg.holdout_categories}" if cfg.holdout_categories else "")
           + (f" --weights {cfg.weights}" if cfg.weights else "") + (" --real-only" if cfg.real_only else "")
           + (" --no-unlike" if cfg.no_unlike else "")
           + (" --no-heuristic" if cfg.no_heuristic else "") + (" --clouds" if cfg.clouds else "")
           + (" --only-motion" if cfg.only_motion else "") + (" --validation" if cfg.validation else "")
           + f" --out {out} --seed {cfg.seed}")
    lines = ["# Articulation results", "", f"Command: `{cmd}` (2 CPU cores shared, no GPU; torch 1 thread).",
             f"Weights: `{res.model_info['weights']}`. Held-out data only: instance seeds >= {TEST_SEED_BASE}, "
             f"categories {', '.join(HOLDOUT_CATEGORIES)} never trained on.", "",
             "Targets: axis error <= 5 deg, origin error <= 0.05, type precision/recall >= 0.95. Reference: GEOPARD "
             "9.18 deg / 0.05 / 0.92 / 0.93 (PartNet-Mobility, from a static shape); ATOP 2.63 deg (from observed "
             "motion, their Table 1). Issue 16 targets: real objects axis <= 9 deg, origin <= 0.05, type P/R >= 0.92; "
             "held-out unlike categories axis <= 10 deg, type P/R >= 0.9.", ""]
    return "\n".join(lines) + "\n" + render(res.rows) + "\n"
