"""A small folder in the formats documentation comes in (Markdown with headings, lists and a table; reStructuredText
with sections and directives; HTML), indexed offline: no entity carries markup, none is a stop word, a section
label or an instruction verb (issue 25's end-to-end evidence)."""

from __future__ import annotations

import re

from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.extraction_models import name_problem
from pathrag_pipeline.index.pipeline import run_indexing
from pathrag_pipeline.llm.embedding import STOPWORDS
from pathrag_pipeline.storage.store import Store

MARKDOWN = """# Kestle Observatory Handbook

## Installation

Install the Kestle toolkit with the instructions below. Use the Marrow Hill mirror when the main site is down.

- Add the Orrin Catalogue to the search path.
- Run the calibration script written by Agnes Morrow.

| instrument | maker |
| --- | --- |
| Great Refractor | Thomas Greaves |

## Method

See Appendix D and Table 2 for the survey of the Brine Sound.
"""

RST = """Pellingham Survey Notes
=======================

Overview
--------

The Pellingham Institute of Hydrology measured the River Lode in 1887.

.. note::

   Edwin Sallow led the winter survey at Corran Ford.

See :ref:`results` for the gauges built by the Varne Navigation Company.
"""

HTML = """<html><head><title>Saltmouth Quay</title></head><body>
<h1>Saltmouth Quay</h1>
<ul><li>Elias Pell founded the Varne Navigation Company at Saltmouth.</li>
<li>The quay served the Varne Valley Railway.</li></ul>
<table><tr><td>Opened</td><td>1822</td></tr></table>
</body></html>
"""

MARKUP = re.compile(r"[#*|`<>=_\[\]{}]|^\s*[-+]\s|:ref:|\.\.\s")


def test_real_formats_give_entities_without_markup_stop_words_or_labels(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text(MARKDOWN, encoding="utf-8")
    (docs / "survey.rst").write_text(RST, encoding="utf-8")
    (docs / "quay.html").write_text(HTML, encoding="utf-8")
    settings = Settings.from_env(env={}, home=tmp_path / "home", docs=docs)
    run_indexing(settings, folder=docs, trigger="test")

    with Store(settings.duckdb_path).connect(read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT name FROM entities").fetchall()]
        texts = [r[0] for r in con.execute("SELECT text FROM chunks").fetchall()]
    assert {"Agnes Morrow", "Thomas Greaves", "Edwin Sallow", "Elias Pell"} <= set(names)
    assert not [n for n in names if MARKUP.search(n)]
    assert not [n for n in names if n.casefold() in STOPWORDS]
    assert not [n for n in names if name_problem(n)]
    assert not {"Installation", "Method", "Overview", "Add", "Run", "Install", "Use", "Appendix D", "Table 2"} & set(names)
    # the chunks hold the text a reader sees: no Markdown or RST markup but heading lines (text/structure.py)
    assert not [t for t in texts if re.search(r"^\||^- |^\.\. |:ref:|={3,}", t, re.MULTILINE)]
    headings = [line for t in texts for line in t.split("\n") if line.startswith("#")]
    assert headings and all(re.fullmatch(r"#{1,6} \S.*", line) for line in headings)
    assert "## Installation" in headings and "## Overview" in headings
