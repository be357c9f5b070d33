"""`pathrag bench sql-memory`: `pathrag sql`'s peak memory against its limit on statements that grow without bound.

Issue 61 item 4: a cross join once grew to 3.3 GB against a 2 GB limit and ran 240 s past a 30 s timeout, because
the timeout stopped at ``fetchall`` and the rows were gathered before printing. Here a generated corpus is indexed
offline, then ``pathrag sql`` runs as a user runs it (its own process, ``PATHRAG_DUCKDB_MEMORY_LIMIT`` and
``--timeout`` set) on three statements over the chunks crossed with themselves: every row streamed as CSV, the
default table view (which keeps the first rows), and a sort of the whole cross join. Per statement: the exit code,
the last line it printed on stderr, the wall time against the timeout, and the process's peak resident memory
(``getrusage`` of the child) against the memory limit. DuckDB's limit covers its buffer manager; the process also
holds Python, the DuckDB library and the rows in flight, which the figure includes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HEADING = "pathrag sql under its limits"
MEMORY_LIMIT = "256MB"
TIMEOUT_S = 30
STATEMENTS = {
    "cross join, every row as CSV": ("--csv", "SELECT a.id, a.text, b.id, b.text FROM chunks a CROSS JOIN chunks b"),
    "cross join, table view": (None, "SELECT a.id, a.text, b.id, b.text FROM chunks a CROSS JOIN chunks b"),
    "cross join sorted whole": ("--csv", "SELECT a.id, b.id, a.text || b.text AS both_texts FROM chunks a "
                                         "CROSS JOIN chunks b ORDER BY both_texts DESC"),
}
# Runs a command, its stdout to /dev/null; prints its exit code, wall time, peak RSS and last stderr line as JSON.
MEASURE = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
           "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True); "
           "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
           "lines = [l for l in p.stderr.splitlines() if l.strip()]; "
           "print(json.dumps({'rc': p.returncode, 'wall_s': round(time.perf_counter() - t, 1), "
           "'peak_rss_mib': round(u.ru_maxrss / 1024, 1), 'last_line': lines[-1][:300] if lines else ''}))")
LAUNCH = "import sys; from pathrag_pipeline.cli import main; sys.exit(main())"
Log = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _mib(limit: str) -> float:
    number, unit = float(limit[:-2]), limit[-2:].upper()
    return number * {"KB": 1 / 1024, "MB": 1, "GB": 1024}[unit]


def run_sql_memory_bench(n_docs: int = 300, memory_limit: str = MEMORY_LIMIT, timeout_s: int = TIMEOUT_S,
                         workdir: Path | None = None, log: Log = _quiet) -> dict[str, Any]:
    from pathrag_lab.bench.indexing import _corpus, _settings
    from pathrag_lab.bench.report import machine_info
    from pathrag_pipeline.index.pipeline import run_indexing
    from pathrag_pipeline.storage.store import Store

    started = time.perf_counter()
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-sql-"))
    base.mkdir(parents=True, exist_ok=True)
    folder, _ = _corpus(base, n_docs)
    home = base / "home"
    shutil.rmtree(home, ignore_errors=True)
    log(f"indexing {n_docs} generated documents offline")
    run_indexing(_settings(home, folder), folder=folder, trigger="bench")
    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        chunks, text_bytes = con.execute("SELECT count(*), sum(length(text)) FROM chunks").fetchone()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATHRAG_", "OPENAI_"))}
    env.update(PATHRAG_HOME=str(home), PATHRAG_DOCS=str(folder), PATHRAG_DUCKDB_MEMORY_LIMIT=memory_limit)
    result: dict[str, Any] = {"documents": n_docs, "chunks": chunks, "text_mib": round(text_bytes / 2**20, 1),
                              "memory_limit": memory_limit, "timeout_s": timeout_s, "runs": []}
    for name, (flag, query) in STATEMENTS.items():
        log(f"pathrag sql: {name}")
        command = [sys.executable, "-c", LAUNCH, "sql", query, "--timeout", str(timeout_s), *([flag] if flag else [])]
        proc = subprocess.run([sys.executable, "-c", MEASURE, *command], env=env, capture_output=True, text=True,
                              timeout=timeout_s * 10)
        figures = json.loads(proc.stdout.strip().splitlines()[-1])
        result["runs"].append({"statement": name, "query": query, "flag": flag, **figures})
        log(f"  rc {figures['rc']}, {figures['wall_s']} s, peak {figures['peak_rss_mib']} MiB: {figures['last_line']}")
    result["limit_mib"] = _mib(memory_limit)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["machine"] = machine_info()
    return result


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import machine_stamp, md_table

    rows = [[run["statement"], f"`{run['flag'] or '(table)'}`", run["rc"], f"{run['wall_s']:.1f}",
             f"{run['peak_rss_mib']:.0f}", f"{run['peak_rss_mib'] / r['limit_mib']:.2f}", run["last_line"] or "-"]
            for run in r["runs"]]
    intro = (f"Reproduce: `pathrag bench sql-memory --update-docs docs/benchmarks.md`.\n\n"
             f"A generated corpus of {r['documents']} documents indexed offline ({r['chunks']} chunks, "
             f"{r['text_mib']} MiB of chunk text), then `pathrag sql` in its own process with "
             f"`PATHRAG_DUCKDB_MEMORY_LIMIT={r['memory_limit']}` and `--timeout {r['timeout_s']}` on the chunks crossed "
             "with themselves (the rows' text alone is far past the limit), stdout to /dev/null. *Peak MiB*: the "
             "process's largest resident set (Python, the DuckDB library and the rows in flight included); *of the "
             "limit*: that over the memory limit. A statement past its timeout is stopped with one line, fetching "
             "and printing included.\n")
    table = md_table(["statement", "output", "exit", "s", "peak MiB", "of the limit", "last line on stderr"], rows)
    return (f"## {HEADING}\n\n{intro}\n{table}\n\n_Measured {machine_stamp(r['machine'])}; this section ran "
            f"{r['seconds']:.0f} s._")
