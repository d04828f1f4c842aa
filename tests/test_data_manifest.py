"""Dataset manifest (JSONL) and deterministic train/test splits."""

from __future__ import annotations

import json

import pytest

from kinemesh.data.manifest import assign_splits, entry_for, read_manifest, scan_dataset, write_manifest
from kinemesh.errors import ConfigError, InputFileError, UnsafePathError


def _entries():
    out = []
    for cat, n in (("cabinet", 20), ("door", 10), ("cloth", 6)):
        for i in range(n):
            for pose in range(2):  # two sequences per instance
                out.append(
                    {
                        "path": f"articulated/{cat}/{i:03d}_{pose}.npz",
                        "category": cat,
                        "kind": "articulated",
                        "n_frames": 8,
                        "n_vertices": 100,
                        "instance": f"{cat}-{i}",
                    }
                )
    return out


def test_round_trip_and_defaults(tmp_path):
    entries = _entries()[:3]
    path = write_manifest(entries, tmp_path / "manifest.jsonl")
    back = read_manifest(path)
    assert [e["path"] for e in back] == [e["path"] for e in entries]
    assert all(e["split"] == "train" for e in back)
    assert len(path.read_text().splitlines()) == 3


def test_bad_manifest(tmp_path):
    with pytest.raises(ConfigError, match="missing"):
        write_manifest([{"path": "a.npz"}], tmp_path / "m.jsonl")
    assert not (tmp_path / "m.jsonl").exists()
    (tmp_path / "m.jsonl").write_text(
        '{"path": "a.npz", "category": "c", "kind": "cloth", "n_frames": 1, "n_vertices": 3}\n{not json\n'
    )
    with pytest.raises(InputFileError, match=r"m\.jsonl: line 2 is not valid JSON"):
        read_manifest(tmp_path / "m.jsonl")
    for bad in ("../x.npz", "/etc/x.npz", "a/../../x.npz"):
        (tmp_path / "u.jsonl").write_text(
            json.dumps({"path": bad, "category": "c", "kind": "cloth", "n_frames": 1, "n_vertices": 3}) + "\n"
        )
        with pytest.raises(UnsafePathError, match="leaves the manifest's folder"):
            read_manifest(tmp_path / "u.jsonl")
    for content in ("", "\n  \n"):
        (tmp_path / "e.jsonl").write_text(content)
        with pytest.raises(InputFileError, match=r"e\.jsonl: manifest is empty"):
            read_manifest(tmp_path / "e.jsonl")


def test_splits_hold_out_categories_and_whole_instances():
    entries = _entries()
    out = assign_splits(entries, holdout_categories=("cloth",), instance_fraction=0.2, seed=7)
    assert len(out) == len(entries) and "split" not in entries[0]  # copies, input untouched
    assert all(e["split"] == "test_category" for e in out if e["category"] == "cloth")
    for cat, n_inst in (("cabinet", 20), ("door", 10)):
        test_inst = {e["instance"] for e in out if e["category"] == cat and e["split"] == "test"}
        assert len(test_inst) == round(0.2 * n_inst)
        for e in out:  # both sequences of an instance land on the same side
            if e["category"] == cat:
                assert (e["split"] == "test") == (e["instance"] in test_inst)
    again = assign_splits(
        list(reversed(entries)), holdout_categories=("cloth",), instance_fraction=0.2, seed=7
    )
    assert {e["path"]: e["split"] for e in again} == {e["path"]: e["split"] for e in out}
    other = assign_splits(entries, holdout_categories=("cloth",), instance_fraction=0.2, seed=8)
    assert {e["path"]: e["split"] for e in other} != {e["path"]: e["split"] for e in out}


def test_val_split_leaves_the_test_split_unchanged():
    entries = _entries()
    base = assign_splits(entries, holdout_categories=("cloth",), instance_fraction=0.2, seed=7)
    out = assign_splits(entries, holdout_categories=("cloth",), instance_fraction=0.2, seed=7, val_fraction=0.1)
    before, after = {e["path"]: e["split"] for e in base}, {e["path"]: e["split"] for e in out}
    assert {p for p, s in after.items() if s in ("test", "test_category")} == \
        {p for p, s in before.items() if s in ("test", "test_category")}
    for cat, n_inst in (("cabinet", 20), ("door", 10)):
        val_inst = {e["instance"] for e in out if e["category"] == cat and e["split"] == "val"}
        assert len(val_inst) == max(1, round(0.1 * n_inst))
        assert all(before[e["path"]] == "train" for e in out if e["split"] == "val")  # taken from training
        for e in out:  # whole instances
            if e["category"] == cat:
                assert (e["split"] == "val") == (e["instance"] in val_inst)
    with pytest.raises(ConfigError):
        assign_splits(entries, instance_fraction=0.5, val_fraction=0.5)


def test_split_edge_cases(tiny_sequence, tmp_path):
    one = [{"path": "a.npz", "category": "x", "kind": "cloth", "n_frames": 1, "n_vertices": 3}]
    assert assign_splits(one, instance_fraction=0.5)[0]["split"] == "train"  # never empties training
    two = one + [{"path": "b.npz", "category": "x", "kind": "cloth", "n_frames": 1, "n_vertices": 3}]
    assert sorted(e["split"] for e in assign_splits(two, instance_fraction=0.01)) == ["test", "train"]
    with pytest.raises(ConfigError):
        assign_splits(one, instance_fraction=1.0)
    e = entry_for(tiny_sequence, tmp_path / "elastic" / "box" / "0.npz", root=tmp_path)
    assert e == {
        "path": "elastic/box/0.npz",
        "category": "box",
        "kind": "elastic",
        "n_frames": 4,
        "n_vertices": 8,
        "split": "train",
    }


def test_scan_dataset(tiny_sequence, tmp_path):
    tiny_sequence.meta["name"] = "box7"
    tiny_sequence.save(tmp_path / "elastic" / "box" / "b.npz")
    tiny_sequence.meta["category"] = "crate"
    tiny_sequence.save(tmp_path / "elastic" / "crate" / "a.npz")
    entries = scan_dataset(tmp_path)
    assert entries == [
        {
            "path": "elastic/box/b.npz",
            "category": "box",
            "kind": "elastic",
            "n_frames": 4,
            "n_vertices": 8,
            "split": "train",
            "instance": "box/box7",
        },
        {
            "path": "elastic/crate/a.npz",
            "category": "crate",
            "kind": "elastic",
            "n_frames": 4,
            "n_vertices": 8,
            "split": "train",
            "instance": "crate/box7",
        },
    ]
    (tmp_path / "broken.npz").write_bytes(b"junk")
    with pytest.raises(InputFileError, match="broken.npz"):
        scan_dataset(tmp_path)
