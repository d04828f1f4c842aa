"""Distributed data-parallel training: 2 CPU processes (gloo) keep identical replicas.

Marked slow (two fresh Python processes importing torch take ~20-40 s on the shared 2-core machine);
run with ``make test-slow`` or ``pytest -m slow tests/test_model_ddp.py``.
"""

from __future__ import annotations

import json
import socket

import pytest
import torch

from kinemesh.model import preset
from kinemesh.model.network import KinematicVAE
from toys import write_toy_dataset


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    return write_toy_dataset(tmp_path_factory.mktemp("toy"), n_train=4, n_val=2, n_frames=4, seed=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_ddp_two_cpu_processes_keep_replicas_identical(toy_data, tmp_path):
    import torch.multiprocessing as mp
    from safetensors.torch import load_file

    from kinemesh.model.train import spawn_worker

    cfg = preset("tiny").to_dict()
    opts = dict(data=toy_data, out=tmp_path / "ddp", steps=6, progress=False, replica_file="replica", seed=3)
    mp.spawn(spawn_worker, args=(2, _free_port(), cfg, opts), nprocs=2, join=True)
    r0 = load_file(str(tmp_path / "ddp" / "replica.rank0.safetensors"))
    r1 = load_file(str(tmp_path / "ddp" / "replica.rank1.safetensors"))
    init = KinematicVAE(preset("tiny").model).state_dict()
    assert r0.keys() == r1.keys()
    for k in r0:
        assert torch.equal(r0[k], r1[k]), k
    # and training changed them
    assert any(not torch.allclose(r0[k], init[k]) for k in r0 if k in init)
    state = json.loads((tmp_path / "ddp" / "checkpoint" / "train_state.json").read_text())
    assert state["step"] == 6 and state["samples"] == 6 * 2 * preset("tiny").train.batch_size
