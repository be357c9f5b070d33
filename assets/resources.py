"""The one resource every asset uses: PathRAG settings and the DuckDB store they point to."""


import contextlib
import os
import threading
from pathlib import Path
from typing import Iterator

import dagster as dg

from pathrag_pipeline.config import Settings
from pathrag_pipeline.ingest.home_folder import with_home_folder
from pathrag_pipeline.storage.store import Store


class PathragResource(dg.ConfigurableResource):
    """Settings come from the PATHRAG_* environment (see README); these fields override them per deployment."""

    home: str | None = None
    docs: str | None = None
    triples: str | None = None   # build the graph from this triples JSONL instead of extraction
    retry_failed: bool = False   # also extract chunks left alone after failing 3 runs in a row (index --retry-failed)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # record this process on the run: a run whose process died is released before the next one waits
        # for the duckdb pool (assets/stale_runs.py)
        from assets.stale_runs import tag_run

        tag_run(context.instance, context.run_id)

    def settings(self) -> Settings:
        """The PATHRAG_* settings with these overrides. With no folder named (``docs`` and PATHRAG_DOCS unset),
        the folder is the one the home records (ingest/home_folder.py), so the sensor, the schedule and UI
        launches over a home made by `pathrag index ~/docs` index ~/docs; a new home's is PATHRAG_DOCS' default."""
        overrides = {}
        if self.home:
            overrides["home"] = Path(self.home).resolve()
        if self.docs:
            overrides["docs"] = Path(self.docs).resolve()
        settings = Settings.from_env(**overrides)
        return settings if self.docs or os.environ.get("PATHRAG_DOCS") else with_home_folder(settings)

    def triples_path(self) -> Path | None:
        return Path(self.triples).resolve() if self.triples else None

    def store(self) -> Store:
        return Store.for_settings(self.settings())


class RunReports:
    """Where the assets hand their stage reports to the caller of an in-process run (`pathrag index` prints
    them). The code location's default keeps nothing: runs launched by the UI, sensor or schedule report
    through their materialisation metadata only."""

    def __init__(self, keep: bool = True, across_steps: bool = False):
        self.keep = keep
        self.across_steps = keep and across_steps
        self.items: dict[str, object] = {}
        self._hold: tuple[Store, contextlib.ExitStack, int] | None = None

    @contextlib.contextmanager
    def holding(self, store: Store) -> Iterator[Store]:
        """The store a step uses, holding one DuckDB connection (``Store.holding``) for the block. With
        ``across_steps`` (``index_folder``, which calls ``release`` when its run ends, failed or not) it is the
        run's: opened by the first step that asks, kept open after the block for the next steps (a small run's
        steps then share one open and one close; a one-file edit opened and closed the file once per step, ~15 ms
        each, with Dagster's records between them), and the later steps get that store (a holding is its own and
        its thread's: the in-process executor runs every step in the caller's thread). Otherwise the step's own,
        closed when the block ends, as before (a job executed directly, whose caller releases nothing)."""
        if not self.across_steps:
            with store.holding():
                yield store
            return
        if self._hold is None:
            stack = contextlib.ExitStack()
            stack.enter_context(store.holding())
            self._hold = (store, stack, threading.get_ident())
        held, _, thread = self._hold
        if thread != threading.get_ident():   # its connection is that thread's: waiting on it would never end
            raise RuntimeError("a step of an in-process run ran outside the run's thread, which holds the DuckDB "
                               "connection (assets/resources.py RunReports.holding)")
        yield held

    def holds(self) -> Store | None:
        """The store whose connection the run holds now, if it holds one."""
        return self._hold[0] if self._hold is not None else None

    def release(self) -> None:
        """Close the connection the run holds across its steps, if any (row-group merging counted as at any
        write's close)."""
        hold, self._hold = self._hold, None
        if hold is not None:
            hold[1].close()

    def put(self, name: str, value: object) -> None:
        if self.keep:
            self.items[name] = value

    def get(self, name: str, default=None):
        return self.items.get(name, default)
