"""The one resource every asset uses: PathRAG settings and the DuckDB store they point to."""


from pathlib import Path

import dagster as dg

from pathrag_pipeline.config import Settings
from pathrag_pipeline.storage.store import Store


class PathragResource(dg.ConfigurableResource):
    """Settings come from the PATHRAG_* environment (see README); these fields override them per deployment."""

    home: str | None = None
    docs: str | None = None
    triples: str | None = None   # build the graph from this triples JSONL instead of extraction

    def settings(self) -> Settings:
        overrides = {}
        if self.home:
            overrides["home"] = Path(self.home).resolve()
        if self.docs:
            overrides["docs"] = Path(self.docs).resolve()
        return Settings.from_env(**overrides)

    def store(self) -> Store:
        return Store.for_settings(self.settings())
