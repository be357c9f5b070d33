"""`pathrag bench concurrency` on a tiny dataset: every ask answers, every query is logged (spool included)."""

from __future__ import annotations

import json

import pytest

from pathrag_lab.bench.concurrency import markdown_section, run_concurrency_bench


@pytest.mark.slow   # some 20 s of subprocesses: a benchmark, outside the default test run
def test_concurrency_bench_runs_asks_at_once_and_logs_every_query(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    passages = [{"id": "p1", "title": "Valmere University", "text": "Valmere University was founded by Ada Halden."},
                {"id": "p2", "title": "Ada Halden", "text": "Ada Halden was born in Port Aster in 1820."}]
    (data / "corpus.jsonl").write_text("\n".join(json.dumps(p) for p in passages) + "\n")
    (data / "triples.jsonl").write_text("\n".join(json.dumps(t) for t in [
        {"doc_id": "p1", "subject": "Valmere University", "predicate": "founded by", "object": "Ada Halden"},
        {"doc_id": "p2", "subject": "Ada Halden", "predicate": "born in", "object": "Port Aster"}]) + "\n")
    (data / "questions.jsonl").write_text(json.dumps({"id": "q1", "question": "Where was the founder of Valmere "
                                                      "University born?", "answers": ["Port Aster"]}) + "\n")

    result = run_concurrency_bench(asks=3, single=1, dataset=data, workdir=tmp_path / "work")

    for config in ("standalone", "service", "http"):
        c = result[config]
        for wave in ("idle", "indexing"):
            assert c["waves"][wave]["asks"] == 3 and c["waves"][wave]["failed"] == 0
        assert c["waves"]["indexing"]["index_runs"] >= 1
        assert c["client_cpu_s"] > 0
    # the standalone asks never reach a service; every served one does (the service counts what it answered),
    # whether a `pathrag ask` process or an HTTP request sent it
    assert result["standalone"]["service_cpu_s"] == 0
    assert result["service_answered"] == 2 * (1 + 2 * 3)
    assert result["queries_logged"] == result["queries_expected"] == 3 * (1 + 2 * 3)
    section = markdown_section(result)
    assert section.startswith("## Concurrent asks") and "| `pathrag ask`, standalone | no index running | 3 |" in section
    assert "| `pathrag ask` through `pathrag serve` | `pathrag index` running throughout | 3 |" in section
    assert "| `POST /ask` to `pathrag serve` | no index running | 3 |" in section
