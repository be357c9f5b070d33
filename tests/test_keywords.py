"""Offline question keywords: names and details low level, themes and relations high level."""

from __future__ import annotations

import pytest

from pathrag_pipeline.query.keywords import Keywords, extract_keywords_offline


def test_names_are_low_level_and_content_phrases_high_level():
    got = extract_keywords_offline(
        "Who was the first president of the association which published Journal of Psychotherapy Integration?")
    assert got.low_level == ["Journal of Psychotherapy Integration"]
    assert got.high_level[:3] == ["first president", "association", "published"]
    for stop in ("who", "was", "the", "which", "of"):
        assert stop not in [k.lower() for k in got.high_level + got.low_level]


def test_several_names_dates_and_possessives():
    got = extract_keywords_offline(
        "How many Publix stores are in the state where Hello Love's performer lived in 1990?")
    assert got.low_level[:3] == ["Publix", "Hello Love", "1990"]
    assert "Hello Love performer" in got.low_level
    assert {"stores", "state", "performer", "lived"} <= set(got.high_level)
    assert not {"Publix", "Hello Love"} & set(got.high_level)


def test_quoted_titles_and_acronyms():
    got = extract_keywords_offline('When did the BBC first air "The Office" in the UK?')
    assert got.low_level[:3] == ["BBC", "The Office", "UK"]
    assert "air" in got.high_level


def test_lower_case_question_falls_back_to_content_phrases():
    got = extract_keywords_offline("who is the spouse of the green performer?")
    assert got.low_level and set(got.low_level) <= {"green performer", "spouse"}
    assert all(k not in ("who", "is", "the") for k in got.high_level)


def test_deduplicated_deterministic_and_empty():
    question = "Which river flows through Paris, and which river flows through Lyon?"
    first = extract_keywords_offline(question)
    assert first == extract_keywords_offline(question)
    assert len({k.casefold() for k in first.high_level}) == len(first.high_level)
    assert first.high_level.count("river flows") == 1
    assert extract_keywords_offline("   ") == Keywords()
    with pytest.raises(TypeError, match="str"):
        extract_keywords_offline(None)  # type: ignore[arg-type]


def test_model_fields_are_described_for_the_llm():
    schema = Keywords.model_json_schema()
    assert schema["properties"]["low_level"]["description"]
    assert schema["properties"]["high_level"]["description"]
