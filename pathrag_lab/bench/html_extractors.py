"""Main-content extraction for HTML documentation pages: which library drops the site furniture and keeps the page.

trafilatura (XML and Markdown, default and ``fast``, the body as it is or wrapped in <article>), readability-lxml
(``summary()`` rendered with BeautifulSoup), jusText, resiliparse (``main_content=True``) and inscriptis (a renderer,
no main-content detection), against the indexer's BeautifulSoup reading and the full text (the fallback), on every
k-th page by path of real generated documentation: Sphinx, DocBook, asciidoc and SQLite's own generator
(``DEBIAN_FOLDERS``). Per library and folder: furniture kept (full-text lines on at least half of the folder's pages,
outside the reference on most of them), content kept against a hand-made reference region (``REFERENCE``: CSS
selectors chosen by reading the pages) as line recall, characters kept and recall of headings, code blocks, table
cells, prose list items and ``dt`` terms, pages that would fall back, heading levels recoverable from the output, and
time. Lines are compared as lowercased word sequences, so Markdown markup, table pipes and bullets count against no
library. ``compare(DEBIAN_FOLDERS)``, then ``render_markdown(result)``.
"""

from __future__ import annotations

import re
import statistics
import time
import warnings
from collections import Counter
from html import unescape
from pathlib import Path
from typing import Any, Callable

DEBIAN_FOLDERS = {"sphinx": Path("/usr/share/doc/sphinx-doc/html"),
                  "postgresql": Path("/usr/share/doc/postgresql-doc-15/html"),
                  "git": Path("/usr/share/doc/git-doc"), "sqlite": Path("/usr/share/doc/sqlite3")}
# (glob, paths to skip): Sphinx's generated index, search and module-source pages are not documentation.
PAGES = {"sphinx": ("**/*.html", re.compile(r"(^|/)(_[^/]*/|genindex|search\.html|py-modindex)"))}
# Hand-made reference main content: (elements to keep, furniture inside them to drop). Git's #header holds the title
# and the NAME section; SQLite's text sits beside its menu (.nosearch) with an in-page TOC and a "last modified".
REFERENCE = {"sphinx": ("div[role=main]", ""),
             "postgresql": ("body > div:not(.navheader):not(.navfooter)", ""),
             "git": ("#header, #content, #footnotes", ""),
             "sqlite": ("body > :not(.nosearch):not(script)", ".fancy_toc, p:has(#mtimelink)")}
BLOCKS = {"address", "article", "aside", "blockquote", "br", "caption", "center", "dd", "details", "div", "dl", "dt",
          "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main",
          "nav", "ol", "p", "pre", "section", "summary", "table", "td", "th", "tr", "ul"}
SKIP = {"script", "style", "noscript", "template", "head", "title", "svg"}  # SVG: SQLite's syntax-diagram labels
XML_BLOCKS = {"head", "p", "list", "item", "table", "row", "cell", "quote", "lb", "main", "comments"}
HEADING_TAGS = [f"h{i}" for i in range(1, 7)]
# Generic navigation markers for resiliparse's skip_elements: DocBook XSL's page header and footer, ARIA navigation.
NAV_SELECTORS = [".navheader", ".navfooter", "[role=navigation]", "nav"]
FALLBACK_SHARE = 0.2
MEANS = ("recall", "chars_kept", "headings", "headings_marked", "heading_levels", "code", "code_lines", "cells",
         "items", "terms")
Headings = list[tuple[int, str]]
Extractor = Callable[[str, bytes], tuple[str, Headings]]  # (page as text, as bytes) -> (text, [(level, heading)])


def key(text: str) -> str:
    """Lowercased words of ``text`` (Markdown's backslash escapes dropped): what two lines share to count as one."""
    return " ".join(re.findall(r"\w+", text.replace("\\", "").lower()))


def soup_lines(node: Any) -> list[str]:
    """Whitespace-collapsed lines of a BeautifulSoup node: a line per block element, ``pre`` keeps its lines."""
    from bs4 import NavigableString, Tag
    parts: list[str] = []

    def walk(tag: Any) -> None:
        for child in tag.children:
            if isinstance(child, Tag) and child.name not in SKIP:
                parts.append("\n" if child.name in BLOCKS else "")
                parts.append(child.get_text()) if child.name == "pre" else walk(child)
                parts.append("\n" if child.name in BLOCKS else "")
            elif type(child) is NavigableString:
                parts.append(re.sub(r"\s+", " ", str(child)))
    walk(node)
    return [line for line in (" ".join(raw.split()) for raw in "".join(parts).split("\n")) if line]


def _soup(html: str | bytes, parser: str = "lxml") -> Any:
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning
    warnings.filterwarnings("ignore", category=XMLParsedAsHTMLWarning)
    warnings.filterwarnings("ignore", category=MarkupResemblesLocatorWarning)
    return BeautifulSoup(html, parser)


def _soup_headings(node: Any) -> Headings:
    return [(int(h.name[1]), " ".join(h.get_text(" ").split())) for h in node.find_all(HEADING_TAGS)]


def _trafilatura(output_format: str, fast: bool, wrap: bool = False) -> Extractor:
    def run(html: str, _: bytes) -> tuple[str, Headings]:
        import trafilatura
        from lxml import etree
        # without a container its main extractor knows, trafilatura recovers loose text: paragraphs but no headings
        if wrap and not re.search(r"<(main|article)\b|role=.main", html):
            html = re.sub(r"(<body\b[^>]*>)", r"\1<article>", html, count=1)
        out = trafilatura.extract(html, output_format=output_format, include_tables=True, include_formatting=True,
                                  include_comments=False, favor_recall=True, fast=fast) or ""
        if output_format == "markdown" or not out:
            heads, fenced = [], False
            for line in out.splitlines():
                fenced ^= line.startswith("```")
                if not fenced and (m := re.match(r"(#{1,6}) (.+)", line)):
                    heads.append((len(m.group(1)), m.group(2)))
            return out, heads
        root = etree.fromstring(out.encode())
        for el in root.iter():  # a line per block; top-level <code> is a code block, inside a <p> it is inline
            if el.tag in XML_BLOCKS or (el.tag == "code" and el.getparent().tag != "p"):
                el.text, el.tail = "\n" + (el.text or ""), "\n" + (el.tail or "")
            elif el.tag == "code":  # the XML drops the space between adjacent inline elements: "<code>a</code> <code>b"
                el.tail = " " + (el.tail or "")
        heads = [(int(h.get("rend", "h0")[1:] or 0), " ".join("".join(h.itertext()).split()))
                 for h in root.iter("head")]
        return "".join(root.itertext()), heads
    return run


def _readability(html: str, _: bytes) -> tuple[str, Headings]:
    from readability import Document
    soup = _soup(Document(html).summary())
    return "\n".join(soup_lines(soup)), _soup_headings(soup)


def _justext(_: str, data: bytes) -> tuple[str, Headings]:
    import justext
    kept = [p for p in justext.justext(data, justext.get_stoplist("English")) if not p.is_boilerplate]
    heads = [(int(re.findall(r"\bh(\d)\b", p.dom_path)[-1]), p.text) for p in kept if p.is_heading]
    return "\n".join(p.text for p in kept), heads


def _resiliparse(minimal_html: bool, skip: list[str] | None = None) -> Extractor:
    def run(html: str, _: bytes) -> tuple[str, Headings]:
        from resiliparse.extract.html2text import extract_plain_text
        out = extract_plain_text(html, main_content=True, preserve_formatting="minimal_html" if minimal_html else True,
                                 skip_elements=skip)
        strip = lambda markup: unescape(re.sub(r"<[^>]+>", "", markup))  # noqa: E731 - minimal_html to text
        heads = [(int(level), strip(t)) for level, t in re.findall(r"<h([1-6])>(.*?)</h\1>", out, re.S)]
        return (strip(out), heads) if minimal_html else (out, [])
    return run


def _inscriptis(html: str, _: bytes) -> tuple[str, Headings]:
    from inscriptis import get_annotated_text
    from inscriptis.model.config import ParserConfig
    out = get_annotated_text(html, ParserConfig(annotation_rules={h: [h] for h in HEADING_TAGS}))
    return out["text"], [(int(label[1]), " ".join(out["text"][a:b].split())) for a, b, label in out["label"]]


def _current(_: str, data: bytes) -> tuple[str, Headings]:
    """The indexer's HTML reading at 0e38d57: html.parser, these tags dropped, the rest's text."""
    soup = _soup(data, "html.parser")
    for tag in soup.find_all(["script", "style", "nav", "header", "footer", "noscript", "template", "iframe", "svg"]):
        tag.decompose()
    return "\n".join(soup_lines(soup)), []


def _indexer(_: str, data: bytes) -> tuple[str, Headings]:
    """What this indexer stores (``ingest/html_content.py``): the page rendered, the blocks trafilatura keeps, or the
    whole page when that is too little."""
    from pathrag_pipeline.ingest import html_content

    main, blocks = html_content.main_content(html_content.decoded(data))
    words = sum(html_content.word_count(b.text) for b in main)
    if html_content.is_miss(words, sum(html_content.word_count(b.text) for b in blocks)):
        main = blocks
    return html_content.as_text(main), [(b.level, b.text) for b in main if b.kind == "heading"]


INDEXER = "this indexer: its rendering, blocks kept by trafilatura"
EXTRACTORS: dict[str, Extractor] = {
    INDEXER: _indexer,
    "trafilatura xml": _trafilatura("xml", fast=False), "trafilatura xml fast": _trafilatura("xml", fast=True),
    "trafilatura xml, body as <article>": _trafilatura("xml", fast=False, wrap=True),
    "trafilatura xml fast, body as <article>": _trafilatura("xml", fast=True, wrap=True),
    "trafilatura md": _trafilatura("markdown", fast=False), "readability": _readability, "justext": _justext,
    "resiliparse": _resiliparse(False), "resiliparse minimal_html": _resiliparse(True),
    "resiliparse minimal_html, nav skipped": _resiliparse(True, skip=NAV_SELECTORS), "inscriptis": _inscriptis,
    "the indexer before (0e38d57): bs4, nav/header/footer dropped": _current, "full text (fallback)": lambda html, _: ("\n".join(soup_lines(_soup(html))), [])}


def sample_pages(name: str, folder: Path, n: int) -> list[Path]:
    """Every k-th page by sorted path, k = count // n, the first ``n`` of them (all pages when fewer)."""
    paths = all_pages(name, folder)
    return paths[:: max(1, len(paths) // n)][:n]


def _reference(name: str, soup: Any, full: list[str]) -> dict[str, Any]:
    keep, drop = REFERENCE[name]
    region = _soup("<div></div>").div
    for el in soup.select(keep):
        region.append(el.extract())
    for el in region.select(drop) if drop else []:
        el.decompose()
    lines = [line for line in soup_lines(region) if len(line) >= 3]
    code = [[k for k in map(key, pre.get_text().splitlines()) if len(k) >= 3] for pre in region.find_all("pre")]
    return {"lines": lines, "chars": len(" ".join(lines)), "full_chars": len(" ".join(full)),
            "headings": [(level, key(t)) for level, t in _soup_headings(region)], "code": [c for c in code if c],
            "cells": [key(c.get_text(" ")) for c in region.find_all(["td", "th"])],
            # list items of prose: a list of links (a toctree, "See also") is navigation as much as content
            "items": [key(li.get_text(" ")) for li in region.find_all("li")
                      if len(key(" ".join(a.get_text(" ") for a in li.find_all("a")))) * 2 < len(key(li.get_text()))],
            "terms": [key(dt.get_text(" ")) for dt in region.find_all("dt")]}


def _stat(values: list[Any], fn: Callable[[list[Any]], float] = statistics.fmean) -> float | None:
    present = [v for v in values if v is not None]
    return round(fn(present), 3) if present else None


def _score(ref: dict[str, Any], text: str, heads: Headings, furniture: dict[str, str]) -> dict[str, Any]:
    out_key, ref_key = f" {key(text)} ", f" {key(' '.join(ref['lines']))} "
    cells = (" ".join(part.split()) for line in text.splitlines() for part in re.split(r"\||\t| {2,}", line))
    seg_keys = [k for k in (key(cell) for cell in cells if len(cell) >= 3) if k]  # output lines split at table cells
    line_keys = {key(line) for line in text.splitlines()}
    has = lambda k, hay: bool(k) and f" {k} " in hay  # noqa: E731 - word-bounded substring
    ref_found = [has(key(line), out_key) or not key(line) for line in ref["lines"]]
    head_keys, head_levels = {key(t) for _, t in heads}, {(level, key(t)) for level, t in heads}
    chars = len(" ".join(text.split()))
    kept_chars = sum(len(line) for line, ok in zip(ref["lines"], ref_found) if ok) / max(1, sum(map(len, ref["lines"])))
    # a furniture line counts only beyond its occurrences in the reference ("Glossary" the heading is content)
    kept = Counter(k for k in seg_keys if k in furniture) - Counter(map(key, ref["lines"]))
    return {"fallback": chars < FALLBACK_SHARE * ref["chars"], "furniture": [furniture[k] for k in kept.elements()],
            "fallback_full": chars < FALLBACK_SHARE * ref["full_chars"], "segments": len(seg_keys),
            "off_reference": sum(not has(k, ref_key) for k in seg_keys),
            "recall": _stat(ref_found), "chars_kept": round(kept_chars, 3) if ref["lines"] else None,
            "missing": [line for line, ok in zip(ref["lines"], ref_found) if not ok],
            "headings": _stat([has(k, out_key) for _, k in ref["headings"] if k]),
            "headings_marked": _stat([k in head_keys for _, k in ref["headings"] if k]),
            "heading_levels": _stat([(level, k) in head_levels for level, k in ref["headings"] if k]),
            "code": _stat([has(c[0], out_key) for c in ref["code"]]),
            "code_lines": _stat([k in line_keys for c in ref["code"] for k in c]),
            "cells": _stat([has(k, out_key) for k in ref["cells"] if len(k) >= 3]),
            "items": _stat([has(k, out_key) for k in ref["items"] if len(k) >= 3]),
            "terms": _stat([has(k, out_key) for k in ref["terms"] if k])}


def _templates(pages: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """Lines on at least half the pages, as key -> line: furniture (outside the reference on most of its pages), and
    the rest (headings every page has, such as a man page's SYNOPSIS)."""
    seen, inside, text = Counter(), Counter(), {}
    for page in pages:
        ref_keys = {key(line) for line in page["ref"]["lines"]}
        lines = {key(line): line for line in reversed(page["full"]) if len(line) >= 3 and key(line)}
        text.update({k: line for k, line in lines.items() if k not in text})
        for k in lines:
            seen[k], inside[k] = seen[k] + 1, inside[k] + (k in ref_keys)
    common = [k for k, n in seen.items() if n >= len(pages) / 2]
    return ({k: text[k] for k in common if inside[k] * 2 < seen[k]},
            {k: text[k] for k in common if inside[k] * 2 >= seen[k]})


def all_pages(name: str, folder: Path) -> list[Path]:
    pattern, skip = PAGES.get(name, ("*.html", None))
    return sorted(p for p in folder.glob(pattern) if not (skip and skip.search(p.relative_to(folder).as_posix())))


def llm_tokens(folders: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """What cleaning saves an LLM that reads the folder (issue 58): over every page, the tokens of the page's text
    read whole (every block of the indexer's rendering, what it keeps when the main content is a miss) against the
    tokens of what it stores (``ingest/html_content``), by the product's token count (``text/tokenizer``)."""
    from pathrag_pipeline.ingest import html_content
    from pathrag_pipeline.text.tokenizer import count_tokens

    out = {}
    for name, folder in folders.items():
        whole = cleaned = fallback = pages = 0
        for path in all_pages(name, folder):
            main, blocks = html_content.main_content(html_content.decoded(path.read_bytes()))
            if html_content.is_miss(sum(html_content.word_count(b.text) for b in main),
                                    sum(html_content.word_count(b.text) for b in blocks)):
                main, fallback = blocks, fallback + 1
            pages += 1
            whole += count_tokens(html_content.as_text(blocks))
            cleaned += count_tokens(html_content.as_text(main))
        out[name] = {"pages": pages, "tokens_whole": whole, "tokens_cleaned": cleaned, "fallback_pages": fallback,
                     "saved_share": round(1 - cleaned / whole, 3) if whole else 0.0}
    return out


def compare(folders: dict[str, Path], pages_per_folder: int = 40,
            extractors: dict[str, Extractor] | None = None) -> dict[str, Any]:
    """All figures, per extractor and folder and over every page. Each extractor reads the sample twice in this
    process; the second run is timed and scored."""
    from importlib.metadata import distributions
    wanted = {"trafilatura", "readability-lxml", "justext", "resiliparse", "inscriptis", "lxml", "beautifulsoup4"}
    result: dict[str, Any] = {"folders": {}, "extractors": {}, "versions": {
        d.metadata["Name"]: d.version for d in distributions() if d.metadata["Name"].lower() in wanted}}
    sampled: dict[str, list[dict[str, Any]]] = {}
    for name, folder in folders.items():
        pages = []
        for path in sample_pages(name, folder, pages_per_folder):
            data = path.read_bytes()
            soup = _soup(data)
            full = soup_lines(soup.body or soup)
            pages.append({"path": path.relative_to(folder).as_posix(), "data": data, "full": full,
                          "html": data.decode("utf-8", "replace"), "ref": _reference(name, soup, full)})
        furniture, content = _templates(pages)
        sampled[name] = pages
        result["folders"][name] = {"path": str(folder), "pages": len(pages), "reference": REFERENCE[name],
                                   "mb": round(sum(len(p["data"]) for p in pages) / 1e6, 2),
                                   "furniture_lines": sorted(furniture.values()),
                                   "content_template_lines": sorted(content.values()), "_furniture": furniture}
    result["skipped"] = {}
    for label, extract in (extractors or EXTRACTORS).items():
        try:
            extract("<html><body><p>x</p></body></html>", b"<html><body><p>x</p></body></html>")
        except ImportError as exc:   # a library of the `bench` extra that is not installed
            result["skipped"][label] = f"not installed ({exc.name}): pip install -e '.[bench]'"
            continue
        per_folder, total_bytes, all_scores, all_times = {}, 0, [], []
        for name, pages in sampled.items():
            scores, times, errors = [], [], []
            for run in range(2):  # the first run warms caches and lazy imports
                for page in pages:
                    started, error = time.perf_counter(), None
                    try:
                        text, heads = extract(page["html"], page["data"])
                    except Exception as exc:  # noqa: BLE001 - a library failing on a page is a finding
                        text, heads, error = "", [], f"{page['path']}: {type(exc).__name__}: {str(exc)[:80]}"
                    if run:
                        times.append(time.perf_counter() - started)
                        errors += [error] if error else []
                        furniture = result["folders"][name]["_furniture"]
                        scores.append({"page": page["path"], **_score(page["ref"], text, heads, furniture)})
            total_bytes += sum(len(p["data"]) for p in pages)
            all_scores, all_times = all_scores + scores, all_times + times
            per_folder[name] = _summary(scores, times) | {"errors": errors}
        result["extractors"][label] = {"folders": per_folder, "all": _summary(all_scores, all_times),
                                       "ms_per_mb": round(1000 * sum(all_times) / (total_bytes / 1e6), 1)}
    for info in result["folders"].values():
        info.pop("_furniture")
    result["llm_tokens"] = llm_tokens(folders)
    return result


def _summary(scores: list[dict[str, Any]], times: list[float]) -> dict[str, Any]:
    kept = Counter(k for s in scores for k in s["furniture"])
    segments = sum(s["segments"] for s in scores) or 1
    return {"pages": len(scores), "median_ms": round(1000 * statistics.median(times), 2),
            "furniture_share": round(sum(kept.values()) / segments, 4), "furniture_kept": kept.most_common(10),
            "pages_with_furniture": sum(bool(s["furniture"]) for s in scores),
            "off_reference_share": round(sum(s["off_reference"] for s in scores) / segments, 4),
            "fallback_pages": [s["page"] for s in scores if s["fallback"]],
            "fallback_full_pages": [s["page"] for s in scores if s["fallback_full"]],
            "recall_median": _stat([s["recall"] for s in scores], statistics.median),
            **{f"{m}_mean": _stat([s[m] for s in scores]) for m in MEANS},
            "lost": sorted(({"page": s["page"], "recall": s["recall"], "missing": s["missing"][:6]} for s in scores
                            if s["recall"] is not None and s["recall"] < 0.9), key=lambda x: x["recall"])}


def _row(label: str, values: list[Any]) -> str:
    cells = ["–" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in values]
    return f"| {label} | " + " | ".join(cells) + " |"


def render_markdown(result: dict[str, Any], chosen: tuple[str, ...] = ()) -> str:
    """The report's tables: a row per extractor for each folder and for all pages, the structure table, the template
    lines, and for the ``chosen`` extractors the furniture that survives and the pages that lost content."""
    out = ["Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(result["versions"].items()))
           + "".join(f"; {label}: {why}" for label, why in result.get("skipped", {}).items()), "",
           "| folder | pages | MB | reference (hand-made) | furniture template lines |", "|---" * 5 + "|"]
    for name, info in result["folders"].items():
        ref = info["reference"][0] + (f"` minus `{info['reference'][1]}" if info["reference"][1] else "")
        out.append(_row(name, [info["pages"], info["mb"], f"`{ref}`", len(info["furniture_lines"])]))
    cols = ["furniture share", "pages w/ furniture", "off-reference share", "line recall median", "line recall mean",
            "chars kept", "headings", "code", "cells", "prose li", "dt", "fallback pages (ref / full)", "median ms"]
    for name in [*result["folders"], "all"]:
        out += ["", f"#### {name}", "", "| extractor | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
        for label, ex in result["extractors"].items():
            s = ex["all"] if name == "all" else ex["folders"][name]
            out.append(_row(label, [s["furniture_share"], f"{s['pages_with_furniture']}/{s['pages']}",
                                    s["off_reference_share"], s["recall_median"], s["recall_mean"],
                                    s["chars_kept_mean"], s["headings_mean"],
                                    s["code_mean"], s["cells_mean"], s["items_mean"], s["terms_mean"],
                                    f"{len(s['fallback_pages'])} / {len(s['fallback_full_pages'])}", s["median_ms"]]))
    out += ["", "#### Structure (all pages, means) and cost", "", "| extractor | headings found | marked as headings "
            "| with right level | code first lines | code lines kept as lines | ms per MB of HTML |", "|---" * 7 + "|"]
    for label, ex in result["extractors"].items():
        s = ex["all"]
        out.append(_row(label, [s["headings_mean"], s["headings_marked_mean"], s["heading_levels_mean"],
                                s["code_mean"], s["code_lines_mean"], ex["ms_per_mb"]]))
    if result.get("llm_tokens"):
        out += ["", "#### What an LLM reads: every page, whole and cleaned", "",
                "| folder | pages | tokens, page read whole | tokens, main content (stored) | saved | pages read whole "
                "(main content a miss) |", "|---" * 6 + "|"]
        for name, t in result["llm_tokens"].items():
            out.append(_row(name, [t["pages"], f"{t['tokens_whole']:,}", f"{t['tokens_cleaned']:,}",
                                   f"{100 * t['saved_share']:.1f}%", t["fallback_pages"]]))
    for name, info in result["folders"].items():
        out += ["", f"Furniture template lines, {name}: " + "; ".join(f"`{x}`" for x in info["furniture_lines"]),
                f"Template lines inside the reference (not furniture), {name}: "
                + ("; ".join(f"`{x}`" for x in info["content_template_lines"]) or "none")]
    for label in chosen:
        out += ["", f"#### {label}: surviving furniture (most frequent 10) and pages under 0.9 line recall", ""]
        for name, s in result["extractors"][label]["folders"].items():
            out.append(f"- {name}: kept " + ("; ".join(f"`{k}` x{n}" for k, n in s["furniture_kept"]) or "nothing")
                       + f"; fallback pages: {', '.join(s['fallback_pages']) or 'none'}; errors: {len(s['errors'])}")
            out += [f"  - {x['page']} recall {x['recall']}: missing " + "; ".join(f"`{m[:70]}`" for m in x["missing"])
                    for x in s["lost"][:8]]
    return "\n".join(out) + "\n"
