"""Kinematic model on held-out instances: posterior reconstruction and prior-sample plausibility.

For every held-out instance (M0 = its rest mesh):
- elastic and cloth frames have the whole-body rigid motion removed first (as in training);
- posterior reconstruction with known correspondences: z = mean of q(z | phi) for the true deformation to a
  frame, decoded to vertices; mean vertex error as a fraction of the mean true vertex motion, fraction of
  motion explained, and Chamfer-L1 (normalised rest scale, point-to-triangle) next to the do-nothing rest pose;
  for elastic and cloth objects the same measures "rest-corrected", as ``kinemesh simulate`` decodes them
  (``kinemesh.dynamics.scene.rest_offset``): the rest mesh minus the decoded posterior of the rest pose added to
  the decoded frame, so the model's error in reproducing the rest shape itself (about 0.7 % of the size on
  validation soft bodies, more than their mean deformation) is not counted as motion;
- prior samples z ~ N(mu_cond, I): articulated objects: within-part rigidity (mean change of within-part
  pairwise distances / object size) and attachment (parts that touch at rest stay within 2 % of the object
  size of each other); elastic and cloth objects: relative change of total surface area.

    kinemesh eval model --data DIR [--checkpoint DIR] [--split auto] [--max-instances 60] [--parts] [--out FILE.json]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kinemesh.errors import ConfigError
from kinemesh.eval import Result, check, option

ATTACH_TOL = 0.02  # gap increase (fraction of object size) above which two touching parts count as detached
TOUCH = 0.02  # parts closer than this (fraction of size) at rest are "attached" neighbours
SURFACE_POINTS = 2048  # surface points per part of ``attachment(..., faces=)`` (1.6 cm apart on a 0.5 m^2 door)


@dataclass
class ModelEvalConfig:
    """Options of ``kinemesh eval model``. Raises ConfigError."""

    data: str | None = option(None, "dataset folder with manifest.jsonl (required unless --from-json)")
    checkpoint: str | None = option(None, "checkpoint folder (default: the shipped model)")
    split: str = option("auto", "auto (test, else val) or a split name")
    kinds: str = option("", "only sequences of these object kinds, e.g. elastic,cloth (default: all)")
    max_instances: int = option(60, "held-out instances to evaluate (balanced by kind)", min=1)
    frames: int = option(4, "target frames per instance", min=1)
    samples: int = option(8, "prior samples per instance", min=1)
    n_points: int = option(2048, "surface points per instance", min=1)
    seed: int = option(0)
    device: str = option("cpu", choices=("cpu", "cuda"))
    parts: bool = option(False, "bind with the sequences' part ids (a segmented input, e.g. a URDF) instead of "
                                "grouping points by connected component")

    def __post_init__(self):
        check(self)
        if self.data is None:
            raise ConfigError("eval model: give --data DIR (or --from-json FILE)")
        if self.kinds:
            from kinemesh.geometry.kind import parse_kinds

            try:
                self.kinds = ",".join(parse_kinds(self.kinds))  # checked and normalised once
            except ConfigError as exc:
                raise ConfigError(f"--kinds: {exc}") from None


def surface_area(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Total triangle area of (..., N, 3) vertices -> (...,) m^2."""
    t = vertices[..., faces, :]
    return 0.5 * np.linalg.norm(np.cross(t[..., 1, :] - t[..., 0, :], t[..., 2, :] - t[..., 0, :]), axis=-1).sum(-1)


def attachment(rest: np.ndarray, posed: np.ndarray, part_ids: np.ndarray, size: float, joined=None, faces=None,
               reference: np.ndarray | None = None):
    """(fraction of touching part pairs that stay attached, mean gap increase / size) over posed (S, N, 3).

    ``joined``: only these (a, b) part pairs (the parts a joint connects, ``kinemesh.eval.real.joint_pairs``)
    among those touching at rest; None = every pair touching at rest (neighbours that are not joined, such as two
    doors meeting at a seam, then count as detached when one opens). ``faces`` (M, 3): gaps between the parts'
    surfaces (``SURFACE_POINTS`` points per part, carried by the posed triangles) instead of their vertices: a
    drawer sliding along its runner on a coarse mesh moves its vertices away from the carcass's vertices while
    the surfaces still touch. ``reference`` (N, 3): a pose the parts are asked to reach (a drag's target: the part
    moved along its true joint); a pair's gap may then grow up to the larger of its rest gap and its gap in that
    pose (+ ``ATTACH_TOL``), so the asked motion itself counts as attached (a real drawer, clear of its carcass's
    walls inside, leaves the front frame it touches at rest as soon as it slides)."""
    from scipy.spatial import cKDTree

    if faces is not None:
        from kinemesh.geometry.sampling import points_from_barycentric, sample_surface

        f = np.asarray(faces)
        groups = np.asarray(part_ids)[f[:, 0]]
        n = SURFACE_POINTS * len(np.unique(groups))
        _, fid, bary = sample_surface(rest, f, n, seed=0, face_groups=groups, min_per_group=SURFACE_POINTS)
        rest, part_ids = points_from_barycentric(rest, f, fid, bary), groups[fid]
        posed = np.stack([points_from_barycentric(p, f, fid, bary) for p in posed])
        if reference is not None:
            reference = points_from_barycentric(reference, f, fid, bary)
    ids = [i for i in np.unique(part_ids) if i >= 0]
    allowed = None if joined is None else {tuple(sorted(map(int, p))) for p in joined}
    pairs = []
    for a_i, a in enumerate(ids):
        ta = cKDTree(rest[part_ids == a])
        for b in ids[a_i + 1:]:
            if allowed is not None and (int(min(a, b)), int(max(a, b))) not in allowed:
                continue
            if ta.query(rest[part_ids == b])[0].min() < TOUCH * size:
                pairs.append((a, b))
    if not pairs:
        return float("nan"), float("nan")
    ok, inc = [], []
    for a, b in pairs:
        d0 = cKDTree(rest[part_ids == a]).query(rest[part_ids == b])[0].min()
        if reference is not None:
            d0 = max(d0, cKDTree(reference[part_ids == a]).query(reference[part_ids == b])[0].min())
        for pv in posed:
            d = cKDTree(pv[part_ids == a]).query(pv[part_ids == b])[0].min()
            inc.append(max(d - d0, 0.0) / size)
            ok.append(inc[-1] < ATTACH_TOL)
    return float(np.mean(ok)), float(np.mean(inc))


def _pick(entries: list[dict], n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    by_kind: dict[str, list[dict]] = {}
    for e in entries:
        by_kind.setdefault(str(e.get("kind", "unknown")), []).append(e)
    for v in by_kind.values():
        rng.shuffle(v)
    out, i = [], 0
    while len(out) < n and any(i < len(v) for v in by_kind.values()):
        for v in by_kind.values():
            if i < len(v) and len(out) < n:
                out.append(v[i])
        i += 1
    return out


def evaluate(cfg: ModelEvalConfig) -> Result:
    """Per-instance rows (see module docstring) of the held-out split of ``cfg.data``. Raises ConfigError,
    InputFileError."""
    import torch

    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.dynamics.scene import rest_offset
    from kinemesh.geometry import metrics
    from kinemesh.model import load_model
    from kinemesh.model.data import FREE_BODY_KINDS, read_manifest_entries, remove_rigid_motion, select_split
    from kinemesh.progress import tqdm

    entries = read_manifest_entries(cfg.data)
    if cfg.kinds:
        entries = [e for e in entries if e.get("kind") in cfg.kinds.split(",")]
    held = (select_split(entries, "test") or select_split(entries, "heldout")) if cfg.split == "auto" else \
        select_split(entries, cfg.split)
    if not held:
        raise ConfigError(f"{cfg.data}: no entries in split {cfg.split!r}")
    model = load_model(cfg.checkpoint, device=cfg.device)
    rows = []
    for e in tqdm(_pick(held, cfg.max_instances, cfg.seed), desc="eval model", unit="instance"):
        seq = KinematicSequence.load(e["_path"])
        rest = seq.rest_vertices.astype(np.float64)
        faces = seq.faces.astype(np.int64)
        frames_all = seq.frames.astype(np.float64)
        if seq.kind in FREE_BODY_KINDS:  # shape change only, as in training (whole-body flight removed)
            frames_all = np.stack([remove_rigid_motion(rest, f) for f in frames_all])
        size = float((rest.max(0) - rest.min(0)).max())
        # as a user would call it: no part labels (vertices follow points of their connected component), or
        # with --parts the part labels of a segmented input
        inst = model.instance(rest, faces, n_points=cfg.n_points, seed=cfg.seed,
                              part_ids=seq.part_ids if cfg.parts else None)
        row = {"path": str(e.get("path", e["_path"])), "kind": seq.kind, "category": seq.category, "size_m": size}
        # posterior reconstruction of the frames that move most (known correspondences)
        motion = np.linalg.norm(frames_all - rest[None], axis=-1).mean(-1)
        order = np.argsort(-motion)[:cfg.frames]
        err, mot, expl, cd, cd0, expl_c, cd_c = [], [], [], [], [], [], []
        # elastic and cloth: rest mesh minus the decoded posterior of the rest pose, as simulate's rest correction
        offset = rest_offset(inst, inst.encode(rest)[0]) if seq.kind in FREE_BODY_KINDS else None
        for t in order:
            target = frames_all[t]
            if motion[t] < 1e-6 * size:
                continue
            mean, _ = inst.encode(target)
            with torch.no_grad():
                fit = inst.vertices(mean).cpu().double().numpy()
            err.append(metrics.mean_vertex_error(fit, target))
            mot.append(float(motion[t]))
            expl.append(metrics.motion_explained(fit, target, rest))
            cd.append(metrics.chamfer(fit / size, target / size, faces, faces, n_samples=4000, seed=cfg.seed))
            cd0.append(metrics.chamfer(rest / size, target / size, faces, faces, n_samples=4000, seed=cfg.seed))
            if offset is not None:  # as kinemesh simulate decodes a soft body or cloth: with the rest correction
                expl_c.append(metrics.motion_explained(fit + offset, target, rest))
                cd_c.append(metrics.chamfer((fit + offset) / size, target / size, faces, faces, n_samples=4000,
                                            seed=cfg.seed))
        if err:
            row.update(rel_vertex_error=float(np.sum(err) / np.sum(mot)), motion_explained=float(np.mean(expl)),
                       chamfer_l1=float(np.mean(cd)), chamfer_l1_rest=float(np.mean(cd0)))
        if cd_c:
            row.update(motion_explained_rest_corrected=float(np.mean(expl_c)),
                       chamfer_l1_rest_corrected=float(np.mean(cd_c)))
        # prior samples
        z = inst.prior_sample(cfg.samples, seed=cfg.seed)
        with torch.no_grad():
            pv = inst.vertices(z).cpu().double().numpy()
        row["prior_motion"] = float(np.linalg.norm(pv - rest, axis=-1).mean() / size)
        if seq.kind == "articulated" and seq.part_ids is not None:
            row["rigidity"] = metrics.within_part_rigidity(rest, pv, seq.part_ids, seed=cfg.seed)
            row["attached"], row["gap_increase"] = attachment(rest, pv, seq.part_ids, size)
            # the same measures on the training data's own frames (what real motion looks like)
            row["data_rigidity"] = metrics.within_part_rigidity(rest, frames_all, seq.part_ids, seed=cfg.seed)
        else:
            a0 = surface_area(rest, faces)
            row["area_change"] = float(np.abs(surface_area(pv, faces) / a0 - 1).mean())
            row["data_area_change"] = float(np.abs(surface_area(frames_all, faces) / a0 - 1).mean())
        rows.append(row)
    return Result(rows, model.info)


def summarize(rows: list[dict]) -> dict:
    """Per-kind means of every numeric field (and the medians of the motion explained, which a few failed
    targets can drag far below the typical value)."""
    summary: dict[str, dict] = {}
    for kind in sorted({r["kind"] for r in rows}) + ["all"]:
        sel = [r for r in rows if kind == "all" or r["kind"] == kind]
        keys = sorted({k for r in sel for k, v in r.items() if isinstance(v, float)})
        summary[kind] = {"instances": len(sel)}
        for k in keys:
            vals = [r[k] for r in sel if k in r and np.isfinite(r[k])]
            if vals:
                summary[kind][k] = float(np.mean(vals))
        for key in ("motion_explained", "motion_explained_rest_corrected"):
            med = [r[key] for r in sel if np.isfinite(r.get(key, np.nan))]
            if med:
                summary[kind][f"{key}_median"] = float(np.median(med))
    return summary


def render(rows: list[dict]) -> str:
    """The per-kind markdown table of :func:`summarize` of ``rows``."""
    summary = summarize(rows)
    cols = [("instances", "n", "{:d}"), ("rel_vertex_error", "posterior vertex err / motion", "{:.3f}"),
            ("motion_explained", "motion explained (mean)", "{:.3f}"),
            ("motion_explained_median", "motion explained (median)", "{:.3f}"), ("chamfer_l1", "Chamfer-L1", "{:.4f}"),
            ("chamfer_l1_rest", "Chamfer-L1 rest pose", "{:.4f}"),
            ("motion_explained_rest_corrected_median", "rest-corrected: motion explained (median)", "{:.3f}"),
            ("chamfer_l1_rest_corrected", "rest-corrected: Chamfer-L1", "{:.4f}"), ("prior_motion", "prior motion / size", "{:.3f}"),
            ("rigidity", "prior within-part rigidity", "{:.4f}"), ("attached", "prior parts attached", "{:.3f}"),
            ("area_change", "prior area change", "{:.3f}"), ("data_area_change", "data area change", "{:.3f}")]
    lines = ["| kind | " + " | ".join(c[1] for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for kind, s in summary.items():
        cells = [(fmt.format(int(s[k]) if k == "instances" else s[k]) if k in s else "-") for k, _, fmt in cols]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
