"""`pathrag bench peers`: PathRAG against LightRAG and nano-graphrag, one scripted server, one run (issue 64).

Each peer lives in its own virtual environment under ``--envs`` (created once, then reused: ``PEERS`` pins what is
installed) and runs as a child process of a small driver script (``peer_drivers/``) executed by that environment's
Python: ``index`` a folder, ``edit`` or ``delete`` one file, ``query`` the questions in one process. Ours runs as a
user runs it: ``pathrag index FOLDER`` (a Dagster run), ``pathrag index --runless FOLDER``, a Python process calling
``run_indexing`` (the Dagster-free core call, ``OURS_INDEX_API``), and a Python process asking
``PathRAG(settings).query``. This parent measures each child's wall time and CPU (user + system,
``RUSAGE_CHILDREN``), as ``startup.py`` does.

All three talk to one ``FakeOpenAIServer`` on 127.0.0.1 whose chat responder (``peer_formats.PeerModel``) answers
each system in its own format with the same entities and relations per passage (the passage's musique-100
triples), after the same fixed delay per request; embeddings are the same server's bag-of-words vectors.

The corpus: ``QUESTIONS`` questions of musique-100, every gold passage of them, then other passages of the
dataset nearest (in the dataset's order, which keeps each question's paragraphs together) to each question's gold
passages, taken round-robin over the questions until there are ``PASSAGES``. One .txt file per passage: its
title, a blank line, its text.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from pathrag_lab.bench.peer_formats import PassageGraph, PeerModel, embed_responder, titles_in, EMBED_DIM

HEADING = "Peers"
DRIVERS = Path(__file__).resolve().parent / "peer_drivers"
DEFAULT_ENVS = Path.home() / ".cache" / "pathrag" / "peers"
PEERS: dict[str, dict[str, Any]] = {
    "lightrag": {"label": "LightRAG", "packages": ["lightrag-hku==1.5.7", "openai>=1.40"],
                 "driver": "lightrag_driver.py", "mode": "hybrid"},
    "nano": {"label": "nano-graphrag", "packages": ["nano-graphrag==0.0.8.2"],
             "driver": "nano_graphrag_driver.py", "mode": "local"},
}
SYSTEMS = ("ours", *PEERS)
LABELS = {"ours": "ours", **{k: v["label"] for k, v in PEERS.items()}}
QUESTIONS = 20
PASSAGES = 200
DELAY_S = 0.05
EDIT_LINE = "\nThis passage was revised once, edit {n}.\n"
Log = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


# ---- the corpus ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Corpus:
    folder: Path
    graphs: list[PassageGraph]
    questions: list[dict[str, Any]]   # {"question", "gold_titles"}
    victim: Path                       # the file edited, then deleted

    @property
    def question_texts(self) -> list[str]:
        return [q["question"] for q in self.questions]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def select_passages(corpus: list[dict[str, Any]], questions: list[dict[str, Any]], n: int) -> list[str]:
    """Passage ids: every gold passage of ``questions``, then each question's nearest other passages (by position in
    the dataset) round-robin until ``n``."""
    order = {p["id"]: i for i, p in enumerate(corpus)}
    chosen: list[str] = list(dict.fromkeys(g for q in questions for g in q["gold_ids"] if g in order))
    taken = set(chosen)
    queues = []
    for q in questions:
        spots = [order[g] for g in q["gold_ids"] if g in order]
        near = sorted(range(len(corpus)), key=lambda i: min(abs(i - s) for s in spots)) if spots else []
        queues.append(iter(near))
    while len(chosen) < n and queues:
        for queue in list(queues):
            for i in queue:
                pid = corpus[i]["id"]
                if pid not in taken:
                    taken.add(pid)
                    chosen.append(pid)
                    break
            else:
                queues.remove(queue)
            if len(chosen) >= n:
                break
    return chosen[:n]


def build_corpus(dataset: Path, where: Path, n_questions: int = QUESTIONS, n_passages: int = PASSAGES) -> Corpus:
    passages = _jsonl(dataset / "corpus.jsonl")
    questions = _jsonl(dataset / "questions.jsonl")[:n_questions]
    triples: dict[str, list[tuple[str, str, str]]] = {}
    for t in _jsonl(dataset / "triples.jsonl"):
        triples.setdefault(t["doc_id"], []).append((t["subject"], t["predicate"], t["object"]))
    by_id = {p["id"]: p for p in passages}
    ids = select_passages(passages, questions, n_passages)
    folder = where / "corpus"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    graphs = []
    for pid in ids:
        p = by_id[pid]
        g = PassageGraph.of(pid, " ".join(p["title"].split()), p["text"].strip(), triples.get(pid, []))
        (folder / f"{pid}.txt").write_text(g.file_text, encoding="utf-8")
        graphs.append(g)
    gold = {g for q in questions for g in q["gold_ids"]}
    victim = folder / f"{next(g.doc_id for g in graphs if g.doc_id not in gold and g.entities)}.txt"
    qs = [{"question": q["question"], "gold_titles": [by_id[g]["title"] for g in q["gold_ids"] if g in by_id]}
          for q in questions]
    return Corpus(folder, graphs, qs, victim)


# ---- side environments ---------------------------------------------------------------------------

def env_python(envs: Path, peer: str) -> Path:
    return envs / peer / "bin" / "python"


def ensure_env(envs: Path, peer: str, log: Log = _quiet) -> Path:
    """The peer's side environment's Python: created and installed on first use (``PEERS``), then reused. A marker
    file records what was installed; a different pin reinstalls."""
    python = env_python(envs, peer)
    marker = envs / peer / "pathrag-peer.json"
    wanted = PEERS[peer]["packages"]
    if python.exists() and marker.is_file() and json.loads(marker.read_text()).get("packages") == wanted:
        return python
    log(f"peers: creating {envs / peer} and installing {' '.join(wanted)} (once)")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(envs / peer)], check=True)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", *wanted], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"installing {' '.join(wanted)} into {envs / peer} failed: {done.stderr.strip()[-800:]}")
    marker.write_text(json.dumps({"packages": wanted}))
    return python


# ---- running a child and measuring it ------------------------------------------------------------

def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


COLD_ASKS = 5   # questions asked by new `pathrag ask` processes with no service running (each ~1 s: the imports)


def _process_cpu(pid: int | None) -> float:
    """User + system CPU seconds a running process has used so far (Linux /proc; 0 without one)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_child(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 3600) -> dict[str, Any]:
    """Run a child to its end: {"wall_s", "cpu_s", "stdout", "stderr", "result"} (``result``: the driver's PEER-RESULT JSON,
    when it printed one). A failed child is an error, never a figure."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-1500:]}")
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith("PEER-RESULT "):
            result = json.loads(line[len("PEER-RESULT "):])
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "stdout": proc.stdout, "stderr": proc.stderr,
            "result": result}


def _base_env() -> dict[str, str]:
    """The caller's environment without any endpoint or key setting (nothing real is ever reached), and our
    command's garbage-collector policy for the peer drivers (``PEER_GC_THRESHOLDS``, see _peer_common.py)."""
    from pathrag_pipeline.cli.gc_policy import THRESHOLDS

    drop = ("PATHRAG_", "OPENAI_", "LIGHTRAG", "LLM_", "EMBEDDING_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PEER_GC_THRESHOLDS"] = ",".join(str(v) for v in THRESHOLDS)
    return env


def ours_env(base_url: str, home: Path, docs: Path) -> dict[str, str]:
    from pathrag_pipeline.config import PACKAGE_ROOT

    return dict(_base_env(), PYTHONPATH=str(PACKAGE_ROOT), PATHRAG_HOME=str(home), PATHRAG_DOCS=str(docs),
                PATHRAG_LLM_BASE_URL=base_url, PATHRAG_LLM_MODEL="fake-chat",
                PATHRAG_EMBED_BASE_URL=base_url, PATHRAG_EMBED_MODEL="fake-embed", PATHRAG_AUTO_SERVE="never")


OURS_QUERY = """
import json, sys, time
from pathrag_pipeline.cli import gc_policy
gc_policy.apply()   # as the `pathrag` command's process, and the peer drivers' (PEER_GC_THRESHOLDS)
from pathrag_pipeline.config import Settings
from pathrag_pipeline.query.engine import PathRAG
questions = json.load(open(sys.argv[1]))
options = {"keywords": sys.argv[2]} if len(sys.argv) > 2 and sys.argv[2] != "auto" else {}
paused = len(sys.argv) > 3 and sys.argv[3] == "paused"
rag = PathRAG(Settings.from_env(), record=False)
rag.query("What is this collection of passages about?", mode="path", **options)
seconds = []
for q in questions[:5] if paused else questions:
    if paused:   # longer than the store keeps its read connection: this query opens the DuckDB file again
        from pathrag_pipeline.storage.store import KEEP_READING_S
        time.sleep(KEEP_READING_S + 0.5)
    t0 = time.perf_counter()
    rag.query(q, mode="path", **options)
    seconds.append(round(time.perf_counter() - t0, 4))
print("PEER-RESULT " + json.dumps({"query_s": seconds}))
"""


OURS_INDEX_API = """
import sys
from pathrag_pipeline.cli import gc_policy
gc_policy.apply()   # as the `pathrag` command's process, and the peer drivers' (PEER_GC_THRESHOLDS)
from pathlib import Path
from pathrag_pipeline.config import Settings
from pathrag_pipeline.index.pipeline import run_indexing
run_indexing(Settings.from_env(), folder=Path(sys.argv[1]), trigger="python")
"""
"""An index step through the Python API without Dagster: what a library user of ours calls (the peers are
libraries), and what a `pathrag index` process costs without its Dagster run (docs/scaling.md: the sensor then
reports it as runless materialisations)."""


class System:
    """How the benchmark drives one system: ``step(name, ...)`` runs index / edit / delete / query as a child."""

    def __init__(self, name: str, base_url: str, work: Path, corpus: Corpus, envs: Path) -> None:
        self.name, self.base_url, self.work, self.corpus = name, base_url, work, corpus
        self.docs = work / "docs"
        self.questions = work / "questions.json"
        self.python = env_python(envs, name) if name != "ours" else Path(sys.executable)
        self.served_pid: int | None = None

    def fresh(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        shutil.copytree(self.corpus.folder, self.docs)
        self.questions.write_text(json.dumps(self.corpus.question_texts))

    def graph_size(self) -> dict[str, int]:
        """Our index's documents, entities and relations (read after the measured child ended)."""
        import duckdb

        with duckdb.connect(str(self.work / "home" / "pathrag.duckdb"), read_only=True) as con:
            row = con.execute("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM entities), "
                              "(SELECT count(*) FROM relations)").fetchone()
        return dict(zip(("documents", "entities", "relations"), row))

    @property
    def victim(self) -> Path:
        return self.docs / self.corpus.victim.name

    @contextlib.contextmanager
    def service(self) -> Iterator[None]:
        """Ours: the query service a plain `pathrag index` starts in the background for the next commands (as at a
        terminal: ``PATHRAG_AUTO_SERVE=always``; cli/background_service.py), while the block runs; the ``served``
        steps hand their work to it (`pathrag index` and `pathrag ask` find it themselves) and count its CPU with
        their own. The starting command (it puts the deleted file back) is not measured; `pathrag serve --stop`
        ends the service."""
        from pathrag_lab.bench.startup import LAUNCH
        from pathrag_pipeline.config import PACKAGE_ROOT
        from pathrag_pipeline.query.service import wait_ready
        from pathrag_pipeline.storage.process_identity import is_alive, parse

        env = ours_env(self.base_url, self.work / "home", self.docs)
        started = run_child([sys.executable, "-c", LAUNCH, "index", str(self.docs)],
                            dict(env, PATHRAG_AUTO_SERVE="always"), PACKAGE_ROOT)
        if "started a query service" not in started["stderr"]:
            raise RuntimeError(f"`pathrag index` started no query service: {started['stderr'][-2000:]}")
        # its indexer warmed up (imports, the Dagster instance), as a user's next command a few seconds later finds it
        info = wait_ready(self.work / "home", timeout=300, warm=True)
        try:
            self.served_pid = parse(info.process)[1]
            yield
        finally:
            self.served_pid = None
            run_child([sys.executable, "-c", LAUNCH, "serve", "--stop"], env, PACKAGE_ROOT)
            deadline = time.monotonic() + 120
            while is_alive(info.process) and time.monotonic() < deadline:
                time.sleep(0.2)

    def served_step(self, step: str, questions: int | None = None) -> dict[str, Any]:
        """Ours with `pathrag serve` running: ``index`` (a new `pathrag index` process, handed to the service) or
        ``ask`` (one new `pathrag ask` process per question, the first ``questions`` of them: wall and CPU are their
        medians). CPU includes the service's over the step. Outside ``service()`` the same processes run alone."""
        from pathrag_lab.bench.startup import LAUNCH
        from pathrag_pipeline.config import PACKAGE_ROOT

        env = ours_env(self.base_url, self.work / "home", self.docs)
        texts = self.corpus.question_texts[:questions] if step == "ask" else [None]
        walls, cpus, stdout = [], [], ""
        for question in texts:
            argv = ([sys.executable, "-c", LAUNCH, "ask", question] if question is not None
                    else [sys.executable, "-c", LAUNCH, "index", str(self.docs)])
            served0 = _process_cpu(self.served_pid)
            measured = run_child(argv, env, PACKAGE_ROOT)
            walls.append(measured["wall_s"])
            cpus.append(measured["cpu_s"] + _process_cpu(self.served_pid) - served0)
            stdout = measured["stdout"]
        if step == "ask":
            return {"wall_s": _median(walls), "cpu_s": _median(cpus), "stdout": stdout, "result": {"ask_s": walls}}
        from pathrag_lab.bench.startup import report_parts

        return {"wall_s": walls[0], "cpu_s": round(cpus[0], 3), "stdout": stdout,
                "result": dict(self.graph_size(), parts=report_parts(stdout))}

    def step(self, step: str, runless: bool = False, api: bool = False) -> dict[str, Any]:
        if self.name == "ours":
            from pathrag_lab.bench.startup import LAUNCH

            env = ours_env(self.base_url, self.work / "home", self.docs)
            if step == "query":
                argv = [sys.executable, "-c", OURS_QUERY, str(self.questions)]
            elif step == "query_llm_keywords":   # PathRAG's keyword call, then the answer: two model calls
                argv = [sys.executable, "-c", OURS_QUERY, str(self.questions), "llm"]
            elif step == "paused_query":   # each question after a pause: the DuckDB file reopened every query
                argv = [sys.executable, "-c", OURS_QUERY, str(self.questions), "auto", "paused"]
            elif api:   # run_indexing in a new Python process: no Dagster import, no run recorded
                argv = [sys.executable, "-c", OURS_INDEX_API, str(self.docs)]
            else:   # edit and delete change the folder first (see run_peers_bench); the index brings it up to date
                argv = [sys.executable, "-c", LAUNCH, "index", *(["--runless"] if runless else []), str(self.docs)]
            from pathrag_pipeline.config import PACKAGE_ROOT
            measured = run_child(argv, env, PACKAGE_ROOT)
            if measured["result"] is None:   # an index step: the graph it left, where its time went (its report)
                from pathrag_lab.bench.startup import report_parts

                measured["result"] = dict(self.graph_size(), parts=report_parts(measured["stdout"]))
            return measured
        peer = PEERS[self.name]
        argv = [str(self.python), str(DRIVERS / peer["driver"]), step, "--base-url", self.base_url,
                "--workdir", str(self.work / "store"), "--dim", str(EMBED_DIM), "--mode", peer["mode"]]
        if step == "index":
            argv += ["--docs", str(self.docs)]
        elif step in ("edit", "delete"):
            argv += ["--file", str(self.victim)]
        else:
            argv += ["--questions", str(self.questions)]
        return run_child(argv, _base_env(), self.work)


# ---- the benchmark -------------------------------------------------------------------------------

def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def _edit(path: Path, n: int) -> None:
    path.write_text(path.read_text(encoding="utf-8") + EDIT_LINE.format(n=n), encoding="utf-8")


def gold_share(model: PeerModel, system: str, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """For each question, the answer prompt the system sent (the last one holding the question) and whether the
    gold passages' titles are in it: share of questions with every gold title, and mean share of gold titles."""
    prompts = [p for s, p in model.answer_prompts if s == system]
    every, share, missing, words = 0, [], 0, []
    for q in questions:
        prompt = next((p for p in reversed(prompts) if q["question"] in p), None)
        if prompt is None:
            missing += 1
            share.append(0.0)
            continue
        words.append(len(prompt.split()))
        found = titles_in(prompt, q["question"], q["gold_titles"])
        every += all(found)
        share.append(sum(found) / len(found) if found else 0.0)
    n = len(questions) or 1
    return {"all_gold_titles": round(every / n, 2), "gold_titles_share": round(sum(share) / n, 2),
            "questions_without_prompt": missing, "answer_prompt_words": _median(words)}


def compile_ours() -> None:
    """Byte-compile our package, as pip does when it installs one (the peers' packages are installed so, into their
    environments). A repository checkout installed editable (`pip install -e .`) is compiled by the interpreter at
    first use and kept in ``__pycache__``, unless ``PYTHONDONTWRITEBYTECODE`` is set (as on this machine and in many
    container images): then every new process compiles every module it imports again, ~0.4 s of a `pathrag index`
    process. Python reads compiled files even then, so compiling once here measures ours as installed."""
    import compileall

    from pathrag_pipeline.config import PACKAGE_ROOT

    for package in ("pathrag_pipeline", "assets"):
        compileall.compile_dir(str(PACKAGE_ROOT / package), quiet=1)


def run_peers_bench(dataset: Path, repeats: int = 3, systems: tuple[str, ...] = SYSTEMS, delay: float = DELAY_S,
                    n_questions: int = QUESTIONS, n_passages: int = PASSAGES, envs: Path = DEFAULT_ENVS,
                    workdir: Path | None = None, log: Log = _quiet) -> dict[str, Any]:
    from pathrag_lab.bench.report import machine_info
    from pathrag_lab.testing.openai_server import FakeOpenAIServer

    started = time.perf_counter()
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-peers-"))
    corpus = build_corpus(dataset, base, n_questions, n_passages)
    for name in systems:
        if name != "ours":
            ensure_env(envs, name, log)
        else:
            compile_ours()
    model = PeerModel(corpus.graphs, delay=delay)   # a delay per chat call, not per embedding
    results: dict[str, Any] = {}
    with FakeOpenAIServer() as server:
        server.chat_responder = model
        server.embed_responder = embed_responder
        for name in systems:
            runs: dict[str, list[dict[str, Any]]] = {}
            figures: dict[str, Any] = {}
            for r in range(repeats):
                system = System(name, server.base_url, base / f"{name}-{r}", corpus, envs)
                system.fresh()

                def measure(label: str, step: str, served: bool = False, runless: bool = False,
                            api: bool = False) -> None:
                    model.reset()
                    embeds0 = server.count("embeddings")
                    log(f"peers: {LABELS[name]} {label} (run {r + 1}/{repeats})")
                    if step == "ask_cold":
                        measured = system.served_step("ask", questions=COLD_ASKS)
                    else:
                        measured = system.served_step(step) if served else system.step(step, runless=runless, api=api)
                    usage = model.totals(name)
                    row = {"wall_s": measured["wall_s"], "cpu_s": measured["cpu_s"], **usage,
                           "embedding_requests": server.count("embeddings") - embeds0,
                           "unmatched_extractions": model.unmatched, "driver": measured["result"]}
                    if step.startswith("query") or step == "paused_query":
                        qs = (measured["result"] or {}).get("query_s") or []
                        row["query_median_s"] = _median(qs)
                    if step.startswith("query"):
                        row.update(gold_share(model, name, corpus.questions))
                    runs.setdefault(label, []).append(row)

                measure("index", "index")
                _edit(system.victim, r)   # the same sentence appended again still changes the file
                measure("edit", "edit")
                if name == "ours":
                    _edit(system.victim, r)
                    measure("edit_runless", "edit", runless=True)
                    _edit(system.victim, r)
                    measure("edit_api", "edit", api=True)
                    kept = system.victim.read_text(encoding="utf-8")
                    system.victim.unlink()   # ours: the file leaves the folder, the index follows
                    measure("delete", "delete")
                    system.victim.write_text(kept, encoding="utf-8")
                    measure("restore_api", "edit", api=True)   # the file back, indexed (not in the table)
                    system.victim.unlink()
                    measure("delete_api", "delete", api=True)
                    system.victim.write_text(kept, encoding="utf-8")
                    with system.service():   # started by the `pathrag index` that put the file back
                        _edit(system.victim, r + 1)
                        measure("first_served", "index", served=True)   # its first run pays first uses
                        measure("noop_served", "index", served=True)
                        _edit(system.victim, r)
                        measure("edit_served", "index", served=True)
                        measure("ask_served", "ask", served=True)
                        system.victim.unlink()
                        measure("delete_served", "index", served=True)
                    # a new `pathrag ask` with no service running: it loads the engine and the clients itself
                    measure("ask_cold", "ask_cold", served=True)
                elif name == "lightrag":
                    measure("delete", "delete")
                # nano-graphrag: insert only, no delete (see UNFAIR)
                measure("query", "query")
                if name == "ours":
                    measure("query_llm_keywords", "query_llm_keywords")
                    measure("paused_query", "paused_query")
            for label, rows in runs.items():
                figures[label] = {
                    "wall_s": _median([x["wall_s"] for x in rows]), "cpu_s": _median([x["cpu_s"] for x in rows]),
                    "calls": rows[-1]["calls"], "prompt_tokens": rows[-1]["prompt_tokens"],
                    "completion_tokens": rows[-1]["completion_tokens"], "by_kind": rows[-1]["by_kind"],
                    "embedding_requests": rows[-1]["embedding_requests"],
                    "unmatched_extractions": rows[-1]["unmatched_extractions"], "driver": rows[-1]["driver"],
                    # the peers' edit and delete: the work alone, inside their process (drivers' step_s)
                    "step_s": _median([x["driver"]["step_s"] for x in rows if (x["driver"] or {}).get("step_s")]),
                }
                if label.startswith("query"):
                    figures[label].update({k: rows[-1][k] for k in ("all_gold_titles", "gold_titles_share",
                                                                     "questions_without_prompt",
                                                                     "answer_prompt_words")})
                if label.startswith("query") or label == "paused_query":
                    figures[label]["query_median_s"] = _median([x["query_median_s"] for x in rows
                                                                if x["query_median_s"] is not None])
            results[name] = {"figures": figures, "runs": runs}
    if workdir is None:
        shutil.rmtree(base, ignore_errors=True)
    names = {n.casefold() for g in corpus.graphs for n, _ in g.entities}
    pairs = {frozenset((s.casefold(), t.casefold())) for g in corpus.graphs for s, t, _, _ in g.relations}
    return {"dataset": dataset.name, "questions": len(corpus.questions), "passages": len(corpus.graphs),
            "scripted_entities": len(names), "scripted_relations": len(pairs), "delay_s": delay, "repeats": repeats,
            "embedding_dim": EMBED_DIM, "modes": {"ours": "path", **{k: v["mode"] for k, v in PEERS.items()}},
            "packages": {k: v["packages"] for k, v in PEERS.items()}, "systems": results,
            "machine": machine_info(), "seconds": round(time.perf_counter() - started, 1)}


# ---- the report ----------------------------------------------------------------------------------

UNFAIR = [
    "**Concurrency as shipped.** Ours sends at most 4 LLM requests at once (`PATHRAG_LLM_MAX_CONCURRENCY`), "
    "LightRAG 4 (`llm_model_max_async`, with `max_parallel_insert` 3 documents at once), nano-graphrag 16 "
    "(`best_model_max_async`). With a fixed delay per request, wall time follows these limits as much as the code.",
    "**One process per step.** Every index, edit, delete and query step is a fresh process for every system, so each "
    "figure includes imports and opening the stores. Ours is driven as its users drive it (the `pathrag index` CLI, "
    "a Dagster run recorded per index); the peers are libraries, whose users may keep one process alive and pay "
    "this once. Ours does it for its users: a plain `pathrag index` or `pathrag ask` at a terminal starts `pathrag "
    "serve` for the home in the background (`PATHRAG_AUTO_SERVE`; the benchmark sets it to `always`, its children "
    "having no terminal), and the next commands hand it their work. The rows \"after a command that started the "
    "background service\" are those next commands: a new `pathrag index` process that hands the run to the service "
    "(the same Dagster run; the figure is the new process's wall time, start-up included, and the CPU of both "
    "processes over it), set beside the peers' new-process edit and delete. The first command (the one that starts "
    "the service, here the one putting the deleted file back) costs what the \"edit one file\" row says and is not "
    "measured again; the benchmark waits until the service has warmed up (its imports and Dagster instance, a few "
    "seconds after it starts; a command sent sooner waits for them), and the service's first run still pays "
    "first-use costs (Dagster's, LanceDB's, pydantic's) and has its own row; after 15 minutes without a command the service stops and the next command is a first one again. "
    "The rows \"in a running process\" set ours beside the time the peers' driver measured around the delete and "
    "insert calls alone, inside the process that loaded them (no start-up, no storage loading: a bound no real "
    "client of theirs gets below).",
    "**Tokenizers.** tiktoken's files cannot be downloaded here, so both peers run with a reversible word-piece "
    "encoding in its place (about 1.3 tiktoken tokens a piece): their chunk sizes and context budgets hold more "
    "text than with tiktoken. Ours counts with its own tokenizer. musique passages are ~76 words, so every system "
    "makes one chunk per passage anyway.",
    "**Gleaning.** All three make one gleaning pass per chunk (ours `PATHRAG_GLEANING=1`, LightRAG "
    "`entity_extract_max_gleaning=1`, nano-graphrag 1, which then asks no YES/NO loop question). The scripted model "
    "returns 4/5 of a passage's entities first and the rest when gleaning, for all three.",
    "**Same graph, different normalisation.** The scripted model gives every system the same entities and relations "
    "per passage (the passage's musique-100 triples, type `concept` for all), but each system merges names its own "
    "way (nano-graphrag upper-cases them, ours merges aliases), so the graph sizes below differ slightly.",
    "**What each system does beyond extraction.** Description summaries follow each system's own trigger (ours: its "
    "merge rules; LightRAG: 8 or more description fragments; nano-graphrag: descriptions over 500 tokens). "
    "nano-graphrag also clusters the graph and asks for a report per community (GraphRAG) at every insert, "
    "rewriting every report each time; neither ours nor LightRAG has communities.",
    "**What an edit re-does.** Ours re-chunks the changed file, re-extracts only its changed chunks (cache by chunk "
    "text) and re-embeds what changed, inside a recorded Dagster run (`--runless`: the same stages, then Dagster "
    "imported to record them as runless materialisations; the Python API's `run_indexing`: the same stages, no Dagster "
    "at all, as the peers are called). "
    "LightRAG has no update: the benchmark deletes the document by id (it rebuilds the entities and relations it "
    "touched from its cached extraction results) and inserts the new text. nano-graphrag has no update or delete: "
    "it inserts the new text as a new document (ids are content hashes) and keeps the old version's chunks, "
    "entities and relations, then re-clusters and re-reports every community.",
    "**Delete.** nano-graphrag 0.0.8.2 cannot delete a document: no figure.",
    "**Query modes.** Ours `path` (its default: the question's keywords by the offline rules, then the answer), "
    "LightRAG `hybrid` (an LLM keyword call, then the answer), nano-graphrag `local` (no keyword call: it embeds "
    "the question; then the answer). With the fixed delay per request, ours and nano-graphrag's query pay one "
    "delay, LightRAG's two; ours with PathRAG's keyword call (`keywords=llm`, two delays) has its own rows. Ours "
    "queries with `record=False` (no query-log write, as the peers keep none).",
    "**Stores kept open between queries.** The peers load their stores (JSON files, nano-vectordb, the graph) into "
    "memory once per process. Ours holds the graph and the vectors it searches in memory, and the passages the "
    "chunk BM25 index reads to build itself (up to `KEPT_PASSAGES`), and checks their "
    "versions in its DuckDB file per query, which it keeps open for one second after each (`KEEP_READING_S`, for the "
    "next query; every query here follows the last within that second), with the LanceDB tables it opened. The row "
    "\"query after a pause\" gives ours when every query reopens the file and the tables.",
    "**Bytecode.** The peers are installed packages, compiled to bytecode by pip. Ours runs from this checkout "
    "(an editable install), which the benchmark byte-compiles first (`compile_ours`): with `PYTHONDONTWRITEBYTECODE` "
    "set, as on this machine, each of our processes would otherwise compile its modules again (~0.4 s of an edit).",
    "**The garbage collector.** Our `pathrag` command sets how its process collects garbage (not while a "
    "command's modules load, not at exit: `cli/gc_policy.py`; CPython's defaults cost about a fifth of a cold "
    "edit's CPU). The peer drivers and our query "
    "process run with the same setting (`PEER_GC_THRESHOLDS`), so no system's figure gains from it alone; a peer's "
    "user who never sets it gets slower new-process steps than shown here.",
    "**Caches.** LightRAG's LLM response cache is on (its default; its delete needs the cached extraction results). "
    "nano-graphrag's cache lives inside its own OpenAI functions, which the benchmark replaces, so it is off. "
    "Ours caches extractions by chunk text in its own tables. Each query question is asked once after a warm-up "
    "with a different question, so no answer comes from a cache.",
    "**Embeddings.** All three get the same 384-dimension bag-of-words vectors from the scripted server (a lexical "
    "stand-in for an embedding model: texts sharing words are close). Batching differs (embedding requests below). "
    "Ours would use its local embedder by default.",
    "**Storage.** The peers use their defaults (JSON files, nano-vectordb, NetworkX graphml); ours DuckDB and "
    "LanceDB, plus Dagster's run storage.",
    "**Gold titles in the context.** The check looks for each gold passage's title in the answer prompt the system "
    "sent (the question's own text removed first). Systems send contexts of different sizes (their own budgets), "
    "and a bigger context holds more titles; a title can also be present as an entity name rather than as the "
    "passage. It says what reached the prompt, not whether an LLM would answer right.",
    "**Tokens** are the scripted server's (whitespace words of every message and reply), not a real tokenizer's; "
    "prompts that re-send a conversation (gleaning) count it again, as a paid API would.",
]


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.0f}{unit}" if abs(v) >= 100 else f"{v:.2f}{unit}"   # word counts: no hundredths
    return f"{v}{unit}"


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "n/a"


def table_rows(r: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The report's table: one row per figure, one column per system, then ours/peer ratios."""
    systems = list(r["systems"])
    fig = {s: r["systems"][s]["figures"] for s in systems}
    peers = [s for s in systems if s != "ours"]

    def get(s: str, phase: str, key: str) -> Any:
        return (fig[s].get(phase) or {}).get(key)

    def wall_cpu(s: str, phase: str) -> str:
        if phase not in fig[s]:
            return "not supported"
        text = f"{_fmt(get(s, phase, 'wall_s'), ' s')} / {_fmt(get(s, phase, 'cpu_s'), ' s')}"
        if s == "ours" and phase == "edit" and "edit_runless" in fig[s]:
            text += f" (`--runless` {_fmt(get(s, 'edit_runless', 'wall_s'), ' s')} / " \
                    f"{_fmt(get(s, 'edit_runless', 'cpu_s'), ' s')})"
        if s == "nano" and phase == "edit":
            text += " (keeps the old copy)"
        if s == "lightrag" and phase == "edit":
            text += " (delete + insert)"
        return text

    def api(s: str, phase: str) -> str:
        """Ours through ``run_indexing`` (no Dagster run) beside the peers' own new-process step."""
        if s != "ours":
            return wall_cpu(s, phase)
        return wall_cpu(s, f"{phase}_api") if f"{phase}_api" in fig[s] else "n/a"

    def calls(s: str, phase: str) -> str:
        if phase not in fig[s]:
            return "n/a"
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(get(s, phase, "by_kind").items()))
        return f"{get(s, phase, 'calls')} ({kinds})" if kinds else str(get(s, phase, "calls"))

    def graph(s: str) -> str:
        d = get(s, "index", "driver") or {}
        return f"{d.get('entities', 'n/a')} / {d.get('relations', 'n/a')}"

    def running(s: str, ours_phase: str, phase: str) -> str:
        """An edit or delete in a process that has everything loaded: ours handed to `pathrag serve` by a new
        `pathrag index` (its wall and the CPU of both), the peers' own work inside their process (wall)."""
        if s == "ours":
            return wall_cpu(s, ours_phase) if ours_phase in fig[s] else "n/a"
        value = get(s, phase, "step_s")
        return f"{_fmt(value, ' s')} (the work alone)" if value is not None else "not supported"

    def two_calls(s: str, key: str, unit: str) -> str:
        """Ours with PathRAG's keyword call (``keywords="llm"``); a peer that makes two model calls a query already
        (LightRAG's keywords, then the answer) shows its query, one that makes one (nano-graphrag's local mode)
        has no such row."""
        if s == "ours":
            return _fmt(get(s, "query_llm_keywords", key), unit) if "query_llm_keywords" in fig[s] else "n/a"
        if "query" in fig[s] and not get(s, "query", "by_kind").get("keywords"):
            return "n/a (one call)"
        return _fmt(get(s, "query", key), unit)

    rows: list[tuple] = [
        ("full index, wall / CPU", lambda s: wall_cpu(s, "index"), "index", "wall_s"),
        ("chat calls for the index", lambda s: calls(s, "index"), "index", "calls"),
        ("prompt / completion tokens for the index",
         lambda s: f"{get(s, 'index', 'prompt_tokens')} / {get(s, 'index', 'completion_tokens')}", "index",
         "prompt_tokens"),
        ("embedding requests for the index", lambda s: _fmt(get(s, "index", "embedding_requests")), "index",
         "embedding_requests"),
        ("entities / relations after the index", graph, None, None),
        ("edit one file, wall / CPU", lambda s: wall_cpu(s, "edit"), "edit", "wall_s"),
        ("chat calls for the edit", lambda s: calls(s, "edit"), "edit", "calls"),
        ("delete one file, wall / CPU", lambda s: wall_cpu(s, "delete"), "delete", "wall_s"),
        ("edit one file through the Python API, no Dagster run (ours: `run_indexing` in a new process; the peers: "
         "their edit above), wall / CPU", lambda s: api(s, "edit"),
         "edit", "wall_s", ("edit_api", "wall_s")),
        ("delete one file through the Python API, no Dagster run (ours: as above; the peers: their delete above), "
         "wall / CPU", lambda s: api(s, "delete"), "delete",
         "wall_s", ("delete_api", "wall_s")),
        ("edit one file, a new process after a command that started the background service, wall / CPU (ours: "
         "`pathrag index` handed to it; the peers: their new-process edit above)",
         lambda s: wall_cpu(s, "edit_served") if s == "ours" else wall_cpu(s, "edit"), "edit", "wall_s",
         ("edit_served", "wall_s")),
        ("delete one file, a new process after a command that started the background service, wall / CPU (ours: "
         "as above; the peers: their new-process delete above)",
         lambda s: wall_cpu(s, "delete_served") if s == "ours" else
         (wall_cpu(s, "delete") if "delete" in fig[s] else "not supported"), "delete", "wall_s",
         ("delete_served", "wall_s")),
        ("edit one file in a running process, wall / CPU (ours: as above; the peers: the work alone, in the process "
         "that loaded them)", lambda s: running(s, "edit_served", "edit"), "edit", "step_s", ("edit_served", "wall_s")),
        ("delete one file in a running process, wall / CPU (ours: as above)",
         lambda s: running(s, "delete_served", "delete"), "delete", "step_s", ("delete_served", "wall_s")),
        ("the background service's first run (an edit), a new `pathrag index` process, wall / CPU",
         lambda s: wall_cpu(s, "first_served") if "first_served" in fig[s] else "n/a", None, None),
        ("`pathrag index` with nothing to do, handed to the background service, wall / CPU",
         lambda s: wall_cpu(s, "noop_served") if "noop_served" in fig[s] else "n/a", None, None),
        ("`pathrag ask` as a new process, handed to the background service (median), wall / CPU",
         lambda s: wall_cpu(s, "ask_served") if "ask_served" in fig[s] else "n/a", None, None),
        (f"`pathrag ask` as a new process, no background service running (median of {COLD_ASKS} questions), wall / "
         "CPU", lambda s: wall_cpu(s, "ask_cold") if "ask_cold" in fig[s] else "n/a", None, None),
        ("query, in one process (median)", lambda s: _fmt(get(s, "query", "query_median_s"), " s"), "query",
         "query_median_s"),
        ("query after a pause, in one process (ours: past the second its DuckDB file stays open; median of 5)",
         lambda s: _fmt(get(s, "paused_query", "query_median_s"), " s") if "paused_query" in fig[s] else "n/a",
         None, None),
        ("chat calls for the queries (warm-up included)", lambda s: calls(s, "query"), "query", "calls"),
        (f"every gold passage title in the context, {r['questions']} questions",
         lambda s: _fmt(get(s, "query", "all_gold_titles")), "query", "all_gold_titles"),
        ("share of gold passage titles in the context", lambda s: _fmt(get(s, "query", "gold_titles_share")),
         "query", "gold_titles_share"),
        ("words in an answer prompt (median)", lambda s: _fmt(get(s, "query", "answer_prompt_words")), "query",
         "answer_prompt_words"),
        # ours with PathRAG's keyword call (`keywords="llm"`, the paper's preset): two model calls a query, as
        # LightRAG's hybrid mode makes; our default path takes the offline rules' keywords (one call)
        ("query with PathRAG's keyword call (two model calls; ours: `keywords=llm`), in one process (median)",
         lambda s: two_calls(s, "query_median_s", " s"), "query", "query_median_s",
         ("query_llm_keywords", "query_median_s")),
        ("every gold passage title in the context, PathRAG's keyword call",
         lambda s: two_calls(s, "all_gold_titles", ""), "query", "all_gold_titles",
         ("query_llm_keywords", "all_gold_titles")),
    ]
    columns = ["figure", *[LABELS[s] for s in systems], *[f"ours / {LABELS[p]}" for p in peers]]
    out = []
    for label, cell, phase, key, *ours_override in rows:
        ours_phase, ours_key = ours_override[0] if ours_override else (phase, key)
        ratios = [(_ratio(get("ours", ours_phase, ours_key), get(p, phase, key)) if phase and "ours" in fig else "")
                  for p in peers]
        out.append([label, *[cell(s) for s in systems], *ratios])
    return columns, out


def markdown_section(r: dict[str, Any]) -> str:
    from pathrag_lab.bench.report import machine_stamp, md_table

    columns, rows = table_rows(r)
    pins = ", ".join(p for pk in r["packages"].values() for p in pk)
    intro = (
        f"Reproduce: `pathrag bench peers --repeats {r['repeats']} --update-docs docs/benchmarks.md`.\n\n"
        f"Ours against LightRAG and nano-graphrag ({pins}, each in its own virtual environment) on "
        f"{r['passages']} passages of {r['dataset']} (every gold passage of its first {r['questions']} questions, "
        "then the passages nearest them in the dataset; one .txt file each, title first), all three answered by one "
        f"scripted OpenAI-compatible server on 127.0.0.1 waiting {r['delay_s'] * 1000:.0f} ms before every chat reply "
        "(embeddings are answered at once). Its "
        "model gives each system, in that system's own output format, the same entities and relations for a passage: "
        f"the passage's musique-100 triples ({r['scripted_entities']} distinct entities and {r['scripted_relations']} "
        "related pairs in all). Each step runs as its own process and is timed from outside: wall time and CPU (user + "
        f"system) of that process, median of {r['repeats']} fresh runs; calls and tokens as the server counted them "
        f"(the last run). Query modes: ours `{r['modes']['ours']}`, LightRAG `{r['modes']['lightrag']}`, "
        f"nano-graphrag `{r['modes']['nano']}`; latency is the median over the {r['questions']} questions after one "
        "warm-up question, in one process. Ratios are ours / the peer's (below 1: ours is lower); in a wall / CPU row "
        "the ratio is of wall time.\n")
    unfair = "\n".join(f"- {u}" for u in UNFAIR)
    return (f"## {HEADING}\n\n{intro}\n{md_table(columns, rows)}\n\nEvery way this comparison is unfair:\n\n{unfair}"
            f"\n\n_Measured {machine_stamp(r['machine'])}; this section ran {r['seconds']:.0f} s{_load(r['machine'])}._")


def _load(machine: dict[str, Any]) -> str:
    """The load average at the end of the run: the machine is shared, and wall times stretch with its load."""
    loads = machine.get("load_average") or []
    return f"; load average {loads[0]:.1f} at its end" if loads else ""
