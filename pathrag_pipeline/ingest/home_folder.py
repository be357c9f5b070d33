"""The folder a PATHRAG_HOME indexes, and the guard that keeps an index run from emptying the home by mistake.

A home indexes one folder: documents are keyed by their path relative to it, and a sync removes every
document whose file is not in the folder. Indexing another folder into a home, or a folder that is empty or
missing (a disk not mounted, a mistyped path), would therefore delete everything indexed. The sync records
the folder it indexed, absolute and resolved, in ``pathrag_meta`` (key ``docs_folder``); a home made before
the key existed adopts the folder of its next sync. Every entry point plans a sync through the same checks
(``folder_sync.sync_folder`` for the CLI, the Dagster assets, the sensor's and schedule's runs and
``run_indexing``; ``index/pending_work.py`` for the CLI's no-op check, so the CLI refuses before it launches
a run), and they refuse, before anything is written, with one line naming the home, what it holds and what
to do:

- a folder other than the recorded one, while the home holds documents;
- a folder holding no supported file, while the home holds documents the sync would delete;
- a missing folder (always: there is nothing to index).

``replace`` (``pathrag index --replace``, the Dagster run config ``ops.ingest.config.replace``) allows the
first two: the folder is indexed in place of the old one, whose documents not found in it are deleted.
Ordinary deletions (some files removed from the recorded folder) need no flag.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.ingest.parsing import SUPPORTED
from pathrag_pipeline.storage.store import Store, get_meta, set_meta

FOLDER_META = "docs_folder"
"""pathrag_meta key: the absolute, resolved path of the folder the home indexes (written by each sync)."""

REPLACE_HINT = "pass --replace (in Dagster: ops.ingest.config.replace)"


class FolderRefused(PipelineError, RuntimeError):
    """An index run would delete what the home holds by mistake; nothing was changed."""


FOLDER_HINT = ("check the path given to `pathrag index` (or PATHRAG_DOCS, the folder the Dagster sensor and schedule "
               "watch)")
"""What a missing document folder's message ends with (`pathrag index` takes its folder as PATH; PATHRAG_DOCS is the
Dagster side's)."""


class FolderMissing(PipelineError, FileNotFoundError):
    """The folder to index does not exist or is not a folder; nothing was changed."""


def folder_key(folder: Path | str) -> str:
    """How a folder is recorded and compared: absolute, symlinks resolved."""
    return str(Path(folder).expanduser().resolve())


def recorded_folder(con: duckdb.DuckDBPyConnection) -> str | None:
    """The folder the home indexes, or None for an empty home or one made before the key existed."""
    return get_meta(con, FOLDER_META)


def record_folder(con: duckdb.DuckDBPyConnection, folder: Path | str) -> None:
    set_meta(con, FOLDER_META, folder_key(folder))


def _documents(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute("SELECT count(*) FROM documents").fetchone()[0]


def _source(recorded: str | None) -> str:
    return f" indexed from {recorded}" if recorded else ""


def _count(documents: int) -> str:
    return f"{documents} document{'' if documents == 1 else 's'}"


def require_folder(store: Store, folder: Path, home: Path) -> None:
    """Raise ``FolderMissing`` when ``folder`` is not a folder, saying what the home holds (left unchanged)."""
    if Path(folder).is_dir():
        return
    held = ""
    if store.path.exists():
        with store.connect(read_only=True) as con:
            documents, recorded = _documents(con), recorded_folder(con)
        if documents:
            held = (f" (is a disk not mounted, or the path mistyped?); nothing was changed in PATHRAG_HOME {home} "
                    f"({_count(documents)}{_source(recorded)})")
    raise FolderMissing(f"document folder {folder} does not exist or is not a folder{held}; {FOLDER_HINT}")


def check_plan(con: duckdb.DuckDBPyConnection, scan, plan, folder: Path, home: Path, *, replace: bool) -> None:
    """Raise ``FolderRefused`` when syncing ``folder`` by this plan (``folder_sync.plan_changes`` of its
    ``scan``) would delete what the home holds by mistake (see the module docstring); ``replace`` allows it.
    Reads only."""
    documents = _documents(con)
    if replace or not documents:
        return
    recorded = recorded_folder(con)
    if recorded is not None and recorded != folder_key(folder):
        raise FolderRefused(
            f"PATHRAG_HOME {home} holds {_count(documents)} indexed from {recorded}: indexing {folder} there "
            f"would delete them. Nothing was changed. Give {folder} its own index (set PATHRAG_HOME to another "
            f"folder), or {REPLACE_HINT} to index it instead of {recorded}, deleting that folder's documents.")
    if not scan and plan.deleted:
        deleted = con.execute("SELECT count(*) FROM documents WHERE path IN (SELECT unnest(?::VARCHAR[]))",
                              [plan.deleted]).fetchone()[0]
        raise FolderRefused(
            f"{folder} holds no supported file (supported: {' '.join(sorted(SUPPORTED))}): indexing it would "
            f"delete {_count(deleted)} of the {documents}{_source(recorded)} in PATHRAG_HOME {home}. Nothing was "
            f"changed: is a disk not mounted, or the path mistyped? To empty the index on purpose, {REPLACE_HINT}.")
