"""Extractors: the LLM prompt and gleaning over real HTTP, merging, identities, and the offline fallback."""

from __future__ import annotations

import json
import pickle

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.llm_extraction import (
    GLEANING_PROMPT,
    PROMPT_VERSION,
    LLMExtractor,
    LLMSummariser,
    OfflineExtractor,
    extractor_from_settings,
    merge_extractions,
)
from pathrag_pipeline.index.extraction_models import ChunkExtraction, Entity, Relation, entity_of, relation_of
from pathrag_pipeline.llm.client import LLMOutputError
from pathrag_pipeline.index.offline_extraction import OFFLINE_EXTRACTOR_ID
from pathrag_lab.testing.openai_server import FakeOpenAIServer
from tests.extraction_fakes import FakeExtractionModel, chunk_text_of, make_client

TEXT = "Ada Lovelace wrote notes on the Analytical Engine designed by Charles Babbage in London."


def test_first_pass_sends_text_title_and_entity_types(openai_server: FakeOpenAIServer) -> None:
    openai_server.chat_responder = FakeExtractionModel()
    extractor = LLMExtractor(make_client(openai_server), gleaning=0)

    outcome = extractor.extract(TEXT, "Computing history")

    assert openai_server.count("chat") == outcome.calls == 1
    request = openai_server.requests_for("chat")[0].body
    prompt = "\n".join(str(m["content"]) for m in request["messages"])
    assert chunk_text_of(request).strip() == TEXT
    assert "Computing history" in prompt and "organization" in prompt and "strength" in prompt
    assert {e.name for e in outcome.extraction.entities} >= {"Ada", "Lovelace", "Analytical", "Engine"}
    assert outcome.prompt_tokens > 0 and outcome.completion_tokens > 0


def test_gleaning_makes_the_extra_call_with_the_conversation_and_merges_items(openai_server: FakeOpenAIServer) -> None:
    openai_server.chat_responder = FakeExtractionModel()
    extractor = LLMExtractor(make_client(openai_server), gleaning=1)

    outcome = extractor.extract(TEXT, None)

    assert openai_server.count("chat") == outcome.calls == 2
    second = openai_server.requests_for("chat")[1].body["messages"]
    assert second[-1] == {"role": "user", "content": GLEANING_PROMPT}
    assert second[-2]["role"] == "assistant" and "Lovelace" in second[-2]["content"]
    names = [e.name for e in outcome.extraction.entities]
    assert "Gleaned Ada" in names and "Lovelace" in names
    assert len(names) == len(set(names))


def test_gleaning_stops_early_when_a_pass_adds_nothing(openai_server: FakeOpenAIServer) -> None:
    openai_server.chat_responder = FakeExtractionModel(glean=False)
    extractor = LLMExtractor(make_client(openai_server), gleaning=3)

    outcome = extractor.extract(TEXT, None)

    assert openai_server.count("chat") == outcome.calls == 2


def test_empty_names_are_reasked_and_persistent_invalid_output_raises(openai_server: FakeOpenAIServer) -> None:
    bad = json.dumps({"entities": [{"name": "  ", "type": "person"}], "relations": []})
    good = json.dumps({"entities": [{"name": "Ada", "type": "person"}], "relations": []})
    openai_server.script_chat([bad, good])
    extractor = LLMExtractor(make_client(openai_server, validation_retries=1), gleaning=0)

    assert [e.name for e in extractor.extract(TEXT, None).extraction.entities] == ["Ada"]

    openai_server.reset()
    openai_server.script_chat([bad] * 5)
    with pytest.raises(LLMOutputError) as info:
        extractor.extract(TEXT, None)
    assert info.value.usage.calls == openai_server.count("chat") == 2


def test_gleaning_failure_carries_the_usage_of_every_pass(openai_server: FakeOpenAIServer) -> None:
    openai_server.script_chat([json.dumps({"entities": [{"name": "Ada"}], "relations": []})] + ["not json"] * 5)
    extractor = LLMExtractor(make_client(openai_server, validation_retries=1), gleaning=1)

    with pytest.raises(LLMOutputError) as info:
        extractor.extract(TEXT, None)

    assert info.value.usage.calls == openai_server.count("chat") == 3


def test_relation_endpoints_missing_from_entities_are_added(openai_server: FakeOpenAIServer) -> None:
    openai_server.script_chat([json.dumps({"entities": [], "relations": [
        {"source": "Ada", "target": "Babbage", "keywords": "collaboration", "strength": 7}]})])
    extractor = LLMExtractor(make_client(openai_server), gleaning=0)

    extraction = extractor.extract(TEXT, None).extraction

    assert {e.name for e in extraction.entities} == {"Ada", "Babbage"}


def test_merge_extractions_dedupes_by_name_key_and_undirected_pair() -> None:
    base = ChunkExtraction(entities=[Entity(name="The Beatles", description=""), Entity(name="Liverpool")],
                           relations=[Relation(source="The Beatles", target="Liverpool")])
    extra = ChunkExtraction(
        entities=[Entity(name="beatles", description="a band"), Entity(name="John Lennon")],
        relations=[Relation(source="Liverpool", target="Beatles"), Relation(source="John Lennon", target="Beatles")],
    )

    merged, added = merge_extractions(base, extra)

    assert [e.name for e in merged.entities] == ["The Beatles", "Liverpool", "John Lennon"]
    assert merged.entities[0].description == "a band"
    assert len(merged.relations) == 2 and added == 2


def test_identities_name_model_prompt_and_gleaning_never_the_key(openai_server: FakeOpenAIServer) -> None:
    client = make_client(openai_server, api_key="sk-secret-123")
    assert LLMExtractor(client, gleaning=2).identity == f"llm:fake-chat:{PROMPT_VERSION}:glean2"
    assert "sk-secret" not in LLMExtractor(client).identity
    assert OfflineExtractor().identity == OFFLINE_EXTRACTOR_ID
    with pytest.raises(ValueError, match="gleaning"):
        LLMExtractor(client, gleaning=-1)


def test_extractor_from_settings_picks_llm_when_configured(openai_server: FakeOpenAIServer, tmp_path) -> None:
    offline = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path)})
    assert isinstance(extractor_from_settings(offline), OfflineExtractor)
    online = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path), "PATHRAG_LLM_BASE_URL": openai_server.base_url,
                                    "PATHRAG_LLM_MODEL": "fake-chat"})
    extractor = extractor_from_settings(online, gleaning=0)
    assert isinstance(extractor, LLMExtractor) and extractor.identity.endswith("glean0")
    assert isinstance(extractor_from_settings(offline, llm=make_client(openai_server)), LLMExtractor)


def test_offline_extractor_returns_normalised_extraction_without_calls() -> None:
    outcome = OfflineExtractor().extract(TEXT, "Computing history")

    assert outcome.calls == outcome.prompt_tokens == 0
    assert outcome.extraction.entities
    names = {e.name.casefold() for e in outcome.extraction.entities}
    for rel in outcome.extraction.relations:
        assert rel.source.casefold() in names and rel.target.casefold() in names


@pytest.mark.parametrize("name,kind", [("Ada Lovelace", "person"), ("Ada  Lovelace ", "person"), (" ", "person"),
                                       ("Acme", "Company"), ("Acme", "location"), ("Acme", "")])
def test_rule_built_entities_equal_validated_ones_and_bad_fields_still_go_through_the_validators(name, kind) -> None:
    """entity_of / relation_of skip the validators only where they would change nothing (the offline extractor's
    speed): the result equals the validated model, and what the validators fix or refuse they still do."""
    def either(make):
        try:
            return make()
        except ValueError as exc:   # pydantic's ValidationError is one
            return type(exc).__name__
    assert either(lambda: entity_of(name, kind, "A mathematician.")) == \
        either(lambda: Entity(name=name, type=kind, description="A mathematician."))
    for strength in (7.5, 10.0, 12.0, -1.0, 3):
        made = either(lambda: relation_of(name, "Babbage", "worked with", "They met.", strength))
        assert made == either(lambda: Relation(source=name, target="Babbage", keywords="worked with",
                                               description="They met.", strength=strength))
        if not isinstance(made, str):
            validated = Relation(source=name, target="Babbage", keywords="worked with", description="They met.",
                                 strength=strength)
            _same_model(made, validated)
    made = either(lambda: entity_of(name, kind, "A mathematician."))
    if not isinstance(made, str):
        _same_model(made, Entity(name=name, type=kind, description="A mathematician."))


def _same_model(made, validated) -> None:
    """Everything pydantic keeps of a model, and what the pipeline does with one (dump, copy, pickle, compare)."""
    assert type(made) is type(validated) and made == validated
    assert made.model_dump_json() == validated.model_dump_json() and made.model_dump() == validated.model_dump()
    assert made.model_fields_set == validated.model_fields_set
    assert made.__pydantic_extra__ == validated.__pydantic_extra__
    assert made.__pydantic_private__ == validated.__pydantic_private__
    assert made.model_copy() == validated and pickle.loads(pickle.dumps(made)) == validated
    assert ChunkExtraction(entities=[made] if isinstance(made, Entity) else [],
                           relations=[made] if isinstance(made, Relation) else []).model_dump_json() == \
        ChunkExtraction(entities=[validated] if isinstance(made, Entity) else [],
                        relations=[validated] if isinstance(made, Relation) else []).model_dump_json()


def test_summariser_asks_for_one_description_and_counts_usage(openai_server: FakeOpenAIServer) -> None:
    openai_server.script_chat(["Ada Lovelace was a mathematician who wrote the first program."])
    summarise = LLMSummariser(make_client(openai_server), max_tokens=100)

    summary = summarise("entity", "Ada Lovelace", ["Ada was a mathematician.", "Ada wrote the first program."])

    assert summary.startswith("Ada Lovelace was")
    prompt = openai_server.requests_for("chat")[0].body["messages"][-1]["content"]
    assert "Ada wrote the first program." in prompt and "Ada Lovelace" in prompt
    assert summarise.usage.calls == 1 and summarise.summaries == 1
