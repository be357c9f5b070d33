"""`pathrag bench scale`: memory and throughput of a full offline index at real folder sizes.

A deterministic generated corpus (the English-like prose with named entities of ``bench.ingest``, in files
of about ``size / files`` bytes) is indexed offline from scratch at two sizes, so the growth of peak memory
with corpus size can be read off (``--memory-mb``: and at a third, larger size, built but not edited); the
``--size-mb`` corpus is built a second time with extraction and embedding in one process (the speedup of the
worker processes); then ``EDITS`` files of the ``--size-mb`` corpus are edited and re-indexed one at a time
(eight; one write connection in 64 merges DuckDB row groups, and the section says which edits paid for it); then
one 40 MB .txt file and one 200,000-line JSONL file are indexed on their own. Every measurement runs
``run_indexing`` in a fresh child process, whose own peak resident memory (``getrusage(RUSAGE_SELF)
.ru_maxrss`` read in the child when it finishes) is reported, so one measurement's memory never hides
another's. Results are written to ``results.json`` in the work folder after each step, so a long run that
is stopped still leaves the steps it finished.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench.ingest import _document

Log = Callable[[str], None]
MB = 1_000_000
STAGES = ("ingest", "extraction", "merge", "embeddings")
EDITS = 8


def _quiet(_: str) -> None:
    """Default progress sink."""


def generate_scale_corpus(folder: Path, size_mb: float, files: int, seed: int = 11) -> dict[str, Any]:
    """Write ``files`` .md/.txt files of about ``size_mb`` MB in total (deterministic for a seed)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(files):
        # Aim each file at what is left over the files left (so the total reaches the size), at ~62 bytes per
        # generated sentence, varied +-50% around that mean.
        per_file = max(0.0, size_mb * MB - total) / (files - i)
        n_sentences = max(3, int(per_file / 62 * rng.uniform(0.5, 1.5)))
        title, body = _document(rng, n_sentences)
        sub = folder / f"part{i % 50:02d}"
        sub.mkdir(exist_ok=True)
        path = sub / (f"doc{i:06d}.md" if i % 2 else f"doc{i:06d}.txt")
        text = f"# {title}\n\n{body}\n" if i % 2 else f"{title}\n\n{body}\n"
        path.write_text(text)
        total += len(text.encode())
    return {"files": files, "bytes": total}


def generate_big_txt(path: Path, size_mb: float, seed: int = 13) -> int:
    """One .txt file of about ``size_mb`` MB, written paragraph by paragraph."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(path, "w") as fh:
        fh.write("A very long chronicle\n\n")
        while written < size_mb * MB:
            _, body = _document(rng, 200)
            fh.write(body + "\n\n")
            written += len(body) + 2
    return path.stat().st_size


def generate_big_jsonl(path: Path, lines: int, seed: int = 17) -> int:
    """One JSONL file of ``lines`` short records ({id, title, text})."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for i in range(lines):
            title, body = _document(rng, rng.randint(1, 3))
            fh.write(json.dumps({"id": f"r{i}", "title": title, "text": body}) + "\n")
    return path.stat().st_size


# ---- one measurement in a child process ------------------------------------------------------------

def _child(home: str, folder: str, queue, processes: int = 0) -> None:
    try:
        from pathrag_lab.bench.indexing import _settings, timed_index

        settings = _settings(Path(home), Path(folder), extract_processes=processes)
        report, seconds = timed_index(settings, Path(folder))
        x = report.extraction
        queue.put({
            "seconds": seconds,
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            # the largest extraction worker process (children of this one), 0 without workers
            "worker_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            "extract_processes": x.processes if x else 0,
            "files": len(report.sync.plan.new) + len(report.sync.plan.changed),
            "files_failed": len(report.sync.failed),
            "documents_written": report.sync.documents_written,
            "chunks_written": report.sync.chunks_written,
            "chunks_extracted": x.extracted if x else 0,
            # extraction records parsed (written) by the run: the changed chunks'; the merge parses none
            "records_written": (x.extracted + x.cache_hits + x.failed + x.empty) if x else 0,
            # chunks and mention rows the graph merge aggregated (all of them for a full build; for an edit,
            # the mentions of the keys it touched that it did not update from their tallies)
            "merge_chunks_read": x.merge.chunks_read if x and x.merge else 0,
            "merge_mentions_read": x.merge.mentions_read if x and x.merge else 0,
            # entities the merge updated from their kept tallies (entity_tallies) and the logged changes it added
            "merge_entities_tallied": x.merge.entities_tallied if x and x.merge else 0,
            "merge_tally_changes_read": x.merge.tally_changes_read if x and x.merge else 0,
            "graph": report.graph,
            "embedded": {t: s.embedded for t, s in report.embeddings.tables.items()},
            # write connections that merged DuckDB row groups (one in MERGE_EVERY_WRITES does: row_group_merging)
            "row_group_merges": report.row_group_merges,
        })
    except BaseException as exc:  # noqa: BLE001 - report the failure to the parent instead of hanging it
        queue.put({"error": f"{type(exc).__name__}: {exc}",
                   "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})


def measure_index(home: Path, folder: Path, timeout_s: float = 4 * 3600, processes: int = 0) -> dict[str, Any]:
    """``run_indexing`` of ``folder`` into ``home`` in a fresh process: stage seconds, peak RSS, counts.
    ``processes``: offline extraction and embedding worker processes (0: one per usable core, the default)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(str(home), str(folder), queue, processes))
    proc.start()
    try:
        result = queue.get(timeout=timeout_s)
    finally:
        proc.join(timeout=60)
    return result


ASK_QUESTION = "Where did Vera Quist move?"


def measure_ask(home: Path, question: str = ASK_QUESTION, timeout_s: float = 1800) -> dict[str, Any]:
    """``pathrag ask QUESTION`` on ``home`` as a new process, offline, no query service: wall and CPU seconds, peak
    RSS (``real_folders.MEASURE``)."""
    import subprocess
    import sys

    from pathrag_lab.bench.real_folders import LAUNCH, MEASURE

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATHRAG_", "OPENAI_"))}
    env.update(PATHRAG_HOME=str(home), PATHRAG_AUTO_SERVE="never")
    proc = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-c", LAUNCH, "ask", question], env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    if figures["rc"] != 0:
        return {"error": figures["stderr"][-2000:]}
    figures.pop("stderr")
    return figures


def _throughput(result: dict[str, Any], corpus_bytes: int) -> dict[str, Any]:
    """MB/s and chunks/s per stage (chunks = chunks written by the ingest)."""
    if "error" in result:
        return {}
    chunks = result["chunks_written"] or result["graph"].get("chunks", 0)
    out = {}
    for stage in (*STAGES, "total"):
        s = result["seconds"][stage]
        out[stage] = {"seconds": s, "mb_per_s": round(corpus_bytes / MB / s, 3) if s > 0 else None,
                      "chunks_per_s": round(chunks / s, 1) if s > 0 else None}
    return out


def _load() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def run_scale_bench(size_mb: float = 100.0, files: int = 10_000, small_fraction: float = 0.25,
                    big_txt_mb: float = 40.0, jsonl_lines: int = 200_000, workdir: Path | None = None,
                    log: Log = _quiet, keep: bool = False, parts: str = "all", memory_mb: float = 0.0,
                    edits: int = EDITS) -> dict[str, Any]:
    """The whole scale benchmark (see the module docstring); ``small_fraction`` sets the smaller size.
    ``parts``: "all", "corpus" (the two sizes and the edit) or "files" (the large .txt and JSONL).
    ``memory_mb`` > ``size_mb`` adds a third full build of that size (files in proportion), measured like the
    others but not edited: the memory growth is then read between ``size_mb`` and it (issue 23 asks for the slope
    between 100 MB and 300 MB). ``edits``: one-file edits of the ``size_mb`` corpus (``EDITS``)."""
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="pathrag-bench-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    from pathrag_lab.bench.report import machine_info

    results: dict[str, Any] = {"size_mb": size_mb, "files": files, "memory_mb": memory_mb, "parts": parts,
                               "sizes": [], "loads": [_load()],
                               "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "cpu": machine_info()["cpu"]}

    def save() -> None:
        (base / "results.json").write_text(json.dumps(results, indent=1))

    small = round(size_mb * small_fraction, 3)
    sizes = [(small, max(1, int(files * small_fraction))), (size_mb, files)]
    if memory_mb:
        if memory_mb <= size_mb:
            raise ValueError(f"memory_mb={memory_mb:g} must be larger than size_mb={size_mb:g} (or 0: no third build)")
        sizes.append((memory_mb, max(1, round(files * memory_mb / size_mb))))
    if parts == "files":
        sizes = []
    for mb, n in sizes:
        folder = base / f"corpus-{mb:g}MB"
        home = base / f"home-{mb:g}MB"
        # from scratch even in a workdir an earlier --keep run left: its home (and its edited files) would turn
        # the full build into a re-merge
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        log(f"generating {n} files, {mb:g} MB into {folder}")
        corpus = generate_scale_corpus(folder, mb, n)
        log(f"full offline index of {corpus['bytes'] / MB:.1f} MB in {n} files (load {_load()})")
        full = measure_index(home, folder)
        results["loads"].append(_load())
        entry = {"size_mb": round(corpus["bytes"] / MB, 2), "files": n, "full": full,
                 "throughput": _throughput(full, corpus["bytes"])}
        results["sizes"].append(entry)
        save()
        log(f"  {json.dumps({k: full.get(k) for k in ('seconds', 'peak_rss_mib', 'error')})}")
        if mb == size_mb and "error" not in full and full.get("extract_processes", 1) > 1:
            # the same build in one process, in a home of its own: the speedup the worker processes give at the
            # size issue 23 sets its build time for
            log(f"the same build with extraction and embedding in one process (load {_load()})")
            alone = base / f"home-{mb:g}MB-one-process"
            shutil.rmtree(alone, ignore_errors=True)
            entry["one_process"] = measure_index(alone, folder, processes=1)
            shutil.rmtree(alone, ignore_errors=True)
            results["loads"].append(_load())
            save()
        if mb == size_mb and "error" not in full:
            # a new `pathrag ask` after the build (it builds the chunk BM25 index and saves it), and again (it loads it)
            log(f"two new `pathrag ask` processes (load {_load()})")
            entry["asks"] = {"first": measure_ask(home), "next": measure_ask(home)}
            # ``edits`` one-file edits in a row, each its own run: the first is reported in the table, all in "edits"
            entry["edits"] = []
            for i, victim in enumerate(sorted(folder.rglob("*.txt"))[:edits]):
                victim.write_text(victim.read_text() + f"\nAn added line: Vera Quist moved to Carrick in {1901 + i}.\n")
                log(f"re-index after editing {victim.relative_to(folder)} (load {_load()})")
                edit = measure_index(home, folder)
                edit["file"] = victim.relative_to(folder).as_posix()
                entry["edits"].append(edit)
                if i == 0:   # the first ask after a change brings the saved index up to date
                    entry["asks"]["after_edit"] = measure_ask(home)
                entry.setdefault("edit", edit)
                results["loads"].append(_load())
                save()
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(folder, ignore_errors=True)

    for name, make in () if parts == "corpus" else (("big_txt", lambda f: generate_big_txt(f / "chronicle.txt", big_txt_mb)),
                       ("big_jsonl", lambda f: generate_big_jsonl(f / "records.jsonl", jsonl_lines))):
        folder = base / name
        home = base / f"home-{name}"
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        size = make(folder)
        log(f"{name}: one file of {size / MB:.1f} MB (load {_load()})")
        result = measure_index(home, folder)
        results[name] = {"file_mb": round(size / MB, 2), "jsonl_lines": jsonl_lines if name == "big_jsonl" else None,
                         "full": result, "throughput": _throughput(result, size)}
        results["loads"].append(_load())
        save()
        log(f"  {json.dumps({k: result.get(k) for k in ('seconds', 'peak_rss_mib', 'error')})}")
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(folder, ignore_errors=True)

    results["growth"] = memory_growth(results["sizes"])
    results["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    save()
    return results


def memory_growth(sizes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Peak RSS as a + b * MB through the two largest sizes measured, and what it predicts for 1 GB (1000 MB)
    of text. The largest two, not the smallest and the largest: memory that bounded batches and DuckDB's capped
    share hold stops growing once a corpus fills them, which the upper range shows and a line from the smallest
    size would blur."""
    ok = [s for s in sizes if "error" not in s["full"]]
    if len(ok) < 2:
        return None
    ok = sorted(ok, key=lambda s: s["size_mb"])[-2:]
    (x0, y0), (x1, y1) = [(s["size_mb"], s["full"]["peak_rss_mib"]) for s in (ok[0], ok[-1])]
    slope = (y1 - y0) / (x1 - x0) if x1 != x0 else 0.0
    intercept = y0 - slope * x0
    seconds = [(s["size_mb"], s["full"]["seconds"]["total"]) for s in (ok[0], ok[-1])]
    time_slope = (seconds[1][1] - seconds[0][1]) / (seconds[1][0] - seconds[0][0]) if x1 != x0 else 0.0
    return {"from_mb": x0, "to_mb": x1, "mib_per_mb": round(slope, 2), "base_mib": round(intercept, 1),
            "predicted_1gb_mib": round(intercept + slope * 1000, 0),
            "seconds_per_mb": round(time_slope, 2), "predicted_1gb_hours": round(time_slope * 1000 / 3600, 1)}
