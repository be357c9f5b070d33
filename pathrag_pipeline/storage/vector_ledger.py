"""What the writers of embedded rows owe the embedding stage's ledger (``vector_rows``).

``vector_rows`` holds, per LanceDB table and key, the fingerprint of the row the embedding stage last wrote there
(index/embedding_stage.py). The stage plans an edit's sync from it without fingerprinting every row (issue 23: at
100 MB that was ~0.25 s of every one-file edit, the last corpus-sized step outside the graph merge): it sends the
keys the ledger lacks or holds as stale, and deletes the keys it holds that are gone. That is exact only if no
ledger row outlives a change of its row under the same key, so every code that rewrites an embedded row under a
key marks that key's ledger row stale (``STALE``), in the same transaction:

- the graph merge (``graph_merge._write``), the only writer of ``entities`` and ``relations``, for each row it
  writes (new or changed);
- ``folder_sync.write_chunks``, the only writer of ``chunks``, for each chunk it writes: a chunk id fixes its
  text, but not its document's title, which the chunk's embedded passage starts with.

A stale row is kept, not deleted: were its key deleted from DuckDB before the next sync, the ledger still names
it, so the stage deletes its vector. A relation's embedded text also holds its endpoints' names: the stage
compares the fingerprints of the relations of every entity whose ledger row is missing or stale. Inserted keys
need nothing (the ledger does not hold them) and deleted rows neither (the ledger holds them, the table not).
"""

from __future__ import annotations

import duckdb

STALE = ""
"""The fingerprint of a ledger row whose LanceDB row may be out of date: it matches no row's fingerprint."""


def mark_stale(con: duckdb.DuckDBPyConnection, table: str, keys_sql: str, params: list | None = None) -> None:
    """Mark stale the ledger rows of LanceDB table ``table`` ('entities', 'relations' or 'chunks') whose key is
    one ``keys_sql`` selects (one column): their rows changed, so the next sync sends them."""
    con.execute(f"UPDATE vector_rows SET fingerprint = '{STALE}' WHERE table_name = '{table}' AND key IN ({keys_sql})",
                params or [])
