"""docs/methods.md's table of departures from the papers names real files and real options (issue 60, item 3)."""

from __future__ import annotations

import re

from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.config import PACKAGE_ROOT
from pathrag_pipeline.query.params import SETTINGS, QueryParams

METHODS = PACKAGE_ROOT / "docs" / "methods.md"


def _rows() -> list[list[str]]:
    text = METHODS.read_text(encoding="utf-8")
    table = text[text.index("## Departures from the papers"):].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]
    return [r for r in rows[1:] if not set(r[0]) <= {"-", " "}]


def test_every_row_says_where_why_and_what_restores_the_paper():
    rows = _rows()
    assert len(rows) >= 15
    for row in rows:
        assert len(row) == 7, row
        assert row[4] and row[6], row   # why, and what restores the paper (or "none", said)


def test_the_files_it_names_exist():
    for row in _rows():
        for path in re.findall(r"`((?:query|index|llm|ingest|storage)/[\w/]*(?:\.py)?)`", row[5]):
            assert (PACKAGE_ROOT / "pathrag_pipeline" / path).exists(), (path, row[1])


def test_the_options_it_names_are_options_of_ask_and_the_settings_are_query_params():
    ask_help = CliRunner().invoke(main, ["ask", "--help"], terminal_width=200).output
    fields = set(QueryParams.__dataclass_fields__)
    options = {spec.option for spec in SETTINGS.values()}   # every setting is an option of ask, most hidden
    for row in _rows():
        for option in re.findall(r"`(--[a-z-]+)", row[6]):
            assert option in ask_help or option in options, (option, row[1])
        for name in re.findall(r"`([a-z_]+)=", row[6] + row[3]):
            assert name in fields, (name, row[1])
