"""DuckDB merges row groups at one write in ``MERGE_EVERY_WRITES``, not at every write.

DuckDB's checkpoint (at the close of every write connection) merges row groups that fit in fewer (its
"vacuum", ``max_vacuum_tasks``), in every table of the file: the few rows a small write appended land in a row
group of their own, which the checkpoint folds into the table's last, partly filled row group, compressing and
writing that whole row group again. Its size is an accident of history, anything up to DuckDB's 122,880 rows:
in a 100 MB home the last row group of ``extractions`` held 1,415 rows of ~41 kB of JSON, so the one record of a
one-file edit cost a ~58 MB rewrite (~0.2 s), and the ~10 write connections of an edit about a second in all
(issue 23, measured); had that last row group been the table's first (13,315 rows), the same record would have
cost a ~545 MB rewrite. None of it depends on the change.

So write connections checkpoint with merging off (``max_vacuum_tasks = 0``): a write's rows stay in row groups
of their own and its checkpoint costs what it wrote. Unmerged row groups cost scans a little and keep deleted
rows on disk, so one write in ``MERGE_EVERY_WRITES`` (counted in ``pathrag_meta`` over every process that writes
the file) checkpoints with DuckDB's default, merging what gathered since: that write pays about what each
write paid before (the rewrite of the last row groups), the others nothing, and no table holds more than ~64
row groups of small writes.

A large run (a first build, a batch of new files) writes a few large batches, each leaving row groups of its
own; the write that merges them pays for all of it: after a 100 MB build with merging off, the first merging write
took 13 s of the next one-file edit (the build's ``extractions``, chunks and mention rows rewritten). So an index
stage whose writes logged ``SETTLE_AFTER_BYTES`` or more since its store last merged ends with a merge
(``Store.settle_row_groups``): the large run pays for merging what it wrote, as DuckDB's default made it do, and
the small runs after it start from merged tables. Measured: a 10 MB build's writes logged 379 MiB, a one-file
edit's 0.8-1.5 MiB (at 10 MB and at 100 MB).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

MERGE_EVERY_WRITES = 64
"""One write connection in this many (those that changed something) lets DuckDB merge row groups at its
checkpoint. An index run of one changed file makes ~10 such writes, so about one edit in six merges."""

SETTLE_AFTER_BYTES = 16 << 20
"""An index stage ends with a merge when its store's unmerged writes logged this much (the write-ahead log each
left at its close): DuckDB's own automatic checkpoint threshold (``checkpoint_threshold``), the amount of writing
it considers worth a checkpoint."""

UNMERGED_WRITES_META = "row_groups_unmerged_writes"
"""pathrag_meta key: write connections that changed the file since row groups were last merged."""

_OFF = "SET max_vacuum_tasks = 0"
_DEFAULT = "RESET max_vacuum_tasks"


def merging_off(con: duckdb.DuckDBPyConnection) -> None:
    """At the opening of a write connection: its checkpoints (an automatic one while it writes, the one at close)
    do not merge row groups. A setting of the database, so a connection open at the same time in this process
    (they share it) follows it too."""
    con.execute(_OFF)


def wal_bytes(database: Path) -> int:
    """Bytes in the write-ahead log of ``database``: what the open write connection changed since the last
    checkpoint (0: nothing)."""
    try:
        return os.stat(f"{database}.wal").st_size
    except FileNotFoundError:
        return 0


def before_close(con: duckdb.DuckDBPyConnection, logged: int, *, merge: bool = False) -> bool | None:
    """Before a write connection that ended normally is closed, ``logged`` bytes in its write-ahead log: count it
    if it changed the file, and let DuckDB merge row groups at this checkpoint when it is the
    ``MERGE_EVERY_WRITES``-th, or when ``merge`` (then the count's reset is the change that makes the checkpoint
    run). Returns whether it merges; None when the connection changed nothing (and ``merge`` was not asked)."""
    if not merge and not logged:
        return None
    rows = con.execute("SELECT value FROM pathrag_meta WHERE key = ?", [UNMERGED_WRITES_META]).fetchall()
    try:
        unmerged = int(rows[0][0]) if rows else 0
    except ValueError:
        unmerged = 0
    merge = merge or unmerged + 1 >= MERGE_EVERY_WRITES
    con.execute("INSERT OR REPLACE INTO pathrag_meta VALUES (?, ?)",
                [UNMERGED_WRITES_META, "0" if merge else str(unmerged + 1)])
    if merge:
        con.execute(_DEFAULT)
    return merge
