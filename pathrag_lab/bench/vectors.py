"""`pathrag bench vectors`: the LanceDB folder's size over repeated index runs.

Every LanceDB write (an embedding batch, a delete) makes a new table version whose files stay until old versions
are removed; once a table has accumulated enough since its last compaction (``vector_store.TIDY_FRAGMENTS`` fragments
written, dead rows reaching ``TIDY_DEAD_SHARE`` of its rows on disk, or ``TIDY_VERSIONS`` removable versions), a sync
that wrote compacts it and removes versions older than ``vector_store.VERSION_RETENTION``. This benchmark indexes a generated corpus offline once, then re-indexes it ``runs - 1`` times in two
series on the same home, measuring the folder's bytes and the versions each table keeps after every run:

- touched: every file's modification time changes, no content does (what a backup restore or ``touch -r``
  does to a folder);
- edited: one document gains a sentence before each run (its chunk is re-extracted, its rows re-embedded and
  the graph rows it touches rewritten), with a pause of ``pause`` seconds before each run, as scheduled runs
  are minutes apart: versions younger than the retention are kept on purpose (a reader may still use them).

All runs go through ``run_indexing`` exactly as ``pathrag index --runless`` runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench.indexing import _corpus, _edit, _settings, timed_index

Log = Callable[[str], None]
TABLES = ("entities", "relations", "chunks")
HEADING = "Vector store size over re-index runs"


def _quiet(_: str) -> None:
    """Default progress sink."""


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _state(settings: Any) -> dict[str, Any]:
    from pathrag_pipeline.storage.vector_store import VectorStore

    vectors = VectorStore(settings.lancedb_path)
    return {"bytes": folder_bytes(settings.lancedb_path),
            "versions": {t: vectors.versions(t) for t in TABLES},
            "rows": {t: vectors.count(t) for t in TABLES}}


def _touch(folder: Path, when: float) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


def run_vectors_bench(n_docs: int = 1000, runs: int = 10, pause: float | None = None, workdir: Path | None = None,
                      log: Log = _quiet) -> dict[str, Any]:
    """Size and versions of the LanceDB folder after a first build and after ``runs - 1`` more runs in each
    series (touched, edited). ``pause``: seconds before each edited run (default: the retention + 5 s)."""
    from pathrag_pipeline.storage.vector_store import TIDY_DEAD_SHARE, TIDY_FRAGMENTS, TIDY_VERSIONS, VERSION_RETENTION

    if n_docs < 1 or runs < 2:
        raise ValueError(f"n_docs={n_docs} must be at least 1 and runs={runs} at least 2")
    pause = VERSION_RETENTION.total_seconds() + 5 if pause is None else pause
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-vectors-"))
    folder, victim = _corpus(base, n_docs)
    home = base / "home"
    shutil.rmtree(home, ignore_errors=True)
    settings = _settings(home, folder)
    started = time.perf_counter()
    log(f"first build of {n_docs} documents")
    _, stages = timed_index(settings, folder)
    first = {**_state(settings), "embeddings_s": stages["embeddings"]}
    result: dict[str, Any] = {"documents": n_docs, "runs": runs, "pause_s": pause,
                              "retention_s": VERSION_RETENTION.total_seconds(), "tidy_versions": TIDY_VERSIONS,
                              "tidy_fragments": TIDY_FRAGMENTS, "tidy_dead_share": TIDY_DEAD_SHARE,
                              "first": first, "series": {}}
    clock = time.time()
    for series in ("touched", "edited"):
        rows = []
        for r in range(2, runs + 1):
            if series == "edited":
                time.sleep(pause)
                _edit(victim, r)
            clock += 60
            _touch(folder, clock)
            log(f"{series} run {r}/{runs}")
            report, stages = timed_index(settings, folder)
            embedded = sum(s.embedded for s in report.embeddings.tables.values()) if report.embeddings else 0
            rows.append({"run": r, **_state(settings), "embedded": embedded, "embeddings_s": stages["embeddings"],
                         "total_s": stages["total"]})
        result["series"][series] = {
            "runs": rows,
            "bytes_ratio": round(rows[-1]["bytes"] / first["bytes"], 3),
            "max_bytes_ratio": round(max(r["bytes"] for r in rows) / first["bytes"], 3),
            "median_embeddings_s": round(statistics.median(r["embeddings_s"] for r in rows), 3),
            "embedded_per_run": round(statistics.median(r["embedded"] for r in rows), 1),
        }
    result["seconds"] = round(time.perf_counter() - started, 1)
    from pathrag_lab.bench.report import machine_info

    result["machine"] = machine_info()
    return result


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import machine_info, md_table

    first = r["first"]
    rows = [["first build", 1, f"{first['bytes'] / 1e6:.1f}", "1.00",
             ", ".join(f"{first['versions'][t]}" for t in TABLES), "", f"{first['embeddings_s']:.2f}"]]
    for name, s in r["series"].items():
        last = s["runs"][-1]
        rows.append([name, r["runs"], f"{last['bytes'] / 1e6:.1f}", f"{s['bytes_ratio']:.2f} (max {s['max_bytes_ratio']:.2f})",
                     ", ".join(f"{last['versions'][t]}" for t in TABLES), f"{s['embedded_per_run']:.0f}",
                     f"{s['median_embeddings_s']:.2f}"])
    m = r.get("machine") or machine_info()
    return "\n\n".join([
        f"## {HEADING}",
        f"Reproduce: `pathrag bench vectors --docs {r['documents']} --runs {r['runs']} --update-docs docs/benchmarks.md`.",
        f"A generated corpus of {r['documents']} documents indexed offline once, then re-indexed on the same home "
        f"{r['runs'] - 1} times with every file touched (modification time changed, content not), then "
        f"{r['runs'] - 1} times with one document edited before each run and a pause of {r['pause_s']:.0f} s (scheduled "
        f"runs are minutes apart). A sync that writes compacts a table and removes its versions older than "
        f"{r['retention_s']:.0f} s (younger ones stay: a reader may still use them) once it has accumulated, since "
        f"it was last compacted, {r['tidy_fragments']} written fragments, dead rows reaching "
        f"{r['tidy_dead_share']:.0%} of its rows on disk, or {r['tidy_versions']} removable versions; compacting "
        "rewrites the table, so it is not done for every small write. Size: the "
        "LanceDB folder after the series' last run; ratio: against the first build (the largest after any run of "
        "the series in brackets); versions: kept per table (entities, relations, chunks) after the last run; "
        "embeddings s: median wall time of the embedding stage, compaction and cleanup included.",
        md_table(["series", "runs", "MB", "ratio to first build", "versions kept", "rows embedded/run",
                  "embeddings s"], rows),
        f"_Measured {m['date']} on {m['usable_cores']} cores ({m['cpu']}, Python {m['python']}); {r['seconds'] / 60:.0f} "
        "min in all._",
    ])


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)
