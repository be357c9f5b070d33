"""The one resource every asset uses: PathRAG settings and the DuckDB store they point to."""


import os
from pathlib import Path

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

    def __init__(self, keep: bool = True):
        self.keep = keep
        self.items: dict[str, object] = {}

    def put(self, name: str, value: object) -> None:
        if self.keep:
            self.items[name] = value

    def get(self, name: str, default=None):
        return self.items.get(name, default)
