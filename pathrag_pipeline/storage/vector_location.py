"""Where the LanceDB vector tables live: a local folder (the home's ``lancedb/`` by default) or an object store.

``PATHRAG_LANCEDB_URI`` names the place: a folder, or ``s3://bucket/prefix`` (also ``gs://``, ``az://``), which
LanceDB opens directly, so index runs and query servers on several machines share one vector store. Endpoint and
credentials come from the standard variables LanceDB's object store reads itself (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ...) or from
``PATHRAG_LANCEDB_STORAGE_OPTIONS``, a JSON object handed to ``lancedb.connect(storage_options=...)``.
``config`` parses and checks both settings; this module opens what they name.

The options may hold keys: they are never in ``repr``, ``public()`` masks them (``config.redacted_options``), and
opening a location registers their credential values with the log redaction (``llm.redaction``), so an error
that echoes one reaches no log record. No LanceDB import at module level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathrag_pipeline.config import is_secret_option, parse_lancedb_uri, redacted_options

if TYPE_CHECKING:
    from pathrag_pipeline.config import Settings

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


@dataclass(frozen=True)
class VectorLocation:
    """A LanceDB database: a local folder or an object-store URI, with the options needed to open it."""

    uri: str
    storage_options: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, where: "str | Path | VectorLocation") -> "VectorLocation":
        """A location from a folder or URI (no options: those come with ``for_settings``)."""
        if isinstance(where, VectorLocation):
            return where
        return cls(parse_lancedb_uri(str(where)) or str(where))

    @classmethod
    def for_settings(cls, settings: "Settings") -> "VectorLocation":
        """PATHRAG_LANCEDB_URI (default: the home's ``lancedb/`` folder) with its storage options."""
        return cls(settings.lancedb_location, settings.lancedb_storage_options)

    @property
    def is_local(self) -> bool:
        return _SCHEME.match(self.uri) is None

    @property
    def path(self) -> Path:
        """The folder of a local location (an object store has none)."""
        if not self.is_local:
            raise ValueError(f"{self.uri} is an object store, not a folder")
        return Path(self.uri)

    def public(self) -> dict[str, Any]:
        """What may be printed, logged or stored: the URI and the options with credentials masked."""
        return {"uri": self.uri, "storage_options": redacted_options(self.storage_options)}

    def __str__(self) -> str:
        return self.uri

    def sibling(self, suffix: str) -> "VectorLocation":
        """A location beside this one (``lancedb.reembed`` beside ``lancedb``), with the same options."""
        return VectorLocation(self.uri.rstrip("/") + suffix, self.storage_options)

    def table_uri(self, table: str) -> str:
        return f"{self.uri.rstrip('/')}/{table}.lance"

    def connect(self) -> Any:
        """``lancedb.connect`` on this location (a local folder is created first)."""
        from pathrag_pipeline.slim_imports import import_lancedb

        lancedb = import_lancedb()  # about half a second to import: only when a table is opened

        if self.is_local:
            self.path.mkdir(parents=True, exist_ok=True)
            return lancedb.connect(self.uri)
        from pathrag_pipeline.llm.redaction import register_secret

        for key, value in self.storage_options:
            if is_secret_option(key):
                register_secret(value)
        return lancedb.connect(self.uri, storage_options=dict(self.storage_options) or None)

    def exists(self) -> bool:
        """Whether there may be tables here: the folder exists; an object store is always worth opening."""
        return self.path.exists() if self.is_local else True

    def has_table(self, table: str) -> bool:
        """Whether ``table`` exists: a folder test locally (no LanceDB import), a listing on an object store."""
        if self.is_local:
            return (self.path / f"{table}.lance").is_dir()
        return table in self.connect().list_tables().tables
