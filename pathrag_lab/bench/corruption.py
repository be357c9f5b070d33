"""`pathrag bench corruption`: each store file of a home damaged in turn, then what a user sees and the repair.

A generated corpus is indexed offline on a clean home (the reference, as `pathrag bench kills` does). Then, per
case, a fresh home is built the same way and one of its files is damaged: the DuckDB file overwritten in the
middle or cut to half its length, a LanceDB data file or the latest manifest of a vector table likewise, the
Dagster run storage (``dagster/history/runs.db``) likewise. Recorded per case: whether `pathrag status --check`
exits 1 naming the damaged part; whether `pathrag ask` and `pathrag index` stop with one line (not a traceback,
never "Up to date"); then the repair the check names is applied as a user would (``pathrag index --reembed``
for a vector table; the Dagster folder moved aside, then a plain index; the DuckDB file moved aside, then a plain
index), and whether the home then checks whole and its tables equal the clean build's (``kills.fingerprint``).
Offline only: that an LLM-built home whose DuckDB file is lost is rebuilt with 0 LLM calls (its paid-work log,
``storage/paid_work.py``) is tested through the scripted server (tests/test_extraction_stage.py), and the section
says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench.concurrency import _env
from pathrag_lab.bench.kills import clean_build, fingerprint

Log = Callable[[str], None]
HEADING = "A damaged home: check and repair"
QUESTION = "Who designed the railway?"


def _quiet(_: str) -> None:
    """Default progress sink."""


def _overwrite_middle(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(size // 3)
        fh.write(os.urandom(max(1, size // 3)))


def _truncate_half(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


def _largest(folder: Path, pattern: str) -> Path:
    return max(folder.glob(pattern), key=lambda p: (p.stat().st_size, p.name))


def _latest(folder: Path, pattern: str) -> Path:
    return max(folder.glob(pattern), key=lambda p: p.stat().st_mtime)


# (case, part the check must name, file to damage, damage, repair)
def _duckdb(home: Path) -> Path:
    return home / "pathrag.duckdb"


def _vectors(home: Path) -> Path:
    return _largest(home / "lancedb" / "entities.lance" / "data", "*.lance")


def _manifest(home: Path) -> Path:
    return _latest(home / "lancedb" / "entities.lance" / "_versions", "*.manifest")


def _runs(home: Path) -> Path:
    return home / "dagster" / "history" / "runs.db"


REEMBED, MOVE_DAGSTER, MOVE_DUCKDB = "pathrag index --reembed FOLDER", "move dagster/ aside, pathrag index FOLDER", \
    "move pathrag.duckdb aside, pathrag index FOLDER"
CASES: tuple[tuple[str, str, Callable[[Path], Path], Callable[[Path], None], str], ...] = (
    ("DuckDB file, overwritten in the middle", "duckdb", _duckdb, _overwrite_middle, MOVE_DUCKDB),
    ("DuckDB file, cut to half", "duckdb", _duckdb, _truncate_half, MOVE_DUCKDB),
    ("LanceDB data file, overwritten in the middle", "lancedb", _vectors, _overwrite_middle, REEMBED),
    ("LanceDB data file, cut to half", "lancedb", _vectors, _truncate_half, REEMBED),
    ("LanceDB manifest, cut to half", "lancedb", _manifest, _truncate_half, REEMBED),
    ("Dagster run storage, overwritten in the middle", "dagster", _runs, _overwrite_middle, MOVE_DAGSTER),
    ("Dagster run storage, cut to half", "dagster", _runs, _truncate_half, MOVE_DAGSTER),
)


def _cli(*args: str, home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pathrag_pipeline.cli", *args], env=_env(home),
                          capture_output=True, text=True, timeout=timeout)


def _one_line(proc: subprocess.CompletedProcess) -> bool:
    """Stopped (non-zero) with one line that points at the check, not a traceback."""
    lines = [x for x in (proc.stdout + proc.stderr).strip().splitlines() if x.strip()]
    return proc.returncode != 0 and len(lines) == 1 and "status --check" in lines[0]


def _repair(kind: str, home: Path, folder: Path) -> subprocess.CompletedProcess:
    if kind == REEMBED:
        return _cli("index", "--reembed", str(folder), home=home)
    aside = home.parent / f"{home.name}-damaged"
    aside.mkdir(exist_ok=True)
    if kind == MOVE_DAGSTER:
        shutil.move(str(home / "dagster"), str(aside / "dagster"))
    else:
        shutil.move(str(home / "pathrag.duckdb"), str(aside / "pathrag.duckdb"))
    return _cli("index", str(folder), home=home)


def run_corruption_bench(n_docs: int = 100, workdir: Path | None = None, log: Log = _quiet) -> dict[str, Any]:
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-corruption-"))
    folder, clean_s, reference = clean_build(base, n_docs, log)
    rows = []
    for i, (case, part, target, damage, repair) in enumerate(CASES):
        home = base / f"case-{i}"
        shutil.rmtree(home, ignore_errors=True)
        log(case)
        built = _cli("index", str(folder), home=home)
        if built.returncode != 0:
            raise RuntimeError(f"building the home of {case!r} failed: {built.stderr.strip().splitlines()[-1:]}")
        damaged_file = target(home)
        damage(damaged_file)
        check = _cli("status", "--check", home=home)
        named = check.returncode == 1 and any(line.startswith(part) and "DAMAGED" in line
                                              for line in check.stdout.splitlines())
        ask = _cli("ask", QUESTION, "--local", home=home)
        index = _cli("index", str(folder), home=home)
        started = time.perf_counter()
        repaired = _repair(repair, home, folder)
        repair_s = time.perf_counter() - started
        after = _cli("status", "--check", home=home)
        equal = repaired.returncode == 0 and after.returncode == 0 and fingerprint(home) == reference
        rows.append({"case": case, "file": str(damaged_file.relative_to(home)), "check_names_it": named,
                     "ask_one_line": _one_line(ask), "ask_answered": ask.returncode == 0,
                     "index_one_line": _one_line(index), "index_said_up_to_date": "Up to date" in index.stdout,
                     "index_completed": index.returncode == 0,
                     "repair": repair, "repair_completed": repaired.returncode == 0, "repair_s": round(repair_s, 1),
                     "check_whole_after": after.returncode == 0, "tables_equal_clean": equal})
    from pathrag_lab.bench.report import machine_info

    llm = _llm_built_case(base, folder, log)
    return {"documents": n_docs, "clean_s": round(clean_s, 1), "cases": rows, "llm_case": llm,
            "machine": machine_info()}


def _llm_built_case(base: Path, folder: Path, log: Log) -> dict[str, Any]:
    """An LLM-built home (the scripted OpenAI-compatible server playing the extraction model) whose DuckDB file is
    overwritten in the middle, repaired by `pathrag status --check --repair` as a user runs it: the LLM requests the
    repair made (its paid results come back from paid_work.jsonl) and whether the graph equals the build's."""
    from pathrag_lab.bench.indexing import OfflineBackedModel
    from pathrag_lab.testing.openai_server import FakeOpenAIServer

    home = base / "case-llm"
    shutil.rmtree(home, ignore_errors=True)
    log("LLM-built home, DuckDB file overwritten in the middle")
    with FakeOpenAIServer() as server:
        server.chat_responder = OfflineBackedModel()
        env = {**_env(home), "PATHRAG_LLM_BASE_URL": server.base_url, "PATHRAG_LLM_MODEL": "fake-chat"}

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "pathrag_pipeline.cli", *args], env=env,
                                  capture_output=True, text=True, timeout=1200)

        built = cli("index", str(folder))
        if built.returncode != 0:
            raise RuntimeError(f"the LLM-built home failed: {built.stderr.strip().splitlines()[-1:]}")
        build_requests = server.count("chat")
        graph = {k: v for k, v in fingerprint(home).items() if k in ("entities", "relations")}
        _overwrite_middle(_duckdb(home))
        server.reset()
        started = time.perf_counter()
        repaired = cli("status", "--check", "--repair")
        repair_s = time.perf_counter() - started
        repair_requests = server.count("chat")
    after = {k: v for k, v in fingerprint(home).items() if k in ("entities", "relations")}
    return {"build_requests": build_requests, "repair_requests": repair_requests,
            "repair_completed": repaired.returncode == 0, "repair_s": round(repair_s, 1),
            "graph_equal": repaired.returncode == 0 and after == graph,
            "paid_log_kib": round((home / "paid_work.jsonl").stat().st_size / 1024, 1)
            if (home / "paid_work.jsonl").exists() else 0.0}


def _yes(value: bool) -> str:
    return "yes" if value else "NO"


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import md_table

    rows = [[c["case"], _yes(c["check_names_it"]),
             "answered" if c["ask_answered"] else _yes(c["ask_one_line"]),
             "said up to date" if c["index_said_up_to_date"] else "ran" if c.get("index_completed") else
             _yes(c["index_one_line"]),
             f"`{c['repair']}`", c["repair_s"], _yes(c["check_whole_after"]), _yes(c["tables_equal_clean"])]
            for c in r["cases"]]
    good = sum(c["check_names_it"] and c["check_whole_after"] and c["tables_equal_clean"] for c in r["cases"])
    m = r["machine"]
    return "\n\n".join([
        f"## {HEADING}",
        f"Reproduce: `pathrag bench corruption --docs {r['documents']} --update-docs docs/benchmarks.md`",
        f"A generated corpus of {r['documents']} documents indexed offline on a clean home in {r['clean_s']} s (the "
        "reference). Per case a fresh home is built the same way and one file damaged (overwritten with random bytes "
        "over its middle third, or cut to half its length). \"check names it\": `pathrag status --check` exits 1 "
        "with that part's line DAMAGED. \"ask\"/\"index\": the command stops with one line pointing at the check "
        "(not a traceback, not \"Up to date\"); \"answered\"/\"ran\": it did not notice (the damage is in a part "
        "it does not read: a no-op index reads no vector or Dagster file, only the sizes of the vector files; the "
        "check hashes each vector file against the sha256 recorded when an index run wrote it, since LanceDB reads "
        "bytes overwritten in place without an error). Then the repair the check names, as a user would run it; "
        "\"tables "
        "equal\": documents, chunks, entities, relations, extraction records and the LanceDB tables' keys equal the "
        "clean build's, and the check reads the home whole.",
        md_table(["damage", "check names it", "ask: one line", "index: one line", "repair", "repair s",
                  "whole after", "tables equal"], rows),
        f"**{good} of {len(r['cases'])}** cases: named by the check, repaired by the command it names, tables equal "
        "to a clean build's.",
        *([_llm_paragraph(r["llm_case"])] if r.get("llm_case") else []),
        f"_Measured {m['date']} on {m['usable_cores']} cores ({m['cpu']}, Python {m['python']})._",
    ])


def _llm_paragraph(c: dict[str, Any]) -> str:
    return (f"**An LLM-built home** (the same corpus extracted through the scripted OpenAI-compatible server playing "
            f"the model: {c['build_requests']} chat requests to build), its DuckDB file overwritten in the middle and "
            f"repaired by `pathrag status --check --repair`: **{c['repair_requests']} LLM requests** to rebuild "
            f"(the extractions and summaries come back from `paid_work.jsonl`, {c['paid_log_kib']} KiB beside the "
            f"DuckDB file), {c['repair_s']} s, graph equal to the build's: {_yes(c['graph_equal'])}.")
