"""Train the articulation predictor: self-supervised pretraining on valid candidates, then fine-tuning on
synthetic ground truth (and, with ``--real``, the URDF joints of real training objects); the no-pretraining
ablation is trained with the same fine-tuning schedule.

Run ``python -m kinemesh.articulation.train --out kinemesh/assets/articulation`` (or
``scripts/train_articulation.sh``). Writes ``OUT/config.json`` + ``OUT/model.safetensors`` (pretrained +
fine-tuned, the default) and ``OUT/no_pretrain/`` (ablation). Held-out categories
(:data:`kinemesh.articulation.dataset.HOLDOUT_CATEGORIES`), held-out instance seeds and the real validation
split (:func:`kinemesh.articulation.dataset.real_objects`) are never used.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from kinemesh.articulation.dataset import (
    HOLDOUT_CATEGORIES, PRETRAIN_SEED_BASE, build_object, part_samples, real_objects,
)
from kinemesh.articulation.predictor import (
    ArticulationNet, PredictorConfig, PredictorEnsemble, finetune_loss, merge_predictors, pretrain_loss,
    save_predictor,
)


@dataclass
class TrainConfig:
    """Training schedule (defaults with ``--real data/real_train``: 56 min on one CPU thread of a 2-core
    machine shared by about 7 jobs, data 14 min)."""

    n_finetune: int = 12  # annotated instances per training category (fine-tuning)
    n_pretrain: int = 8  # unannotated instances per training category (pretraining, validity labels)
    n_assemblies_ft: int = 30  # annotated random assemblies
    n_assemblies_pre: int = 30  # unannotated random assemblies
    n_extended_ft: int = 0  # annotated random assemblies of the extended kinds (rotors, wheels, rows, oblique
    # parts: ``build_object("assembly+")``)
    n_extended_pre: int = 0  # unannotated ones
    epochs_pre: int = 30  # pretraining epochs (40 before the real objects nearly doubled the data)
    epochs_ft: int = 40  # fine-tuning epochs (50 before)
    n_augment: int = 1  # asset-realism copies per fine-tuning object (:mod:`kinemesh.articulation.realism`)
    n_augment_pre: int = 1  # asset-realism copies per pretraining object (validity labels on the copy)
    p_sheet: float = 0.3  # realism: probability that a thin part of a copy is collapsed to a sheet
    shape_uniform: float = 0.5  # PredictorConfig.shape_uniform: half the context samples spread equally over
    # the other parts, so small attached parts (handles, knobs) are seen
    members: int = 3  # networks trained from seeds seed, seed+1, ... on the same data, shipped as one ensemble
    batch: int = 32  # batch size
    lr: float = 1e-3  # AdamW learning rate (cosine decay)
    seed: int = 0  # data and init seed
    p_yaw: float = 0.75  # realism copies: probability of a yaw (full circle, half of them quarter turns)
    real: str = ""  # folder of real PartNet-Mobility objects / URDFs; its train split is added (GEOPARD:
    # pretraining on their valid candidates needs no labels, fine-tuning uses their URDF joints)
    exclude_categories: str = ""  # comma list of real categories (meta.json model_cat) left out of the real
    # objects: a category-held-out check (``kinemesh eval articulation --holdout-categories``)
    real_copies: int = 2  # realism copies (always yawed) per real object, on top of the object as loaded
    real_cache: str = "runs/cache/articulation_real"  # npz cache of the loaded real objects ("" = none)
    samples: str = ""  # npz file of the generated training samples: read when it was made with the same data
    # settings, else generated and written there (variants of the schedule then train without regenerating)
    workers: int = 1  # processes generating the samples (each object has its own seeded generator)
    device: str = "cpu"  # torch device of the networks' training ("cuda" on a GPU machine)
    type_balance: float = 0.0  # type cross-entropy class weights (count / mean count)^-type_balance: 0 = plain,
    # 1 = inverse class frequency (fixed, revolute and prismatic parts weigh alike in the type loss)
    net_seed: int = -1  # seed of the members' initialisation and batch order (-1: ``seed``); unlike ``seed`` it
    # leaves the samples as they are, so two values give the run-to-run spread of one schedule
    width: int = 64  # PredictorConfig.width (token width)
    layers: int = 2  # PredictorConfig.layers (self-attention layers)
    ablation: int = 1  # 1: also train the no-pretraining ablation (OUT/no_pretrain/, which --merge needs); 0: skip
    # it (variants compared on validation only: the ablation costs as much as the fine-tuning)


DATA_FIELDS = ("n_finetune", "n_pretrain", "n_assemblies_ft", "n_assemblies_pre", "n_augment", "n_augment_pre",
               "p_sheet", "shape_uniform", "seed", "p_yaw", "real", "real_copies", "n_extended_ft", "n_extended_pre",
               "exclude_categories")
"""The :class:`TrainConfig` fields that decide the generated samples (a ``samples`` file records them)."""
ADDED_DATA_FIELDS = {"n_extended_ft": 0, "n_extended_pre": 0}
"""Data fields added after samples files were first written -> the value files without them were made with."""
SAMPLES_FORMAT = "kinemesh-articulation-samples-1"


def _object_samples(args) -> list[dict]:
    """Samples of one object: ``job`` is a (category or "assembly", seed) pair built here or a ready
    ArticulatedObject (a real object), followed by ``n_augment`` realism copies; ``seed`` seeds its own
    generator, so the result does not depend on the order or the process the objects are generated in."""
    from kinemesh.articulation.realism import augment
    from kinemesh.geometry.validity import ValidityConfig

    job, seed, cfg, with_validity, n_augment, realism = args
    rng = np.random.default_rng(seed)
    vcfg = ValidityConfig(n_points=400, steps=6)
    try:
        obj = build_object(*job) if isinstance(job, tuple) else job
    except Exception:  # a builder may give up on an unlucky seed
        return []
    out = part_samples(obj, rng, cfg, with_validity=with_validity, validity_config=vcfg)
    for _ in range(n_augment):  # the originals stay: held-out instances are canonical synthetic objects
        try:
            out += part_samples(augment(obj, rng, realism), rng, cfg, with_validity=with_validity, validity_config=vcfg)
        except Exception:  # an augmentation can make a part degenerate; skip that copy
            continue
    return out


def _gen(jobs, seed, cfg, with_validity, desc, n_augment: int = 0, realism=None, workers: int = 1):
    """Samples of ``jobs`` (see :func:`_object_samples`), object ``i`` seeded by ``(seed, i)``, on ``workers``
    processes."""
    from kinemesh.progress import tqdm

    args = [(job, (*seed, i), cfg, with_validity, n_augment, realism) for i, job in enumerate(jobs)]
    out = []
    if workers <= 1:
        for a in tqdm(args, desc=desc, unit="obj"):
            out += _object_samples(a)
        return out
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(workers, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        for r in tqdm(pool.imap(_object_samples, args, chunksize=1), total=len(args), desc=desc, unit="obj"):
            out += r
    return out


def _stack(samples, keys):
    out = {}
    for k in keys:
        v = np.stack([s[k] for s in samples])
        out[k] = torch.as_tensor(v, dtype=torch.long if v.dtype.kind in "iu" else torch.float32)
    return out


FT_KEYS = ("points", "box", "type", "axis_cls", "sign", "axis_res", "origin_cls", "origin_res", "limits", "movable")


def _fit(net, data, epochs, batch, lr, loss_fn, rng, desc):
    """AdamW with one-cycle learning rate over ``epochs`` passes of ``data`` (tensors on the net's device)."""
    from kinemesh.progress import tqdm

    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    n = len(data["points"])
    steps = epochs * max(1, n // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    net.train()
    hist = []
    bar = tqdm(range(epochs), desc=desc, unit="epoch")
    for _ in bar:
        perm = rng.permutation(n)
        tot = 0.0
        for b in range(max(1, n // batch)):
            idx = torch.as_tensor(perm[b * batch:(b + 1) * batch], device=data["points"].device)
            tb = {k: v[idx] for k, v in data.items()}
            out = net(tb["points"], tb["box"])
            loss = loss_fn(out, tb)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            tot += loss.detach()
        hist.append(float(tot) / max(1, n // batch))
        bar.set_postfix(loss=f"{hist[-1]:.3f}")
    net.eval()
    return hist


def generate(tc: TrainConfig, pc: PredictorConfig, read_only: bool = False) -> tuple[dict, dict, dict]:
    """The fine-tuning and pretraining tensors and a summary: generated (synthetic training categories, random
    assemblies and, with ``tc.real``, the train split of the real objects), or read from ``tc.samples`` when
    that file was written with the same data settings. ``read_only``: never generate (InputFileError when the
    file is missing or was made with other settings)."""
    head = {"format": SAMPLES_FORMAT, "train": {k: getattr(tc, k) for k in DATA_FIELDS},
            "predictor": {"n_part": pc.n_part, "n_shape": pc.n_shape, "shape_uniform": pc.shape_uniform}}
    if tc.samples and Path(tc.samples).is_file():
        with np.load(tc.samples, allow_pickle=False) as z:
            stored = json.loads(bytes(z["head"]).decode())
            stored["train"] = {**ADDED_DATA_FIELDS, **stored.get("train", {})}
            if stored.get("format") == SAMPLES_FORMAT and stored.get("train") == head["train"] \
                    and stored.get("predictor") == head["predictor"]:
                ft = {k[3:]: _from_file(z[k]) for k in z.files if k.startswith("ft.")}
                pre = {k[4:]: _from_file(z[k]) for k in z.files if k.startswith("pre.")}
                return ft, pre, {**stored["summary"], "data_seconds": 0.0, "samples_file": str(tc.samples)}
        if read_only:
            from kinemesh.errors import InputFileError

            diff = sorted(k for k in head["train"] if stored.get("train", {}).get(k) != head["train"][k])
            raise InputFileError(Path(tc.samples), f"made with other data settings ({', '.join(diff) or 'sizes'})")
        print(f"{tc.samples}: made with other data settings; generating anew", file=sys.stderr)
    elif read_only:
        from kinemesh.errors import InputFileError

        raise InputFileError(Path(tc.samples or "--samples"), "no samples file (make it with --generate-only)")
    from kinemesh.articulation.realism import RealismConfig
    from kinemesh.synth.categories import CATEGORIES

    t0 = time.time()
    cats = [c for c in CATEGORIES if c not in HOLDOUT_CATEGORIES]
    ft_jobs = [(c, s) for c in cats for s in range(tc.n_finetune)] + \
              [("assembly", s) for s in range(tc.n_assemblies_ft)] + \
              [("assembly+", s) for s in range(tc.n_extended_ft)]
    pre_jobs = [(c, PRETRAIN_SEED_BASE + s) for c in cats for s in range(tc.n_pretrain)] + \
               [("assembly", PRETRAIN_SEED_BASE + s) for s in range(tc.n_assemblies_pre)] + \
               [("assembly+", PRETRAIN_SEED_BASE + s) for s in range(tc.n_extended_pre)]
    realism = RealismConfig(p_sheet=tc.p_sheet, p_yaw=tc.p_yaw)
    w, seed = tc.workers, tc.seed
    ft = _gen(ft_jobs, (seed, 0), pc, False, "fine-tune data", tc.n_augment, realism, w)
    pre = _gen(pre_jobs, (seed, 1), pc, True, "pretrain data (validity labels)", tc.n_augment_pre, realism, w)
    n_real = 0
    if tc.real:  # real shapes are already real: copies are turned (and sometimes reposed/stretched) only
        excluded = {c.strip() for c in tc.exclude_categories.split(",") if c.strip()}
        real = [o for _, o in real_objects(tc.real, "train", tc.real_cache or None) if o.category not in excluded]
        n_real = len(real)
        rcfg = RealismConfig(p_yaw=1.0, p_repose=0.3, p_stretch=0.3, p_open=0.0, p_sheet=0.0)
        ft += _gen(real, (seed, 2), pc, False, "fine-tune data (real)", tc.real_copies, rcfg, w)
        pre += _gen(real, (seed, 3), pc, True, "pretrain data (real, validity labels)", 1, rcfg, w)
    ft_t, pre_t = _stack(ft, FT_KEYS), _stack(pre, ("points", "box", "valid"))
    summary = {"train_categories": cats, "n_real_objects": n_real, "n_finetune_parts": len(ft),
               "n_pretrain_parts": len(pre), "data_seconds": round(time.time() - t0, 1)}
    if tc.samples:
        from kinemesh.atomic import atomic_path

        for t in (ft_t, pre_t):  # the file keeps the points in float16 (half the size, so it travels to a GPU
            t["points"] = t["points"].half().float()  # machine); train on what the file gives back
        head["summary"] = summary
        arrays = {f"ft.{k}": _to_file(k, v) for k, v in ft_t.items()} | \
                 {f"pre.{k}": _to_file(k, v) for k, v in pre_t.items()}
        with atomic_path(tc.samples) as tmp:
            np.savez(tmp, head=np.frombuffer(json.dumps(head).encode(), np.uint8), **arrays)
    return ft_t, pre_t, summary


def _to_file(key: str, t: torch.Tensor) -> np.ndarray:
    """A samples-file array: the points (most of the bytes) in float16, the rest as they are."""
    return t.numpy().astype(np.float16) if key == "points" else t.numpy()


def _from_file(a: np.ndarray) -> torch.Tensor:
    """A tensor of a samples-file array (float16 back to float32; files before the float16 points hold float32)."""
    return torch.as_tensor(a.astype(np.float32) if a.dtype == np.float16 else a)


def type_weights(types: torch.Tensor, power: float) -> torch.Tensor | None:
    """Class weights (count_c / mean count)^-power for the type cross-entropy (classes absent from ``types``
    weigh 0), or None for ``power`` 0."""
    if power == 0:
        return None
    counts = torch.bincount(types, minlength=3).float()
    w = torch.where(counts > 0, (counts / counts[counts > 0].mean()).clamp(min=1e-6) ** -power, 0.0)
    return w


def train(out_dir: str, tc: TrainConfig, pc: PredictorConfig | None = None, read_only: bool = False) -> dict:
    """Generate (or read; ``read_only``: only read, see :func:`generate`) data, pretrain, fine-tune, train the
    ablation, write both weight folders. Returns info."""
    t0 = time.time()
    net_seed = tc.seed if tc.net_seed < 0 else tc.net_seed
    rng = np.random.default_rng(net_seed)
    pc = pc or PredictorConfig(shape_uniform=tc.shape_uniform, width=tc.width, layers=tc.layers)
    ft_t, pre_t, summary = generate(tc, pc, read_only)
    dev = torch.device(tc.device)
    ft_t = {k: v.to(dev) for k, v in ft_t.items()}
    pre_t = {k: v.to(dev) for k, v in pre_t.items()}
    valid_rate = float(pre_t["valid"].mean())
    tw = type_weights(ft_t["type"], tc.type_balance)

    def ft_loss(out, tb):
        return finetune_loss(out, tb, type_weight=tw)[0]

    nets, abls, h_pre, h_ft, h_abl = [], [], [], [], []
    for i in range(tc.members):  # ensemble members: same data, different initialisation and batch order
        tag = f" {i + 1}/{tc.members}" if tc.members > 1 else ""
        torch.manual_seed(net_seed + i)
        net = ArticulationNet(pc).to(dev)
        init = copy.deepcopy(net.state_dict())
        h_pre.append(_fit(net, pre_t, tc.epochs_pre, tc.batch, tc.lr, lambda o, b: pretrain_loss(o, b["valid"]),
                          rng, "pretrain" + tag))
        h_ft.append(_fit(net, ft_t, tc.epochs_ft, tc.batch, tc.lr, ft_loss, rng, "fine-tune" + tag))
        nets.append(net)
        if tc.ablation:
            abl = ArticulationNet(pc).to(dev)
            abl.load_state_dict(init)
            h_abl.append(_fit(abl, ft_t, tc.epochs_ft, tc.batch, tc.lr, ft_loss, rng,
                              "fine-tune (no pretraining)" + tag))
            abls.append(abl)
    info = {
        "train_config": tc.__dict__, "holdout_categories": list(HOLDOUT_CATEGORIES), **summary,
        "pretrain_valid_rate": valid_rate, "total_seconds": round(time.time() - t0, 1),
        "final_loss": {"pretrain": [h[-1] if h else None for h in h_pre], "finetune": [h[-1] for h in h_ft],
                       "ablation": [h[-1] for h in h_abl]},
        "torch_threads": torch.get_num_threads(), "device": str(dev),
    }

    def pack(ms):
        return ms[0] if len(ms) == 1 else PredictorEnsemble(ms)

    save_predictor(pack(nets), out_dir, {**info, "variant": "pretrained+finetuned"})
    if abls:
        save_predictor(pack(abls), f"{out_dir}/no_pretrain", {**info, "variant": "no pretraining (ablation)"})
    else:
        _drop_stale_ablation(out_dir)
    return info


def _drop_stale_ablation(out_dir) -> None:
    """Remove ``out_dir/no_pretrain/`` when a run or merge that writes no ablation reuses ``out_dir``: it would be
    an earlier run's, not these networks' (and ``--merge`` would take it for theirs)."""
    if (Path(out_dir) / "no_pretrain" / "config.json").is_file():
        shutil.rmtree(Path(out_dir) / "no_pretrain")


def main(argv=None) -> int:
    from kinemesh.errors import InputFileError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="kinemesh/assets/articulation")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--merge", nargs="+", metavar="FOLDER",
                    help="write one ensemble of the members of these predictor folders (and of their no_pretrain/ "
                         "ablations, when every folder has one) to --out instead of training")
    ap.add_argument("--float16", action="store_true",
                    help="with --merge: store the weights as float16 (half the size)")
    ap.add_argument("--samples-only", action="store_true",
                    help="train only from the --samples file as it is: an error instead of generating anew")
    ap.add_argument("--generate-only", action="store_true",
                    help="write the training samples to --samples and stop (train elsewhere, e.g. on a GPU)")
    for k, v in TrainConfig().__dict__.items():
        ap.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    tc = TrainConfig(**{k: getattr(a, k) for k in TrainConfig().__dict__})
    if a.merge:
        def provenance(folder):  # each source's own training record, so the merged folder describes itself
            cfg = json.loads((Path(folder) / "config.json").read_text())
            return {"folder": str(folder), "members": cfg.get("members", 1), "extra": cfg.get("extra", {})}

        # the ablations are merged too when every folder has one; folders trained with --ablation 0 have none
        with_abl = [(Path(f) / "no_pretrain" / "config.json").is_file() for f in a.merge]
        try:  # both ensembles are built before anything is written
            if any(with_abl) and not all(with_abl):
                raise InputFileError(Path(a.merge[with_abl.index(False)]) / "no_pretrain",
                                     "missing, while other folders have their ablation (merge all or none)")
            nets = (merge_predictors(a.merge),
                    merge_predictors([Path(f) / "no_pretrain" for f in a.merge]) if all(with_abl) else None)
        except InputFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        info = {"variant": "merged ensemble", "merged_from": [provenance(f) for f in a.merge]}
        dtype = torch.float16 if a.float16 else torch.float32
        save_predictor(nets[0], a.out, info, dtype)
        if nets[1] is None:
            _drop_stale_ablation(a.out)
            print(f"wrote {a.out} (no ablations to merge)")
            return 0
        info_abl = {"variant": "merged ensemble (no pretraining ablations)",
                    "merged_from": [provenance(Path(f) / "no_pretrain") for f in a.merge]}
        save_predictor(nets[1], f"{a.out}/no_pretrain", info_abl, dtype)
        print(f"wrote {a.out} and {a.out}/no_pretrain")
        return 0
    if a.generate_only:
        if not tc.samples:
            ap.error("--generate-only needs --samples FILE")
        pc = PredictorConfig(shape_uniform=tc.shape_uniform, width=tc.width, layers=tc.layers)
        print(generate(tc, pc)[2])
        return 0
    try:
        info = train(a.out, tc, read_only=a.samples_only)
    except InputFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print({k: info[k] for k in ("n_finetune_parts", "n_pretrain_parts", "pretrain_valid_rate", "data_seconds",
                                 "total_seconds", "final_loss")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
