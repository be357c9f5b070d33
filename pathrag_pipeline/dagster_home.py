"""The Dagster instance folder inside PATHRAG_HOME, so run history, sensor cursors and states persist.

Writes a dagster.yaml (only if none exists, so a user's own settings win) that serialises runs touching
the DuckDB file: DuckDB admits one writing process at a time and every Dagster run is a process.
No Dagster import here: this is plain file setup used by the CLI and the code location.
"""

from __future__ import annotations

from pathlib import Path

DUCKDB_TAG = "pathrag/duckdb"

DAGSTER_YAML = f"""\
# Written by pathrag. Runs tagged {DUCKDB_TAG} write the DuckDB file, which admits one writer process:
# the run queue launches them one at a time (queued runs wait; they do not fail on the lock).
# Every pathrag asset is also in the "duckdb" pool, limited to one step at a time, which covers runs
# launched from the UI without the tag. Nothing leaves the machine: no telemetry, and no "join the community"
# dialog (it asks for an e-mail address and covers the page on a first visit).
concurrency:
  pools:
    default_limit: 1
  runs:
    tag_concurrency_limits:
      - key: "{DUCKDB_TAG}"
        limit: 1
telemetry:
  enabled: false
nux:
  enabled: false
"""


def ensure_dagster_yaml(dagster_home: Path) -> Path:
    dagster_home.mkdir(parents=True, exist_ok=True)
    path = dagster_home / "dagster.yaml"
    if not path.exists():
        path.write_text(DAGSTER_YAML)
    return path
