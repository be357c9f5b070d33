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

The Dagster side (the sensor, the schedule, runs launched from the UI) names no folder on a command line: with
PATHRAG_DOCS unset it indexes the folder the home records (``with_home_folder``), so `pathrag dev` over a home made
by `pathrag index ~/docs` watches ~/docs, not the sample. PATHRAG_DOCS names the folder of a new home; set to
another folder than the home's, the run is refused with a line that says to unset it or give that folder its own
home, never to replace: only `pathrag index PATH`, where the user names the folder, offers ``--replace``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from pathrag_pipeline.errors import PipelineError
from pathrag_pipeline.ingest.parsing import SUPPORTED_SAID
from pathrag_pipeline.storage.store import Store, StoreLockedError, get_meta, set_meta

if TYPE_CHECKING:
    from pathrag_pipeline.config import Settings

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


FOLDER_NOTE = "docs_folder.txt"
"""A copy of the recorded folder in the home, written after each sync: what the Dagster side reads to pick its
folder without opening DuckDB (a sensor tick or a run's first step must not wait for an index run's write
connection). ``pathrag_meta`` stays the authority: a run on the wrong folder is still refused by ``check_plan``."""


def write_folder_note(home: Path, folder: Path | str) -> None:
    note = Path(home) / FOLDER_NOTE
    tmp = note.with_suffix(".tmp")
    tmp.write_text(folder_key(folder) + "\n", encoding="utf-8")
    tmp.replace(note)


def home_folder(settings: Settings) -> str | None:
    """The folder the home of ``settings`` records, or None (no home yet, or none recorded): the home's note of
    it (``FOLDER_NOTE``), else, for a home indexed before the note existed, ``pathrag_meta`` if the file is free
    within a second (None if not: the run then meets ``check_plan``, which refuses another folder)."""
    note = settings.home / FOLDER_NOTE
    if note.is_file():
        return note.read_text(encoding="utf-8").strip() or None
    if not settings.duckdb_path.exists():
        return None
    try:
        with Store(settings.duckdb_path, lock_timeout=1.0).connect(read_only=True) as con:
            return recorded_folder(con)
    except StoreLockedError:
        return None


def with_home_folder(settings: Settings) -> Settings:
    """``settings`` indexing the folder its home records, when it records one: what the Dagster side indexes
    when no folder is named (PATHRAG_DOCS unset)."""
    recorded = home_folder(settings)
    return dataclasses.replace(settings, docs=Path(recorded)) if recorded else settings


def watched_folder(recorded: str | None, docs_env: str | None, default: Path) -> tuple[str, str | None]:
    """The folder the Dagster side (the sensor, the schedule, UI launches) indexes, given the home's ``recorded``
    folder and PATHRAG_DOCS (``docs_env``), with a warning when its runs would be refused (another folder)."""
    if docs_env:
        named = folder_key(docs_env)
        if recorded and named != recorded:
            return named, (f"PATHRAG_DOCS names {named}, but this home indexes {recorded}: the sensor's, the "
                           f"schedule's and the UI's index runs will be refused; unset PATHRAG_DOCS to watch "
                           f"{recorded}, or give {named} its own PATHRAG_HOME")
        return named, None
    return recorded or folder_key(default), None


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


def check_plan(con: duckdb.DuckDBPyConnection, scan, plan, folder: Path, home: Path, *, replace: bool,
               named: bool = True) -> None:
    """Raise ``FolderRefused`` when syncing ``folder`` by this plan (``folder_sync.plan_changes`` of its
    ``scan``) would delete what the home holds by mistake (see the module docstring); ``replace`` allows it.
    ``named``: the user named ``folder`` on a command line (`pathrag index PATH`), so the refusal may offer to
    replace the home's folder with it; a run of the Dagster side (its folder from PATHRAG_DOCS) never does.
    Reads only."""
    documents = _documents(con)
    if replace or not documents:
        return
    recorded = recorded_folder(con)
    if recorded is not None and recorded != folder_key(folder) and not named:
        raise FolderRefused(
            f"PATHRAG_DOCS names {folder}, but PATHRAG_HOME {home} indexes {recorded} ({_count(documents)}). "
            f"Nothing was changed. Unset PATHRAG_DOCS to index {recorded}, or give {folder} its own PATHRAG_HOME.")
    if recorded is not None and recorded != folder_key(folder):
        raise FolderRefused(
            f"PATHRAG_HOME {home} holds {_count(documents)} indexed from {recorded}: indexing {folder} there "
            f"would delete them. Nothing was changed. Give {folder} its own index (set PATHRAG_HOME to another "
            f"folder), or {REPLACE_HINT} to index it instead of {recorded}, deleting that folder's documents.")
    if not scan and plan.deleted:
        deleted = con.execute("SELECT count(*) FROM documents WHERE path IN (SELECT unnest(?::VARCHAR[]))",
                              [plan.deleted]).fetchone()[0]
        ignored = getattr(scan, "ignored_files", 0) + getattr(scan, "ignored_folders", 0)
        why = ("is its .pathragignore leaving out too much (it matched "
               f"{getattr(scan, 'ignored_files', 0)} file(s) and {getattr(scan, 'ignored_folders', 0)} folder(s))?"
               if ignored else "is a disk not mounted, or the path mistyped?")
        raise FolderRefused(
            f"{folder} holds no supported file (supported: {SUPPORTED_SAID}): indexing it would "
            f"delete {_count(deleted)} of the {documents}{_source(recorded)} in PATHRAG_HOME {home}. Nothing was "
            f"changed: {why} To empty the index on purpose, {REPLACE_HINT}.")
