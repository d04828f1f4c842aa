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
import time
from dataclasses import dataclass

import numpy as np
import torch

from kinemesh.articulation.dataset import (
    HOLDOUT_CATEGORIES, PRETRAIN_SEED_BASE, build_object, part_samples, real_objects,
)
from kinemesh.articulation.predictor import (
    ArticulationNet, PredictorConfig, PredictorEnsemble, finetune_loss, pretrain_loss, save_predictor,
)
from kinemesh.geometry.validity import ValidityConfig


@dataclass
class TrainConfig:
    """Training schedule (defaults with ``--real data/real_train``: 56 min on one CPU thread of a 2-core
    machine shared by about 7 jobs, data 14 min)."""

    n_finetune: int = 12  # annotated instances per training category (fine-tuning)
    n_pretrain: int = 8  # unannotated instances per training category (pretraining, validity labels)
    n_assemblies_ft: int = 30  # annotated random assemblies
    n_assemblies_pre: int = 30  # unannotated random assemblies
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
    real_copies: int = 2  # realism copies (always yawed) per real object, on top of the object as loaded
    real_cache: str = "runs/cache/articulation_real"  # npz cache of the loaded real objects ("" = none)


def _gen(jobs, rng, cfg, with_validity, desc, n_augment: int = 0, realism=None):
    """Samples of ``jobs``: (category or "assembly", seed) pairs built here, or ready ArticulatedObjects
    (real objects), each followed by ``n_augment`` realism copies."""
    from kinemesh.progress import tqdm

    from kinemesh.articulation.realism import augment

    out = []
    vcfg = ValidityConfig(n_points=400, steps=6)
    for job in tqdm(jobs, desc=desc, unit="obj"):
        try:
            obj = build_object(*job) if isinstance(job, tuple) else job
        except Exception:  # a builder may give up on an unlucky seed
            continue
        out += part_samples(obj, rng, cfg, with_validity=with_validity, validity_config=vcfg)
        for _ in range(n_augment):  # the originals stay: held-out instances are canonical synthetic objects
            try:
                out += part_samples(augment(obj, rng, realism), rng, cfg, with_validity=with_validity, validity_config=vcfg)
            except Exception:  # an augmentation can make a part degenerate; skip that copy
                continue
    return out


def _stack(samples, keys):
    out = {}
    for k in keys:
        v = np.stack([s[k] for s in samples])
        out[k] = torch.as_tensor(v, dtype=torch.long if v.dtype.kind in "iu" else torch.float32)
    return out


FT_KEYS = ("points", "box", "type", "axis_cls", "sign", "axis_res", "origin_cls", "origin_res", "limits", "movable")


def _fit(net, data, epochs, batch, lr, loss_fn, rng, desc):
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
            idx = torch.as_tensor(perm[b * batch:(b + 1) * batch])
            tb = {k: v[idx] for k, v in data.items()}
            out = net(tb["points"], tb["box"])
            loss = loss_fn(out, tb)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            tot += float(loss)
        hist.append(tot / max(1, n // batch))
        bar.set_postfix(loss=f"{hist[-1]:.3f}")
    net.eval()
    return hist


def train(out_dir: str, tc: TrainConfig, pc: PredictorConfig | None = None) -> dict:
    """Generate data, pretrain, fine-tune, train the ablation, write both weight folders. Returns info."""
    from kinemesh.synth.categories import CATEGORIES

    t0 = time.time()
    torch.manual_seed(tc.seed)
    rng = np.random.default_rng(tc.seed)
    pc = pc or PredictorConfig(shape_uniform=tc.shape_uniform)
    cats = [c for c in CATEGORIES if c not in HOLDOUT_CATEGORIES]
    ft_jobs = [(c, s) for c in cats for s in range(tc.n_finetune)] + \
              [("assembly", s) for s in range(tc.n_assemblies_ft)]
    pre_jobs = [(c, PRETRAIN_SEED_BASE + s) for c in cats for s in range(tc.n_pretrain)] + \
               [("assembly", PRETRAIN_SEED_BASE + s) for s in range(tc.n_assemblies_pre)]
    from kinemesh.articulation.realism import RealismConfig

    realism = RealismConfig(p_sheet=tc.p_sheet, p_yaw=tc.p_yaw)
    ft = _gen(ft_jobs, rng, pc, False, "fine-tune data", tc.n_augment, realism)
    pre = _gen(pre_jobs, rng, pc, True, "pretrain data (validity labels)", tc.n_augment_pre, realism)
    n_real = 0
    if tc.real:  # real shapes are already real: copies are turned (and sometimes reposed/stretched) only
        real = [o for _, o in real_objects(tc.real, "train", tc.real_cache or None)]
        n_real = len(real)
        rcfg = RealismConfig(p_yaw=1.0, p_repose=0.3, p_stretch=0.3, p_open=0.0, p_sheet=0.0)
        ft += _gen(real, rng, pc, False, "fine-tune data (real)", tc.real_copies, rcfg)
        pre += _gen(real, rng, pc, True, "pretrain data (real, validity labels)", 1, rcfg)
    t_data = time.time() - t0
    ft_t = _stack(ft, FT_KEYS)
    pre_t = _stack(pre, ("points", "box", "valid"))
    valid_rate = float(pre_t["valid"].mean())

    def ft_loss(out, tb):
        return finetune_loss(out, tb)[0]

    nets, abls, h_pre, h_ft, h_abl = [], [], [], [], []
    for i in range(tc.members):  # ensemble members: same data, different initialisation and batch order
        tag = f" {i + 1}/{tc.members}" if tc.members > 1 else ""
        torch.manual_seed(tc.seed + i)
        net = ArticulationNet(pc)
        init = copy.deepcopy(net.state_dict())
        h_pre.append(_fit(net, pre_t, tc.epochs_pre, tc.batch, tc.lr, lambda o, b: pretrain_loss(o, b["valid"]),
                          rng, "pretrain" + tag))
        h_ft.append(_fit(net, ft_t, tc.epochs_ft, tc.batch, tc.lr, ft_loss, rng, "fine-tune" + tag))
        abl = ArticulationNet(pc)
        abl.load_state_dict(init)
        h_abl.append(_fit(abl, ft_t, tc.epochs_ft, tc.batch, tc.lr, ft_loss, rng, "fine-tune (no pretraining)" + tag))
        nets.append(net)
        abls.append(abl)
    info = {
        "train_config": tc.__dict__, "holdout_categories": list(HOLDOUT_CATEGORIES),
        "train_categories": cats, "n_real_objects": n_real, "n_finetune_parts": len(ft), "n_pretrain_parts": len(pre),
        "pretrain_valid_rate": valid_rate, "data_seconds": round(t_data, 1),
        "total_seconds": round(time.time() - t0, 1),
        "final_loss": {"pretrain": [h[-1] if h else None for h in h_pre], "finetune": [h[-1] for h in h_ft],
                       "ablation": [h[-1] for h in h_abl]},
        "torch_threads": torch.get_num_threads(),
    }
    def pack(ms):
        return ms[0] if len(ms) == 1 else PredictorEnsemble(ms)

    save_predictor(pack(nets), out_dir, {**info, "variant": "pretrained+finetuned"})
    save_predictor(pack(abls), f"{out_dir}/no_pretrain", {**info, "variant": "no pretraining (ablation)"})
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="kinemesh/assets/articulation")
    ap.add_argument("--threads", type=int, default=1)
    for k, v in TrainConfig().__dict__.items():
        ap.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    tc = TrainConfig(**{k: getattr(a, k) for k in TrainConfig().__dict__})
    info = train(a.out, tc)
    print({k: info[k] for k in ("n_finetune_parts", "n_pretrain_parts", "pretrain_valid_rate", "data_seconds",
                                 "total_seconds", "final_loss")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
