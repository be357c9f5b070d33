"""Path Pooling, our variant (``pool_variant="ours"``), kept for comparison with the paper's Algorithm 1.

``query/path_pooling.py`` describes both (steps 3-5 of its docstring are this formula) and imports this module only
when the variant is asked for (``--set pool_variant=ours``, the evaluation's ours rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

SMOOTHING = 0.5
POSITION_BONUS = 0.1


def smoothed_scores(scores: Mapping[str, float], kernel_list: Sequence[Sequence[str]],
                    distance: Mapping[str, int]) -> dict[str, float]:
    """``s'(r)`` for every scored relation: mean-pooled over its kernels, plus the positional bonus."""
    pooled_sum: dict[str, float] = {}
    pooled_n: dict[str, int] = {}
    for kernel in kernel_list:
        if not kernel:
            continue
        mean = sum(scores.get(k, 0.0) for k in kernel) / len(kernel)
        for key in dict.fromkeys(kernel):
            pooled_sum[key] = pooled_sum.get(key, 0.0) + mean
            pooled_n[key] = pooled_n.get(key, 0) + 1
    out: dict[str, float] = {}
    for key, s in scores.items():
        pooled = pooled_sum[key] / pooled_n[key] if key in pooled_n else s
        d = distance.get(key)
        bonus = POSITION_BONUS / d if d else 0.0
        out[key] = (1.0 - SMOOTHING) * s + SMOOTHING * pooled + bonus
    return out
