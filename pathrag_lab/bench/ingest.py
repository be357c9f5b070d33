"""`pathrag bench ingest`: throughput and memory of a full ingest and of an incremental re-ingest.

A synthetic corpus (English-like prose full of named entities, as .md/.txt/.html plus one JSONL file)
is generated so anyone can rerun the figures. Each measurement runs in a fresh child process so the
peak resident memory it reports belongs to that measurement alone.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

FIRST = ["Ada", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Keiko", "Lars",
         "Mira", "Nils", "Olga", "Pavel", "Rosa", "Sven", "Tomas", "Ulla", "Vera", "Wim", "Yara", "Zoran"]
LAST = ["Halden", "Morrow", "Castell", "Brand", "Okafor", "Lindqvist", "Ferreira", "Novak", "Arden", "Quist",
        "Saltmarsh", "Verhoeven", "Kowalski", "Ibarra", "Whitcombe", "Tanaka"]
PLACES = ["Port Aster", "Valmere", "Northwick", "Kessel Bay", "Old Farrow", "Drayton", "Lune Valley", "Ostrava Gate",
          "Marlow Heath", "Carrick", "Ember Falls", "Greyhaven"]
ORGS = ["Valmere University", "the Aster Shipping Company", "the Northwick Observatory", "the Royal Society of Kessel",
        "the Drayton Railway", "the Institute of Hydrology", "the Farrow Museum", "Lune Valley Press"]
VERBS = ["founded", "studied at", "directed", "worked for", "corresponded with", "moved to", "married",
         "designed the bridge at", "published a survey of", "was born in", "taught at", "funded"]
TOPICS = ["tidal engineering", "river navigation", "star catalogues", "railway finance", "flood defence",
          "printing", "glass lenses", "trade routes", "weather records", "canal locks"]


def _person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def _sentence(rng: random.Random) -> str:
    subject = _person(rng)
    verb = rng.choice(VERBS)
    obj = rng.choice([_person(rng), rng.choice(PLACES), rng.choice(ORGS)])
    year = rng.randint(1820, 1950)
    tail = rng.choice([f" in {year}", f" after the flood of {year}", f" to study {rng.choice(TOPICS)}",
                       f", according to records in {rng.choice(PLACES)}", ""])
    return f"{subject} {verb} {obj}{tail}."


def _document(rng: random.Random, n_sentences: int) -> tuple[str, str]:
    title = f"{rng.choice(PLACES)} and {rng.choice(TOPICS)}"
    paragraphs = []
    while n_sentences > 0:
        k = min(n_sentences, rng.randint(3, 7))
        paragraphs.append(" ".join(_sentence(rng) for _ in range(k)))
        n_sentences -= k
    return title, "\n\n".join(paragraphs)


def generate_corpus(folder: Path, n_docs: int, seed: int = 7) -> list[Path]:
    """Write ``n_docs`` documents (mostly .md and .txt, some .html, 20 records in one .jsonl) to ``folder``."""
    import json

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    n_files = max(n_docs - 20, 1)
    for i in range(n_files):
        title, body = _document(rng, rng.randint(20, 120))
        sub = folder / f"part{i % 10}"
        sub.mkdir(exist_ok=True)
        kind = ("md", "txt", "md", "html")[i % 4]
        path = sub / f"doc{i:05d}.{kind}"
        if kind == "md":
            path.write_text(f"# {title}\n\n{body}\n")
        elif kind == "txt":
            path.write_text(f"{title}\n\n{body}\n")
        else:
            paras = "".join(f"<p>{p}</p>" for p in body.split("\n\n"))
            path.write_text(f"<html><head><title>{title}</title><style>p{{}}</style></head>"
                            f"<body><nav>Home | Archive</nav><h1>{title}</h1>{paras}</body></html>")
        paths.append(path)
    if n_docs > n_files:
        path = folder / "records.jsonl"
        with open(path, "w") as fh:
            for j in range(n_docs - n_files):
                title, body = _document(rng, rng.randint(5, 20))
                fh.write(json.dumps({"id": f"r{j}", "title": title, "text": body}) + "\n")
        paths.append(path)
    return paths


def _measure(home: str, folder: str, queue) -> None:
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.ingest.folder_sync import sync_folder

    settings = Settings.from_env(home=Path(home), docs=Path(folder))
    start = time.perf_counter()
    report = sync_folder(settings, trigger="bench")
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put({"seconds": seconds, "documents": report.documents_written, "chunks": report.chunks_written,
               "files": len(report.plan.new) + len(report.plan.changed), "peak_mib": peak_kib / 1024})


def _run_child(home: Path, folder: Path) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_measure, args=(str(home), str(folder), queue))
    proc.start()
    result = queue.get(timeout=1800)
    proc.join()
    return result


def run_ingest_bench(n_docs: int = 1000, repeats: int = 3, workdir: Path | None = None) -> dict:
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="pathrag-bench-ingest-"))
    folder = base / "corpus"
    if n_docs < 22:
        raise ValueError(f"--docs {n_docs}: give at least 22 (20 go into one JSONL file, the edited file is a .txt)")
    victim = next(p for p in generate_corpus(folder, n_docs) if p.suffix == ".txt")
    full, incremental = [], []
    for r in range(repeats):
        home = base / f"home{r}"
        full.append(_run_child(home, folder))
        victim.write_text(victim.read_text() + f"\nAn added line, edit {r}: Vera Quist moved to Carrick.\n")
        incremental.append(_run_child(home, folder))

    def row(name: str, runs: list[dict]) -> dict:
        secs = statistics.median(x["seconds"] for x in runs)
        docs = runs[0]["documents"]
        chunks = runs[0]["chunks"]
        return {
            "measurement": name,
            "files processed": runs[0]["files"],
            "documents": docs,
            "chunks": chunks,
            "median s": round(secs, 3),
            "documents/s": round(docs / secs, 1) if secs else None,
            "chunks/s": round(chunks / secs, 1) if secs else None,
            "peak MiB (median)": round(statistics.median(x["peak_mib"] for x in runs), 1),
        }

    return {
        "title": f"Ingest of {n_docs} generated documents, median of {repeats}",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "rows": [row("full ingest", full), row("re-ingest after 1 file changed", incremental)],
        "ratio_full_to_incremental": round(statistics.median(x["seconds"] for x in full)
                                           / statistics.median(x["seconds"] for x in incremental), 1),
    }
