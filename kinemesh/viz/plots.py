"""Matplotlib PNG plots used by other commands: curves over time, eigen-spectra, histograms, training curves.

Every function renders with the non-interactive Agg backend (no display needed) and writes its PNG
atomically, so a crash never leaves a half-written figure. Each returns the written path.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from kinemesh.atomic import atomic_path
from kinemesh.errors import InputFileError

__all__ = ["plot_curves", "plot_spectrum", "plot_histogram", "plot_training_curves"]

_DPI = 120
_FIGSIZE = (6.4, 4.0)


def _figure(figsize=_FIGSIZE):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    # A bare Figure (no pyplot) is not registered globally, so nothing leaks between calls or threads.
    fig = Figure(figsize=figsize, dpi=_DPI, layout="constrained")
    return fig, fig.add_subplot(1, 1, 1)


def _save(fig, path: str | os.PathLike) -> Path:
    path = Path(path)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=_DPI)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; figures are meant to be shared
    return path


def plot_curves(
    path: str | os.PathLike,
    x,
    series: Mapping[str, Sequence[float]],
    xlabel: str = "time (s)",
    ylabel: str = "",
    title: str = "",
    logy: bool = False,
) -> Path:
    """Plot several named curves over a shared x axis (e.g. kinetic/potential/total energy over time).

    Parameters
    ----------
    path : output PNG path.
    x : (T,) float, shared abscissa (e.g. seconds).
    series : name -> (T,) float values; non-finite values are left as gaps.
    xlabel, ylabel, title : axis labels (include units, e.g. "energy (J)").
    logy : log-scale y axis (non-positive values are dropped by matplotlib).

    Raises
    ------
    ValueError if a series length differs from ``x``.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    fig, ax = _figure()
    for name, values in series.items():
        y = np.asarray(values, dtype=np.float64).reshape(-1)
        if y.shape != x.shape:
            raise ValueError(f"series {name!r} has {y.size} values but x has {x.size}")
        ax.plot(x, y, label=str(name), linewidth=1.6)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend(frameon=False)
    return _save(fig, path)


def plot_spectrum(
    path: str | os.PathLike,
    eigenvalues,
    k_selected: int,
    title: str = "active-subspace eigen-spectrum",
) -> Path:
    """Plot eigenvalues (descending, log scale) with the first ``k_selected`` highlighted.

    Also draws the cumulative explained fraction on a second axis, so the cut-off can be judged.

    Parameters
    ----------
    path : output PNG path.
    eigenvalues : (D,) float, eigenvalues of the active-subspace matrix C (any order; sorted here).
    k_selected : number of kept directions k_q (0 <= k_q <= D).
    """
    ev = np.sort(np.asarray(eigenvalues, dtype=np.float64).reshape(-1))[::-1]
    if ev.size == 0:
        raise ValueError("no eigenvalues to plot")
    k = int(np.clip(k_selected, 0, ev.size))
    idx = np.arange(1, ev.size + 1)
    pos = np.clip(ev, max(ev.max(), 1e-30) * 1e-12, None)
    fig, ax = _figure()
    ax.semilogy(idx, pos, "-", color="0.6", linewidth=1.0)
    ax.semilogy(idx[k:], pos[k:], "o", color="0.55", markersize=4, label="discarded")
    if k:
        ax.semilogy(idx[:k], pos[:k], "o", color="tab:blue", markersize=5, label=f"kept (k_q = {k})")
        ax.axvline(k + 0.5, color="tab:red", linestyle="--", linewidth=1.0)
    ax.set_xlabel("eigenvalue index")
    ax.set_ylabel("eigenvalue")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    total = np.clip(ev, 0.0, None).sum()
    if total > 0:
        ax2 = ax.twinx()
        ax2.plot(idx, np.cumsum(np.clip(ev, 0.0, None)) / total, color="tab:green", linewidth=1.2)
        ax2.set_ylim(0.0, 1.05)
        ax2.set_ylabel("cumulative fraction", color="tab:green")
        if k:
            frac = np.clip(ev[:k], 0.0, None).sum() / total
            ax.set_title(f"{title}\nkept {k} of {ev.size}: {100 * frac:.1f}% of the trace")
    ax.legend(frameon=False, loc="lower left")
    return _save(fig, path)


def plot_histogram(
    path: str | os.PathLike,
    values,
    xlabel: str = "",
    title: str = "",
    bins: int | str = "auto",
) -> Path:
    """Histogram of errors or any scalar values, with the mean and median marked.

    Parameters
    ----------
    path : output PNG path.
    values : (n,) float; non-finite values are dropped (their count is shown in the title).
    xlabel, title : labels (include units).
    bins : passed to ``numpy.histogram_bin_edges``.
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    finite = v[np.isfinite(v)]
    fig, ax = _figure()
    if finite.size:
        edges = np.histogram_bin_edges(finite, bins=bins if np.ptp(finite) > 0 else 10)
        ax.hist(finite, bins=edges, color="tab:blue", alpha=0.8, edgecolor="white", linewidth=0.5)
        ax.axvline(finite.mean(), color="tab:red", linestyle="--", label=f"mean {finite.mean():.4g}")
        med = np.median(finite)
        ax.axvline(med, color="tab:orange", linestyle=":", label=f"median {med:.4g}")
        ax.legend(frameon=False)
    else:
        ax.text(0.5, 0.5, "no finite values", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    dropped = v.size - finite.size
    full_title = title + (f" ({dropped} non-finite dropped)" if dropped else "")
    if full_title:
        ax.set_title(full_title)
    ax.grid(True, alpha=0.25)
    return _save(fig, path)


def _read_csv_columns(csv_path: Path) -> dict[str, np.ndarray]:
    try:
        with open(csv_path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputFileError(csv_path, f"cannot read training log ({exc.strerror})") from exc
    if not rows:
        raise InputFileError(csv_path, "training log has a header but no rows (or is empty)")
    cols: dict[str, np.ndarray] = {}
    for name in rows[0].keys():
        if name is None:
            continue
        vals = []
        for r in rows:
            try:
                vals.append(float(r.get(name) or "nan"))
            except ValueError:
                vals.append(np.nan)
        arr = np.asarray(vals)
        if np.isfinite(arr).any():
            cols[name] = arr
    return cols


def plot_training_curves(path: str | os.PathLike, csv_path: str | os.PathLike) -> Path:
    """Plot every numeric column of a training-log CSV against its step/epoch column.

    The x column is the first of ``step``, ``iteration``, ``iter``, ``epoch`` present (else the row
    number). Loss-like columns (name contains ``loss``, ``kl``, ``err`` or ``chamfer``) share a log-scale
    panel; any other columns (learning rate, beta, ...) go to a second panel. Empty cells are gaps.

    Raises
    ------
    InputFileError if the CSV is missing, empty or has no numeric column.
    """
    csv_path = Path(csv_path)
    cols = _read_csv_columns(csv_path)
    xname = next((c for c in ("step", "iteration", "iter", "epoch") if c in cols), None)
    x = cols.pop(xname) if xname else np.arange(len(next(iter(cols.values()), [])), dtype=np.float64)
    cols = {k: v for k, v in cols.items() if k not in ("time", "wall_time", "epoch", "step")}
    if not cols:
        raise InputFileError(csv_path, "training log has no numeric columns to plot")
    lossy = {k: v for k, v in cols.items() if any(s in k.lower() for s in ("loss", "kl", "err", "chamfer"))}
    other = {k: v for k, v in cols.items() if k not in lossy}
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    n_panels = int(bool(lossy)) + int(bool(other))
    fig = Figure(figsize=(6.4, 3.2 * n_panels), dpi=_DPI, layout="constrained")
    axes = [fig.add_subplot(n_panels, 1, i + 1) for i in range(n_panels)]
    for ax, group, log in zip(axes, [g for g in (lossy, other) if g], [bool(lossy), False]):
        for name, y in group.items():
            m = np.isfinite(y)
            if log:
                m &= y > 0
            ax.plot(x[m], y[m], label=name, linewidth=1.3)
        if log and any((np.nan_to_num(y) > 0).any() for y in group.values()):
            ax.set_yscale("log")
        ax.set_xlabel(xname or "row")
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(frameon=False, fontsize=8)
    axes[0].set_title(f"training curves: {csv_path.name}")
    return _save(fig, path)
