"""An answer as one self-contained HTML page: the answer, its kept paths drawn as a graph, the passages quoted.

``pathrag ask QUESTION --html FILE`` writes it for the answer just given, ``pathrag ask --show QUERY_ID --html FILE``
for any ask in the log (issue 63). The page needs no network: styles inline, the graph an inline SVG. The
graph's layout is igraph's (Kamada-Kawai, which starts from a circle, so the same answer is drawn the same way);
the page only turns its coordinates into SVG: the seed entities (the query's retrieved nodes on a path) ringed, an
edge's width by the reliability of the most reliable path through it, its relation keywords written on it, each
node and edge with a tooltip. Below it the paths (rank, reliability, chain) and the passages, each with its
document, section and a ``file://`` link to the file in the indexed folder.

The passages come in two lists. First the cited ones: for each [n] of the answer (``QueryResult.citations``,
logged in ``queries.citations``) the same document and section, and the passage its sentences were quoted from,
cut around them with the quoted sentences marked, so a reader checks a citation on the page. Then the other
retrieved passages, in retrieval's order, labelled by their rank there and never by a bracketed number: numbering
them [1], [2], ... as the page once did put a retrieved passage of one document under an answer citing another as
[1]. An ask logged before citations were recorded shows the retrieved list alone, and says so.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

WIDTH, HEIGHT, MARGIN = 880, 520, 70
MAX_PASSAGES = 8
PASSAGE_CHARS = 700
AROUND_QUOTE_CHARS = 300   # a cited passage is shown from this much before its first quoted sentence to as much after
LABEL_CHARS = 28


@dataclass(frozen=True)
class PagePath:
    rank: int
    reliability: float
    nodes: tuple[str, ...]
    edge_ids: tuple[str, ...]
    keywords: tuple[str, ...]
    chunk_ids: tuple[str, ...]


@dataclass(frozen=True)
class PagePassage:
    chunk_id: str
    document: str        # the file's path in the folder (a JSONL record: path#id)
    section: str
    text: str


@dataclass(frozen=True)
class PageCitation:
    """One [n] of the answer: its source as the answer names it, the passages its sentences came from, the quotes."""

    n: int
    document: str
    section: str
    passages: tuple[PagePassage, ...]
    quotes: tuple[str, ...]


@dataclass
class AnswerView:
    """What the page shows of one ask."""

    query_id: str
    question: str
    mode: str
    answer: str
    answer_kind: str
    model: str
    asked_at: str
    paths: list[PagePath]
    seeds: list[str]
    passages: list[PagePassage]
    folder: str | None = None
    notes: list[str] = field(default_factory=list)
    citations: list[PageCitation] | None = None   # None: an ask logged before its citations were recorded


class UnknownQuery(LookupError):
    """No ask with that id in the log."""


# ---- the view, from a result just made or from the log ------------------------------------------------------------

def view_of_result(result: Any, con: Any) -> AnswerView:
    """The page's view of a ``QueryResult`` (``con``: a read connection to the home's DuckDB file)."""
    paths = [PagePath(p.rank, float(p.reliability), tuple(p.nodes), tuple(p.edge_ids),
                      tuple(getattr(p, "keywords", ()) or ()), tuple(p.chunk_ids)) for p in result.paths]
    paths = _with_keywords(con, paths)
    seeds = list(dict.fromkeys(n.entity_name for n in result.retrieved))
    return AnswerView(result.query_id, result.question, result.mode, result.answer, result.answer_kind, result.model,
                      str(result.asked_at)[:19], paths, seeds, _passages(con, list(result.chunk_ids)), _folder(con),
                      citations=_citations(con, list(getattr(result, "citations", None) or [])))


def view_of_logged(con: Any, query_id: str) -> AnswerView:
    """The page's view of the logged ask ``query_id``; ``UnknownQuery`` when the log has none."""
    row = con.execute("SELECT question, mode, answer, answer_kind, model, strftime(asked_at, '%Y-%m-%d %H:%M:%S'), "
                      "chunk_ids FROM queries WHERE query_id = ?", [query_id]).fetchone()
    if row is None:
        raise UnknownQuery(f"no ask with query id {query_id!r} in the log; list recent ones with: pathrag sql "
                           "\"SELECT query_id, asked_at, question FROM queries ORDER BY asked_at DESC LIMIT 10\"")
    question, mode, answer, kind, model, asked_at, chunk_ids = row
    paths = [PagePath(rank, float(rel), tuple(nodes), tuple(edges), (), tuple(chunks)) for rank, rel, nodes, edges, chunks
             in con.execute("SELECT rank, reliability, node_names, edge_ids, chunk_ids FROM path_traces "
                            "WHERE query_id = ? ORDER BY rank", [query_id]).fetchall()]
    seeds = [r[0] for r in con.execute("SELECT DISTINCT entity_name FROM retrieved_nodes WHERE query_id = ? "
                                       "ORDER BY entity_name", [query_id]).fetchall()]
    cited = _logged_citations(con, query_id)
    return AnswerView(query_id, question, mode, answer, kind, model, asked_at, _with_keywords(con, paths), seeds,
                      _passages(con, list(chunk_ids or [])), _folder(con),
                      citations=None if cited is None else _citations(con, cited))


def _logged_citations(con: Any, query_id: str) -> list[dict] | None:
    """``queries.citations`` of a logged ask, or None when it was logged before they were recorded (NULL there, or a
    home read before its next write added the column)."""
    import duckdb

    try:
        row = con.execute("SELECT citations FROM queries WHERE query_id = ?", [query_id]).fetchone()
    except duckdb.BinderException:
        return None
    return None if row is None or row[0] is None else json.loads(row[0])


def _citations(con: Any, citations: list[dict]) -> list[PageCitation]:
    """The page's citations (``Citation.to_dict()`` each), with the text of the chunks each quotes from."""
    wanted = list(dict.fromkeys(c for citation in citations for c in citation.get("chunk_ids", [])))
    found = {p.chunk_id: p for p in _passages(con, wanted, limit=None)}
    return [PageCitation(int(c["n"]), c.get("document", ""), c.get("section", ""),
                         tuple(found[i] for i in c.get("chunk_ids", []) if i in found), tuple(c.get("quotes", [])))
            for c in citations]


def _with_keywords(con: Any, paths: list[PagePath]) -> list[PagePath]:
    wanted = sorted({e for p in paths if not p.keywords for e in p.edge_ids})
    found: dict[str, str] = {}
    if wanted:
        found = dict(con.execute("SELECT relation_key, keywords FROM relations WHERE relation_key IN "
                                 "(SELECT unnest(?::VARCHAR[]))", [wanted]).fetchall())
    return [p if p.keywords else PagePath(p.rank, p.reliability, p.nodes, p.edge_ids,
                                          tuple(found.get(e, "") for e in p.edge_ids), p.chunk_ids) for p in paths]


def _passages(con: Any, chunk_ids: list[str], limit: int | None = MAX_PASSAGES) -> list[PagePassage]:
    ids = chunk_ids[:limit]
    if not ids:
        return []
    rows = {r[0]: r for r in con.execute(
        "SELECT c.id, coalesce(d.path, c.document_id), coalesce(c.section, ''), c.text FROM chunks c "
        "LEFT JOIN documents d ON d.id = c.document_id WHERE c.id IN (SELECT unnest(?::VARCHAR[]))", [ids]).fetchall()}
    return [PagePassage(c, rows[c][1], rows[c][2], rows[c][3]) for c in ids if c in rows]


def _folder(con: Any) -> str | None:
    from pathrag_pipeline.ingest.home_folder import recorded_folder

    try:
        return recorded_folder(con)
    except Exception:   # noqa: BLE001 - a link is a convenience; the page is drawn without it
        return None


# ---- the drawing --------------------------------------------------------------------------------------------------

def _graph(paths: Sequence[PagePath]) -> tuple[list[str], list[tuple[int, int, str, str, float]]]:
    """Distinct nodes, and edges (a, b, relation key, keywords, best reliability) of the paths."""
    names: dict[str, int] = {}
    edges: dict[tuple[int, int, str], list] = {}
    for path in paths:
        for name in path.nodes:
            names.setdefault(name, len(names))
        for i, edge in enumerate(path.edge_ids):
            if i + 1 >= len(path.nodes):
                break
            a, b = names[path.nodes[i]], names[path.nodes[i + 1]]
            key = (min(a, b), max(a, b), edge)
            keywords = path.keywords[i] if i < len(path.keywords) else ""
            if key in edges:
                edges[key][1] = max(edges[key][1], path.reliability)
            else:
                edges[key] = [keywords, path.reliability]
    return list(names), [(a, b, key, kw, rel) for (a, b, key), (kw, rel) in edges.items()]


def _layout(n: int, edges: Sequence[tuple[int, int, str, str, float]]) -> list[tuple[float, float]]:
    from pathrag_pipeline.slim_imports import import_igraph

    ig = import_igraph()

    if n == 0:
        return []
    g = ig.Graph(n=n, edges=[(a, b) for a, b, *_ in edges])
    coords = g.layout_kamada_kawai() if n > 1 else [(0.0, 0.0)]
    xs, ys = [c[0] for c in coords], [c[1] for c in coords]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    return [(MARGIN + (x - min(xs)) / span_x * (WIDTH - 2 * MARGIN) if n > 1 else WIDTH / 2,
             MARGIN + (y - min(ys)) / span_y * (HEIGHT - 2 * MARGIN) if n > 1 else HEIGHT / 2) for x, y in coords]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def svg(paths: Sequence[PagePath], seeds: Sequence[str]) -> str:
    """The paths as an inline SVG graph (empty string when there is no path)."""
    names, edges = _graph(paths)
    if not names:
        return ""
    at = _layout(len(names), edges)
    best = max((rel for *_, rel in edges), default=1.0) or 1.0
    seeds_set = set(seeds)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
           f'height="{HEIGHT}" role="img" aria-label="kept paths">']
    for a, b, key, keywords, rel in edges:
        (x1, y1), (x2, y2) = at[a], at[b]
        width = 1.0 + 5.0 * max(0.0, rel) / best
        tip = html.escape(f"{names[a]} — {names[b]}: {keywords or 'related'} (reliability {rel:.4g})")
        out.append(f'<g class="edge" data-relation="{html.escape(key)}"><title>{tip}</title>'
                   f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke-width="{width:.2f}"/>')
        if keywords:
            angle = math.degrees(math.atan2(y2 - y1, x2 - x1))
            if angle > 90 or angle < -90:
                angle += 180
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
            out.append(f'<text class="keywords" x="{mx:.1f}" y="{my - 4:.1f}" '
                       f'transform="rotate({angle:.1f} {mx:.1f} {my:.1f})">'
                       f'{html.escape(_clip(keywords, LABEL_CHARS))}</text>')
        out.append("</g>")
    for i, name in enumerate(names):
        x, y = at[i]
        seed = name in seeds_set
        out.append(f'<g class="node{" seed" if seed else ""}" data-name="{html.escape(name)}">'
                   f'<title>{html.escape(name)}{" (seed: retrieved for the question)" if seed else ""}</title>'
                   f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{11 if seed else 8}"/>'
                   f'<text x="{x:.1f}" y="{y + 24:.1f}">{html.escape(_clip(name, 40))}</text></g>')
    out.append("</svg>")
    return "\n".join(out)


STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:24px auto;max-width:960px;color:#1d232a;padding:0 12px}
h1{font-size:20px} h2{font-size:16px;margin-top:28px} .meta{color:#5b6670;font-size:13px}
.answer{white-space:pre-wrap;background:#f4f6f8;border-left:4px solid #2f6f9f;padding:10px 14px}
svg{background:#fbfcfd;border:1px solid #dde3e8;max-width:100%;height:auto}
.edge line{stroke:#7f95a8} .edge .keywords{font-size:11px;fill:#4b5a66;text-anchor:middle}
.node circle{fill:#ffffff;stroke:#2f6f9f;stroke-width:2} .node.seed circle{fill:#2f6f9f}
.node text{font-size:12px;text-anchor:middle;fill:#1d232a}
table{border-collapse:collapse;width:100%;font-size:13px} td,th{border-bottom:1px solid #e3e8ec;padding:4px 6px;
text-align:left;vertical-align:top} .passage{margin:10px 0;padding:8px 12px;border:1px solid #e3e8ec}
.passage.top{border-color:#2f6f9f} .passage.cited{border-left:4px solid #2f6f9f} mark{background:#fff1a8}
.passage pre{white-space:pre-wrap;margin:6px 0 0;font:13px/1.4 ui-monospace,monospace}
.note{color:#8a5a00} form.ask{display:flex;gap:8px;margin-bottom:18px} form.ask input[type=text]{flex:1;padding:6px 8px;
font:inherit} form.ask select,form.ask button{font:inherit;padding:6px 10px} .error{color:#a3261c;font-weight:600}
ul.recent{padding-left:18px;font-size:14px}
"""


def _link(folder: str | None, document: str) -> str:
    name = html.escape(document)
    if not folder:
        return name
    path = Path(folder) / document.split("#", 1)[0]
    return f'<a href="{html.escape(path.as_uri())}">{name}</a>'


def page(title: str, body: str) -> str:
    """A page of this look around ``body`` (HTML)."""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n")


def _quote_spans(text: str, quotes: Sequence[str]) -> list[tuple[int, int]]:
    """Where the quoted sentences are in a passage's text, as (start, end), in order and not overlapping. The answer
    quotes a sentence without its markup (no backticks, whitespace made one space), cut to a length (" ..."), and a
    definition as its term and some of its sentences ("term: first sentence ... later sentence"): each sentence of a
    quote is looked for on its own, word by word, whatever markup stands between the words."""
    spans = []
    for quote in quotes:
        if quote.endswith(" ..."):
            quote = quote[:-4].rsplit(" ", 1)[0]   # the cut's last word may be a piece of a word
        for piece in re.split(r"(?<=[.!?:])\s+", quote):
            words = re.findall(r"\w+", piece)
            if len(words) < 3:
                continue   # a term alone ("--all:") or a fragment: too short to place
            found = re.search(r"\W*".join(re.escape(w) for w in words), text)
            if found:
                spans.append((found.start(), found.end()))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _marked(text: str, quotes: Sequence[str]) -> tuple[str, bool]:
    """A cited passage as HTML: cut to ``AROUND_QUOTE_CHARS`` around the sentences the answer quotes from it, those
    marked; and whether any was found (else its opening, as a retrieved passage is shown)."""
    spans = _quote_spans(text, quotes)
    if not spans:
        return html.escape(_clip(text, PASSAGE_CHARS)), False
    start, end = max(0, spans[0][0] - AROUND_QUOTE_CHARS), min(len(text), spans[-1][1] + AROUND_QUOTE_CHARS)
    if start:   # not in the middle of a word
        start = next((i + 1 for i in range(start, spans[0][0]) if text[i].isspace()), spans[0][0])
    if end < len(text):
        end = next((i for i in range(end, spans[-1][1], -1) if text[i].isspace()), spans[-1][1])
    out, at = ["…" if start else ""], start
    for a, b in spans:
        out.append(html.escape(text[at:a]) + f"<mark>{html.escape(text[a:b])}</mark>")
        at = b
    out.append(html.escape(text[at:end]) + ("…" if end < len(text) else ""))
    return "".join(out), True


def _cited(view: AnswerView, top: set[str]) -> str:
    """The answer's citations, each numbered as in the answer, with its source and the passages it quotes."""
    out = []
    for c in view.citations or []:
        blocks, placed = [], False
        for p in c.passages:
            text, found = _marked(p.text, c.quotes)
            placed = placed or found
            blocks.append(f"<pre>{text}</pre>")
        missing = "" if placed else (
            '<p class="meta">The quoted sentences, as the answer words them (not found word for word in the passage '
            'below):</p><ul class="quotes">' + "".join(f"<li>{html.escape(q)}</li>" for q in c.quotes) + "</ul>")
        if not c.passages:
            blocks.append('<p class="meta">The passage is no longer in the index (the document changed since).</p>')
        from_top = any(p.chunk_id in top for p in c.passages)
        out.append(f'<div class="passage cited{" top" if from_top else ""}" id="cite-{c.n}"><div class="meta">'
                   f'[{c.n}] {_link(view.folder, c.document)}{" › " + html.escape(c.section) if c.section else ""}'
                   f'{" · from the top path" if from_top else ""}</div>{missing}{"".join(blocks)}</div>')
    return "".join(out)


def _answer_html(view: AnswerView) -> str:
    """The answer, its citation marks (" [2]") linked to the cited passages below."""
    text = html.escape(view.answer)
    numbers = {c.n for c in view.citations or []}
    return re.sub(r"(?<= )\[(\d+)\](?=\s|;|$)",
                  lambda m: f'<a href="#cite-{m.group(1)}">{m.group()}</a>' if int(m.group(1)) in numbers else m.group(),
                  text)


def render(view: AnswerView, *, before: str = "", after: str = "") -> str:
    """The whole page; ``before`` and ``after``: HTML around the answer (the query service's form, its recent asks)."""
    top = set(view.paths[0].chunk_ids) if view.paths else set()
    rows = "".join(f"<tr><td>{p.rank}</td><td>{p.reliability:.4g}</td><td>{html.escape(' → '.join(p.nodes))}</td></tr>"
                   for p in view.paths)
    cited_ids = {p.chunk_id for c in view.citations or [] for p in c.passages}
    ranks = {p.chunk_id: i for i, p in enumerate(view.passages, 1)}
    # the retrieved passages the answer does not cite, labelled by their rank in the retrieval (no [n]: those are the
    # answer's numbers)
    context = [p for p in view.passages if p.chunk_id not in cited_ids]
    passages = "".join(
        f'<div class="passage{" top" if p.chunk_id in top else ""}"><div class="meta">retrieved #{ranks[p.chunk_id]} · '
        f'{_link(view.folder, p.document)}'
        f'{" › " + html.escape(p.section) if p.section else ""}{" · from the top path" if p.chunk_id in top else ""}'
        f'</div><pre>{html.escape(_clip(p.text, PASSAGE_CHARS))}</pre></div>'
        for p in context)
    if view.citations:
        cited = (f"<h2>Cited passages ({len(view.citations)})</h2>\n<p class=\"meta\">Each [n] of the answer: its "
                 f"source and the passage its sentences were quoted from (marked).</p>\n{_cited(view, top)}")
        heading = f"Other retrieved passages: context, not cited ({len(context)})"
    elif view.citations is None:
        cited = ('<p class="note">This ask was logged before the answer\'s citations were recorded: the passages '
                 "below are the retrieved ones, in retrieval order, not numbered as the answer's sources.</p>")
        heading = f"Retrieved passages ({len(context)})"
    else:
        cited = ""
        heading = f"Retrieved passages: context, the answer numbers no source ({len(context)})"
    drawing = svg(view.paths, view.seeds)
    notes = "".join(f'<p class="note">{html.escape(n)}</p>' for n in view.notes)
    return page(_clip(view.question, 80), f"""{before}
<h1>{html.escape(view.question)}</h1>
<p class="meta">mode {html.escape(view.mode)} · {html.escape(view.answer_kind)} answer by {html.escape(view.model)} ·
asked {html.escape(view.asked_at)} UTC · query {html.escape(view.query_id)}</p>
<div class="answer" id="answer">{_answer_html(view)}</div>{notes}
<h2>Kept paths ({len(view.paths)})</h2>
{drawing or '<p class="meta">This answer kept no path (a flat mode, or no path between its seeds).</p>'}
{'<p class="meta">Filled circles: the seed entities retrieved for the question; edge width: the reliability of the most reliable path through it; on each edge, its relation keywords.</p>' if drawing else ''}
{f'<table><tr><th>rank</th><th>reliability</th><th>path</th></tr>{rows}</table>' if rows else ''}
{cited}
<h2>{heading}</h2>
{passages or f'<p class="meta">No {"other " if view.citations else ""}passage.</p>'}
{after}""")


PAGES_DIR = "pages"


def write_pages(store: Any, results: Sequence[Any], folder: Path) -> list[Path]:
    """Each result's page written to ``folder/QUERY_ID.html`` (the Dagster query job's answers); returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    with store.connect(read_only=True) as con:
        for result in results:
            path = folder / f"{result.query_id}.html"
            path.write_text(render(view_of_result(result, con)), encoding="utf-8")
            out.append(path)
    return out
