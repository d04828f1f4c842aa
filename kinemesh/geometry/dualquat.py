"""Unit dual quaternions in torch (batched, float32/float64, differentiable, ``torch.func`` compatible).

Layout: ``dq[..., :4]`` is the real (rotation) quaternion and ``dq[..., 4:]`` the dual part, both ``wxyz``.
A rigid transform ``x -> R x + t`` with rotation quaternion ``q`` is ``(q, 0.5 * (0, t) * q)``.
Blending is Dual-quaternion Linear Blending (Kavan et al. 2008, DLB): align signs to the dominant
transform, take the weighted sum, normalize.

All functions are pure tensor code without in-place writes or data-dependent Python branches, so they work
under ``torch.autograd`` and ``torch.func.jvp`` / ``vmap``.
"""

from __future__ import annotations

import torch

_EPS = 1e-12


# ----------------------------------------------------------------------------------------------- quaternions
def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product of wxyz quaternions, (..., 4) x (..., 4) -> (..., 4) (broadcasts)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def quat_conj(q: torch.Tensor) -> torch.Tensor:
    """Conjugate of wxyz quaternions (..., 4)."""
    return q * q.new_tensor([1.0, -1.0, -1.0, -1.0])


def quat_normalize(q: torch.Tensor) -> torch.Tensor:
    """Unit quaternions (..., 4); the norm is floored to avoid division by zero."""
    return q / q.norm(dim=-1, keepdim=True).clamp_min(_EPS)


def quat_rotate(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Rotate points ``p`` (..., 3) by unit quaternions ``q`` (..., 4) wxyz (broadcasts)."""
    w = q[..., :1]
    v = q[..., 1:]
    v, p = torch.broadcast_tensors(v, p)
    uv = torch.linalg.cross(v, p, dim=-1)
    uuv = torch.linalg.cross(v, uv, dim=-1)
    return p + 2.0 * (w * uv + uuv)


def quat_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) from wxyz quaternions (..., 4) (normalized first)."""
    q = quat_normalize(q)
    w, x, y, z = q.unbind(-1)
    m = torch.stack(
        (
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ),
        dim=-1,
    )
    return m.reshape(q.shape[:-1] + (3, 3))


def _sqrt_pos(x: torch.Tensor) -> torch.Tensor:
    # sqrt with zero value *and zero gradient* where x <= 0 (the unselected branches below must not inject NaN)
    pos = x > 0
    return torch.where(pos, torch.sqrt(torch.where(pos, x, torch.ones_like(x))), torch.zeros_like(x))


def quat_from_matrix(m: torch.Tensor) -> torch.Tensor:
    """wxyz unit quaternions (..., 4) with w >= 0 from rotation matrices (..., 3, 3).

    Uses the numerically best of the four classic formulas per matrix (Shepperd's method).
    """
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    # 2|w|, 2|x|, 2|y|, 2|z|
    q_abs = _sqrt_pos(
        torch.stack(
            (1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22), dim=-1
        )
    )
    cands = torch.stack(
        (
            torch.stack((q_abs[..., 0] ** 2, m21 - m12, m02 - m20, m10 - m01), dim=-1),
            torch.stack((m21 - m12, q_abs[..., 1] ** 2, m10 + m01, m02 + m20), dim=-1),
            torch.stack((m02 - m20, m10 + m01, q_abs[..., 2] ** 2, m12 + m21), dim=-1),
            torch.stack((m10 - m01, m20 + m02, m21 + m12, q_abs[..., 3] ** 2), dim=-1),
        ),
        dim=-2,
    )  # (..., 4, 4): row i is q * 2 q_abs_i (up to sign)
    cands = cands / (2.0 * q_abs[..., None].clamp_min(0.1))
    best = q_abs.argmax(dim=-1)
    onehot = torch.nn.functional.one_hot(best, 4).to(m.dtype)
    q = (cands * onehot[..., None]).sum(dim=-2)
    q = quat_normalize(q)
    sign = torch.where(q[..., :1] < 0, -torch.ones_like(q[..., :1]), torch.ones_like(q[..., :1]))
    return q * sign


# ------------------------------------------------------------------------------------------ dual quaternions
def from_rt(quat: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Dual quaternions (..., 8) from rotations ``quat`` (..., 4) wxyz and translations ``t`` (..., 3) metres.

    ``quat`` is normalized first; leading dimensions broadcast.
    """
    q = quat_normalize(quat)
    q, t = torch.broadcast_tensors(q, torch.cat((torch.zeros_like(t[..., :1]), t), dim=-1))
    return torch.cat((q, 0.5 * quat_mul(t, q)), dim=-1)


def identity(shape=(), dtype=torch.float32, device=None) -> torch.Tensor:
    """Identity dual quaternions of shape ``shape + (8,)``."""
    out = torch.zeros(tuple(shape) + (8,), dtype=dtype, device=device)
    out[..., 0] = 1.0
    return out


def normalize(dq: torch.Tensor) -> torch.Tensor:
    """Project (..., 8) onto unit dual quaternions.

    Divides by the real part's norm and removes the dual part's component along the real part, so that
    ``|real| = 1`` and ``real . dual = 0`` hold exactly.
    """
    r = dq[..., :4]
    d = dq[..., 4:]
    n = r.norm(dim=-1, keepdim=True).clamp_min(_EPS)
    r = r / n
    d = d / n
    d = d - r * (r * d).sum(dim=-1, keepdim=True)
    return torch.cat((r, d), dim=-1)


def to_rt(dq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotation quaternion (..., 4) wxyz and translation (..., 3) of dual quaternions (..., 8) (normalized first)."""
    dq = normalize(dq)
    r = dq[..., :4]
    t = 2.0 * quat_mul(dq[..., 4:], quat_conj(r))
    return r, t[..., 1:]


def from_matrix(T: torch.Tensor) -> torch.Tensor:
    """Dual quaternions (..., 8) from homogeneous rigid transforms (..., 4, 4) (or (..., 3, 4))."""
    return from_rt(quat_from_matrix(T[..., :3, :3]), T[..., :3, 3])


def to_matrix(dq: torch.Tensor) -> torch.Tensor:
    """Homogeneous transforms (..., 4, 4) of dual quaternions (..., 8)."""
    q, t = to_rt(dq)
    R = quat_to_matrix(q)
    top = torch.cat((R, t[..., None]), dim=-1)
    bottom = torch.zeros_like(top[..., :1, :])
    bottom = bottom + torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=dq.dtype, device=dq.device)
    return torch.cat((top, bottom), dim=-2)


def mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Compose dual quaternions: ``mul(a, b)`` applies ``b`` first, then ``a`` ((..., 8), broadcasts)."""
    ar, ad = a[..., :4], a[..., 4:]
    br, bd = b[..., :4], b[..., 4:]
    return torch.cat((quat_mul(ar, br), quat_mul(ar, bd) + quat_mul(ad, br)), dim=-1)


def inverse(dq: torch.Tensor) -> torch.Tensor:
    """Inverse of unit dual quaternions (..., 8) (quaternion conjugate of both parts)."""
    return torch.cat((quat_conj(dq[..., :4]), quat_conj(dq[..., 4:])), dim=-1)


def blend(dq: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Dual-quaternion linear blending (DLB) of K transforms.

    Parameters
    ----------
    dq : (..., K, 8) dual quaternions.
    weights : (..., K) non-negative weights (need not sum to 1).

    Returns
    -------
    (..., 8) unit dual quaternions. Each input is first sign-flipped to the hemisphere of the dominant
    (largest-weight) transform, since q and -q are the same rotation and must not cancel.
    """
    dq, w = torch.broadcast_tensors(dq, weights[..., None])
    w = w[..., 0]
    pivot = torch.argmax(w, dim=-1, keepdim=True)  # (..., 1)
    ref = torch.gather(dq[..., :4], -2, pivot[..., None].expand(*pivot.shape, 4))  # (..., 1, 4)
    dots = (dq[..., :4] * ref).sum(dim=-1)  # (..., K)
    sign = torch.where(dots < 0, -torch.ones_like(dots), torch.ones_like(dots))
    out = ((w * sign)[..., None] * dq).sum(dim=-2)
    return normalize(out)


def apply(dq: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Transform points (..., 3) metres by dual quaternions (..., 8) (normalized first; broadcasts)."""
    q, t = to_rt(dq)
    return quat_rotate(q, points) + t
