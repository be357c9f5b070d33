"""How close the rule-based extractor comes to an LLM's entity lists, and how fast it runs.

The reference is a benchmark's ``entities.jsonl`` (entity names an LLM found per passage of
``corpus.jsonl``). Names are compared after normalisation (case, accents, punctuation, a leading
"the"): *strict* needs equal normalised names, *lenient* accepts token overlap (one name's tokens
contained in the other's, or Jaccard >= 0.5), which forgives "Pope John Paul II" vs "John Paul II".
Throughput is chunks (passages) per second over the whole corpus, titles included, single process.

The graph's shape is measured too: relations per 1,000 passages, entities per type, and the hubs (the names
found in the most passages). ``compare_rules`` runs the same measure with the v2 rules restored (dates and
amounts as nodes, two neighbours per mention) next to the current ones, so the effect of each rule is a figure.
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pathrag_pipeline.config import BENCH_DIR
from pathrag_pipeline.index import offline_extraction as rules
from pathrag_pipeline.index.offline_extraction import OFFLINE_EXTRACTOR_ID, extract_offline

HUBS_SHOWN = 8
# The rule switches of the previous rule set, for the before/after comparison.
V2_RULES = {"LITERAL_TYPES": frozenset(), "RELATION_NEIGHBOURS": 2}

LENIENT_JACCARD = 0.5


def normalise_name(name: str) -> str:
    """Compare names without case, accents, punctuation or a leading article."""
    decomposed = unicodedata.normalize("NFKD", name.casefold())
    stripped = "".join(ch if ch.isalnum() else " " for ch in decomposed if not unicodedata.combining(ch))
    words = stripped.split()
    if words and words[0] in ("the", "a", "an") and len(words) > 1:
        words = words[1:]
    return " ".join(words)


def _lenient_match(a: str, b: str) -> bool:
    ta, tb = set(a.split()), set(b.split())
    if not ta or not tb:
        return False
    if ta <= tb or tb <= ta:
        return True
    return len(ta & tb) / len(ta | tb) >= LENIENT_JACCARD


def _load_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def measure(corpus_path: str | Path, entities_path: str | Path) -> dict:
    """Entity precision/recall (strict and lenient) against the reference, and chunks/s throughput."""
    corpus_path, entities_path = Path(corpus_path), Path(entities_path)
    for path in (corpus_path, entities_path):
        if not path.is_file():
            raise FileNotFoundError(f"benchmark file {path} not found; pass the corpus.jsonl and entities.jsonl of a dataset")
    passages = _load_jsonl(corpus_path)
    gold: dict[str, set[str]] = defaultdict(set)
    for row in _load_jsonl(entities_path):
        key = normalise_name(row["name"])
        if key:
            gold[row["doc_id"]].add(key)

    started = time.perf_counter()
    predicted = {p["id"]: extract_offline(p["text"], p.get("title")) for p in passages}
    elapsed = time.perf_counter() - started

    counts = dict.fromkeys(("pred", "gold", "strict_tp_pred", "strict_tp_gold", "lenient_tp_pred", "lenient_tp_gold",
                            "relations"), 0)
    types: Counter[str] = Counter()
    passages_of: dict[str, set[str]] = defaultdict(set)
    for passage in passages:
        extraction = predicted[passage["id"]]
        counts["relations"] += len(extraction.relations)
        for e in extraction.entities:
            types[e.type] += 1
            passages_of[normalise_name(e.name)].add(passage["id"])
        pred = {normalise_name(e.name) for e in extraction.entities} - {""}
        ref = gold.get(passage["id"], set())
        counts["pred"] += len(pred)
        counts["gold"] += len(ref)
        strict = pred & ref
        counts["strict_tp_pred"] += len(strict)
        counts["strict_tp_gold"] += len(strict)
        counts["lenient_tp_pred"] += sum(1 for p in pred if any(_lenient_match(p, g) for g in ref))
        counts["lenient_tp_gold"] += sum(1 for g in ref if any(_lenient_match(p, g) for p in pred))

    def ratio(a: int, b: int) -> float:
        return round(a / b, 4) if b else 0.0

    return {
        "extractor": OFFLINE_EXTRACTOR_ID,
        "passages": len(passages),
        "predicted_entities": counts["pred"],
        "reference_entities": counts["gold"],
        "relations": counts["relations"],
        "relations_per_1000_passages": round(1000 * counts["relations"] / len(passages)) if passages else 0,
        "entity_mentions_by_type": dict(types.most_common()),
        "hubs": [[name, len(ids)] for name, ids in sorted(passages_of.items(), key=lambda kv: (-len(kv[1]), kv[0]))
                 [:HUBS_SHOWN]],
        "strict_precision": ratio(counts["strict_tp_pred"], counts["pred"]),
        "strict_recall": ratio(counts["strict_tp_gold"], counts["gold"]),
        "lenient_precision": ratio(counts["lenient_tp_pred"], counts["pred"]),
        "lenient_recall": ratio(counts["lenient_tp_gold"], counts["gold"]),
        "seconds": round(elapsed, 3),
        "chunks_per_second": round(len(passages) / elapsed, 1) if elapsed > 0 else float("inf"),
    }


@contextmanager
def rule_switches(switches: dict) -> Iterator[None]:
    """Set module-level rule switches of the offline extractor for the duration (benchmarks only)."""
    saved = {name: getattr(rules, name) for name in switches}
    try:
        for name, value in switches.items():
            setattr(rules, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(rules, name, value)


def compare_rules(corpus_path: str | Path, entities_path: str | Path) -> dict:
    """``measure`` with the current rules and with the v2 switches (dates as nodes, two neighbours)."""
    current = measure(corpus_path, entities_path)
    with rule_switches(V2_RULES):
        before = measure(corpus_path, entities_path)
    before["extractor"] = "offline-rules-v2 (switches: dates/amounts as nodes, 2 neighbours)"
    return {"current": current, "v2_rules": before}


if __name__ == "__main__":
    import sys

    root = Path(sys.argv[1] if len(sys.argv) > 1 else BENCH_DIR / "musique-100")
    print(json.dumps(measure(root / "corpus.jsonl", root / "entities.jsonl"), indent=2))
