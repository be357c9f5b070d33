"""`pathrag bench answer-page`: what drawing an answer costs (issue 63).

The bundled sample indexed offline in a temporary home, the quickstart's question asked with ``top_k`` 15 (so the
answer keeps 15 paths), then its page made ``ROUNDS`` times: the view read from the tables (``view_of_result``:
relation keywords and the quoted passages) and the page rendered (``render``: igraph's layout and the SVG),
timed apart. Medians, milliseconds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ROUNDS = 20
QUESTION = "On which river lies the birthplace of the first director of the Pellingham Institute of Hydrology?"


def run_answer_page_bench(rounds: int = ROUNDS, top_k: int = 15) -> dict[str, Any]:
    from pathrag_lab.bench.indexing import _settings
    from pathrag_lab.bench.report import machine_info
    from pathrag_pipeline.config import SAMPLE_DOCS
    from pathrag_pipeline.index.pipeline import run_indexing
    from pathrag_pipeline.query.answer_page import render, view_of_result
    from pathrag_pipeline.query.engine import PathRAG

    home = Path(tempfile.mkdtemp(prefix="pathrag-bench-page-"))
    settings = _settings(home, SAMPLE_DOCS)
    run_indexing(settings, folder=SAMPLE_DOCS, trigger="bench")
    rag = PathRAG(settings, record=False)
    result = rag.query(QUESTION, top_k=top_k)
    reads, draws, size = [], [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        with rag.store.connect(read_only=True) as con:
            view = view_of_result(result, con)
        reads.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        text = render(view)
        draws.append((time.perf_counter() - started) * 1000)
        size = len(text.encode())
    nodes = len({n for p in result.paths for n in p.nodes})
    return {"paths": len(result.paths), "nodes": nodes, "passages": len(view.passages), "rounds": rounds,
            "read_ms": round(statistics.median(reads), 2), "render_ms": round(statistics.median(draws), 2),
            "page_kib": round(size / 1024, 1), "machine": machine_info()}


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import machine_stamp

    return (f"## Drawing an answer\n\nReproduce: `pathrag bench answer-page --update-docs docs/benchmarks.md`\n\n"
            f"The quickstart's question over the bundled sample indexed offline, asked with `top_k` 15: an answer "
            f"with {r['paths']} paths over {r['nodes']} entities and {r['passages']} passages, its page "
            f"(`pathrag ask --html`, the page of `pathrag serve`) made {r['rounds']} times. Median: reading the "
            f"view from the tables (relation keywords, passages) **{r['read_ms']} ms**, rendering the page "
            f"(igraph's Kamada-Kawai layout and the SVG) **{r['render_ms']} ms**; the page is "
            f"{r['page_kib']} KiB, self-contained.\n\n_Measured {machine_stamp(r['machine'])}._")
