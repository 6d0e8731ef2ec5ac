"""Closed-form T -> infinity limits (derivations in docs/ANALYTIC.md, "The perp Markov stack").

The model: i.i.d. Markov attention with perp (A^perp = A - (1/T) 1 1^T, Mind the Gap eq. (16)),
Gaussian W_V, orthonormal input, lambda = 0, no norm, gate or MLP, one head; gamma = T / d in (0, 1].
Sigma_L = X_L X_L^T. With free probability the limiting spectrum of Sigma_L (normalised) has the
S-transform S(z) = (1 + z)^-L (1 + gamma z)^-L, so that

    m1 = 1,  m2 = 1 + L (1 + gamma)                               (Mind the Gap Prop. A.8)
    right edge lambda_+ = 1 / u*,  u* = max_{z > 0} z / ((1 + z)^(L+1) (1 + gamma z)^L)
    z* = [-(L(1 + gamma) - gamma) + sqrt((L(1 + gamma) - gamma)^2 + 8 L gamma)] / (4 L gamma)

and the scale-free ratios tend to
    sr_cov / T -> m2 / lambda_+^2 = (1 + L (1 + gamma)) u*^2      (stable rank, Mind the Gap eq. (5))
    sr_x / T   -> m1 / lambda_+   = u*
    pr / T     -> m1^2 / m2       = 1 / (1 + L (1 + gamma))        (pr = (tr Sigma)^2 / tr Sigma^2)
None depends on sigma_A or sigma_v.
"""
from __future__ import annotations

import numpy as np


def edge_point(L, gamma):
    """z* > 0 where u(z) = z / ((1+z)^(L+1) (1+gamma z)^L) is largest (the root of
    2 L gamma z^2 + (L(1+gamma) - gamma) z - 1 = 0; z* = 1/L at gamma = 0)."""
    L, gamma = _check(L, gamma)
    if gamma == 0:
        return 1.0 / L
    b = L * (1 + gamma) - gamma
    return (-b + np.sqrt(b * b + 8 * L * gamma)) / (4 * L * gamma)


def _check(L, gamma):
    L, gamma = int(L), float(gamma)
    if L < 1:
        raise ValueError(f"depth L must be >= 1, got {L}")
    if not 0 <= gamma <= 1:
        raise ValueError(f"gamma = T/d must lie in [0, 1] (the orthonormal input needs T <= d), got {gamma}")
    return L, gamma


def perp_markov_limits(L, gamma):
    """{"sr_cov": ..., "sr_x": ..., "pr": ..., "m2": ..., "edge": ...}: the T -> infinity limits of
    sr_cov/T, sr_x/T and pr/T at depth L >= 1 for gamma = T/d (module docstring), with the second
    moment m2 and the right edge lambda_+ of the normalised spectrum of Sigma_L (m1 = 1)."""
    L, gamma = _check(L, gamma)
    z = edge_point(L, gamma)
    u = z / ((1 + z) ** (L + 1) * (1 + gamma * z) ** L)
    m2 = 1 + L * (1 + gamma)
    return {"sr_cov": m2 * u * u, "sr_x": u, "pr": 1.0 / m2, "m2": m2, "edge": 1.0 / u}
