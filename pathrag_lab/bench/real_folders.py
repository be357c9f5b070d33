"""`pathrag bench real-folders`: the offline defaults on real documentation folders nobody here wrote.

Users point the tool at documentation, wikis and exported pages. This benchmark indexes installed documentation
folders from Debian's packages, each made by another generator (``FOLDERS``: asciidoc, DocBook, SQLite's own,
Sphinx), with ``pathrag index`` as a user runs it, and asks each folder's own questions
(``data/eval/real-folders/NAME.questions.jsonl``, written by hand from the pages' text, with accepted answer
strings and the technical names each question uses). Per folder:

- **template entities** among the 50 most-mentioned: an entity whose name occurs in the folder mostly inside
  template lines (``template_lines`` of the pages as read whole, furniture included: a line on at least half of
  them), e.g. "Show Source", a copyright footer, a menu; counted automatically, and the top 50 are listed so a
  reader can check;
- **names asked about that are entities**: each name a question uses (``names``) has an entity of the same name
  key (``text.names.name_key``), or one that ends with it after a dot ("bisect.insort" for "insort");
- **answers that state the fact**: the offline answer (extractive) of each mode holds an accepted answer, SQuAD-
  normalised, within its first ``ANSWER_PREFIX_CHARS`` characters (after the "Extractive answer" label), with the
  paired difference of ``path`` against ``naive`` and its 95% bootstrap interval;
- index wall time, CPU time and peak RSS of the ``pathrag index`` process (its workers included in CPU).

``baseline`` (a git revision) builds and asks the same folders with that revision's code in the same run (a git
worktree first on ``PYTHONPATH``, as ``bench startup`` does), so "before" and "after" come from one machine and
one command. A folder not installed is skipped with the ``apt-get install`` line that brings it. Any other folder
and question file can be given (``extra``), such as a held-out one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pathrag_pipeline.config import PACKAGE_ROOT

QUESTIONS_DIR = PACKAGE_ROOT / "data" / "eval" / "real-folders"
ANSWER_PREFIX_CHARS = 400
TOP_ENTITIES = 50
TEMPLATE_SHARE = 0.5
DEFAULT_MODES = ("path", "naive")
LAUNCH = "import sys; from pathrag_pipeline.cli import main; sys.exit(main())"
# Runs a command and prints its wall time, the CPU time and largest resident set of it and its waited-for children.
MEASURE = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
           "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True); "
           "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
           "print(json.dumps({'rc': p.returncode, 'wall_s': round(time.perf_counter() - t, 2), "
           "'cpu_s': round(u.ru_utime + u.ru_stime, 2), 'peak_rss_mib': round(u.ru_maxrss / 1024, 1), "
           "'stderr': p.stderr[-3000:]}))")


@dataclass(frozen=True)
class Folder:
    path: Path
    package: str          # the Debian package that installs it
    generator: str


FOLDERS: dict[str, Folder] = {
    "git-doc": Folder(Path("/usr/share/doc/git-doc"), "git-doc", "asciidoc (HTML) + its .txt sources"),
    "postgresql-doc": Folder(Path("/usr/share/doc/postgresql-doc-15/html"), "postgresql-doc-15", "DocBook (HTML)"),
    "sqlite3-doc": Folder(Path("/usr/share/doc/sqlite3"), "sqlite3-doc", "SQLite's own (HTML)"),
    "sphinx-doc": Folder(Path("/usr/share/doc/sphinx-doc/html"), "sphinx-doc", "Sphinx (HTML) + .rst.txt sources"),
    "flask-doc": Folder(Path("/usr/share/doc/python-flask-doc/html"), "python-flask-doc",
                        "Sphinx (HTML) + .txt sources"),
    "python3-doc": Folder(Path("/usr/share/doc/python3.11/html"), "python3-doc",
                          "Sphinx (HTML) + .rst.txt sources, 530 pages"),
}
ENCYCLOPEDIC = ("sample", "musique-100")
"""Encyclopedic sets asked the same way, so a change made for documentation is seen not to cost prose: the bundled
sample (``data/sample/`` and the lead names of ``data/sample_questions.md``) and musique-100 (``../shared/bench``, its
corpus.jsonl as the folder, indexed offline like any folder, with its answers and aliases)."""
HELD_OUT = frozenset({"sphinx-doc", "python3-doc"})
"""Folders whose questions were not looked at while the extractor and the answer rules were changed (the others
were): quote their figures as held out. python3-doc's were written by a helper from the pages alone (session 67),
without running the tool on them."""


# ---- the raw folder's template lines ------------------------------------------------------------------------

def _raw_texts(folder: Path):
    """Each supported file's text as read whole (HTML with its furniture), one document per file or JSONL record."""
    from pathrag_pipeline.ingest import html_content
    from pathrag_pipeline.ingest.parsing import ParseError, is_supported, parse_file

    for path in sorted(folder.rglob("*")):
        if not path.is_file() or not is_supported(path):
            continue
        rel = str(path.relative_to(folder))
        try:
            if path.suffix.lower() in (".html", ".htm"):
                yield html_content.full_text(html_content.decoded(path.read_bytes()))[0]
            else:
                for doc in parse_file(path, rel, max_bytes=50 * 1024 * 1024):
                    yield doc.text
        except (ParseError, OSError, ValueError):
            continue


def _line(line: str) -> str:
    return " ".join(line.split()).strip("# ").casefold()


def template_names(folder: Path, names: list[str]) -> dict[str, dict[str, int]]:
    """For each name, its whole-word occurrences in the folder read whole: in template lines (on at least
    ``TEMPLATE_SHARE`` of the documents) and in all. Two passes over the folder, one line count in memory."""
    docs = 0
    counts: Counter[str] = Counter()
    for text in _raw_texts(folder):
        docs += 1
        counts.update({_line(line) for line in text.split("\n") if len(_line(line)) >= 3})
    template = {line for line, n in counts.items() if n >= max(2, TEMPLATE_SHARE * docs)}
    # names are counted as written (case-sensitive): "Last" of a "Last updated" footer is not "last" in a sentence
    patterns = {name: re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)") for name in names}
    out = {name: {"template": 0, "all": 0} for name in names}
    for text in _raw_texts(folder):
        for line in text.split("\n"):
            folded = _line(line)
            written = " ".join(line.split())
            for name, pattern in patterns.items():
                n = len(pattern.findall(written))
                if n:
                    out[name]["all"] += n
                    if folded in template:
                        out[name]["template"] += n
    return out


# ---- one side's build and answers ---------------------------------------------------------------------------

def _env(code_root: Path, home: Path, docs: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATHRAG_", "OPENAI_"))}
    env.update(PYTHONPATH=str(code_root), PATHRAG_HOME=str(home), PATHRAG_DOCS=str(docs))
    return env


def index_folder(code_root: Path, home: Path, docs: Path) -> dict[str, Any]:
    """``pathrag index DOCS`` from ``code_root`` into a fresh ``home``: wall and CPU seconds, peak RSS."""
    shutil.rmtree(home, ignore_errors=True)
    proc = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-c", LAUNCH, "index", str(docs)],
                          cwd=code_root, env=_env(code_root, home, docs), capture_output=True, text=True,
                          timeout=4 * 3600)
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    if figures["rc"] != 0:
        raise RuntimeError(f"`pathrag index {docs}` from {code_root} exited {figures['rc']}: {figures['stderr']}")
    figures.pop("stderr")
    return figures


def ask_all(code_root: Path, home: Path, docs: Path, questions: Path, modes: tuple[str, ...]) -> dict[str, Any]:
    out = home.parent / f"{home.name}-answers.json"
    probe = Path(__file__).with_name("real_folder_probe.py")
    subprocess.run([sys.executable, str(probe), str(home), str(docs), str(questions), ",".join(modes), str(out)],
                   cwd=code_root, env=_env(code_root, home, docs), check=True, capture_output=True, text=True,
                   timeout=4 * 3600)
    return json.loads(out.read_text(encoding="utf-8"))


NEW_ASKS = 3
EDIT_SENTENCE = "Edited for the benchmark: the Harrowgate footbridge over the Lode was rebuilt in 1911."
EDITABLE = (".html", ".htm", ".md", ".rst", ".txt", ".jsonl")   # by preference: a page, a text file, a record


def _measured(argv: list[str], code_root: Path, env: dict[str, str]) -> float:
    """Wall seconds of ``pathrag ARGV`` run from ``code_root`` as a new process (``MEASURE``)."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-c", LAUNCH, *argv],
                          cwd=code_root, env=env, capture_output=True, text=True, timeout=3600)
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    if figures["rc"] != 0:
        raise RuntimeError(f"`pathrag {argv[0]}` from {code_root} exited {figures['rc']}: {figures['stderr']}")
    return figures["wall_s"]


def edit_victim(docs: Path) -> Path:
    """The file the benchmark edits: the first page by path (HTML, Markdown, reST, then text) of at least 1 KB; in
    a folder of small files (musique's passages), the first of any size."""
    files = sorted(f for f in docs.rglob("*") if f.is_file() and f.suffix.lower() in EDITABLE)
    for large_only in (True, False):
        for suffix in EDITABLE:
            for f in files:
                if f.suffix.lower() == suffix and (not large_only or f.stat().st_size >= 1024):
                    return f
    raise RuntimeError(f"{docs}: no page or text file to edit")


def edited(text: str, suffix: str) -> str:
    """``text`` with one sentence more: a paragraph before ``</body>`` in a page, at the end of the first record's
    text in JSON lines, else a paragraph at the end."""
    if suffix.lower() == ".jsonl":   # one document per line (musique's corpus): the first record's text
        first, _, rest = text.partition("\n")
        record = json.loads(first)
        record["text"] = f"{record.get('text', '')} {EDIT_SENTENCE}"
        return json.dumps(record, ensure_ascii=False) + "\n" + rest
    if suffix.lower() in (".html", ".htm"):
        at = text.lower().rfind("</body>")
        paragraph = f"<p>{EDIT_SENTENCE}</p>\n"
        return text[:at] + paragraph + text[at:] if at >= 0 else text + paragraph
    return text.rstrip("\n") + f"\n\n{EDIT_SENTENCE}\n"


def new_process_asks(code_root: Path, home: Path, docs: Path, questions: list[str],
                     repeats: int = NEW_ASKS) -> dict[str, Any]:
    """What a user pays without the query service (``PATHRAG_AUTO_SERVE=never``), each a new process: ``pathrag ask``
    (path mode, offline) of the first ``repeats`` questions after the home answered once, median; then one file
    edited (a sentence added, ``edit_victim``), ``pathrag index`` of the folder (a Dagster run) and the first
    ``pathrag ask`` after it. The file is put back afterwards (the home then lags it: it is not used again)."""
    env = _env(code_root, home, docs) | {"PATHRAG_AUTO_SERVE": "never"}
    picked = (questions * repeats)[:repeats]
    walls = [_measured(["ask", q], code_root, env) for q in picked]
    victim = edit_victim(docs)
    original = victim.read_bytes()
    try:
        victim.write_text(edited(original.decode("utf-8", errors="replace"), victim.suffix), encoding="utf-8")
        edit_s = _measured(["index", str(docs)], code_root, env)
        after_edit_s = _measured(["ask", picked[0]], code_root, env)
    finally:
        victim.write_bytes(original)
    return {"median_s": round(statistics.median(walls), 2), "runs_s": walls, "edited": str(victim.relative_to(docs)),
            "edit_s": edit_s, "after_edit_s": after_edit_s}


def graph_figures(home: Path) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(str(home / "pathrag.duckdb"), read_only=True)
    try:
        from pathrag_pipeline.text.tokenizer import count_tokens

        counts = {table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                  for table in ("documents", "chunks", "entities", "relations")}
        # what an LLM extraction reads: every chunk's text (its prompt's fixed part is the same per chunk)
        texts = con.execute("SELECT text FROM chunks").fetchall()
        counts["chunk_tokens"] = sum(count_tokens(text) for (text,) in texts)
        top = con.execute(f"SELECT name, mention_count FROM entities ORDER BY mention_count DESC, name "
                          f"LIMIT {TOP_ENTITIES}").fetchall()
        keys = [row[0] for row in con.execute("SELECT entity_key FROM entities").fetchall()]
        dotted = [row[0] for row in con.execute("SELECT name FROM entities WHERE name LIKE '%_._%' "
                                                "AND name NOT LIKE '% %'").fetchall()]
    finally:
        con.close()
    return {"counts": counts, "top": top, "keys": keys, "dotted": dotted}


# ---- scores -----------------------------------------------------------------------------------------------

def answer_body(answer: str) -> str:
    """The answer without the extractive label an offline answer opens with."""
    from pathrag_pipeline.query.params import EXTRACTIVE_LABEL

    return answer[len(EXTRACTIVE_LABEL):].lstrip() if answer.startswith(EXTRACTIVE_LABEL) else answer


def states_fact(answer: str, accepted: list[str], prefix: int = ANSWER_PREFIX_CHARS) -> bool:
    from pathrag_pipeline.evaluation.answer_scoring import answer_in_context

    return answer_in_context(answer_body(answer)[:prefix], accepted)


def name_is_entity(name: str, keys: set[str], suffixes: set[str]) -> bool:
    from pathrag_pipeline.text.names import name_key

    key = name_key(name.strip().removesuffix("()"))
    return key in keys or key in suffixes


def score_folder(rows: list[dict], graph: dict[str, Any], answers: dict[str, list[str]],
                 template: dict[str, dict[str, int]]) -> dict[str, Any]:
    from pathrag_pipeline.evaluation.bootstrap import paired_bootstrap

    from pathrag_pipeline.text.names import name_key

    keys = set(graph["keys"])
    # "bisect.insort" answers for "insort": the name keys of a dotted name's tails
    dotted = {name_key(name.split(".", i)[-1]) for name in graph["dotted"] for i in range(1, name.count(".") + 1)}
    names = [name for row in rows for name in row.get("names", [])]
    exact = [name_is_entity(n, keys, set()) for n in names]
    lenient = [name_is_entity(n, keys, dotted) for n in names]
    top = [{"name": name, "mentions": n, "template": _is_template(template.get(name))} for name, n in graph["top"]]
    stated = {mode: [states_fact(a, row["answers"]) for a, row in zip(texts, rows)] for mode, texts in answers.items()}
    anywhere = {mode: [states_fact(a, row["answers"], prefix=10**9) for a, row in zip(texts, rows)]
                for mode, texts in answers.items()}
    out: dict[str, Any] = {
        "questions": len(rows), "counts": graph["counts"],
        "template_entities": sum(t["template"] for t in top), "top": top,
        "names": len(names), "names_exact": sum(exact), "names_with_dotted": sum(lenient),
        "missing_names": [n for n, ok in zip(names, lenient) if not ok],
        "stated": {mode: sum(v) for mode, v in stated.items()},
        "anywhere": {mode: sum(v) for mode, v in anywhere.items()},
        "which": {mode: v for mode, v in stated.items()},
    }
    if "path" in stated and "naive" in stated:
        interval = paired_bootstrap([float(x) for x in stated["path"]], [float(x) for x in stated["naive"]])
        out["path_vs_naive"] = {"diff": interval.diff, "low": interval.low, "high": interval.high}
    return out


def _is_template(occurrences: dict[str, int] | None) -> bool:
    return bool(occurrences) and occurrences["all"] > 0 and occurrences["template"] * 2 > occurrences["all"]


# ---- the run ----------------------------------------------------------------------------------------------

ENCYCLOPEDIC_SOURCE = "one folder of the corpus.jsonl of ../shared/bench/"
"""How the report names an encyclopedic set's folder (built in a temporary folder by ``encyclopedic_target``)."""


def encyclopedic_target(name: str, base: Path) -> tuple[Path, Path] | None:
    """(folder, questions file in this benchmark's format) of an encyclopedic set, or None when it is not there."""
    from pathrag_pipeline.config import BENCH_DIR, SAMPLE_DOCS

    base.mkdir(parents=True, exist_ok=True)
    questions = base / f"{name}.questions.jsonl"
    if name == "sample":
        from pathrag_lab.bench.sample_answers import lead_name, parse_answer_key

        rows = [{"id": f"sample-{i}", "question": q, "answers": [lead_name(a)], "names": []}
                for i, (q, a) in enumerate(parse_answer_key(), 1)]
        folder = SAMPLE_DOCS
    else:
        dataset = BENCH_DIR / name
        if not (dataset / "corpus.jsonl").is_file():
            return None
        folder = base / f"{name}-docs"
        folder.mkdir(exist_ok=True)
        shutil.copy(dataset / "corpus.jsonl", folder / "corpus.jsonl")
        rows = [{"id": r["id"], "question": r["question"], "names": [],
                 "answers": [*r.get("answers", []), *r.get("answer_aliases", [])]}
                for r in map(json.loads, (dataset / "questions.jsonl").read_text(encoding="utf-8").splitlines())]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder, questions


def _worktree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(PACKAGE_ROOT), "worktree", "add", "--detach", str(where), rev],
                   check=True, capture_output=True, text=True)
    return where


def run_real_folders_bench(names: list[str] | None = None, extra: dict[str, tuple[Path, Path]] | None = None,
                           modes: tuple[str, ...] = DEFAULT_MODES, baseline: str | None = None,
                           workdir: Path | None = None, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Build and ask every folder (``names`` of ``FOLDERS``, default all, plus ``extra`` {name: (folder,
    questions)}) with this checkout's code and, with ``baseline``, that revision's. Returns per folder and side
    the figures of ``score_folder`` and ``index_folder``."""
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-real-"))
    targets: dict[str, tuple[Path, Path]] = {}
    skipped: dict[str, str] = {}
    for name in [*FOLDERS, *ENCYCLOPEDIC] if names is None else names:
        if name in ENCYCLOPEDIC:
            target = encyclopedic_target(name, base / "sets")
            if target is None:
                skipped[name] = "not found beside the checkout (../shared/bench or PATHRAG_BENCH_DIR)"
            else:
                targets[name] = target
            continue
        folder = FOLDERS[name]
        if not folder.path.is_dir():
            skipped[name] = f"not installed: apt-get install {folder.package}"
            continue
        targets[name] = (folder.path, QUESTIONS_DIR / f"{name}.questions.jsonl")
    targets.update(extra or {})
    roots = {"current": PACKAGE_ROOT}
    tree = None
    if baseline:
        tree = _worktree(baseline, base / "baseline-code")
        roots["baseline"] = tree
    results: dict[str, Any] = {"modes": list(modes), "baseline": baseline, "skipped": skipped, "folders": {}}
    try:
        for name, (source, questions) in targets.items():
            # a copy the benchmark can edit (Debian's folders are read-only; symbolic links followed, as `cp -rL`)
            docs = base / "folders" / name
            if not docs.exists():
                shutil.copytree(source, docs, ignore_dangling_symlinks=True)
            rows = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
            entry: dict[str, Any] = {"path": str(source), "held_out": name in HELD_OUT or name in (extra or {}),
                                     "generator": FOLDERS[name].generator if name in FOLDERS else "",
                                     "encyclopedic": name in ENCYCLOPEDIC}
            sides: dict[str, Any] = {}
            for side, root in roots.items():
                home = base / side / name
                log(f"real folders: {name}, {side}: indexing {docs}")
                build = index_folder(root, home, docs)
                log(f"real folders: {name}, {side}: {build['wall_s']} s, {build['peak_rss_mib']} MiB; asking "
                    f"{len(rows)} questions x {len(modes)} modes")
                asked = ask_all(root, home, docs, questions, modes)
                new_asks = new_process_asks(root, home, docs, [r["question"] for r in rows])
                sides[side] = {"build": build, "graph": graph_figures(home), "answers": asked["answers"],
                               "ask_seconds": asked["seconds"], "new_ask": new_asks}
            log(f"real folders: {name}: counting template lines of the folder read whole")
            top_names = sorted({n for s in sides.values() for n, _ in s["graph"]["top"]})
            template = {} if name in ENCYCLOPEDIC else template_names(docs, top_names)
            for side, data in sides.items():
                entry[side] = score_folder(rows, data["graph"], data["answers"], template) | {
                    "build": data["build"], "ask_seconds": data["ask_seconds"], "new_ask": data["new_ask"],
                    "answers": {mode: texts for mode, texts in data["answers"].items()}}
            results["folders"][name] = entry
    finally:
        if tree is not None:
            subprocess.run(["git", "-C", str(PACKAGE_ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True, text=True)
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    return results


INTRO = (
    "Reproduce: `pathrag bench real-folders --baseline REV --update-docs docs/benchmarks.md` (the folders from "
    "Debian's packages: `apt-get install git-doc postgresql-doc-15 sqlite3-doc sphinx-doc python-flask-doc "
    "python3-doc`; another folder with its own questions: `--folder NAME=DIR=QUESTIONS`).\n\n"
    "Each folder indexed offline by `pathrag index` as a user runs it, then asked its own questions "
    "(`data/eval/real-folders/NAME.questions.jsonl`: 25 a folder, written from the pages' text, each with accepted "
    "answer strings and the technical names it uses), with this code and with the baseline revision's in the same "
    "run. *Template entities*: among the 50 most-mentioned, those whose name occurs in the folder read whole mostly "
    "inside lines that half of its pages repeat (counted automatically, listed below). *Names*: names a question "
    "uses that are an entity of the same name key (with dotted: or the tail of a dotted name). *States it*: the "
    "offline answer holds an accepted answer (SQuAD-normalised) in its first 400 characters after the "
    "\"Extractive answer\" label; the interval is the paired bootstrap of `path` minus `naive` over the questions. "
    "*Chunk tokens*: what an LLM extraction reads (the text of every chunk). sphinx-doc's and python3-doc's "
    "questions were not looked at while the extractor or the answer rules were changed: their rows are held out "
    "(python3-doc's, added in session 67, written by a helper from the pages alone). The answer rules' constants "
    "(`query/answering.py`) were set on git-doc, postgresql-doc, sqlite3-doc, flask-doc (added in session 53, its "
    "questions written by a helper from Flask's pages before any rule was changed for it) and musique-100. *Chunk "
    "tokens* also show what skipping the pages' own source files saves (`ingest/page_sources.py`: Sphinx's "
    "`_sources/*.txt`, asciidoc's `PAGE.txt` beside `PAGE.html`). Since session 67 a folder's files with no "
    "extension and its gzipped files are read too (docs/usage.md): git-doc's rows count its 3.2 MB `changelog.gz` and "
    "its `copyright`, sqlite3-doc's its `changelog.html.gz`, which a baseline older than that does not read (the "
    "docs / chunks column shows it). *New `pathrag ask`*: a path-mode question "
    f"asked as a new process with no query service, median of {NEW_ASKS} (the folder's first questions, after the "
    "home answered once). *One-file edit*: then a sentence added to one page (the first by path of 1 KB or more, in "
    "a copy of the folder the benchmark indexes), `pathrag index` of the folder as a new process (a Dagster run), "
    "and the first `pathrag ask` after it; each figure is the whole process, start-up included (the baseline "
    "revision's code measured the same way).")


def _new_ask_cells(figures: dict[str, Any] | None) -> list[str]:
    if not figures:
        return ["-", "-"]
    return [f"{figures['median_s']:.2f}", f"{figures['edit_s']:.2f}, {figures['after_edit_s']:.2f}"]


def markdown(result: dict[str, Any]) -> str:
    """The benchmark's section of docs/benchmarks.md."""
    from pathrag_lab.bench.report_sections import repo_path

    modes = result["modes"]
    sides = ["current"] + (["baseline"] if result.get("baseline") else [])
    head = ["folder", "side", "questions", "template entities (top 50)", "names that are entities",
            *[f"`{m}` states it (first {ANSWER_PREFIX_CHARS} chars)" for m in modes], "`path` - `naive` [95% CI]",
            "index s (CPU s)", "peak RSS MiB", "new `pathrag ask` s", "one-file edit: `pathrag index` s, then "
            "`pathrag ask` s", "docs / chunks / entities", "chunk tokens (what an LLM reads)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, entry in result["folders"].items():
        for side in sides:
            f = entry[side]
            label = "this code" if side == "current" else f"`{result['baseline']}`"
            pvn = f.get("path_vs_naive")
            ci = f"{pvn['diff']:+.2f} [{pvn['low']:+.2f}, {pvn['high']:+.2f}]" if pvn else "-"
            c = f["counts"]
            cells = [f"{name}{' (held out)' if entry['held_out'] else ''}", label, str(f["questions"]),
                     f"{f['template_entities']}", f"{f['names_exact']}/{f['names']} ({f['names_with_dotted']} with "
                     "dotted)", *[f"{f['stated'].get(m, 0)}/{f['questions']}" for m in modes], ci,
                     f"{f['build']['wall_s']:.0f} ({f['build']['cpu_s']:.0f})", f"{f['build']['peak_rss_mib']:.0f}",
                     *_new_ask_cells(f.get("new_ask")),
                     f"{c['documents']} / {c['chunks']} / {c['entities']}", f"{c.get('chunk_tokens', 0):,}"]
            lines.append("| " + " | ".join(cells) + " |")
    out = [INTRO, "\n".join(lines)]
    for name, entry in result["folders"].items():
        f = entry["current"]
        flagged = [t["name"] for t in f["top"] if t["template"]]
        where = entry["generator"] or (f"{ENCYCLOPEDIC_SOURCE}{name}" if entry["encyclopedic"] and name != "sample"
                                       else repo_path(entry["path"]))
        out.append(f"**{name}** ({where}): the 50 most-mentioned entities: "
                   + ", ".join(f"{t['name']}" + (" *(template)*" if t["template"] else "") for t in f["top"])
                   + f". Template: {', '.join(flagged) or 'none'}. Names asked that are no entity: "
                   + (", ".join(f"`{n}`" for n in f["missing_names"]) or "none") + ".")
    if result.get("skipped"):
        out.append("Skipped: " + "; ".join(f"{k} ({v})" for k, v in result["skipped"].items()) + ".")
    return "\n\n".join(out)


# ---- the same questions answered by an LLM ---------------------------------------------------------------------

LLM_MODES = ("path", "naive", "local", "global", "hybrid")


def run_folder_llm(name: str, workdir: Path, *, base_url: str | None = None, model: str | None = None,
                   modes: tuple[str, ...] = LLM_MODES, limit: int | None = None, budget: int = 1000,
                   log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """One folder's questions answered by an LLM in each mode, over the folder indexed offline (the same graph
    the offline figures read; ``workdir/current/NAME`` is reused when a real-folders run left it there): exact match
    and token F1 of the short answer (SQuAD normalisation) against the accepted answers, and whether the mode's
    prompt held one of them. The endpoint is ``base_url``/``model``, or the bench's own llama.cpp server with
    Qwen2.5-Coder-0.5B (``bench/llm_answers.py``)."""
    from pathrag_lab.bench.llm_answers import bench_settings, on_endpoint
    from pathrag_pipeline.config import PACKAGE_ROOT as ROOT
    from pathrag_pipeline.evaluation.answer_scoring import answer_in_context, exact_match, token_f1
    from pathrag_pipeline.query.engine import PathRAG

    folder = FOLDERS[name]
    questions = QUESTIONS_DIR / f"{name}.questions.jsonl"
    rows = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = rows[:limit] if limit else rows
    home = workdir / "current" / name
    if not (home / "pathrag.duckdb").is_file():
        log(f"real folders LLM: indexing {folder.path} offline")
        index_folder(ROOT, home, folder.path)
    out: dict[str, Any] = {"folder": name, "questions": len(rows), "budget": budget, "modes": {}}

    def run(url: str, model_name: str) -> None:
        settings = bench_settings(url, model_name, None, own_server=base_url is None, home=home)
        rag = PathRAG(settings, record=False)
        out["model"] = model_name
        for mode in modes:
            ems, f1s, held, answers = [], [], [], []
            for i, row in enumerate(rows, 1):
                result = rag.query(row["question"], mode=mode, response="short", token_budget=budget)
                ems.append(float(exact_match(result.answer, row["answers"])))
                f1s.append(float(token_f1(result.answer, row["answers"])))
                held.append(float(answer_in_context(result.prompt or "", row["answers"])))
                answers.append(result.answer)
                log(f"real folders LLM: {name} {mode} {i}/{len(rows)}")
            n = len(rows) or 1
            out["modes"][mode] = {"em": round(sum(ems) / n, 3), "f1": round(sum(f1s) / n, 3),
                                  "in_prompt": round(sum(held) / n, 3), "answers": answers, "f1s": f1s}

    out["server"] = on_endpoint(workdir, base_url, model, run, log)
    return out


def llm_markdown(result: dict[str, Any]) -> str:
    from pathrag_pipeline.evaluation.bootstrap import paired_bootstrap

    lines = [f"Reproduce: `pathrag bench real-folders-llm --folder {result['folder']} --workdir DIR --update-docs "
             "docs/benchmarks.md` (the local server and model of docs/llm-endpoints.md).\n\n"
             f"{result['questions']} questions of {result['folder']}, answered by {result.get('model', '?')} over the "
             f"folder indexed offline, {result.get('budget', '?')}-token prompts, asked for the answer alone "
             "(`response=short`); SQuAD exact match and token F1 "
             "against the accepted answers; *in prompt*: an accepted answer occurs in the mode's prompt; "
             "*F1 - naive*: the paired difference of token F1 with `naive` (the flat baseline) over the same "
             "questions, with its 95% bootstrap interval.", "",
             "| mode | EM | F1 | answer in prompt | F1 - naive [95% CI] |", "| --- | --- | --- | --- | --- |"]
    base = result["modes"].get("naive", {}).get("f1s")
    for mode, m in result["modes"].items():
        versus = "-"
        if base and mode != "naive" and m.get("f1s"):
            interval = paired_bootstrap(m["f1s"], base)
            versus = f"{interval.diff:+.2f} [{interval.low:+.2f}, {interval.high:+.2f}]"
        lines.append(f"| {mode} | {m['em']:.2f} | {m['f1']:.2f} | {m['in_prompt']:.2f} | {versus} |")
    return "\n".join(lines)
