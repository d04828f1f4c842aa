"""Training of the conditional VAE (NeuROK Sec. 4.2, Eq. 1), resumable and data-parallel.

Single process: ``kinemesh train --data DIR --out runs/NAME``; several datasets: repeat ``--data DIR[:WEIGHT]``
(pairs drawn per dataset by weight, default proportional to training sequences; each keeps its own splits,
validation on the union of their val splits); ``--init CKPT`` starts from a checkpoint's weights (fine-tuning). Many processes (GPUs or machines): launch the
same command with ``torchrun --nproc_per_node N -m kinemesh train ...``; each process draws its own pairs,
gradients are averaged by DistributedDataParallel (gloo on CPU, nccl on CUDA) and rank 0 writes logs and
checkpoints.

Output folder:
``config.json`` + ``model.safetensors`` (the latest weights, loadable by ``load_model``),
``checkpoint/`` (weights + ``optimizer.safetensors`` + ``train_state.json`` for ``--resume``),
``log.csv``, ``tb/`` (TensorBoard), ``val.csv``.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from kinemesh.atomic import atomic_dir, write_text
from kinemesh.errors import ConfigError, KinemeshError
from kinemesh.model.checkpoint import load_weights, read_config, save_weights
from kinemesh.model.config import Config
from kinemesh.model.data import Augment, PairSampler, data_folders, read_datasets, select_split
from kinemesh.model.network import KinematicVAE, vae_loss

log = logging.getLogger(__name__)
LOG_FIELDS = ("step", "samples", "elapsed_s", "lr", "loss", "recon", "rel_recon", "kl", "prior_reg", "post_std",
              "active_dims", "samples_per_s")
VAL_FIELDS = ("val_recon", "val_rel_recon", "val_kl", "val_prior_reg")


class TrainingCollapsedError(KinemeshError):
    """The posterior collapsed onto the prior (the decoder ignores z) or the loss became non-finite."""


@dataclass
class RunOptions:
    """What one ``kinemesh train`` invocation does (the model/optimiser settings live in Config)."""

    data: Path | list[Path]
    """Dataset folder with manifest.jsonl, or several (each keeps its own splits)."""
    out: Path
    """Run folder (created; with --resume continued)."""
    steps: int | None = None
    """Stop after this many optimisation steps in total (across resumes)."""
    minutes: float | None = None
    """Stop after this many wall-clock minutes of this invocation."""
    device: str = "cpu"
    """cpu or cuda."""
    resume: bool = False
    """Continue from out/checkpoint."""
    seed: int = 0
    """Seed of initialisation and data sampling."""
    threads: int | None = None
    """torch.set_num_threads for this process (None: leave as is)."""
    progress: bool = True
    """Show a tqdm progress bar (rank 0)."""
    stop_at: int | None = None
    """Testing: stop (as if interrupted) after this total step, keeping the --steps schedule."""
    data_weights: list[float | None] | None = None
    """Sampling weight per ``data`` folder (None: proportional to their training sequences)."""
    kinds: tuple[str, ...] | None = None
    """Train on the sequences of these object kinds only, e.g. ("elastic", "cloth") (recorded in the weights' info);
    None = all."""
    init: Path | None = None
    """Start a new run from this checkpoint's weights (fine-tuning); its model config must equal the run's."""
    replica_file: str | None = None
    """Testing: every rank writes its final parameters to ``out/<replica_file>.rank<r>.safetensors``."""


# ---------------------------------------------------------------------------------------------- distributed
def _dist_env() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from the torchrun environment (1 process when absent)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    return rank, world, int(os.environ.get("LOCAL_RANK", str(rank)))


def _init_dist(device: str) -> tuple[int, int, torch.device]:
    rank, world, local = _dist_env()
    dev = torch.device(device)
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda but torch.cuda.is_available() is False")
        dev = torch.device("cuda", local % max(torch.cuda.device_count(), 1))
        torch.cuda.set_device(dev)
    if world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if device == "cuda" else "gloo")
    return rank, world, dev


# ---------------------------------------------------------------------------------------------- optimizer io
def _save_optimizer(opt: torch.optim.Optimizer, folder: Path) -> dict:
    from safetensors.torch import save_file

    sd = opt.state_dict()
    tensors = {}
    for pid, st in sd["state"].items():
        for key, val in st.items():
            tensors[f"state.{pid}.{key}"] = torch.as_tensor(val).detach().cpu().contiguous()
    save_file(tensors, str(folder / "optimizer.safetensors"))
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in sd["param_groups"]]
    return {"param_groups": groups}


def _load_optimizer(opt: torch.optim.Optimizer, folder: Path, groups: list[dict]) -> None:
    from safetensors.torch import load_file

    tensors = load_file(str(folder / "optimizer.safetensors"))
    state: dict[int, dict] = {}
    for name, val in tensors.items():
        _, pid, key = name.split(".", 2)
        state.setdefault(int(pid), {})[key] = val
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    opt.load_state_dict({"state": state, "param_groups": groups})


# ---------------------------------------------------------------------------------------------- schedule
def lr_factor(step: int, warmup: int, progress: float) -> float:
    """Linear warm-up, then cosine decay to 10 % over the run's progress (0..1, by steps or time)."""
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))


# ---------------------------------------------------------------------------------------------- main loop
def train(config: Config, opts: RunOptions) -> dict:
    """Train (or resume) a run. Returns the final metrics dict. Raises ConfigError, InputFileError,
    TrainingCollapsedError."""
    if opts.steps is None and opts.minutes is None:
        raise ConfigError("give --steps or --minutes (or both)")
    if opts.threads:
        torch.set_num_threads(int(opts.threads))
    rank, world, device = _init_dist(opts.device)
    out = Path(opts.out)
    ckpt = out / "checkpoint"
    state: dict = {"step": 0, "samples": 0, "elapsed_total_s": 0.0, "best_val": None}
    opt_groups = None
    if ckpt.is_dir() and (ckpt / "train_state.json").is_file():
        if not opts.resume:
            raise ConfigError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
        config, _ = read_config(ckpt)  # the run's own configuration wins
        state = json.loads((ckpt / "train_state.json").read_text())
        opt_groups = state.pop("optimizer", {}).get("param_groups")
    elif opts.resume:
        log.warning("--resume: no checkpoint in %s, starting a new run", out)
    tc = config.train

    folders = data_folders(opts.data)
    entries, weights = read_datasets(folders, opts.data_weights, opts.kinds)
    train_entries = select_split(entries, "train")
    # the union of the datasets' validation splits; test splits only when no dataset has one
    val_entries = [e for e in entries if e["split"] in ("val", "valid", "validation")]
    if not val_entries:
        val_entries = select_split(entries, "heldout")
        if val_entries:
            log.warning("%s: no 'val' split (dataset made before kinemesh synth --val-fraction); the validation "
                        "curve uses the test splits, so do not select models by it", ", ".join(map(str, folders)))
    if not train_entries:
        raise ConfigError(f"{', '.join(map(str, folders))}: manifest has no entries with split 'train'")
    if rank == 0 and len(folders) > 1:
        log.info("datasets (sampling weight): %s", ", ".join(f"{k} ({v / sum(weights.values()):.2f})"
                                                              for k, v in weights.items()))
    augment = Augment(tc.rotate_z, tuple(tc.scale_range), tc.resample_points)
    sampler = PairSampler(train_entries, tc.n_points, augment, tc.max_cached_instances, weights)
    val_sampler = (PairSampler(val_entries, tc.n_points, Augment(False, (1.0, 1.0), True), tc.max_cached_instances,
                               weights) if val_entries else None)

    torch.manual_seed(opts.seed)
    net = KinematicVAE(config.model).to(device)
    if state["step"] > 0:
        load_weights(net, ckpt)
    elif opts.init is not None:
        init_from(net, config, opts.init)
        state["init"] = str(opts.init)
    if tc.frozen:
        if state["step"] == 0 and opts.init is None:
            raise ConfigError(f"train.frozen ({', '.join(tc.frozen)}) keeps networks as --init gives them; "
                              "pass --init CKPT")
        for name in tc.frozen:
            getattr(net, name).requires_grad_(False)
    trained = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trained, lr=tc.lr, weight_decay=tc.weight_decay)
    if opt_groups is not None:
        _load_optimizer(opt, ckpt, opt_groups)
    model = net
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None)
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if tc.bf16 else None

    writer = None
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / "config.json", json.dumps(config.to_dict(), indent=2) + "\n")
        try:
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter(str(out / "tb"))
        except ImportError:  # pragma: no cover - tensorboard is a pinned dependency
            log.warning("tensorboard not available; logging CSV only")
    n_params = sum(p.numel() for p in net.parameters())
    if rank == 0:
        log.info("model %s: %.2f M parameters, latent D=%d, head=%s, world=%d, device=%s", config.preset,
                 n_params / 1e6, config.model.latent_dim, config.model.head, world, device)
        if tc.frozen:
            log.info("frozen (kept as --init gives them): %s; training %.2f M parameters", ", ".join(tc.frozen),
                     sum(p.numel() for p in trained) / 1e6)

    pbar = None
    if rank == 0 and opts.progress:
        from kinemesh.progress import tqdm

        pbar = tqdm(total=opts.steps, initial=state["step"] if opts.steps else 0, desc="train", unit="step",
                    dynamic_ncols=True)

    t_start = time.time()
    t_log, samples_log = time.time(), 0
    acc: dict[str, float] = {}
    n_acc, collapsed, metrics = 0, 0, {}
    last_val = state.get("last_val")
    budget_s = None if opts.minutes is None else 60.0 * float(opts.minutes)

    def progress() -> float:
        p = 0.0
        if opts.steps:
            p = max(p, state["step"] / opts.steps)
        if budget_s:
            p = max(p, (time.time() - t_start) / budget_s)
        return p

    def should_stop() -> bool:
        stop = (opts.steps is not None and state["step"] >= opts.steps) or (
            budget_s is not None and time.time() - t_start >= budget_s) or (
            opts.stop_at is not None and state["step"] >= opts.stop_at)
        if world > 1:  # every rank stops at the same step
            flag = torch.tensor([1.0 if stop else 0.0], device=device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            stop = bool(flag.item() > 0)
        return stop

    def save_checkpoint():
        if rank != 0:
            return
        with atomic_dir(ckpt) as tmp:
            save_weights(net, config, tmp)
            st = dict(state, elapsed_total_s=state["elapsed_total_s"] + time.time() - t_start,
                      optimizer=_save_optimizer(opt, tmp), last_val=last_val)
            write_text(tmp / "train_state.json", json.dumps(st, indent=2) + "\n")
        save_weights(net, config, out, extra={"step": state["step"], "samples": state["samples"],
                                              "trained": True, "last_val": last_val,
                                              **({"kinds": list(opts.kinds)} if opts.kinds else {}),
                                              **({"init": state["init"]} if state.get("init") else {})})

    prior_reg = tc.prior_weight > 0 and "decoder" not in tc.frozen  # the term trains the decoder only
    net.train()
    while not should_stop():
        step = state["step"]
        for g in opt.param_groups:
            g["lr"] = tc.lr * lr_factor(step, tc.warmup_steps, progress())
        rng = np.random.default_rng([opts.seed, rank, step])
        torch.manual_seed(int(rng.integers(2**62)))  # posterior noise: reproducible per step (resume)
        pts, dls, grp = sampler.batch(rng, tc.batch_size)
        pts_t = torch.from_numpy(pts).to(device)
        dls_t = torch.from_numpy(dls).to(device)
        grp_t = torch.from_numpy(grp).to(device)
        if autocast is not None:
            with autocast():
                outd = model(pts_t, dls_t, groups=grp_t, prior_reg=prior_reg)
        else:
            outd = model(pts_t, dls_t, groups=grp_t, prior_reg=prior_reg)
        parts = vae_loss(outd, dls_t, tc.kl_weight, tc.free_bits, tc.recon_weight, tc.prior_weight)
        if not torch.isfinite(parts["loss"]):
            raise TrainingCollapsedError(f"step {step}: loss is {float(parts['loss'])}; lower --lr or disable --bf16")
        opt.zero_grad(set_to_none=True)
        parts["loss"].backward()
        torch.nn.utils.clip_grad_norm_(trained, tc.grad_clip)
        opt.step()
        state["step"] += 1
        state["samples"] += tc.batch_size * world
        samples_log += tc.batch_size * world
        mean_sq = float((dls_t.float() ** 2).sum(-1).mean())
        for key in ("loss", "recon", "kl", "prior_reg", "post_std", "active_dims"):
            acc[key] = acc.get(key, 0.0) + float(parts[key].detach())
        acc["rel_recon"] = acc.get("rel_recon", 0.0) + float(parts["recon"]) / max(mean_sq, 1e-12)
        n_acc += 1
        if pbar is not None:
            pbar.update(1 if opts.steps else 0)
            pbar.set_postfix(step=state["step"], loss=f"{float(parts['loss']):.4f}",
                             rel=f"{acc['rel_recon'] / n_acc:.3f}", kl=f"{float(parts['kl']):.1f}")

        if state["step"] % tc.log_every == 0:
            now = time.time()
            metrics = {k: v / n_acc for k, v in acc.items()}
            metrics.update(step=state["step"], samples=state["samples"],
                           elapsed_s=round(state["elapsed_total_s"] + now - t_start, 2),
                           lr=opt.param_groups[0]["lr"], samples_per_s=samples_log / max(now - t_log, 1e-9))
            acc, n_acc, t_log, samples_log = {}, 0, now, 0
            if rank == 0:
                _append_csv(out / "log.csv", LOG_FIELDS, metrics)
                if writer is not None:
                    for k in LOG_FIELDS[2:]:
                        writer.add_scalar(f"train/{k}", metrics[k], state["step"])
            # Collapse monitor (issue pitfall 1): after warm-up, KL ~ 0 means q(z|phi) = p(z) and D ignores z.
            if state["step"] > 2 * tc.warmup_steps and metrics["kl"] < tc.collapse_kl:
                collapsed += 1
                if collapsed >= tc.collapse_patience:
                    save_checkpoint()
                    raise TrainingCollapsedError(
                        f"posterior collapse at step {state['step']}: KL {metrics['kl']:.4f} nats < "
                        f"{tc.collapse_kl} for {collapsed} log intervals (posterior std "
                        f"{metrics['post_std']:.3f}); raise train.free_bits or lower train.kl_weight")
            else:
                collapsed = 0

        if val_sampler is not None and state["step"] % tc.val_every == 0:
            last_val = validate(net, val_sampler, tc, device, seed=1234)
            last_val["step"] = state["step"]
            if rank == 0:
                _append_csv(out / "val.csv", ("step", *VAL_FIELDS), last_val)
                if writer is not None:
                    for k in VAL_FIELDS:
                        writer.add_scalar(f"val/{k}", last_val[k], state["step"])
                log.info("step %d: val recon %.5f (%.3f of motion), KL %.2f, prior implausibility %.5f",
                         state["step"], last_val["val_recon"], last_val["val_rel_recon"], last_val["val_kl"],
                         last_val["val_prior_reg"])
            net.train()
        if state["step"] % tc.ckpt_every == 0:
            save_checkpoint()

    if val_sampler is not None:
        last_val = validate(net, val_sampler, tc, device, seed=1234)
        last_val["step"] = state["step"]
        if rank == 0:
            _append_csv(out / "val.csv", ("step", *VAL_FIELDS), last_val)
    save_checkpoint()
    if pbar is not None:
        pbar.close()
    if writer is not None:
        writer.close()
    if opts.replica_file:
        from safetensors.torch import save_file

        save_file({k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()},
                  str(out / f"{opts.replica_file}.rank{rank}.safetensors"))
    if world > 1:
        torch.distributed.barrier()
    result = dict(metrics)
    result.update(step=state["step"], samples=state["samples"], params=n_params,
                  minutes=(time.time() - t_start) / 60.0)
    if last_val:
        result.update(last_val)
    return result


def init_from(net: KinematicVAE, config: Config, folder) -> None:
    """Load the weights of checkpoint ``folder`` into ``net`` for fine-tuning. Raises ConfigError when the
    checkpoint's model config differs from ``config.model``, InputFileError for an unreadable checkpoint."""
    theirs, _ = read_config(folder)
    ours_d, theirs_d = asdict(config.model), asdict(theirs.model)
    diff = [f"{k} {theirs_d[k]!r} (run: {ours_d[k]!r})" for k in ours_d if ours_d[k] != theirs_d[k]]
    if diff:
        raise ConfigError(f"--init {Path(folder) / 'config.json'}: model config differs from this run's: "
                          f"{', '.join(diff)}; use the same --preset/--set or drop --init")
    load_weights(net, folder)


@torch.no_grad()
def validate(net: KinematicVAE, sampler: PairSampler, tc, device, seed: int = 1234) -> dict:
    """Posterior-mean reconstruction on fixed held-out pairs: val_recon, val_rel_recon (recon / mean
    |delta|^2), val_kl (nats)."""
    net.eval()
    rng = np.random.default_rng(seed)
    rec, msq, kl, pr = 0.0, 0.0, 0.0, 0.0
    torch.manual_seed(seed)
    with torch.no_grad():
        for _ in range(tc.val_batches):
            pts, dls, grp = sampler.batch(rng, tc.batch_size)
            pts_t, dls_t = torch.from_numpy(pts).to(device), torch.from_numpy(dls).to(device)
            out = net(pts_t, dls_t, sample=False, groups=torch.from_numpy(grp).to(device), prior_reg=True)
            parts = vae_loss(out, dls_t, tc.kl_weight, 0.0)
            rec += float(parts["recon"])
            kl += float(parts["kl"])
            pr += float(parts["prior_reg"])
            msq += float((dls_t ** 2).sum(-1).mean())
    n = tc.val_batches
    return {"val_recon": rec / n, "val_rel_recon": rec / max(msq, 1e-12), "val_kl": kl / n,
            "val_prior_reg": pr / n}


def _append_csv(path: Path, fields, row: dict) -> None:
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(fields), extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow({k: (f"{row[k]:.6g}" if isinstance(row.get(k), float) else row.get(k)) for k in fields})


def spawn_worker(rank: int, world: int, port: int, config_dict: dict, opts_kwargs: dict) -> None:
    """Entry point of one process for ``torch.multiprocessing.spawn`` (what torchrun does per process)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    try:
        train(Config.from_dict(config_dict), RunOptions(**opts_kwargs))
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
