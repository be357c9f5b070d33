"""No single document or chunk stops the others: a failure in any per-document or per-chunk step (parse,
chunk, extract) is recorded on that document or chunk, and the run goes on (issue 10, item 2)."""

from __future__ import annotations

import pytest

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.offline_extraction import extract_offline, find_candidates
from pathrag_pipeline.index.pipeline import run_indexing
from pathrag_pipeline.storage.store import Store

TURKISH = "İstanbul\n\nİstanbul is a large city.\n"
GOOD = {
    "ada.txt": "Ada Lovelace wrote notes about the Analytical Engine in London.",
    "alan.txt": "Alan Turing worked at Bletchley Park near London during the war.",
}


def test_dotted_capital_i_in_a_known_name_keeps_offsets_right() -> None:
    # 'İ'.lower() is two characters long: offsets of the lowered sentence used to run past the sentence.
    found = find_candidates("İstanbul is a large city.", known_names=("İstanbul",))
    assert [(c.name, c.start, c.end) for c in found][:1] == [("İstanbul", 0, 8)]
    names = {e.name for e in extract_offline(TURKISH, "İstanbul").entities}
    assert "İstanbul" in names


def _index(tmp_path, files: dict[str, str]):
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for name, text in files.items():
        (docs / name).write_text(text, encoding="utf-8")
    settings = Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home"), "PATHRAG_DOCS": str(docs)})
    report = run_indexing(settings, folder=docs)
    store = Store(settings.duckdb_path)
    with store.connect(read_only=True) as con:
        docs_rows = dict(con.execute("SELECT id, status FROM documents").fetchall())
        failed = con.execute("SELECT document_id, error FROM extractions WHERE status = 'failed'").fetchall()
        entities = {r[0] for r in con.execute("SELECT name FROM entities").fetchall()}
    return report, docs_rows, failed, entities


def test_turkish_title_document_indexes_with_the_others(tmp_path) -> None:
    _, docs, failed, entities = _index(tmp_path, {**GOOD, "istanbul.txt": TURKISH})
    assert set(docs.values()) == {"indexed"} and not failed
    assert "İstanbul" in entities and any("Lovelace" in n for n in entities)


@pytest.mark.parametrize("stage", ["parse", "chunk", "extract"])
def test_a_document_raising_inside_a_stage_is_marked_failed_and_the_others_index(tmp_path, monkeypatch, stage) -> None:
    from pathrag_pipeline.index import llm_extraction
    from pathrag_pipeline.ingest import folder_sync

    poison = "Poison Document raises here."

    def boom(*_args, **_kwargs):
        raise RuntimeError("injected failure")

    if stage == "parse":
        real = folder_sync.parse_file
        monkeypatch.setattr(folder_sync, "parse_file",
                            lambda path, rel, **kw: boom() if rel == "poison.txt" else real(path, rel, **kw))
    elif stage == "chunk":
        real = folder_sync.chunk_text
        monkeypatch.setattr(folder_sync, "chunk_text",
                            lambda doc_id, text, **kw: boom() if doc_id == "poison.txt" else real(doc_id, text, **kw))
    else:
        real = llm_extraction.extract_offline
        monkeypatch.setattr(llm_extraction, "extract_offline",
                            lambda text, title=None: boom() if "Poison" in text else real(text, title))

    report, docs, failed, entities = _index(tmp_path, {**GOOD, "poison.txt": poison})

    assert docs["ada.txt"] == docs["alan.txt"] == "indexed"
    assert any("Lovelace" in n for n in entities) and any("Turing" in n for n in entities)
    if stage == "extract":
        assert len(failed) == 1 and failed[0][0] == "poison.txt" and "injected failure" in failed[0][1]
        assert report.extraction.failed == 1
    else:
        assert docs["poison.txt"] == "error"
        assert [r.rel_path for r in report.sync.failed] == ["poison.txt"]
        assert "injected failure" in report.sync.failed[0].errors[0]
