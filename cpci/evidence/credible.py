"""How high might a config's failure rate be? An upper credible bound from few observations.

A point estimate (3 failures in 20 runs: 0.15) says too little with 20 runs: the true rate may
well be 0.3. The verdicts therefore weigh a failure at head against the *upper* end of what the
history allows: the `level` quantile of the Jeffreys posterior Beta(f + 1/2, n - f + 1/2),
which covers the true rate about as often as it claims even for small n and f = 0 (where the
Wilson and normal bounds do not). No SciPy: the regularised incomplete beta function by its
continued fraction (Numerical Recipes 6.4), the quantile by bisection.
"""

from __future__ import annotations

import math

_EPSILON = 1e-12
_TINY = 1e-300


def jeffreys_upper(failures: int, trials: int, level: float) -> float:
    """The `level` quantile of the failure rate's Jeffreys posterior after `failures` of
    `trials`; 1.0 without trials (nothing is known)."""
    if not 0 < level < 1:
        raise ValueError(f"a credible level must be between 0 and 1, got {level}")
    if not 0 <= failures <= trials:
        raise ValueError(f"failures must be between 0 and trials ({trials}), got {failures}")
    if trials == 0:
        return 1.0
    return beta_quantile(level, failures + 0.5, trials - failures + 0.5)


def beta_quantile(q: float, a: float, b: float) -> float:
    """The x with I_x(a, b) = q (bisection: I is monotone in x; 60 halvings reach 1e-18)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if regularized_beta(mid, a, b) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the Beta(a, b) distribution function at x."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1) / (a + b + 2):  # the continued fraction converges fast on this side
        return front * _continued_fraction(x, a, b) / a
    return 1.0 - front * _continued_fraction(1 - x, b, a) / b


def _continued_fraction(x: float, a: float, b: float) -> float:
    """Lentz's method for the incomplete beta function's continued fraction."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= d * c
        if abs(d * c - 1.0) < _EPSILON:
            break
    return result
