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
(D, D) float32, one key per kind, metadata JSON with the data folder, split and pair counts), written and read
by ``kinemesh.model.checkpoint``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from kinemesh.errors import ConfigError
from kinemesh.model.api import KinematicModel
from kinemesh.model.checkpoint import save_calibration


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


def calibrate_checkpoint(checkpoint: str | os.PathLike, data, split: str = "train",
                         per_kind: int = 150, frames_per_sequence: int = 3, seed: int = 0,
                         progress: bool = True, kinds=None) -> tuple[Path, dict]:
    """Compute and write ``checkpoint/prior_calibration.safetensors`` from ``split`` of dataset ``data`` (a
    folder or a list of folders, as ``kinemesh train --data``), its sequences of ``kinds`` only when given.

    Returns (path written, {kind: poses encoded}). Raises InputFileError / ConfigError for a bad checkpoint,
    dataset or split.
    """
    from kinemesh.model.data import data_folders, read_datasets, select_split

    model = KinematicModel.load(checkpoint)
    model.prior_factors = None  # encode against mu_cond only; the old calibration plays no part
    model.to(dtype=torch.float64)
    folders = data_folders(data)
    entries = select_split(read_datasets(folders, kinds=kinds)[0], split)
    covs, counts = aggregate_posterior(model, entries, per_kind=per_kind, frames_per_sequence=frames_per_sequence,
                                       seed=seed, progress=progress)
    meta = {"data": ", ".join(map(str, folders)), "kinds": list(kinds or []), "split": split, "per_kind": per_kind, "frames_per_sequence": frames_per_sequence,
            "seed": seed, "counts": counts}
    return save_calibration(checkpoint, covs, meta), counts
