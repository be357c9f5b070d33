"""Extraction fanned out over worker processes (assets/fanout.py) writes the same tables as one process."""

from __future__ import annotations

import dagster as dg
import pytest

from pathrag_lab.bench.fanout import TABLES  # what "the same tables" means, as the benchmark checks it
from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.extraction_shards import plan_shards
from pathrag_pipeline.index.extraction_stage import run_extraction
from pathrag_pipeline.index.llm_extraction import extractor_from_settings
from tests.extraction_fakes import Corpus, FakeExtractionModel

DOCS = {
    f"doc{i}.txt": f"Person{i} Halden founded the Institute{i} in City{i % 3} with Partner{(i + 1) % 8} Morrow."
    for i in range(8)
}


def corpus_at(root) -> Corpus:
    corpus = Corpus(root)
    for name, text in DOCS.items():
        corpus.write(name, text)
    corpus.sync()
    return corpus


def tables(corpus: Corpus) -> dict[str, list[tuple]]:
    return {name: corpus.query(sql) for name, sql in TABLES.items()}


@pytest.fixture()
def setup(tmp_path, monkeypatch, openai_server):
    """One corpus extracted by one process (the reference) and a second, identical one left to the fan-out job;
    PATHRAG_* point the job's resource (and its worker processes, which inherit the environment) at the second."""
    openai_server.chat_responder = FakeExtractionModel()
    single, fanned = corpus_at(tmp_path / "single"), corpus_at(tmp_path / "fanned")
    monkeypatch.setenv("PATHRAG_HOME", str(fanned.settings.home))
    monkeypatch.setenv("PATHRAG_DOCS", str(fanned.docs))
    monkeypatch.setenv("PATHRAG_LLM_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PATHRAG_LLM_MODEL", "fake-chat")
    monkeypatch.setenv("PATHRAG_LLM_API_KEY", "test-key")
    settings = Settings.from_env()
    extractor = extractor_from_settings(settings, gleaning=settings.gleaning)
    assert extractor.identity.startswith("llm:")
    run_extraction(single.store, extractor)
    calls_single = openai_server.count("chat")
    openai_server.reset()
    openai_server.chat_responder = FakeExtractionModel()
    return single, fanned, calls_single


def test_shards_cover_every_pending_text_once(tmp_path):
    corpus = corpus_at(tmp_path)
    shards = plan_shards(corpus.store, "offline-rules-v2", 3)
    texts = [item.text for shard in shards for item in shard]
    assert len(shards) == 3 and len(texts) == len(set(texts)) == len(DOCS)


def test_fanout_job_writes_the_tables_one_process_writes(setup, openai_server):
    from assets.fanout import fanout_job

    single, fanned, calls_single = setup
    result = fanout_job().execute_in_process(
        instance=dg.DagsterInstance.ephemeral(),
        run_config={"ops": {"plan_extraction_shards": {"config": {"shards": 3}}}})
    assert result.success
    assert openai_server.count("chat") == calls_single  # every text extracted once, in the shard step
    assert tables(fanned) == tables(single)
    written = {m.asset_key.path[-1]: m.metadata for m in result.asset_materializations_for_node("write_extraction_shards")}
    assert set(written) == {"extractions", "entities", "relations"}   # the fan-out's writes are in the lineage
    # with the metadata index_folder's graph asset records (row counts, previews, calls), not a bare event
    assert written["entities"]["dagster/row_count"].value == len(tables(fanned)["entities"])
    assert written["extractions"]["llm_calls"].value > 0 and "preview" in written["relations"]


@pytest.mark.slow
def test_fanout_over_worker_processes_writes_the_tables_one_process_writes(setup, openai_server, tmp_path):
    from assets.fanout import fanout_job

    single, fanned, calls_single = setup
    from pathrag_pipeline.dagster_home import ensure_dagster_yaml

    ensure_dagster_yaml(tmp_path / "dagster")  # the pathrag instance config: the duckdb pool limited to one step
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster")) as instance:
        result = dg.execute_job(
            dg.reconstructable(fanout_job), instance=instance,
            run_config={"ops": {"plan_extraction_shards": {"config": {"shards": 4}}},
                        "execution": {"config": {"multiprocess": {"max_concurrent": 4}}}})
        assert result.success
        meta = [e for e in result.all_events if e.is_successful_output and e.step_key == "write_extraction_shards"]
        [mat] = [e.event_specific_data.metadata for e in meta]
    assert mat["shards"].value == 4 and mat["worker_processes"].value == 4  # each shard in its own process
    assert openai_server.count("chat") == calls_single
    assert tables(fanned) == tables(single)
