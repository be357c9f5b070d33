"""Aliases are a function of the current records (issue 23): after any sequence of adds, edits, deletes and
renames, the alias table, the graph and the vectors' keys and texts equal a fresh build's of the same folder."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.pipeline import run_indexing
from pathrag_pipeline.storage.store import Store

SNAPSHOT_SQL = {
    "entities": "SELECT * EXCLUDE (updated_at) FROM entities ORDER BY entity_key",
    "relations": "SELECT * EXCLUDE (updated_at) FROM relations ORDER BY relation_key",
    "entity_aliases": "SELECT alias_key, canonical_key, method, round(score, 9), disabled FROM entity_aliases "
                      "ORDER BY alias_key",
    "entity_names": "SELECT * FROM entity_names ORDER BY ALL",
}


def snapshot(home: Path) -> dict[str, list]:
    import lancedb

    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        out = {name: con.execute(sql).fetchall() for name, sql in SNAPSHOT_SQL.items()}
    db = lancedb.connect(str(home / "lancedb"))
    for name in ("entities", "relations", "chunks"):   # every key with the text its vector embeds
        table = db.open_table(name).to_arrow()
        out[f"lancedb {name}"] = sorted(zip(table.column("key").to_pylist(), table.column("text").to_pylist()))
    return out


def assert_same(incremental: dict, fresh: dict, context: str) -> None:
    for name in fresh:
        assert incremental[name] == fresh[name], f"{name} differs from a fresh build after {context}"


JOHN = "John Smith founded the Harbor Institute in Boston in 1990. Later, J. Smith wrote a history of it.\n"
JANE = "Jane Smith directed the Lakeside Museum in Chicago. Jane Smith also taught at the Lakeside Academy.\n"


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def smiths(home: Path) -> list[str]:
    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        return [k for (k,) in con.execute("SELECT entity_key FROM entities WHERE entity_key IN "
                                          "('j smith', 'john smith', 'jane smith') ORDER BY 1").fetchall()]


@pytest.mark.e2e   # several full index runs: end to end, run by .ci/run (pytest -m e2e)
def test_j_smith_comes_apart_from_john_smith_when_jane_smith_arrives(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "john.txt").write_text(JOHN)
    home = tmp_path / "home"
    monkeypatch.setenv("PATHRAG_HOME", str(home))
    _cli("index", str(docs))
    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        assert con.execute("SELECT alias_key, canonical_key FROM entity_aliases").fetchall() == [
            ("john smith", "j smith")]            # one expansion only: merged
    assert smiths(home) == ["j smith"]

    (docs / "jane.txt").write_text(JANE)
    output = _cli("index", str(docs))
    assert "1 undone" in output
    assert smiths(home) == ["j smith", "jane smith", "john smith"]

    fresh = tmp_path / "fresh"
    monkeypatch.setenv("PATHRAG_HOME", str(fresh))
    _cli("index", str(docs))
    assert_same(snapshot(home), snapshot(fresh), "adding jane.txt")

    monkeypatch.setenv("PATHRAG_HOME", str(home))    # Jane's evidence deleted: the merge comes back
    (docs / "jane.txt").unlink()
    _cli("index", str(docs))
    assert smiths(home) == ["j smith"]


# ---- random histories ----------------------------------------------------------------------------------

SENTENCES = [
    "John Smith founded the Harbor Institute in Boston.",
    "J. Smith wrote a history of the Harbor Institute.",
    "Jane Smith directed the Lakeside Museum in Chicago.",
    "IBM opened a laboratory in Zurich.",
    "I.B.M. hired Jane Smith as an engineer.",
    "The University of Copenhagen awarded John Smith a prize.",
    "Copenhagen University hosted a conference in Paris.",
    "PARIS welcomed the delegates of the Lakeside Museum.",
    "Paris is the capital of France.",
    "J. Smith lectured at the Copenhagen University.",
    "Massachusetts Institute of Technology collaborated with IBM.",
    "Massachusets Institute of Technology published the report.",
]


def _write(path: Path, rng: random.Random) -> None:
    title = rng.choice(["Notes", "Report", "Memo", "Letter"])
    body = " ".join(rng.sample(SENTENCES, rng.randint(1, 4)))
    path.write_text(f"{title} {rng.randint(1, 999)}\n\n{body}\n")


def _step(docs: Path, rng: random.Random, serial: list[int]) -> str:
    files = sorted(docs.iterdir())
    # never the last file: an empty folder is refused (home_folder), which is not what this test is about
    action = rng.choice(["add", "add", "edit", "delete", "rename"] if len(files) > 1 else ["add", "edit"]) \
        if files else "add"
    if action == "add":
        serial[0] += 1
        path = docs / f"doc{serial[0]}.txt"
        _write(path, rng)
    else:
        path = rng.choice(files)
        if action == "edit":
            _write(path, rng)
        elif action == "delete":
            path.unlink()
        else:
            serial[0] += 1
            path.rename(docs / f"doc{serial[0]}.txt")
    return f"{action} {path.name}"


def _history(tmp_path: Path, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    docs = tmp_path / "docs"
    docs.mkdir()
    home = tmp_path / "home"
    history, serial = [], [0]
    for _ in range(steps):
        history.append(_step(docs, rng, serial))
        run_indexing(Settings.from_env({"PATHRAG_HOME": str(home)}), folder=docs)
        fresh = tmp_path / "fresh"
        shutil.rmtree(fresh, ignore_errors=True)
        run_indexing(Settings.from_env({"PATHRAG_HOME": str(fresh)}), folder=docs)
        assert_same(snapshot(home), snapshot(fresh), f"seed {seed}: {'; '.join(history)}")


@pytest.mark.e2e   # a long random history: end to end, run by .ci/run (pytest -m e2e)
def test_a_random_history_of_changes_ends_as_a_fresh_build(tmp_path):
    _history(tmp_path, seed=3, steps=8)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 16))
def test_many_random_histories_end_as_fresh_builds(tmp_path, seed):
    _history(tmp_path, seed=seed, steps=12)


def test_a_home_made_before_entity_names_rebuilds_it_from_its_records(tmp_path):
    """ensure_names: a table never built whole (or under other name-key rules) is rebuilt from the stored records
    and equals what write_records kept up to date."""
    from pathrag_pipeline.index.mention_index import MENTIONS_META, raw_entities

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "john.txt").write_text(JOHN)
    (docs / "jane.txt").write_text(JANE)
    home = tmp_path / "home"
    run_indexing(Settings.from_env({"PATHRAG_HOME": str(home)}), folder=docs)
    with Store(home / "pathrag.duckdb").connect() as con:
        kept = con.execute(SNAPSHOT_SQL["entity_names"]).fetchall()
        expected = raw_entities(con)
        con.execute("DELETE FROM entity_names WHERE chunk_id IN (SELECT min(chunk_id) FROM entity_names)")
        con.execute("DELETE FROM pathrag_meta WHERE key = ?", [MENTIONS_META])     # as before the table existed
        assert raw_entities(con) == expected
        assert con.execute(SNAPSHOT_SQL["entity_names"]).fetchall() == kept and kept
