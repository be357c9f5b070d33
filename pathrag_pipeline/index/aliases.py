"""Near-duplicate entity names, merged through the reversible ``entity_aliases`` table.

``names.name_key`` only removes differences that never matter. Everything riskier lives here as a row
alias_key -> canonical_key that the graph merge applies: "Jan P. Solovej" -> "jan philip solovej",
"Copenhagen University" -> "university of copenhagen". Rows can be inspected with SQL, disabled (un-merged
on the next merge, and never re-proposed) or deleted.

Detected rows are re-decided at every indexing run from every name key the current extraction records
mention before aliases (the ``entity_names`` table), not from the merged entities: an expansion that became
ambiguous is undone, an alias whose evidence was deleted goes, and a group's canonical key follows the current
mention counts (ties by the key), so the table equals a fresh build's whatever the order of adds, edits and
deletes (issue 23). The optional embedding method compares the vectors of the merged entities, so its rows can
still depend on history: the exactness holds for the string rules, the default.

Detection is deliberately conservative, because a false merge corrupts paths through the graph while a
missed one only leaves two nodes: every rule below needs positive evidence, and numbers, roman numerals,
different entity types or ambiguous expansions always block a merge. The rules:

- ``accents``: equal once accents are folded ("Dvořák" / "Dvorak").
- ``definition``: "X (Y)" where Y is the acronym of X joins X; a standalone "Y" joins X only when exactly one
  such definition of Y exists ("the American Institute of Physics (AIP)" / "American Institute of Physics" / "AIP").
- ``initials``: same words in the same order except that single letters stand for words, the last word
  spelled out and equal, and only one name the initials could expand to ("Jan P. Solovej" / "Jan Philip Solovej").
- ``reorder``: the same content words in any order, where one name adds function words such as "of" to the
  other's ("University of Copenhagen" / "Copenhagen University"); a bare swap like "John Paul" / "Paul John"
  is not enough, swapped function words ("9 to 25 May" / "9 and 25 May") block it, and in unchanged word
  order "of"/"and" may not be dropped ("east of Boston" / "East Boston"), only words like "the" or "in".
- ``typo``: three or more words of which exactly one differs, a difflib ratio of the keys of at least
  ``string_threshold``, and the differing words are alphabetic, at least 6 letters, start alike and neither
  extends the other ("Massachusets Institute of Technology" / "Massachusetts Institute of Technology").
  Two-word person names never qualify ("Andrew Johnston" / "Andrew Johnson"), nor do "John Smith" /
  "John Smithson" or "Paris, France" / "Paris, Texas".
- ``embedding`` (optional): cosine of normalised name embeddings of at least ``embedding_threshold``, with the
  same blocking guards (numbers, roman numerals, types).

Candidate pairs come from blocking on shared rare words (a word shared by more than ``max_block`` names
is not used to pair), so detection is near-linear in the number of names rather than quadratic.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

import duckdb
import numpy as np

from pathrag_pipeline.index.mention_index import raw_entities
from pathrag_pipeline.text.names import name_key
from pathrag_pipeline.storage.store import utc_now

METHODS = ("string", "embedding", "manual")
STOPWORDS = frozenset("a an and at by de del der des di du for from in la le of on the to und van von".split())
_LINKING_WORDS = frozenset({"of", "and", "und", "de", "del", "der", "des", "di", "du", "van", "von"})
GENERIC_TYPES = frozenset({"", "other", "concept", "unknown"})
_ROMAN = re.compile(r"^(?=[ivxlcdm]+$)m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})$")
_PARENTHETICAL = re.compile(r"^(?P<base>.+?)\s*\((?P<inner>[^()]+)\)\s*$")



# ---- applying aliases -----------------------------------------------------------------------------------

def alias_map(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Active aliases with chains resolved: alias key -> the key its mentions finally merge into.

    a->b, b->c gives a->c and b->c. A cycle (a->b, b->a, made by hand) resolves every member to the
    smallest key of the cycle, so the result never depends on row order.
    """
    edges = dict(con.execute(
        "SELECT alias_key, canonical_key FROM entity_aliases WHERE NOT disabled AND alias_key <> canonical_key"
    ).fetchall())
    resolved: dict[str, str] = {}
    for start in edges:
        path, seen, node = [], set(), start
        while node in edges and node not in resolved and node not in seen:
            seen.add(node)
            path.append(node)
            node = edges[node]
        if node in resolved:
            final = resolved[node]
        elif node in seen:  # cycle: node is on the path
            final = min(path[path.index(node):])
        else:
            final = node
        for member in path:
            resolved[member] = final
    return {k: v for k, v in resolved.items() if k != v}


def _changed_keys(before: dict[str, str], after: dict[str, str]) -> set[str]:
    changed = {k for k in before.keys() | after.keys() if before.get(k, k) != after.get(k, k)}
    return changed | {before.get(k, k) for k in changed} | {after.get(k, k) for k in changed}


def add_alias(con: duckdb.DuckDBPyConnection, alias_key: str, canonical_key: str, *, method: str = "manual",
              score: float = 1.0) -> set[str]:
    """Insert or replace one alias row (enabled). Returns the entity keys whose merge result changes:
    pass them to ``graph_merge.remerge_entities``."""
    if method not in METHODS:
        raise ValueError(f"alias method {method!r} must be one of {METHODS}")
    if not alias_key or not canonical_key:
        raise ValueError(f"alias needs two non-empty keys, got {alias_key!r} -> {canonical_key!r}")
    before = alias_map(con)
    con.execute("INSERT OR REPLACE INTO entity_aliases VALUES (?, ?, ?, ?, ?, false)",
                [alias_key, canonical_key, method, score, utc_now()])
    return _changed_keys(before, alias_map(con))


def set_alias_disabled(con: duckdb.DuckDBPyConnection, alias_key: str, disabled: bool = True) -> set[str]:
    """Disable (un-merge) or re-enable an alias. Returns the entity keys to re-merge."""
    before = alias_map(con)
    updated = con.execute("UPDATE entity_aliases SET disabled = ? WHERE alias_key = ?", [disabled, alias_key]).fetchone()[0]
    if not updated:
        raise KeyError(f"no alias row with alias_key {alias_key!r}; see SELECT * FROM entity_aliases")
    return _changed_keys(before, alias_map(con))


def delete_alias(con: duckdb.DuckDBPyConnection, alias_key: str) -> set[str]:
    """Delete an alias row (detection may propose it again; disable it to prevent that). Returns keys to re-merge."""
    before = alias_map(con)
    con.execute("DELETE FROM entity_aliases WHERE alias_key = ?", [alias_key])
    return _changed_keys(before, alias_map(con))


DETECTED_METHODS = ("string", "embedding")
DETECTION_VERSION = "records-1"
"""How detected rows are decided; part of the embedding stage's synced state, so a home whose aliases were
decided another way (before: added from the merged entities, never revisited) re-decides them on its next
`pathrag index` even when nothing else changed."""


def _detected_rows(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str, float]]:
    return {a: (c, m, sc) for a, c, m, sc in con.execute(
        "SELECT alias_key, canonical_key, method, score FROM entity_aliases "
        "WHERE NOT disabled AND method IN (SELECT unnest(?::VARCHAR[]))", [list(DETECTED_METHODS)]).fetchall()}


def _decided(con: duckdb.DuckDBPyConnection, candidates: Iterable["AliasCandidate"]
             ) -> tuple[dict[str, tuple[str, str, float]], dict[str, tuple[str, str, float]]]:
    """(stored detected rows, the detected rows these candidates make): a user's rows (manual, or disabled:
    an un-merge) keep their alias key out of detection."""
    held = {k for (k,) in con.execute(
        "SELECT alias_key FROM entity_aliases WHERE disabled OR method NOT IN (SELECT unnest(?::VARCHAR[]))",
        [list(DETECTED_METHODS)]).fetchall()}
    wanted = {c.alias_key: (c.canonical_key, c.method, round(float(c.score), 9))
              for c in candidates if c.alias_key not in held}
    stored = {a: (c, m, round(float(sc), 9) if sc is not None else None)
              for a, (c, m, sc) in _detected_rows(con).items()}
    return stored, wanted


def pending_alias_changes(con: duckdb.DuckDBPyConnection, candidates: Iterable["AliasCandidate"]) -> int:
    """How many detected rows ``decide_aliases`` would add, change or remove for these candidates."""
    stored, wanted = _decided(con, candidates)
    return sum(1 for k in stored.keys() | wanted.keys() if stored.get(k) != wanted.get(k))


def decide_aliases(con: duckdb.DuckDBPyConnection, candidates: Iterable["AliasCandidate"]) -> set[str]:
    """Make the detected rows exactly these candidates: new ones are added, changed ones replaced, and a
    detected row no candidate proposes any more (its evidence deleted, or its expansion now ambiguous) is
    removed. Rows a user made (manual) or disabled are kept and their alias keys never proposed, so an un-merge
    sticks. Rows that stay the same keep their created_at. Returns the entity keys to re-merge.

    With candidates from ``find_alias_candidates(read_alias_inputs(con))`` (the current records' names), the
    table is a function of the records, whatever order documents were added, edited or deleted in."""
    stored, wanted = _decided(con, candidates)
    before = alias_map(con)
    gone = sorted(k for k in stored if stored[k] != wanted.get(k))
    if gone:
        con.execute("DELETE FROM entity_aliases WHERE alias_key IN (SELECT unnest(?::VARCHAR[]))", [gone])
    rows = [[k, c, m, sc, utc_now(), False] for k, (c, m, sc) in sorted(wanted.items()) if stored.get(k) != (c, m, sc)]
    if rows:
        con.executemany("INSERT INTO entity_aliases VALUES (?, ?, ?, ?, ?, ?)", rows)
    return _changed_keys(before, alias_map(con))


# ---- detecting candidates ------------------------------------------------------------------------------

class EntityName(NamedTuple):
    """One name key as alias detection sees it (``read_alias_inputs`` reads them from the entity_names table)."""

    key: str
    name: str
    mention_count: int = 1
    type: str = ""


@dataclass(frozen=True)
class AliasCandidate:
    alias_key: str
    canonical_key: str
    method: str          # 'string' or 'embedding' (the entity_aliases.method)
    rule: str            # accents, definition, initials, reorder, typo, embedding
    score: float
    alias_name: str = ""
    canonical_name: str = ""


def read_alias_inputs(con: duckdb.DuckDBPyConnection) -> list[EntityName]:
    """Every name key the current records mention, before aliases (``mention_index.raw_entities``), as input for
    ``find_alias_candidates``. Not the merged entities: an alias decided earlier must not hide the names that
    would make it ambiguous now ("J. Smith" once merged into "John Smith" is still a name when "Jane Smith"
    arrives)."""
    return [EntityName(*row) for row in raw_entities(con)]


def _fold_accents(text: str) -> str:
    if text.isascii():   # NFKD leaves ASCII as it is
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _is_number_like(token: str, last: bool) -> bool:
    if any(map(str.isdigit, token)):   # a generator here was ~80 ms of a one-file edit at 200 files
        return True
    return bool(_ROMAN.match(token)) and (len(token) > 1 or last)


class _Prepared(NamedTuple):
    entity: EntityName
    tokens: tuple[str, ...]
    content: tuple[str, ...]
    content_sorted: tuple[str, ...]
    numbers: tuple[str, ...]
    type: str


def _prepare(e: EntityName) -> _Prepared:
    tokens = tuple(e.key.split())
    numbers = tuple(sorted(t for i, t in enumerate(tokens) if _is_number_like(t, i == len(tokens) - 1)))
    kind = (e.type or "").strip().lower()
    # the last word is never a function word: "National League A" is not "National League"
    content = tuple(t for i, t in enumerate(tokens) if t not in STOPWORDS or i == len(tokens) - 1)
    return _Prepared(e, tokens, content, tuple(sorted(content)), numbers,
                     "" if kind in GENERIC_TYPES else kind)


_INVERTED = re.compile(r"^(?P<family>[A-Z][\w'-]+(?: [A-Z][\w'-]+)?), (?P<given>[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2})$")


def _compatible(a: _Prepared, b: _Prepared) -> bool:
    """Guards every rule shares: same numbers and roman numerals, no conflicting specific types."""
    return a.numbers == b.numbers and (not a.type or not b.type or a.type == b.type)


def _reorder(a: _Prepared, b: _Prepared) -> bool:
    """Same content words; one name only adds function words ("of", "the") to the other's, never swaps them
    ("9 to 25 May" and "9 and 25 May" differ)."""
    if len(a.content) < 2 or a.content_sorted != b.content_sorted:
        return False
    fa, fb = set(a.tokens) & STOPWORDS, set(b.tokens) & STOPWORDS
    if fa == fb or not (fa <= fb or fb <= fa):
        return False
    # In the same word order, dropping "of"/"and" changes meaning ("east of Boston" / "East Boston").
    return a.content != b.content or not (fa ^ fb) & _LINKING_WORDS


def _initials(short: _Prepared, long: _Prepared) -> bool:
    """``short`` abbreviates some words of ``long`` to their first letter, nothing else differs."""
    s, l = short.tokens, long.tokens
    if len(s) != len(l) or len(s) < 2 or s[-1] != l[-1] or len(s[-1]) < 2:
        return False
    abbreviated = 0
    for x, y in zip(s, l):
        if x == y:
            continue
        if len(x) == 1 and len(y) > 1 and y.startswith(x) and y.isalpha():
            abbreviated += 1
        else:
            return False
    return abbreviated > 0


def _typo(a: _Prepared, b: _Prepared, threshold: float) -> float:
    """Ratio when the names differ in one long word by a small misspelling, else 0."""
    if len(a.tokens) != len(b.tokens) or len(a.tokens) < 3:
        return 0.0
    diffs = [(x, y) for x, y in zip(a.tokens, b.tokens) if x != y]
    if len(diffs) != 1:
        return 0.0
    x, y = diffs[0]
    if (min(len(x), len(y)) < 6 or not (x.isalpha() and y.isalpha()) or x[0] != y[0]
            or x.startswith(y) or y.startswith(x) or difflib.SequenceMatcher(None, x, y).ratio() < 0.85):
        return 0.0
    ratio = difflib.SequenceMatcher(None, a.entity.key, b.entity.key).ratio()
    return ratio if ratio >= threshold else 0.0


def _acronym_of(acronym: str, base_key: str) -> bool:
    words = base_key.split()
    content = [w for w in words if w not in STOPWORDS]
    return len(acronym) >= 2 and acronym.isalpha() and acronym in (
        "".join(w[0] for w in content), "".join(w[0] for w in words))


def _canonical_order(e: EntityName) -> tuple:
    return (-e.mention_count, len(e.key), e.key)


def find_alias_candidates(
    keys_and_names: Iterable[EntityName | tuple],
    *,
    string_threshold: float = 0.95,
    embeddings: tuple[Sequence[str], np.ndarray] | None = None,
    embedding_threshold: float = 0.95,
    max_block: int = 200,
) -> list[AliasCandidate]:
    """Propose aliases among these entities (see the module docstring for the rules and guards).

    Connected proposals form groups; each group's canonical key is the one with the most mentions (ties: the
    shorter key, then A-Z), and every other member points straight at it, so chains never reach the table.
    """
    if not 0.0 < string_threshold <= 1.0 or not -1.0 <= embedding_threshold <= 1.0:
        raise ValueError(f"thresholds out of range: string_threshold={string_threshold} (0..1], "
                         f"embedding_threshold={embedding_threshold} [-1..1]")
    entities = {}
    for item in keys_and_names:
        e = item if isinstance(item, EntityName) else EntityName(*item)
        entities[e.key] = e
    prepared = {k: _prepare(e) for k, e in entities.items()}
    edges: list[tuple[str, str, str, str, float]] = []  # (a, b, method, rule, score)

    def propose(a: str, b: str, method: str, rule: str, score: float) -> None:
        if a != b and _compatible(prepared[a], prepared[b]):
            edges.append((a, b, method, rule, score))

    by_fold: dict[str, list[str]] = defaultdict(list)
    for k in prepared:
        by_fold[_fold_accents(k)].append(k)
    for group in by_fold.values():
        for a, b in zip(group, group[1:]):
            propose(a, b, "string", "accents", 1.0)

    definitions: dict[str, set[str]] = defaultdict(set)
    for k, e in entities.items():
        match = _PARENTHETICAL.match(" ".join(e.name.split()))
        if not match:
            continue
        base, inner = name_key(match["base"]), name_key(match["inner"])
        if _acronym_of(inner, base):
            definitions[inner].add(base)
            if base in prepared:
                propose(k, base, "string", "definition", 1.0)
    for acronym, bases in definitions.items():
        if len(bases) == 1 and acronym in prepared and next(iter(bases)) in prepared:
            propose(acronym, next(iter(bases)), "string", "definition", 1.0)

    # "Morrow, Agnes" (dictionary and index headings) is "Agnes Morrow" when that name exists too. Types are
    # not compared: offline typing often differs between the two forms, and the swap is unambiguous.
    for k, e in entities.items():
        match = _INVERTED.match(" ".join(e.name.split()))
        if match:
            swapped = name_key(f"{match['given']} {match['family']}")
            if swapped in prepared and swapped != k:
                edges.append((k, swapped, "string", "inverted", 1.0))

    expansions: dict[str, set[str]] = defaultdict(set)
    for a, b in _compared_pairs(prepared, max_block):  # order does not matter: groups and best edges are order-free
        pa_, pb = prepared[a], prepared[b]
        if not _compatible(pa_, pb):
            continue
        if _reorder(pa_, pb):
            propose(a, b, "string", "reorder", 0.95)
        elif _initials(pa_, pb):
            expansions[a].add(b)
        elif _initials(pb, pa_):
            expansions[b].add(a)
        elif score := _typo(pa_, pb, string_threshold):
            propose(a, b, "string", "typo", score)
    for short, longs in expansions.items():
        if len(longs) == 1:  # "J. Smith" with both "John Smith" and "Jane Smith" around stays apart
            propose(short, next(iter(longs)), "string", "initials", 0.9)

    if embeddings is not None:
        for a, b, cosine in _embedding_pairs(embeddings, set(prepared), embedding_threshold):
            propose(a, b, "embedding", "embedding", cosine)

    return _groups_to_candidates(entities, edges)


def _compared_pairs(prepared: dict[str, _Prepared], max_block: int) -> list[tuple[str, str]]:
    """The pairs (a, b), a < b, that the pairwise rules (reorder, initials, typo) compare: names sharing a word of
    two or more letters, not number-like, that at most ``max_block`` names contain (blocking), less the pairs that
    cannot pass any of the rules (``_may_pass``: a necessary condition of each, checked in numpy over every
    blocked pair; 120,000 pairs of 12,000 names reduce to a few hundred, which the rules then check one by one)."""
    order = sorted(prepared)
    n = len(order)
    blocks: dict[str, list[int]] = defaultdict(list)
    for i, k in enumerate(order):
        for token in set(prepared[k].content):
            if len(token) > 1 and not _is_number_like(token, False):
                blocks[token].append(i)
    triangles: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    codes = []
    for members in blocks.values():
        m = len(members)
        if 2 <= m <= max_block:
            if m not in triangles:
                triangles[m] = np.triu_indices(m, 1)
            upper, lower = triangles[m]
            ids = np.asarray(members, dtype=np.int64)   # ascending: ids follow ``order``
            codes.append(ids[upper] * n + ids[lower])
    if not codes:
        return []
    pairs = np.sort(np.concatenate(codes))   # then distinct (np.unique hashes: 4x slower here)
    pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]
    a, b = pairs // n, pairs % n
    keep = _may_pass([prepared[k] for k in order], a, b)
    return [(order[i], order[j]) for i, j in zip(a[keep].tolist(), b[keep].tolist())]


def _may_pass(names: list[_Prepared], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each pair (``names[a[k]]``, ``names[b[k]]``), False when no pairwise rule can pass it; True otherwise
    (a hash may collide: the rules themselves decide). Each test is a necessary condition of a rule:

    - ``_compatible``: equal numbers, no two different specific types (every rule needs it);
    - ``_reorder``: equal sorted content words (at least two);
    - ``_initials`` either way: the same number of words, the same first letter at every position (a kept word or
      an initial of it), the same last word (at least two letters);
    - ``_typo``: the same number of words (at least three), all equal but one, which starts alike."""
    n = len(names)
    unique = -np.arange(1, n + 1, dtype=np.int64)   # a value no other name shares (hashes may: a false positive)

    def column(values) -> np.ndarray:
        return np.fromiter(values, dtype=np.int64, count=n)

    numbers = column(hash(p.numbers) for p in names)
    kinds = column(hash(p.type) if p.type else 0 for p in names)
    compatible = (numbers[a] == numbers[b]) & ((kinds[a] == 0) | (kinds[b] == 0) | (kinds[a] == kinds[b]))
    reorder = np.where(column(len(p.content) for p in names) >= 2,
                       column(hash(p.content_sorted) for p in names), unique)
    initials = np.where(column(len(p.tokens) >= 2 and len(p.tokens[-1]) >= 2 for p in names),
                        column(hash((tuple(t[0] for t in p.tokens), p.tokens[-1])) for p in names), unique)
    passes = (reorder[a] == reorder[b]) | (initials[a] == initials[b])
    lengths = column(len(p.tokens) for p in names)
    same = compatible & ~passes & (lengths[a] == lengths[b]) & (lengths[a] >= 3)
    for length in np.unique(lengths[a[same]]).tolist():
        # the name with one word left out (its first letter kept), at each position: two names of this length
        # that differ in one word only leave out the same way at that word
        rows = np.flatnonzero(lengths == length)
        where = np.full(n, -1, dtype=np.int64)
        where[rows] = np.arange(rows.size)
        wild = np.array([[hash((i, t[:i], t[i][0], t[i + 1:])) for i in range(length)]
                         for t in (names[r].tokens for r in rows.tolist())], dtype=np.int64)
        pick = np.flatnonzero(same & (lengths[a] == length))
        passes[pick] = (wild[where[a[pick]]] == wild[where[b[pick]]]).any(axis=1)
    return compatible & passes


def _embedding_pairs(embeddings: tuple[Sequence[str], np.ndarray], known: set[str],
                     threshold: float, block_rows: int = 1024) -> Iterable[tuple[str, str, float]]:
    keys, matrix = list(embeddings[0]), np.asarray(embeddings[1], dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(keys):
        raise ValueError(f"embeddings must be (keys, array of shape (len(keys), dim)); got {len(keys)} keys and "
                         f"shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1)
    if len(keys) and not np.allclose(norms, 1.0, atol=1e-3):
        raise ValueError("embeddings must be L2-normalised (each row of norm 1); divide rows by their norms first")
    for start in range(0, len(keys), block_rows):
        sims = matrix[start:start + block_rows] @ matrix.T
        rows, cols = np.nonzero(sims >= threshold)
        for r, c in zip(rows.tolist(), cols.tolist()):
            i = start + r
            if c > i and keys[i] in known and keys[c] in known:
                yield keys[i], keys[c], float(sims[r, c])


def _groups_to_candidates(entities: dict[str, EntityName],
                          edges: list[tuple[str, str, str, str, float]]) -> list[AliasCandidate]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    best: dict[str, tuple[float, str, str]] = {}
    for a, b, method, rule, score in edges:
        parent[find(a)] = find(b)
        for k in (a, b):
            if k not in best or (score, method, rule) > best[k]:
                best[k] = (score, method, rule)
    groups: dict[str, list[str]] = defaultdict(list)
    for k in parent:
        groups[find(k)].append(k)
    out = []
    for members in groups.values():
        canonical = min(members, key=lambda k: _canonical_order(entities[k]))
        for k in members:
            if k != canonical:
                score, method, rule = best[k]
                out.append(AliasCandidate(k, canonical, method, rule, score, entities[k].name, entities[canonical].name))
    return sorted(out, key=lambda c: (c.canonical_key, c.alias_key))


@dataclass
class AliasStats:
    candidates: int
    new_aliases: int          # detected rows added or changed (a new canonical key) by this pass
    entities_remerged: int
    removed_aliases: int = 0  # detected rows no candidate proposes any more (evidence gone, or now ambiguous)
