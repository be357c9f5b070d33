"""Extraction runs against servers and models like the ones people run locally (issue 11), and llm_usage
written as calls are made (issue 10 item 6), over a real ingest, DuckDB and the test server."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest

from pathrag_pipeline.index.extraction_stage import run_extraction
from pathrag_pipeline.index.llm_extraction import LLMExtractor
from pathrag_pipeline.index.pipeline import count_graph
from pathrag_pipeline.llm.client import LLMError, LLMStoppedError, LLMUnsupportedModeError
from pathrag_lab.testing.openai_server import FakeOpenAIServer, schema_echo
from tests.extraction_fakes import Corpus, FakeExtractionModel, chunk_text_of, make_client, names_in

DOCS = {
    "ada.txt": "Ada Lovelace wrote long notes about the Analytical Engine of Charles Babbage while living in London. "
               "Her notes were published in Taylor's Scientific Memoirs and read at the Royal Society years later.",
    "alan.txt": "Alan Turing worked at Bletchley Park near Milton Keynes during the war and later moved to Manchester. "
                "There he wrote about the Imitation Game and built programs for the Ferranti Mark machine.",
    "grace.txt": "Grace Hopper built the first Compiler for the Navy and later worked in Arlington on Cobol standards. "
                 "She taught at Vassar College before the war and retired from the Navy as a Rear Admiral.",
}


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    corpus = Corpus(tmp_path)
    for name, text in DOCS.items():
        corpus.write(name, text)
    corpus.sync()
    return corpus


def extractor_for(server: FakeOpenAIServer, responder: Any, gleaning: int = 0, **options: Any) -> LLMExtractor:
    server.chat_responder = responder
    return LLMExtractor(make_client(server, **options), gleaning=gleaning)


def statuses(corpus: Corpus) -> dict[str, int]:
    return dict(corpus.query("SELECT status, count(*) FROM extractions GROUP BY status"))


# ---- 11.1 a cut answer splits the chunk -------------------------------------------------------------

def test_answer_cut_at_the_cap_splits_the_chunk_instead_of_storing_it(corpus: Corpus,
                                                                      openai_server: FakeOpenAIServer) -> None:
    """The model's answer for a whole chunk runs past max_tokens (finish_reason length); each half fits."""
    model = FakeExtractionModel()
    whole = set(DOCS.values())

    def responder(request: dict[str, Any]) -> str:
        if chunk_text_of(request).strip() in whole:
            return json.dumps({"entities": [{"name": f"Padding {i}", "description": "x " * 5} for i in range(80)]})
        return model(request)

    extractor = extractor_for(openai_server, responder, max_tokens={"extract": 300})
    stats = run_extraction(corpus.store, extractor)

    assert (stats.extracted, stats.failed) == (len(DOCS), 0), stats.errors
    names = {r[0] for r in corpus.query("SELECT name FROM entities")}
    assert not any(n.startswith("Padding") for n in names)  # the cut answer was not used
    assert {n for text in DOCS.values() for n in names_in(text)} <= names  # both halves were extracted
    cut = [r for r in openai_server.requests_for("chat") if chunk_text_of(r.body).strip() in whole]
    assert len(cut) == len(DOCS)  # each cut answer asked once, not re-asked
    assert all(r.body["max_tokens"] == 300 for r in openai_server.requests_for("chat"))


# ---- 11.2 a serial server: the run stops soon and says what to set -----------------------------------

@pytest.mark.e2e
def test_serial_server_slower_than_the_timeout_stops_the_run_with_advice(corpus: Corpus,
                                                                         openai_server: FakeOpenAIServer) -> None:
    for i in range(9):
        corpus.write(f"extra-{i}.txt", f"Extra Document number {i} mentions Somewhere and Elsewhere in Avalon today.")
    corpus.sync()
    openai_server.serial = True
    openai_server.response_delay = 0.7
    extractor = extractor_for(openai_server, FakeExtractionModel(), max_concurrency=4, max_retries=3, timeout=0.4)

    with pytest.raises(LLMStoppedError) as info:
        run_extraction(corpus.store, extractor, max_concurrency=4)

    message = str(info.value)
    assert "PATHRAG_LLM_MAX_CONCURRENCY=1" in message and "run again" in message
    assert openai_server.count("chat") < 12 * 4  # far from every chunk times every attempt
    usage = corpus.query("SELECT calls FROM llm_usage WHERE stage = 'extract'")
    assert usage and 0 < usage[0][0] <= openai_server.count("chat")


def test_when_every_call_hangs_the_run_gives_up_after_a_few_requests(corpus: Corpus,
                                                                   openai_server: FakeOpenAIServer) -> None:
    """Not chunks x attempts: the first wave of timeouts stops the client, the rest is never sent."""
    for i in range(9):
        corpus.write(f"extra-{i}.txt", f"Extra Document number {i} mentions Somewhere and Elsewhere in Avalon today.")
    corpus.sync()
    openai_server.inject("timeout", times=1000)
    extractor = extractor_for(openai_server, FakeExtractionModel(), max_concurrency=4, max_retries=2, timeout=0.4)

    with pytest.raises(LLMStoppedError, match="PATHRAG_LLM_TIMEOUT"):
        run_extraction(corpus.store, extractor, max_concurrency=4)

    assert openai_server.count("chat") <= 2 * 4  # 12 chunks x 3 attempts would be 36
    assert corpus.query("SELECT count(*) FROM extractions WHERE status = 'ok'")[0][0] == 0


# ---- 11.3 unsupported response_format ------------------------------------------------------------

def test_rejected_mode_stops_the_run_after_one_request(corpus: Corpus, openai_server: FakeOpenAIServer) -> None:
    openai_server.unsupported_formats = {"json_schema"}
    extractor = extractor_for(openai_server, FakeExtractionModel(), mode="json_schema", max_retries=3)

    with pytest.raises(LLMUnsupportedModeError, match="PATHRAG_LLM_MODE=json"):
        run_extraction(corpus.store, extractor, max_concurrency=1)
    assert openai_server.count("chat") == 1


# ---- 11.4 empty but valid output ----------------------------------------------------------------

def test_empty_extraction_is_reasked_once_then_recorded_empty(corpus: Corpus, openai_server: FakeOpenAIServer) -> None:
    extractor = extractor_for(openai_server, lambda request: '{"entities": [], "relations": []}')

    stats = run_extraction(corpus.store, extractor)

    assert (stats.empty, stats.extracted, stats.failed) == (len(DOCS), 0, 0)
    assert openai_server.count("chat") == 2 * len(DOCS)  # first answer + one re-ask each
    assert statuses(corpus) == {"empty": len(DOCS)}
    errors = [r[0] for r in corpus.query("SELECT error FROM extractions")]
    assert all("no entities and no relations" in e for e in errors)
    # the hint names the other modes, never the one in use (issue 27: "try md_json or json" while in json)
    assert all("PATHRAG_LLM_MODE=md_json or tools (now json)" in e for e in errors)
    assert corpus.query("SELECT failed FROM llm_usage")[0][0] == len(DOCS)

    # Retried on the next run; a model that now answers turns them ok.
    openai_server.chat_responder = FakeExtractionModel()
    again = run_extraction(corpus.store, extractor)
    assert (again.pending, again.extracted, again.empty) == (len(DOCS), len(DOCS), 0)
    assert statuses(corpus) == {"ok": len(DOCS)}


@pytest.mark.parametrize("mode", ["json", "md_json"])
def test_schema_echo_is_never_stored_as_an_ok_extraction(corpus: Corpus, openai_server: FakeOpenAIServer,
                                                          mode: str) -> None:
    extractor = extractor_for(openai_server, schema_echo, mode=mode)

    stats = run_extraction(corpus.store, extractor)

    assert stats.extracted == 0 and stats.failed + stats.empty == len(DOCS)
    assert "ok" not in statuses(corpus)
    assert any("repeated the JSON schema" in json.dumps(r.body["messages"]) for r in openai_server.requests)


def test_echo_then_data_is_used(corpus: Corpus, openai_server: FakeOpenAIServer) -> None:
    model = FakeExtractionModel()
    seen: set[str] = set()

    def responder(request: dict[str, Any]) -> str:
        text = chunk_text_of(request)
        if text not in seen:
            seen.add(text)
            return schema_echo(request)
        return model(request)

    stats = run_extraction(corpus.store, extractor_for(openai_server, responder))
    assert (stats.extracted, stats.failed, stats.empty) == (len(DOCS), 0, 0)


# ---- 11.5 names that are not names --------------------------------------------------------------

def test_validator_urls_and_markup_never_become_entities(corpus: Corpus, openai_server: FakeOpenAIServer) -> None:
    model = FakeExtractionModel()
    junk = ["https://errors.pydantic.dev/2.14/v/value_error", "<entity>Ada</entity>", "[/home]",
            "Value error, entity name must not be empty " * 4]

    def responder(request: dict[str, Any]) -> str:
        good = json.loads(model(request))
        good["entities"] += [{"name": n, "type": "other"} for n in junk]
        good["relations"].append({"source": junk[0], "target": good["entities"][0]["name"]})
        return json.dumps(good)

    run_extraction(corpus.store, extractor_for(openai_server, responder))

    names = {r[0] for r in corpus.query("SELECT name FROM entities")}
    assert {n for text in DOCS.values() for n in names_in(text)} <= names
    assert not any("pydantic" in n or "<" in n or "[" in n or "Value error" in n for n in names)
    stored = json.dumps([r[0] for r in corpus.query("SELECT result FROM extractions")])
    assert "errors.pydantic.dev" not in stored


# ---- 11.6 relations without entities ------------------------------------------------------------

def test_entities_named_only_by_relations_are_described_from_them(corpus: Corpus,
                                                                  openai_server: FakeOpenAIServer) -> None:
    model = FakeExtractionModel()

    def relations_only(request: dict[str, Any]) -> str:
        answer = json.loads(model(request))
        answer["entities"] = []
        answer["relations"].append({"source": "Nameless", "target": "Faceless"})  # no description either
        return json.dumps(answer)

    run_extraction(corpus.store, extractor_for(openai_server, relations_only))

    described = dict(corpus.query("SELECT name, description FROM entities"))
    ada = names_in(DOCS["ada.txt"])
    assert f"{ada[0]} is near {ada[1]}." in described[ada[0]]
    with corpus.store.connect(read_only=True) as con:
        counts = count_graph(con)
    assert counts["entities_without_description"] == 2  # Nameless and Faceless
    assert counts["entities_without_description"] == sum(1 for d in described.values() if not d)


# ---- 11.7 one line per failed chunk -------------------------------------------------------------

def test_a_failing_chunk_logs_one_warning_line(corpus: Corpus, openai_server: FakeOpenAIServer,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    extractor = extractor_for(openai_server, FakeExtractionModel(poison={"Babbage"}), validation_retries=2)
    stats = run_extraction(corpus.store, extractor)

    assert stats.failed == 1
    # sqlalchemy: an earlier test's Dagster (SQLite) connection finalised by the garbage collector during this one
    # logs an error from another thread (seen once in CI); it is not a line this extraction wrote
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING
             and not r.name.startswith(("instructor", "sqlalchemy"))]
    assert len(lines) == 1 and "failed" in lines[0].getMessage()


# ---- 10.6 llm_usage is written as calls are made ---------------------------------------------------

def test_calls_are_in_llm_usage_while_the_run_is_still_going(corpus: Corpus, openai_server: FakeOpenAIServer) -> None:
    """The last chunk's call hangs until released: before that, the calls already made are in llm_usage
    (a run killed at that point would leave them there)."""
    model = FakeExtractionModel()
    release = threading.Event()
    last = DOCS["grace.txt"]

    def responder(request: dict[str, Any]) -> str:
        if chunk_text_of(request).strip() == last:
            release.wait(30)
        return model(request)

    extractor = extractor_for(openai_server, responder, timeout=60)
    runner = threading.Thread(target=run_extraction, args=(corpus.store, extractor),
                              kwargs={"max_concurrency": 1, "min_flush_seconds": 0, "write_share": None})
    runner.start()
    try:
        calls = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and calls < 2:
            rows = corpus.query("SELECT calls FROM llm_usage WHERE stage = 'extract'")
            calls = rows[0][0] if rows else 0
            time.sleep(0.1)
        assert calls == 2  # the two finished chunks' calls, recorded before the run ended
        assert corpus.query("SELECT count(*) FROM extractions")[0][0] == 0  # records still wait for a batch
    finally:
        release.set()
        runner.join(timeout=30)
    assert corpus.query("SELECT calls FROM llm_usage WHERE stage = 'extract'") == [(openai_server.count("chat"),)]


def test_summary_calls_are_in_llm_usage_while_summaries_are_still_being_made(
        corpus: Corpus, openai_server: FakeOpenAIServer) -> None:
    """The third description-summary call hangs until released: before that, the two summary calls already
    made are in the 'summarise' row of llm_usage (a run killed at that point would leave them there)."""
    model = FakeExtractionModel()
    release = threading.Event()
    seen = []

    def responder(request: dict[str, Any]) -> str:
        if "Description list:" in str(request["messages"][-1].get("content")):
            seen.append(1)
            if len(seen) == 3:
                release.wait(30)
        return model(request)

    extractor = extractor_for(openai_server, responder, timeout=60)
    runner = threading.Thread(target=run_extraction, args=(corpus.store, extractor),
                              kwargs={"max_concurrency": 1, "min_flush_seconds": 0, "write_share": None, "max_description_tokens": 3})
    runner.start()
    try:
        calls = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and calls < 2:
            rows = corpus.query("SELECT calls FROM llm_usage WHERE stage = 'summarise'")
            calls = rows[0][0] if rows else 0
            time.sleep(0.1)
        assert calls == 2 and len(seen) == 3    # recorded while the third call still hangs
    finally:
        release.set()
        runner.join(timeout=30)
    assert model.summaries > 3
    assert corpus.query("SELECT calls, items FROM llm_usage WHERE stage = 'summarise'") == [
        (model.summaries, model.summaries)]


# ---- issue 27 item 5: partial chunks are kept, a chunk that keeps failing is left alone ------------------

def test_split_parts_that_succeed_are_kept_and_the_record_says_partial(corpus: Corpus,
                                                                       openai_server: FakeOpenAIServer) -> None:
    """The whole chunk's answer runs past the cap; after the split, the half naming Babbage is still cut at
    every depth while the other half extracts: the chunk keeps the other half's entities, marked partial."""
    model = FakeExtractionModel()
    runaway = json.dumps({"entities": [{"name": f"Padding {i}", "description": "x " * 5} for i in range(80)]})

    def responder(request: dict[str, Any]) -> str:
        text = chunk_text_of(request).strip()
        return runaway if text in set(DOCS.values()) or "Babbage" in text else model(request)

    stats = run_extraction(corpus.store, extractor_for(openai_server, responder, max_tokens={"extract": 300}))

    assert (stats.extracted, stats.failed) == (len(DOCS), 0), stats.errors
    status, error = corpus.query("SELECT e.status, e.error FROM extractions e JOIN chunks c ON c.id = e.chunk_id "
                                 "WHERE c.text LIKE '%Babbage%'")[0]
    assert status == "ok" and error.startswith("partial: 1 split part(s)")
    names = {r[0] for r in corpus.query("SELECT name FROM entities")}
    assert "Royal Society" in names or "Taylor" in " ".join(names)   # the half that extracted is in the graph
    assert not any(n.startswith("Padding") for n in names)


@pytest.mark.e2e
def test_a_chunk_failing_three_runs_in_a_row_is_left_alone_until_retry_failed_or_new_settings(
        corpus: Corpus, openai_server: FakeOpenAIServer) -> None:
    model = FakeExtractionModel(poison={"Babbage"})   # the Ada chunk's answer is never JSON
    extractor = extractor_for(openai_server, model, validation_retries=0)
    for run in range(1, 4):
        before = openai_server.count("chat")
        stats = run_extraction(corpus.store, extractor)
        # the first run extracts every chunk; the next two retry only the failing one
        assert stats.failed == 1 and openai_server.count("chat") - before == (len(DOCS) if run == 1 else 1), run
        assert corpus.query("SELECT failed_runs FROM extractions WHERE status = 'failed'")[0][0] == run

    before = openai_server.count("chat")
    stats = run_extraction(corpus.store, extractor)   # the fourth run leaves it alone
    assert (stats.pending, stats.given_up, openai_server.count("chat") - before) == (0, 1, 0)

    # another output cap is another chance; so is --retry-failed
    other = extractor_for(openai_server, model, validation_retries=0, max_tokens={"extract": 2000})
    before = openai_server.count("chat")
    assert run_extraction(corpus.store, other).pending == 1 and openai_server.count("chat") - before == 1
    before = openai_server.count("chat")
    model.poison.clear()
    stats = run_extraction(corpus.store, extractor, retry_failed=True)
    assert (stats.pending, stats.extracted, openai_server.count("chat") - before) == (1, 1, 1)
    assert statuses(corpus) == {"ok": len(DOCS)}
    assert corpus.query("SELECT count(*) FROM extractions WHERE failed_runs IS NOT NULL")[0][0] == 0


@pytest.mark.e2e
def test_an_unreachable_endpoint_does_not_count_against_the_chunk(corpus: Corpus,
                                                                  openai_server: FakeOpenAIServer) -> None:
    extractor = extractor_for(openai_server, FakeExtractionModel(), max_retries=0)
    for _ in range(4):   # four runs against a server answering 503: not the chunks' fault
        openai_server.clear_faults()
        openai_server.inject("503", times=len(DOCS))
        try:
            run_extraction(corpus.store, extractor)
        except LLMError:
            pass   # the run may stop on an unavailable endpoint; the records written stand
    counts = corpus.query("SELECT status, failed_runs FROM extractions")
    assert counts and all(status == "failed" and runs == 0 for status, runs in counts)
    openai_server.clear_faults()
    stats = run_extraction(corpus.store, extractor)
    assert (stats.pending, stats.extracted) == (len(DOCS), len(DOCS))
