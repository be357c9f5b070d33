"""The short answer's post-processing (issue 59): a reply asked for the answer alone is cut to its span."""

from __future__ import annotations

import pytest

from pathrag_pipeline.query.answering import short_answer


@pytest.mark.parametrize(("reply", "question", "expected"), [
    ("Yes, Christopher Nolan and Emma Thomas.", "Who produced the film?", "Christopher Nolan and Emma Thomas"),
    ("Yes, both were directed by Christopher Nolan.", "Were both films directed by the same person?", "yes"),
    ("No. They were not.", "Did the bridge open in 1890?", "no"),
    ("Answer: 1912.", "When did the railway open?", "1912"),
    ("The answer is Lindenholm", "Where was it founded?", "Lindenholm"),
    ("The U.S. Army. It was founded in 1775.", "Which army fought there?", "The U.S. Army"),
    ('"Paris"', "Which city?", "Paris"),
    ("**git gc --auto**\nIt packs loose objects.", "Which command packs loose objects?", "git gc --auto"),
    ("3.14", "What is the value?", "3.14"),
    ("Agnes Morrow", "Who founded Aldermere University?", "Agnes Morrow"),
    ("No such file or directory", "Which error does git print?", "No such file or directory"),
    ("No", "Does git gc run by itself?", "no"),
])
def test_a_reply_is_cut_to_its_answer_span(reply: str, question: str, expected: str) -> None:
    assert short_answer(reply, question) == expected


def test_a_reply_with_nothing_left_after_the_cut_is_kept_as_it_came() -> None:
    assert short_answer("Yes.", "Which one is it?") == "Yes."
    assert short_answer("", "Who?") == ""
