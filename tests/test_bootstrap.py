"""The paired bootstrap over questions (evaluation/bootstrap.py): known differences, ties, determinism."""

from __future__ import annotations

import pytest

from pathrag_pipeline.evaluation.bootstrap import Interval, outcome, paired_bootstrap, paired_by_key
from pathrag_pipeline.evaluation.retrieval_eval import recall_at_k


def _rankings(gold_rank: int, hits: int, n: int = 100) -> tuple[list[list[str]], list[list[str]]]:
    """``n`` questions with one gold passage each: the first ``hits`` have it at rank ``gold_rank``, the rest at
    rank 1."""
    rankings, golds = [], []
    for q in range(n):
        gold = f"g{q}"
        filler = [f"x{q}-{i}" for i in range(30)]
        rank = gold_rank if q < hits else 1
        rankings.append(filler[:rank - 1] + [gold] + filler[rank - 1:])
        golds.append([gold])
    return rankings, golds


def test_a_known_difference_of_recall_at_2_has_an_interval_excluding_zero():
    # A finds the gold at rank 1 for 60 of 100 questions where B finds it at rank 20; the other 40 the same.
    a_rank, golds = _rankings(1, 60)
    b_rank, _ = _rankings(20, 60)
    a = [recall_at_k(r, g, 2) for r, g in zip(a_rank, golds)]
    b = [recall_at_k(r, g, 2) for r, g in zip(b_rank, golds)]
    interval = paired_bootstrap(a, b)
    assert interval.diff == 0.6
    assert 0 < interval.low < 0.6 < interval.high <= 1.0
    assert interval.outcome == "beats" and interval.questions == 100
    reverse = paired_bootstrap(b, a)
    assert reverse.diff == -0.6 and reverse.high < 0 and reverse.outcome == "trails"
    # recall@20 counts the gold for both: no difference left
    a20 = [recall_at_k(r, g, 20) for r, g in zip(a_rank, golds)]
    b20 = [recall_at_k(r, g, 20) for r, g in zip(b_rank, golds)]
    assert paired_bootstrap(a20, b20) == Interval(0.0, 0.0, 0.0, 100)


def test_identical_scores_tie_at_zero():
    scores = [0.5, 1.0, 0.0, 0.25] * 25
    interval = paired_bootstrap(scores, list(scores))
    assert (interval.diff, interval.low, interval.high, interval.outcome) == (0.0, 0.0, 0.0, "ties")
    assert interval.to_dict() == {"diff": 0.0, "low": 0.0, "high": 0.0, "outcome": "ties"}


def test_an_interval_straddling_zero_ties():
    # a wins 6 questions, loses 4: a small positive mean whose interval reaches below zero
    a = [1.0] * 6 + [0.0] * 4 + [0.5] * 90
    b = [0.0] * 6 + [1.0] * 4 + [0.5] * 90
    interval = paired_bootstrap(a, b)
    assert interval.diff == pytest.approx(0.02)
    assert interval.low < 0 < interval.high and interval.outcome == "ties"


def test_the_interval_is_deterministic_for_a_seed_and_moves_with_another():
    a = [(i * 37 % 11) / 10 for i in range(100)]
    b = [(i * 53 % 7) / 6 for i in range(100)]
    first, again = paired_bootstrap(a, b), paired_bootstrap(a, b)
    assert first == again and first.seed == 0 and first.resamples == 10_000
    other = paired_bootstrap(a, b, seed=1)
    assert other.diff == first.diff and (other.low, other.high) != (first.low, first.high)
    narrow = paired_bootstrap(a, b, level=0.5)
    assert first.low < narrow.low < narrow.high < first.high


def test_outcome_words_formatting_and_errors():
    assert (outcome(0.01, 0.2), outcome(-0.2, -0.01), outcome(-0.1, 0.1), outcome(0.0, 0.3)) == (
        "beats", "trails", "ties", "ties")
    assert Interval(0.128, 0.0714, 0.1862).format() == "+0.128 [+0.071, +0.186]"
    assert Interval(-0.05, -0.1, 0.0).format(2) == "-0.05 [-0.10, +0.00]"
    with pytest.raises(ValueError, match="2 and 3"):
        paired_bootstrap([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least one"):
        paired_bootstrap([], [])
    with pytest.raises(ValueError, match="finite"):
        paired_bootstrap([float("nan")], [0.0])


def test_paired_by_key_pairs_by_question_id_and_refuses_one_sided_ids():
    a = {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    b = {"q3": 0.0, "q1": 0.0, "q2": 0.0}
    assert paired_by_key(a, b).diff == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="one side only"):
        paired_by_key(a, {"q1": 0.0, "q2": 0.0})
