"""An independent reference for the equations of motion: the Euler-Lagrange solution by autograd."""

from __future__ import annotations

import torch


def euler_lagrange_qdd(points, point_mass, potential, q, qd, force=None):
    """qdd of L = T - V with T = 1/2 sum_p m_p |J_p(q) qd|^2 (``points``: q (k,) -> (P, 3)), V =
    ``potential(q, points(q))``, and generalized force ``force(M)`` (k,) (M = d2L/dqd2, for mass-proportional
    damping): solves M qdd = dL/dq - d2L/(dqd dq) qd + Q, all in autograd (float64)."""
    k = len(q)

    def lagrangian(y):
        qq, vv = y[:k], y[k:]
        xd = torch.autograd.functional.jacobian(points, qq, create_graph=True) @ vv  # (P, 3)
        T = 0.5 * (point_mass[:, None] * xd * xd).sum()
        return T - potential(qq, points(qq))

    y = torch.cat([q, qd])
    H = torch.autograd.functional.hessian(lagrangian, y)
    g = torch.autograd.functional.jacobian(lagrangian, y)
    M, C = H[k:, k:], H[k:, :k]  # d2L/dqd2, d2L/dqd dq
    Q = torch.zeros(k, dtype=q.dtype) if force is None else force(M)
    return torch.linalg.solve(M, g[:k] - C @ qd + Q)
