"""Prior calibration: the aggregate posterior of the training data, per object kind.

The conditional prior of the VAE is N(mu_cond, I). Training with a small KL weight and the prior
plausibility term (``TrainConfig.prior_weight``) leaves the posterior means of real motions far from that
prior's typical set along a few directions and nowhere near it along most others: on the shipped checkpoint
the offsets mu_post - mu_cond of training poses have a covariance whose top eigenvalue is 6 (articulated),
25 (cloth), 6 (elastic) while most of the 128 directions carry almost nothing, so a sample at "1 std" opens
a door by 0.3 degrees and "3 std" is both too small along the directions that matter and too large along
the ones that do not.

The fix without retraining is to moment-match the prior to the aggregate posterior (the prior a VAE should
have, Tomczak & Welling's VampPrior argument; NeuROK Sec. 4.3 samples "the prior" for its active subspace):

    Sigma_kind = Cov(mu_post - mu_cond) + E[diag sigma_post^2]

over rest -> frame pairs of the *training* split, one matrix per kind (articulated, elastic, cloth, and
"all"). An instance uses the factor L (Sigma = L L^T) of its kind: prior samples are mu_cond + L u with
u ~ N(0, I), and the active subspace (``kinemesh.reduce``) is computed in u, so reduced coordinates are again
N(0, I) and "3 std" means 3 std of the motions the model was trained on.

Files: ``prior_calibration.safetensors`` beside ``model.safetensors`` in the checkpoint folder (covariances
(D, D) float32, one key per kind, metadata JSON with the data folder, split and pair counts).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import torch

from kinemesh.errors import ConfigError, InputFileError

log = logging.getLogger(__name__)

CALIBRATION_FILE = "prior_calibration.safetensors"
KINDS = ("articulated", "elastic", "cloth")


def guess_kind(vertices: np.ndarray, faces: np.ndarray, part_ids: np.ndarray | None = None) -> str:
    """articulated | elastic | cloth from the mesh alone: an open thin sheet is cloth; two or more sizeable
    given parts (``part_ids`` (n,), e.g. URDF links) or three or more sizeable connected components (after
    merging coincident vertices) articulated; anything else elastic."""
    import trimesh

    from kinemesh.model.api import connected_components

    vertices = np.asarray(vertices, dtype=np.float64)
    m = trimesh.Trimesh(vertices, faces, process=False)
    ext = np.sort(np.ptp(vertices, axis=0))
    if not m.is_watertight and ext[0] < 0.05 * ext[2]:
        return "cloth"
    if part_ids is not None:
        sizes = np.unique(np.asarray(part_ids).reshape(-1), return_counts=True)[1]
        if (sizes >= max(8, 0.02 * len(vertices))).sum() >= 2:
            return "articulated"
    # merge coincident vertices first (files often split vertices along UV/normal seams)
    _, inverse = np.unique(np.round(vertices / (1e-6 * max(ext[2], 1e-12))), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    labels = connected_components(int(inverse.max()) + 1, inverse[np.asarray(faces)])
    counts = np.bincount(labels)
    # a soft toy can have a separate shell or two; cabinets, ovens, laptops have body + parts + handles
    if (counts >= max(8, 0.02 * len(vertices))).sum() >= 3:
        return "articulated"
    return "elastic"


def sqrt_factor(cov: np.ndarray, floor: float = 1e-3) -> np.ndarray:
    """Symmetric square root L (D, D) float64 of a covariance (D, D), eigenvalues floored at ``floor``."""
    cov = 0.5 * (np.asarray(cov, dtype=np.float64) + np.asarray(cov, dtype=np.float64).T)
    w, V = np.linalg.eigh(cov)
    return (V * np.sqrt(np.clip(w, floor, None))) @ V.T


def aggregate_posterior(model, entries: list[dict], per_kind: int = 200, frames_per_sequence: int = 3,
                        n_points: int = 512, seed: int = 0, progress: bool = True) -> tuple[dict, dict]:
    """Covariances of the aggregate posterior around mu_cond, per kind and pooled ("all").

    Parameters
    ----------
    model : KinematicModel.
    entries : manifest entries (``kinemesh.model.data.read_manifest_entries``) of the split to use (train).
    per_kind : sequences drawn per kind; ``frames_per_sequence`` random frames of each are encoded against
        the rest mesh (free-body kinds with their rigid motion removed, as in training).

    Returns
    -------
    covs : dict kind -> (D, D) float64.
    counts : dict kind -> number of encoded poses.
    """
    from kinemesh.progress import tqdm

    from kinemesh.data.sequence import KinematicSequence
    from kinemesh.model.data import FREE_BODY_KINDS, remove_rigid_motion

    if per_kind < 1 or frames_per_sequence < 1:
        raise ConfigError("calibration: per_kind and frames_per_sequence must be >= 1")
    rng = np.random.default_rng(seed)
    by_kind: dict[str, list[dict]] = {}
    for e in entries:
        by_kind.setdefault(str(e.get("kind", "unknown")), []).append(e)
    jobs = []
    for kind in sorted(by_kind):
        es = by_kind[kind]
        for i in rng.choice(len(es), size=min(per_kind, len(es)), replace=False):
            jobs.append((kind, es[int(i)]))
    if not jobs:
        raise ConfigError("calibration: no sequences to encode")
    offsets: dict[str, list[np.ndarray]] = {}
    variances: dict[str, list[np.ndarray]] = {}
    for kind, e in tqdm(jobs, desc="calibrate prior", unit="seq", disable=not progress):
        seq = KinematicSequence.load(e["_path"])
        rest = seq.rest_vertices.astype(np.float64)
        inst = model.instance(rest, seq.faces.astype(np.int64), n_points=n_points, part_ids=seq.part_ids,
                              kind=None)
        for t in rng.choice(seq.n_frames, size=min(frames_per_sequence, seq.n_frames), replace=False):
            frame = seq.frames[int(t)].astype(np.float64)
            if kind in FREE_BODY_KINDS:
                frame = remove_rigid_motion(rest, frame)
            mean, logvar = inst.encode(frame)
            offsets.setdefault(kind, []).append((mean - inst.mu_cond).double().cpu().numpy())
            variances.setdefault(kind, []).append(logvar.double().exp().cpu().numpy())
    covs, counts = {}, {}
    groups = {k: [k] for k in offsets}
    groups["all"] = list(offsets)
    for name, kinds in groups.items():
        d = np.concatenate([np.stack(offsets[k]) for k in kinds])
        v = np.concatenate([np.stack(variances[k]) for k in kinds])
        covs[name] = d.T @ d / len(d) + np.diag(v.mean(0))
        counts[name] = int(len(d))
    return covs, counts


def save_calibration(folder: str | os.PathLike, covs: dict, meta: dict) -> Path:
    """Write ``folder/prior_calibration.safetensors`` atomically: one (D, D) float32 covariance per kind."""
    from safetensors.torch import save_file

    from kinemesh.atomic import atomic_path

    path = Path(folder) / CALIBRATION_FILE
    state = {k: torch.as_tensor(np.asarray(v), dtype=torch.float32).contiguous() for k, v in covs.items()}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata={"format": "kinemesh-prior-calibration-1", "meta": json.dumps(meta)})
    return path


def load_calibration(folder: str | os.PathLike, latent_dim: int) -> dict | None:
    """Prior factors {kind: L (D, D) float64 numpy} from ``folder``, or None when the file is absent.

    Raises InputFileError for an unreadable file or matrices that are not (D, D), finite and symmetric.
    """
    from safetensors import safe_open

    path = Path(folder) / CALIBRATION_FILE
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as f:
            covs = {k: f.get_tensor(k).double().numpy() for k in f.keys()}
    except Exception as exc:  # safetensors raises its own error types
        raise InputFileError(path, f"cannot read safetensors ({exc})") from exc
    if "all" not in covs:
        raise InputFileError(path, "has no pooled 'all' covariance")
    factors = {}
    for k, c in covs.items():
        if c.shape != (latent_dim, latent_dim) or not np.isfinite(c).all() or not np.allclose(c, c.T, atol=1e-4):
            raise InputFileError(path, f"covariance {k!r} is not a finite symmetric ({latent_dim}, {latent_dim}) "
                                       f"matrix (shape {c.shape})")
        factors[k] = sqrt_factor(c)
    return factors


def calibrate_checkpoint(checkpoint: str | os.PathLike, data: str | os.PathLike, split: str = "train",
                         per_kind: int = 150, frames_per_sequence: int = 3, seed: int = 0,
                         progress: bool = True) -> tuple[Path, dict]:
    """Compute and write ``checkpoint/prior_calibration.safetensors`` from ``split`` of dataset ``data``.

    Returns (path written, {kind: poses encoded}). Raises InputFileError / ConfigError for a bad checkpoint,
    dataset or split.
    """
    from kinemesh.model.api import KinematicModel
    from kinemesh.model.data import read_manifest_entries, select_split

    model = KinematicModel.load(checkpoint)
    model.prior_factors = None  # encode against mu_cond only; the old calibration plays no part
    model.to(dtype=torch.float64)
    entries = select_split(read_manifest_entries(data), split)
    covs, counts = aggregate_posterior(model, entries, per_kind=per_kind, frames_per_sequence=frames_per_sequence,
                                       seed=seed, progress=progress)
    meta = {"data": str(data), "split": split, "per_kind": per_kind, "frames_per_sequence": frames_per_sequence,
            "seed": seed, "counts": counts}
    return save_calibration(checkpoint, covs, meta), counts
