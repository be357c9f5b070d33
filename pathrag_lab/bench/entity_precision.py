"""Entity precision of the offline extractor on real documentation, against hand labels.

The folder (default ``data/eval/real-docs``) holds documents of several formats copied from installed packages'
own docs (its README names each source and licence), in two parts: ``dev/`` (looked at while the extractor's rules
were changed) and ``heldout/`` (labelled before any change and never used to choose a rule: its figure is the one
to quote). ``entities.tsv`` there labels each name the extractor produced: ``-`` (not an entity: a section label,
a common word, a fragment) or the entity types a reader would accept. The documents go through the pipeline's own
parsing, chunking (default settings) and offline extraction; an entity is a distinct name per file.

- *name precision*: labelled names that are entities / labelled names;
- *typed precision*: entities whose predicted type is one the label accepts / labelled names;
- names the labels do not cover are counted and listed (after a rule change, label them before quoting a figure).
Intervals are 95% Wilson score intervals for a binomial proportion.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from pathrag_pipeline.config import PACKAGE_ROOT, Settings
from pathrag_pipeline.index.offline_extraction import OFFLINE_EXTRACTOR_ID, extract_offline
from pathrag_pipeline.ingest.chunking import chunk_text
from pathrag_pipeline.ingest.parsing import ParseError, is_supported, parse_file

REAL_DOCS = PACKAGE_ROOT / "data" / "eval" / "real-docs"
LABELS_FILE = "entities.tsv"
NOT_ENTITY = "-"
MAX_FILE_BYTES = 10 * 1024 * 1024


class LabelError(ValueError):
    pass


def load_labels(path: Path) -> dict[tuple[str, str], frozenset[str]]:
    """``(file, name) -> accepted types`` (empty for "not an entity") from a labels TSV."""
    labels: dict[tuple[str, str], frozenset[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or not all(p.strip() for p in parts):
            raise LabelError(f"{path}:{number}: expected file<TAB>name<TAB>gold, got {line!r}")
        file, name, gold = parts
        labels[(file, name)] = frozenset() if gold == NOT_ENTITY else frozenset(gold.split("|"))
    return labels


def extracted_entities(folder: Path, settings: Settings | None = None) -> dict[tuple[str, str], str]:
    """``(file relative to folder, name) -> predicted type`` for every supported file, as the pipeline would
    extract them offline (first type seen per name in a file). Documents sit in the folder's subfolders (one per
    split); files at its top level (README, labels) describe it and are not read."""
    settings = settings or Settings()
    found: dict[tuple[str, str], str] = {}
    for path in sorted(p for p in folder.glob("*/**/*") if p.is_file() and is_supported(p)):
        rel = path.relative_to(folder).as_posix()
        try:
            docs = parse_file(path, rel, max_bytes=MAX_FILE_BYTES)
        except ParseError:
            continue   # a file the pipeline would not index has no entities to score
        for doc in docs:
            if doc.error:
                continue
            for chunk in chunk_text(doc.id, doc.text, max_tokens=settings.chunk_tokens,
                                    overlap=settings.chunk_overlap):
                for entity in extract_offline(chunk.text, doc.title).entities:
                    found.setdefault((rel, entity.name), entity.type)
    return found


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def _split_of(rel: str) -> str:
    return rel.split("/", 1)[0]


def _format_of(rel: str) -> str:
    return Path(rel).suffix.lstrip(".").lower() or "none"


def _score(items: list[tuple[str, str, str]], labels) -> dict:
    labelled = [(rel, name, typ) for rel, name, typ in items if (rel, name) in labels]
    good = [x for x in labelled if labels[(x[0], x[1])]]
    typed = [x for x in good if x[2] in labels[(x[0], x[1])]]
    n = len(labelled)
    return {
        "entities": len(items), "labelled": n, "unlabelled": len(items) - n,
        "name_precision": round(len(good) / n, 4) if n else None, "name_ci": wilson(len(good), n),
        "typed_precision": round(len(typed) / n, 4) if n else None, "typed_ci": wilson(len(typed), n),
    }


def measure(folder: Path = REAL_DOCS, labels_path: Path | None = None) -> dict:
    folder = Path(folder)
    labels_path = Path(labels_path) if labels_path else folder / LABELS_FILE
    if not folder.is_dir():
        raise FileNotFoundError(f"real-docs folder {folder} not found; pass --real-docs DIR with an {LABELS_FILE}")
    if not labels_path.is_file():
        raise FileNotFoundError(f"labels file {labels_path} not found; write one (file<TAB>name<TAB>gold), see "
                                f"{REAL_DOCS / LABELS_FILE}")
    labels = load_labels(labels_path)
    found = extracted_entities(folder)
    items = [(rel, name, typ) for (rel, name), typ in found.items()]
    by_split: dict[str, list] = defaultdict(list)
    by_format: dict[str, list] = defaultdict(list)
    for item in items:
        by_split[_split_of(item[0])].append(item)
        by_format[_format_of(item[0])].append(item)
    files = sorted({rel for rel, _, _ in items})
    return {
        "extractor": OFFLINE_EXTRACTOR_ID,
        "folder": str(folder),
        "files": {split: sorted({r for r, _, _ in rows}) for split, rows in sorted(by_split.items())},
        "file_count": len(files),
        "splits": {split: _score(rows, labels) for split, rows in sorted(by_split.items())},
        "formats": {fmt: _score(rows, labels) for fmt, rows in sorted(by_format.items())},
        "not_entities": [[rel, name, typ] for rel, name, typ in items
                         if (rel, name) in labels and not labels[(rel, name)]],
        "wrong_type": [[rel, name, typ, "|".join(sorted(labels[(rel, name)]))] for rel, name, typ in items
                       if labels.get((rel, name)) and typ not in labels[(rel, name)]],
        "unlabelled_names": [[rel, name, typ] for rel, name, typ in items if (rel, name) not in labels],
    }
