"""Paired bootstrap over questions: is one system's per-question score really above another's on this set?

Two systems answered (or ranked passages for) the same questions; ``a[i]`` and ``b[i]`` are their scores on
question ``i`` (recall@k, the mean recall over several ks, answer-in-context 0/1, answer F1, ...). The statistic
is the mean difference ``mean(a - b)``; its 95% interval is the percentile interval of that mean over
``resamples`` (10,000) resamples of the question indices with replacement, the same indices for both systems
(paired), drawn from ``numpy.random.default_rng(seed)`` with ``seed=0``: the same inputs always give the same
interval. The outcome names which side of zero the interval lies on:

    "beats"   the low end is above 0: a's mean is higher on this question set, beyond resampling noise;
    "trails"  the high end is below 0: a's mean is lower;
    "ties"    the interval contains 0 (two identical score lists give [0, 0]: a tie).

This measures variation over *questions* only (the set could have been other questions of the same kind);
it says nothing about a different corpus or distribution, and with 100 questions a difference of a few
hundredths of recall usually ties. Typical use::

    from pathrag_pipeline.evaluation.bootstrap import paired_bootstrap

    interval = paired_bootstrap(recall_path, recall_bm25)      # one value per question, same order
    interval.diff, interval.low, interval.high, interval.outcome
    interval.format()                                          # '+0.128 [+0.071, +0.186]'

``paired_by_key`` takes two ``{question id: score}`` mappings instead and pairs them by id.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
SEED = 0
LEVEL = 0.95
OUTCOMES = ("beats", "ties", "trails")
# Resampled question indices are drawn in blocks of at most this many values (memory), always the same blocks
# for the same (questions, resamples), so the interval does not depend on anything but the inputs and the seed.
_BLOCK_VALUES = 4_000_000


def outcome(low: float, high: float) -> str:
    """"beats" when the interval lies above zero (``low > 0``), "trails" when below (``high < 0``), else "ties"."""
    if low > 0:
        return "beats"
    if high < 0:
        return "trails"
    return "ties"


@dataclass(frozen=True)
class Interval:
    """Mean paired difference ``diff`` = mean(a - b) and its percentile interval [``low``, ``high``]."""

    diff: float
    low: float
    high: float
    questions: int = 0            # pairs the interval was computed over
    resamples: int = RESAMPLES
    seed: int = SEED
    level: float = LEVEL

    @property
    def outcome(self) -> str:
        """"beats" / "ties" / "trails" (see :func:`outcome`)."""
        return outcome(self.low, self.high)

    def format(self, digits: int = 3) -> str:
        """``'+0.128 [+0.071, +0.186]'``: the difference, then the interval, signed."""
        return f"{self.diff:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"

    def to_dict(self, digits: int | None = 4) -> dict[str, float | str]:
        """``{"diff", "low", "high", "outcome"}``, numbers rounded to ``digits`` (None: not rounded)."""
        r = (lambda x: x) if digits is None else (lambda x: round(x, digits))
        return {"diff": r(self.diff), "low": r(self.low), "high": r(self.high), "outcome": self.outcome}


def format_figures(d: Mapping[str, Any]) -> str:
    """``Interval.format`` of an interval's ``to_dict()`` form (as stored and printed as JSON)."""
    return f"{d['diff']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


@functools.lru_cache(maxsize=4)
def _indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """``resamples`` x ``n`` question indices drawn with replacement (read-only; cached: every comparison of a
    run has the same n, resamples and seed, hence the same draws)."""
    rng = np.random.default_rng(seed)
    rows = max(1, _BLOCK_VALUES // n)
    blocks = [rng.integers(0, n, size=(min(rows, resamples - start), n), dtype=np.int32)
              for start in range(0, resamples, rows)]
    out = np.concatenate(blocks, axis=0)
    out.flags.writeable = False
    return out


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED,
                     level: float = LEVEL) -> Interval:
    """Mean of ``a[i] - b[i]`` over questions with its paired bootstrap percentile interval.

    ``a`` and ``b``: one score per question, the same questions in the same order. ``resamples`` resamples of
    the question indices (with replacement, the same for both sides) from ``numpy.random.default_rng(seed)``;
    the interval is the ((1 - level) / 2, (1 + level) / 2) quantiles of the resampled means (linear
    interpolation). Deterministic for given inputs, resamples and seed. Raises ValueError for unequal lengths,
    no questions, non-finite scores, ``resamples < 1`` or a level outside (0, 1).
    """
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("paired_bootstrap needs two flat sequences of per-question scores")
    if len(x) != len(y):
        raise ValueError(f"paired_bootstrap needs one score per question on both sides; got {len(x)} and {len(y)}")
    if len(x) == 0:
        raise ValueError("paired_bootstrap needs at least one question")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("paired_bootstrap scores must be finite numbers (no NaN or infinity)")
    if resamples < 1:
        raise ValueError(f"resamples={resamples} must be at least 1 (default {RESAMPLES})")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be between 0 and 1 (default {LEVEL})")
    d = x - y
    diff = float(d.mean())
    if not d.any():   # identical scores: every resample's mean is exactly 0
        return Interval(0.0, 0.0, 0.0, len(d), resamples, seed, level)
    means = d[_indices(len(d), resamples, seed)].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(diff, float(low), float(high), len(d), resamples, seed, level)


def paired_by_key(a: Mapping[str, float], b: Mapping[str, float], **options) -> Interval:
    """:func:`paired_bootstrap` of two ``{question id: score}`` mappings, paired by id (in ``a``'s order).

    Both must hold the same ids: a question scored on one side only is an error, not silently dropped."""
    missing = [k for k in a if k not in b] + [k for k in b if k not in a]
    if missing:
        raise ValueError(f"paired_by_key: {len(missing)} question id(s) scored on one side only, e.g. {missing[0]!r}")
    keys = list(a)
    return paired_bootstrap([a[k] for k in keys], [b[k] for k in keys], **options)
