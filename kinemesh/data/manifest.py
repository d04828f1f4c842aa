"""Dataset manifests: one JSON object per line describing one sequence file, plus train/test splits.

Each entry has at least ``path`` (relative to the manifest's folder), ``category``, ``kind``,
``n_frames``, ``n_vertices`` and ``split``; an optional ``instance`` groups several sequences of the same
object (default: the path), so splits never put one object on both sides.

Splits: ``train``; ``test`` (held-out instances of categories also seen in training); ``test_category``
(every instance of a held-out category, never seen in training).
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from kinemesh.atomic import write_text
from kinemesh.errors import ConfigError, InputFileError, UnsafePathError

REQUIRED_KEYS = ("path", "category", "kind", "n_frames", "n_vertices")
SPLITS = ("train", "val", "test", "test_category")


def write_manifest(entries: Iterable[dict[str, Any]], path: str | os.PathLike) -> Path:
    """Write ``entries`` as JSONL to ``path`` atomically. Entries without ``split`` get ``train``.

    Raises ConfigError when an entry lacks a required key.
    """
    lines = []
    for i, e in enumerate(entries):
        missing = [k for k in REQUIRED_KEYS if k not in e]
        if missing:
            raise ConfigError(f"manifest entry {i} is missing {missing}")
        e = dict(e)
        e.setdefault("split", "train")
        lines.append(json.dumps(e, sort_keys=True, default=_json_default))
    return write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def read_manifest(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Read a JSONL manifest; raise InputFileError naming the file and line of any bad entry, or the file
    when it holds no entries.

    ``path`` entries must stay inside the manifest's folder (UnsafePathError otherwise). Any non-empty
    split name is accepted (``assign_splits`` produces those in ``SPLITS``).
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "manifest not found")
    entries = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFileError(path, f"line {n} is not valid JSON ({exc.msg})") from None
        if not isinstance(e, dict):
            raise InputFileError(path, f"line {n} is not a JSON object")
        missing = [k for k in REQUIRED_KEYS if k not in e]
        if missing:
            raise InputFileError(path, f"line {n} is missing {missing}")
        e.setdefault("split", "train")
        if not isinstance(e["split"], str) or not e["split"]:
            raise InputFileError(path, f"line {n}: split must be a non-empty string, got {e['split']!r}")
        rel = str(e["path"])
        root = path.parent.resolve()
        if os.path.isabs(rel) or not (root / rel).resolve().is_relative_to(root):
            raise UnsafePathError(path, f"line {n}: path {rel!r} leaves the manifest's folder")
        entries.append(e)
    if not entries:
        raise InputFileError(path, "manifest is empty (no entries)")
    return entries


def entry_for(seq, path: str | os.PathLike, root: str | os.PathLike | None = None, **extra) -> dict[str, Any]:
    """A manifest entry for KinematicSequence ``seq`` stored at ``path`` (made relative to ``root``)."""
    p = Path(path)
    rel = os.path.relpath(p, root) if root is not None else str(p)
    e = {
        "path": Path(rel).as_posix(),
        "category": seq.category,
        "kind": seq.kind,
        "n_frames": seq.n_frames,
        "n_vertices": seq.n_vertices,
        "split": "train",
    }
    e.update(extra)
    return e


def scan_dataset(root: str | os.PathLike) -> list[dict[str, Any]]:
    """Manifest entries (split ``train``) for every ``*.npz`` sequence under ``root`` (sorted by path).

    Reads only each file's ``meta`` and the array headers of ``rest_vertices`` and ``frames`` (no
    decompression of the frames), so scanning is fast. ``instance`` comes from ``meta.instance`` or
    ``meta.name`` when present. Raises InputFileError naming an unreadable file.
    """
    root = Path(root)
    entries = []
    for path in sorted(root.rglob("*.npz")):
        meta, shapes = _npz_meta_and_shapes(path)
        e = {
            "path": path.relative_to(root).as_posix(),
            "category": str(meta.get("category", "unknown")),
            "kind": str(meta.get("kind", "mixed")),
            "n_frames": int(shapes["frames"][0]),
            "n_vertices": int(shapes["rest_vertices"][0]),
            "split": "train",
        }
        inst = meta.get("instance", meta.get("name"))
        if inst is not None:
            e["instance"] = f"{e['category']}/{inst}"
        entries.append(e)
    return entries


def _npz_meta_and_shapes(path: Path) -> tuple[dict, dict]:
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            shapes = {}
            for key in ("rest_vertices", "frames"):
                with z.open(f"{key}.npy") as fh:
                    version = np.lib.format.read_magic(fh)
                    if version == (1, 0):
                        shape, _, _ = np.lib.format.read_array_header_1_0(fh)
                    else:
                        shape, _, _ = np.lib.format.read_array_header_2_0(fh)
                    shapes[key] = shape
            with z.open("meta.npy") as fh:
                meta = json.loads(str(np.lib.format.read_array(fh, allow_pickle=False)))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise InputFileError(
            path, f"not a readable .npz sequence ({exc.__class__.__name__}: {exc})"
        ) from None
    if not isinstance(meta, dict) or len(shapes["frames"]) != 3 or len(shapes["rest_vertices"]) != 2:
        raise InputFileError(path, "meta or array shapes do not follow the KinematicSequence contract")
    return meta, shapes


def assign_splits(
    entries: list[dict[str, Any]],
    holdout_categories: Iterable[str] = (),
    instance_fraction: float = 0.15,
    seed: int = 0,
    val_fraction: float = 0.0,
) -> list[dict[str, Any]]:
    """Return copies of ``entries`` with ``split`` set; deterministic for a given ``seed``.

    Every entry of a category in ``holdout_categories`` becomes ``test_category``. In each other category,
    ``round(instance_fraction * n_instances)`` whole instances (at least one when the category has two or
    more instances and the fraction is positive) become ``test``; the rest ``train``. Instances are grouped by
    the ``instance`` key (default: ``path``). The choice per category depends only on the seed, the category
    name and its instance names, not on the order of ``entries``.

    ``val_fraction`` of each category's instances (rounded, at least one when positive and at least two
    instances stay in training) become ``val``, for model selection and training curves. They are drawn
    from the instances left after the test draw, with their own random stream, so adding a validation split
    never changes the test split.
    """
    if not 0.0 <= instance_fraction < 1.0:
        raise ConfigError(f"instance_fraction must be in [0, 1), got {instance_fraction}")
    if not 0.0 <= val_fraction < 1.0 or instance_fraction + val_fraction >= 1.0:
        raise ConfigError(f"val_fraction must be in [0, 1 - instance_fraction), got {val_fraction}")
    held = set(holdout_categories)
    by_cat: dict[str, set[str]] = {}
    for e in entries:
        by_cat.setdefault(str(e["category"]), set()).add(str(e.get("instance", e["path"])))
    test_instances: set[tuple[str, str]] = set()
    val_instances: set[tuple[str, str]] = set()
    for cat, instances in by_cat.items():
        if cat in held:
            continue
        names = sorted(instances)
        n_test = int(round(instance_fraction * len(names)))
        if instance_fraction > 0 and len(names) >= 2:
            n_test = max(1, n_test)
        n_test = min(n_test, len(names) - 1)
        rng = np.random.default_rng([seed, zlib.crc32(cat.encode("utf-8"))])
        test_idx = rng.permutation(len(names))[:n_test]
        for i in test_idx:
            test_instances.add((cat, names[i]))
        rest = [names[i] for i in range(len(names)) if i not in set(test_idx.tolist())]
        n_val = int(round(val_fraction * len(names)))
        if val_fraction > 0 and len(rest) >= 3:
            n_val = max(1, n_val)
        n_val = min(n_val, len(rest) - 2) if len(rest) >= 2 else 0
        if n_val > 0:
            vrng = np.random.default_rng([seed, zlib.crc32(cat.encode("utf-8")), 1])
            for i in vrng.permutation(len(rest))[:n_val]:
                val_instances.add((cat, rest[i]))
    out = []
    for e in entries:
        e = dict(e)
        cat = str(e["category"])
        if cat in held:
            e["split"] = "test_category"
        elif (cat, str(e.get("instance", e["path"]))) in test_instances:
            e["split"] = "test"
        elif (cat, str(e.get("instance", e["path"]))) in val_instances:
            e["split"] = "val"
        else:
            e["split"] = "train"
        out.append(e)
    return out


def _json_default(obj):
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
