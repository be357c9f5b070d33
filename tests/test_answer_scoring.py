"""SQuAD answer normalisation, EM/F1 and answer-in-context; what the LLM reads, scored per budget."""

from __future__ import annotations

import pytest

from pathrag_pipeline.evaluation.answer_scoring import answer_in_context, exact_match, normalize_answer, token_f1
from pathrag_pipeline.evaluation.prompt_context import parse_budgets, score_prompt, summarize
from pathrag_pipeline.query.results import BudgetedPrompt


@pytest.mark.parametrize("text, normalised", [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  a  Tale of Two   Cities ", "tale of two cities"),
    ("U.S.A.", "usa"),
    ("An apple, the pear", "apple pear"),
    ("Theatre", "theatre"),            # an article inside a word stays
])
def test_normalize_answer_is_squads(text, normalised):
    assert normalize_answer(text) == normalised


def test_exact_match_and_f1_take_the_best_gold_answer():
    assert exact_match("the Eiffel Tower", ["Tour Eiffel", "Eiffel Tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert token_f1("Eiffel", ["Eiffel Tower"]) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert token_f1("Paris France", ["Lyon", "Paris"]) == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert token_f1("", ["Paris"]) == 0.0 and token_f1("nothing", []) == 0.0


def test_answer_in_context_matches_whole_words_after_normalisation():
    assert answer_in_context("Helena Voss was born in LINDENHOLM, a town.", ["Lindenholm"])
    assert answer_in_context("born in the U.S.A. in 1852", ["USA"])
    assert not answer_in_context("born in Lindenholmstad", ["Lindenholm"])     # not a whole word
    assert not answer_in_context("anything", ["The", "..."])                   # normalises to nothing
    assert not answer_in_context("anything", [])


def test_answer_only_in_a_quoted_source_is_in_context_and_its_passage_is_counted():
    prompt = BudgetedPrompt(2000, "Question: Where was Voss born?\n\n-----Sources-----\nid,content\n"
                                  "0,\"Helena Voss was born in Lindenholm in 1820.\"", 31, ("corpus.jsonl#p7",))
    outcome = score_prompt(prompt, ["p7"], ["Lindenholm"], ["p7", "p9"])
    assert outcome.answer_in_context and outcome.quoted_recall == 0.5 and outcome.quoted == ("p7",)
    empty = score_prompt(BudgetedPrompt(2000, "Question: Where was Voss born?", 8, ()), [], ["Lindenholm"], ["p7"])
    assert not empty.answer_in_context and empty.quoted_recall == 0.0


def test_summarize_means_per_budget():
    a = score_prompt(BudgetedPrompt(1000, "Lindenholm", 10, ()), ["p1"], ["Lindenholm"], ["p1"])
    b = score_prompt(BudgetedPrompt(1000, "nothing", 30, ()), [], ["Lindenholm"], ["p1"])
    summary = summarize([{1000: a}, {1000: b}], [1000, 2000])
    assert summary == {"1000": {"answer_in_context": 0.5, "median_tokens": 20.0, "quoted_recall": 0.5,
                                "passages_quoted": 0.5}}


def test_parse_budgets():
    assert parse_budgets("4000,1000,1000") == [1000, 4000]
    assert parse_budgets("") == []
    with pytest.raises(ValueError, match="'50'"):
        parse_budgets("50")
