"""`pathrag bench faults`: an LLM-built index through an endpoint that fails on part of its requests.

Issue 61's fault matrix. A generated corpus is indexed with the LLM extractor against the scripted
OpenAI-compatible server (``testing/openai_server.py``, on 127.0.0.1) playing an extraction model
(``indexing.OfflineBackedModel``: the offline rules' output as the model's reply), first with no fault (the
reference), then once per fault, each striking a share of the chat requests at random (seeded): HTTP 429, HTTP 500,
hangs past the client's timeout, trickled bodies, malformed (not JSON), schema-violating (JSON of the wrong shape),
empty (no choices) and dropped connections (the three faults of content strike the extraction requests, whose
reply has a structure, not the description summaries, whose free text "this is not JSON {" would be). Per fault: whether the run completed (no exception, the run's exit),
the chunks extracted and failed, the requests the server saw, and the same after a second run (failed chunks are
retried by the next run), with whether the graph then equals the reference's (``kills.fingerprint`` of the
entity and relation tables). No timing is asserted anywhere: the seconds are what the runs took here.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

HEADING = "Faults on part of the LLM requests"
TIMEOUT_S = 2
FAULTS: dict[str, float] = {
    "429": 0.30, "500": 0.30, "timeout": 0.15, "trickle": 0.10, "malformed": 0.10, "schema": 0.10,
    "empty_choices": 0.10, "disconnect": 0.10,
}
"""Fault -> share of the chat requests it strikes (issue 61's rates where it names one: 500 at 30%, hangs at 15%,
trickles at 10%; the others at 10%, 429 at 30% as a rate limit under load)."""
NAMES = {"429": "HTTP 429", "500": "HTTP 500", "timeout": "hang past the timeout", "trickle": "trickled body",
         "malformed": "malformed (not JSON)", "schema": "schema-violating JSON", "empty_choices": "empty (no choices)",
         "disconnect": "dropped connection"}
GRAPH_TABLES = ("entities", "relations")
CONTENT_FAULTS = frozenset({"malformed", "schema", "empty_choices"})
"""Faults in what a reply says, not how it arrives: they strike the extraction requests (structured output), not the
description summaries (free text)."""
Log = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _server(fault: str | None, share: float, seed: int) -> Any:
    from pathrag_lab.bench.indexing import OfflineBackedModel
    from pathrag_lab.testing.openai_server import FakeOpenAIServer

    rng = random.Random(seed)
    lock = threading.Lock()
    model = OfflineBackedModel()

    current = threading.local()

    class FaultyServer(FakeOpenAIServer):
        """Strikes each chat request with ``fault`` at ``share``, at random."""

        def _enter(self, endpoint: str, body: dict[str, Any], headers: dict[str, str]) -> None:
            current.body = body
            super()._enter(endpoint, body, headers)

        def _take_fault(self, endpoint: str) -> str | None:
            if endpoint == "chat" and fault is not None and fault != "schema" and _strikes(current.body):
                with self._lock:
                    if rng.random() < share:
                        return fault
            return super()._take_fault(endpoint)

    def _strikes(body: dict[str, Any]) -> bool:
        # a reply of the wrong content is only wrong where a structure is asked for: a description summary is
        # free text, which "this is not JSON {" is too (transport faults strike every request)
        return fault not in CONTENT_FAULTS or not _is_summary(body)

    def respond(request: dict[str, Any]) -> str:
        if fault == "schema" and _strikes(request):
            with lock:
                struck = rng.random() < share
            if struck:
                return json.dumps({"entities": "none", "relations": [{"src": 1}]})
        return model(request)

    server = FaultyServer()
    server.chat_responder = respond
    server.timeout_sleep = TIMEOUT_S * 1.5      # a hang outlasts the client's timeout
    server.trickle_interval = 0.001             # a body of ~2 kB dribbles out over ~2 s
    return server


def _is_summary(body: dict[str, Any]) -> bool:
    return "Description list:" in str(((body or {}).get("messages") or [{}])[-1].get("content") or "")


def _run(home: Path, folder: Path, base_url: str) -> dict[str, Any]:
    from pathrag_lab.bench.indexing import _settings
    from pathrag_pipeline.index.pipeline import run_indexing

    settings = _settings(home, folder, llm_base_url=base_url, llm_model="fake-chat", llm_timeout=TIMEOUT_S)
    started = time.perf_counter()
    out: dict[str, Any] = {"completed": True, "error": None}
    try:
        report = run_indexing(settings, folder=folder, trigger="bench")
        stats = report.extraction
        out.update(extracted=stats.extracted if stats else 0, failed=stats.failed if stats else 0)
    except Exception as exc:   # noqa: BLE001 - the figure is whether the run completed, and why not
        out.update(completed=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def _status(home: Path) -> dict[str, int]:
    from pathrag_pipeline.storage.store import Store

    with Store(home / "pathrag.duckdb").connect(read_only=True) as con:
        rows = dict(con.execute("SELECT status, count(*) FROM extractions GROUP BY status").fetchall())
    return {"ok": rows.get("ok", 0), "failed": rows.get("failed", 0), "empty": rows.get("empty", 0)}


def _graph(home: Path) -> dict[str, str]:
    from pathrag_lab.bench.kills import fingerprint

    prints = fingerprint(home)
    return {t: prints[t] for t in GRAPH_TABLES if t in prints}


def run_faults_bench(n_docs: int = 40, faults: dict[str, float] | None = None, seed: int = 61,
                     workdir: Path | None = None, log: Log = _quiet) -> dict[str, Any]:
    from pathrag_lab.bench.indexing import _corpus
    from pathrag_lab.bench.report import machine_info

    started = time.perf_counter()
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-faults-"))
    base.mkdir(parents=True, exist_ok=True)
    folder, _ = _corpus(base, n_docs)
    result: dict[str, Any] = {"documents": n_docs, "timeout_s": TIMEOUT_S, "seed": seed, "runs": []}
    log("reference build, no fault")
    home = base / "reference"
    shutil.rmtree(home, ignore_errors=True)
    with _server(None, 0.0, seed) as server:
        first = _run(home, folder, server.base_url)
        result["reference"] = {**first, "requests": server.count("chat"), **_status(home)}
    reference = _graph(home)
    for fault, share in (faults or FAULTS).items():
        log(f"{NAMES.get(fault, fault)} at {share:.0%}")
        home = base / f"fault-{fault}"
        shutil.rmtree(home, ignore_errors=True)
        row: dict[str, Any] = {"fault": fault, "share": share}
        with _server(fault, share, seed) as server:
            row["first"] = {**_run(home, folder, server.base_url), "requests": server.count("chat"), **_status(home)}
            server.reset()
            row["second"] = {**_run(home, folder, server.base_url), "requests": server.count("chat"),
                             **_status(home)}
        row["graph_equal"] = _graph(home) == reference
        result["runs"].append(row)
        log(f"  first run: {row['first']['ok']} ok, {row['first']['failed']} failed; after a second: "
            f"{row['second']['ok']} ok, graph equal: {row['graph_equal']}")
    result["machine"] = machine_info()
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import machine_stamp, md_table

    ref = r["reference"]
    rows = []
    for run in r["runs"]:
        a, b = run["first"], run["second"]
        rows.append([NAMES.get(run["fault"], run["fault"]), f"{run['share']:.0%}",
                     "yes" if a["completed"] else f"no: {a['error']}", f"{a['ok']} / {a['failed']}", a["requests"],
                     f"{a['seconds']:.1f}", f"{b['ok']} / {b['failed']}", b["requests"],
                     "yes" if run["graph_equal"] else "no"])
    intro = (f"Reproduce: `pathrag bench faults --update-docs docs/benchmarks.md`.\n\n"
             f"A generated corpus of {r['documents']} documents ({ref['ok']} chunks) indexed with the LLM extractor "
             "(first pass and one gleaning pass a chunk) through the scripted OpenAI-compatible server on 127.0.0.1, "
             "which answers as an extraction model would (the offline rules' entities as its reply), with a client "
             f"timeout of {r['timeout_s']:.0f} s. The reference build, no fault: {ref['ok']} chunks extracted with "
             f"{ref['requests']} requests in {ref['seconds']:.1f} s. Then one build per fault, striking that share "
             "of the chat requests at random (seeded), and a second run of the same command (failed chunks are "
             "retried by the next run). *Completed*: the run ended without an error (a chunk that fails all its "
             "retries fails alone). *ok / failed*: the chunks' extraction records. *Graph equal*: the entity and "
             "relation tables after the second run equal the reference's.\n")
    table = md_table(["fault", "share of requests", "run completed", "ok / failed", "requests answered", "s",
                      "after a second run: ok / failed", "requests answered", "graph equal"], rows)
    return (f"## {HEADING}\n\n{intro}\n{table}\n\n_Measured {machine_stamp(r['machine'])}; this section ran "
            f"{r['seconds']:.0f} s._")
