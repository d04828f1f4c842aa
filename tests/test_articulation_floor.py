"""Per-part floor of the predictor's shape context (``PredictorConfig.shape_floor``): small parts get at least
the floor's share of the context samples, large parts keep about their area share, and with the floor off the
sampling is exactly the one the shipped weights were trained with."""

from __future__ import annotations

import numpy as np
import pytest

from articulation_fixtures import handle_samples_in_door_context
from kinemesh.articulation.predictor import PredictorConfig, context_counts, context_shares


def test_floor_shares_handle_and_carcass():
    """A 1 %-area handle is raised to the floor; the carcass (90 %) loses only what the small parts gain."""
    areas = np.array([0.90, 0.01, 0.005, 0.085])
    w = context_shares(areas, floor=0.03)
    assert w.sum() == pytest.approx(1.0)
    assert w[1] == pytest.approx(0.03) and w[2] == pytest.approx(0.03)
    # the rest (1 - 2 * 0.03) shared in proportion to area among the parts above the floor
    assert w[0] == pytest.approx(0.94 * 0.90 / 0.985)
    assert w[3] == pytest.approx(0.94 * 0.085 / 0.985)
    # the uniform mixture (shipped) halves the carcass' share instead
    assert context_shares(areas, uniform=0.5)[0] == pytest.approx(0.575)


def test_floor_water_filling_and_saturation():
    # a part pushed below the floor by the first raise is raised as well
    w = context_shares(np.array([0.5, 0.45, 0.03, 0.02]), floor=0.04)
    assert np.all(w >= 0.04 - 1e-12) and w.sum() == pytest.approx(1.0)
    assert w[0] / w[1] == pytest.approx(0.5 / 0.45)
    # when the floors alone exceed the budget, every part gets the same share
    assert np.allclose(context_shares(np.r_[10.0, np.ones(39)], floor=0.03), 1 / 40)


def test_floor_counts_guaranteed():
    """Counts: the handle never gets fewer than floor(f * n) samples (not just on average); the carcass keeps
    about its area share; the counts always sum to n_shape."""
    cfg = PredictorConfig(shape_floor=0.03)
    areas = np.array([0.90, 0.01, 0.005, 0.085])
    w = context_shares(areas, floor=0.03)
    for seed in range(50):
        c = context_counts(areas, cfg, np.random.default_rng(seed))
        assert c.sum() == cfg.n_shape
        assert c[1] >= int(0.03 * cfg.n_shape) and c[2] >= int(0.03 * cfg.n_shape)
        assert int(w[0] * cfg.n_shape) <= c[0] <= w[0] * cfg.n_shape + len(areas)  # integer part + leftovers
        assert c[0] >= 0.85 * cfg.n_shape


def test_floor_off_is_the_old_sampling():
    """shape_floor = 0 draws exactly what the code before the floor drew (shipped weights behave as before)."""
    areas = np.array([3.0, 0.02, 0.5, 0.1])
    for u in (0.0, 0.5):
        old = np.random.default_rng(7).multinomial(192, (1.0 - u) * areas / areas.sum() + u / len(areas))
        new = context_counts(areas, PredictorConfig(shape_uniform=u), np.random.default_rng(7))
        assert np.array_equal(old, new)


def test_floor_microwave_handle_visible():
    """On a generated microwave, the door's context with floor 0.03 (no uniform part) holds the handle."""
    cfg = PredictorConfig(shape_uniform=0.0, shape_floor=0.03)
    for count in handle_samples_in_door_context(cfg, range(3)):
        assert count >= int(0.03 * cfg.n_shape)
