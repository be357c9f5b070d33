"""`pathrag bench local-extraction`'s run and report, against the scripted server instead of a real model: the
counting proxy forwards every request and counts the server's tokens independently of the client's accounting."""

from __future__ import annotations

from pathrag_lab.bench.local_extraction import CountingProxy, markdown_section, raw_names, run_mode
from pathrag_lab.testing.openai_server import FakeOpenAIServer
from tests.extraction_fakes import FakeExtractionModel


def test_a_run_through_the_counting_proxy_reports_graph_junk_and_matching_tokens(tmp_path,
                                                                                openai_server: FakeOpenAIServer):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Ada Lovelace wrote notes on the Analytical Engine of Charles Babbage in London. "
                                "Her notes were read at the Royal Society.", encoding="utf-8")
    openai_server.chat_responder = FakeExtractionModel()
    proxy = CountingProxy(openai_server.base_url)
    try:
        run = run_mode("fake-chat", "json", docs, tmp_path / "home", proxy)
    finally:
        proxy.close()
    assert run["stopped"] is None and run["chunks"]["ok"] == 1 and run["entities"] > 0
    assert run["usage_tokens"] == run["server_tokens"] and sum(run["server_tokens"]) > 0
    assert run["raw_names"] > 0 and run["stored_junk"] == 0
    report = {"files": ["a.txt"], "settings": {"PATHRAG_LLM_MAX_TOKENS": "1500", "PATHRAG_CHUNK_TOKENS": "600",
                                                "PATHRAG_LLM_MAX_CONCURRENCY": "1", "PATHRAG_GLEANING": "0",
                                                "PATHRAG_LLM_TIMEOUT": "600"},
              "models": {"fake": [run]}, "seconds": 1.0,
              "machine": {"date": "d", "usable_cores": 2, "cpu": "c", "python": "3"}}
    section = markdown_section(report)
    assert "--files a.txt" in section and "equals the server's own count in 1 of 1 runs" in section


def test_raw_names_read_replies_as_the_pipeline_does():
    replies = ['```json\n{"entities": [{"entity_name": "Document Title"}, "Ada"], "relations": []}\n```',
               '{"relationships": [["Ada", "knew", "Babbage"]]}', "not json at all"]
    assert raw_names(replies) == ["Document Title", "Ada", "Ada", "Babbage"]
