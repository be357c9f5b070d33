"""`pathrag status --check`: read every stored byte of a home and say which part is damaged and what repairs it.

Three stores make a home: the DuckDB file (every table read row by row, so DuckDB verifies each block's checksum),
the LanceDB vector tables (every fragment of every table scanned) and the Dagster storage under ``dagster/``
(SQLite files, ``PRAGMA quick_check``). Reading all of it costs a full scan of each, which is why it is a flag of
`status` and not part of every command. Each part is reported with one line: what was read, or the first line
of the error and the command that repairs it. The repairs are the ones that exist today: the vector tables are
rebuilt from DuckDB by `pathrag index --reembed`; the Dagster storage is made anew by the next run once the
damaged one is moved aside (its run history is lost, the index is kept); a damaged DuckDB file is rebuilt by
indexing the folder into a fresh file (the offline extractor is free; an LLM-built home's extractions and summaries
come back from its paid-work log, ``storage/paid_work.py``, with no LLM call). `pathrag status --check --repair` (cli/inspect.py) applies
them itself, moving a damaged file or folder aside rather than deleting it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathrag_pipeline.storage.store import close_kept_reads, is_lock_error
from pathrag_pipeline.storage.vector_sums import verify as verify_sums

BATCH_ROWS = 65_536


@dataclass(frozen=True)
class PartCheck:
    """One stored part of a home and what reading it all found."""

    part: str             # "duckdb", "lancedb", "dagster"
    name: str             # the file or table
    ok: bool
    detail: str           # rows read, or the error's first line
    repair: str = ""      # the command or step that repairs it, when damaged

    def line(self) -> str:
        state = "ok" if self.ok else "DAMAGED"
        text = f"{self.part} {self.name}: {state}, {self.detail}"
        return text + (f"; repair: {self.repair}" if self.repair else "")


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"


def check_duckdb(path: Path, folder: str) -> list[PartCheck]:
    """Every table of the DuckDB file read in full (read-only)."""
    import duckdb

    repair = (f"move {path} aside and index the folder into a fresh file: `pathrag index {folder}` (no LLM call: "
              "an LLM-built index reads its paid results back from paid_work.jsonl)")
    if not path.exists():
        return [PartCheck("duckdb", path.name, False, "missing", f"`pathrag index {folder}`")]
    close_kept_reads(path)   # a query of this process may keep it open with other settings
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        if is_lock_error(exc):
            return [PartCheck("duckdb", path.name, True, "not checked: another process writes it now; check again "
                              "after it")]
        return [PartCheck("duckdb", path.name, False, _first_line(exc), repair)]
    out: list[PartCheck] = []
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY table_name").fetchall()]
        for table in tables:
            rows = 0
            try:
                reader = con.sql(f'SELECT * FROM "{table}"').to_arrow_reader(BATCH_ROWS)
                for batch in reader:
                    rows += batch.num_rows
            except Exception as exc:  # noqa: BLE001 - DuckDB's error, or pyarrow's wrapping of it while streaming
                out.append(PartCheck("duckdb", f"{path.name} table {table}", False, _first_line(exc), repair))
                continue
            out.append(PartCheck("duckdb", f"{path.name} table {table}", True, f"{rows} rows read"))
    except duckdb.Error as exc:
        out.append(PartCheck("duckdb", path.name, False, _first_line(exc), repair))
    finally:
        con.close()
    return out


def check_lancedb(location: Any, folder: str) -> list[PartCheck]:
    """Every fragment of every vector table scanned; ``location`` is a storage.vector_location.VectorLocation."""
    repair = f"`pathrag index --reembed {folder}` (rebuilds every vector table from DuckDB; no LLM call)"
    if not location.exists():
        return [PartCheck("lancedb", str(location), True, "no vector tables yet")]
    try:
        db = location.connect()
        names = sorted(db.list_tables().tables)
    except Exception as exc:  # noqa: BLE001 - any failure to list is the damage to report
        return [PartCheck("lancedb", str(location), False, _first_line(exc), repair)]
    out: list[PartCheck] = []
    for name in names:
        rows = 0
        try:
            for batch in db.open_table(name).search().limit(None).to_batches(BATCH_ROWS):
                rows += batch.num_rows
        except Exception as exc:  # noqa: BLE001 - a table that cannot be read whole is damaged, whatever raised
            out.append(PartCheck("lancedb", f"table {name}", False, _first_line(exc), repair))
            continue
        out.append(PartCheck("lancedb", f"table {name}", True, f"{rows} rows read"))
    if location.is_local:   # bytes changed in place read back without an error: their sums say it (vector_sums)
        for name in verify_sums(location.path):
            out.append(PartCheck("lancedb", f"file {name}", False,
                                 "its bytes changed since an index run wrote it (sha256 differs)", repair))
    return out


def check_dagster(dagster_home: Path) -> list[PartCheck]:
    """Each SQLite file of the Dagster storage, by ``PRAGMA quick_check``."""
    repair = (f"move {dagster_home} aside: the next run makes a new one (its run history is lost, the index is "
              "kept)")
    files = sorted(dagster_home.rglob("*.db")) if dagster_home.is_dir() else []
    if not files:
        return [PartCheck("dagster", str(dagster_home), True, "no run storage yet")]
    out: list[PartCheck] = []
    for db in files:
        name = str(db.relative_to(dagster_home))
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                result = con.execute("PRAGMA quick_check").fetchall()
            finally:
                con.close()
        except sqlite3.Error as exc:
            out.append(PartCheck("dagster", name, False, _first_line(exc), repair))
            continue
        verdict = "; ".join(str(r[0]) for r in result[:3])
        out.append(PartCheck("dagster", name, verdict == "ok", "readable" if verdict == "ok" else verdict,
                             "" if verdict == "ok" else repair))
    return out


def check_home(store_path: Path, location: Any, dagster_home: Path, folder: str) -> list[PartCheck]:
    """Every part of a home, read in full; ``folder`` names the home's folder in the repair commands."""
    return [*check_duckdb(store_path, folder), *check_lancedb(location, folder), *check_dagster(dagster_home)]
