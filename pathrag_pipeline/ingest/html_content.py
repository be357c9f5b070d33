"""HTML to text: a page's main content, without its furniture, in the marks of ``text.structure``.

A documentation site, a wiki or a saved web page wraps every page's content in the same navigation, sidebars,
breadcrumbs, "Show Source" and "Edit this page" links, cookie banners and licence footers. Kept, they became the
graph's most-mentioned entities and its hubs (a real Sphinx folder: 9 of the 50 most-mentioned entities, the footer's
licence line the second-largest hub).

What is main content is decided by trafilatura, a library made for that. Compared on 160 pages of four generators
(Sphinx, DocBook, asciidoc, SQLite's; ``pathrag bench html``, docs/benchmarks.md) with readability-lxml, jusText,
resiliparse and inscriptis, it kept the least furniture with the most content (no menu line on 158 of 160 pages,
median line recall 0.93), where resiliparse, 15 times faster, kept DocBook's and SQLite's menus and dropped every
bulleted list, readability lost a third of the content and jusText half. Its own rendering loses structure, though:
half of the headings (three quarters on DocBook and SQLite pages) were no headings in its output. So the page is
rendered here (``render``: headings, code blocks, inline code, terms, list items, table rows), and a rendered block
is kept when trafilatura kept its text (``_kept``); a heading is kept when trafilatura kept it or the first block
under it, a definition's term when its definition is kept. A page with no content container trafilatura knows
(<main>, <article>, role=main: DocBook, SQLite and asciidoc's man pages have none) is given to it with its body
wrapped as an <article>: read as loose text, such a page lost its title, its NAME line and most of its headings.

trafilatura's rules are made for news and blog pages, and two of them took documentation's own markup for furniture
and deleted main content with no warning (2% of the paragraphs of Python's documentation, IDLE's page two thirds of
its own): an element whose id holds "nav", "menu", "related", "share", "comment" is deleted, and generators give a
section its heading's words as id ("editing-and-navigation"); a short list or paragraph whose links are mostly short
words is deleted as a menu, and an API entry's or a "See also" line's links are short names. So trafilatura is given
the page with those ids dropped (``_anchor_ids_dropped``) and with the links of a paragraph, list or table that has
words of its own beside them made plain text (``_references_unwrapped``): menus, breadcrumbs and tables of contents,
links alone, are still judged as links.

When trafilatura finds no main content, or keeps fewer than ``MIN_MAIN_WORDS`` words and less than
``MIN_MAIN_SHARE`` of the page's, the page is read whole (every block but scripts, styles, forms, <nav>, <header>,
<footer>) and the document carries a warning naming it: a page that cleaning emptied is never lost.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from pathrag_pipeline.text.structure import code_block, heading_line, inline_code

MIN_MAIN_WORDS = 25
"""Main content of fewer words than this ..."""
MIN_MAIN_SHARE = 0.1
"""... and less than this share of the whole page's words is taken for a miss: the page is read whole instead."""
MATCH_SHARE = 0.6
"""A block is main content when this share of its word trigrams (its words, for a block of under three) is in
trafilatura's text."""

SHORT_WORDS = 5
TOC_WORDS = 12
_WHITESPACE = re.compile(r"\s+")
# permalink marks documentation generators append to headings and terms ("Configuration¶", "project#")
_ANCHOR_MARK = re.compile(r"\s*[¶\uf0c1]+\s*")
_SKIP = frozenset({"script", "style", "noscript", "template", "iframe", "svg", "title", "head", "button", "select",
                   "input", "textarea", "form", "nav", "header", "footer", "object", "embed", "canvas", "map"})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCKS = frozenset({"p", "div", "section", "article", "main", "aside", "blockquote", "ul", "ol", "dl", "li", "dt",
                     "dd", "table", "thead", "tbody", "tfoot", "tr", "caption", "figure", "figcaption", "hr",
                     "address", "details", "summary", "center", "body", "html", "menu", "fieldset", "legend"})
_INLINE_CODE = frozenset({"code", "tt", "kbd", "samp", "var"})
_WORD = re.compile(r"\w+")
_BREAK = "\ue000"   # a <br> inside a block: a line break of its text


def _collapse(text: str) -> str:
    return _WHITESPACE.sub(" ", text.replace(_BREAK, " ")).strip()


@dataclass
class Block:
    kind: str          # "heading", "code", "term", "row" (of a table), "text"
    text: str
    level: int = 0


# ---- rendering a page ---------------------------------------------------------------------------------------

class _Renderer:
    """A page as blocks: block elements end the line being written, inline ones add to it."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.line: list[str] = []

    def flush(self, kind: str = "text") -> None:
        text = "\n".join(filter(None, (_collapse(part) for part in "".join(self.line).split(_BREAK))))
        text = re.sub(r"(?<=`) (?=[.,;:!?)\]])|(?<=[(\[]) (?=`)", "", text)
        text = _ANCHOR_MARK.sub(" ", text).strip()
        self.line = []
        if text:
            self.blocks.append(Block(kind, text))

    def element(self, el) -> None:
        tag = el.tag if isinstance(el.tag, str) else ""
        tag = tag.rsplit("}", 1)[-1].lower()
        if tag in _SKIP or not tag:
            return
        if "headerlink" in (el.get("class") or ""):
            return
        if tag in _HEADINGS:
            self.flush()
            self.children(el)
            text = _ANCHOR_MARK.sub(" ", _collapse("".join(self.line))).strip()
            self.line = []
            if text:
                self.blocks.append(Block("heading", text, _HEADINGS[tag]))
            return
        if tag == "pre":
            self.flush()
            code = el.text_content()
            if code.strip():
                self.blocks.append(Block("code", code.strip("\n")))
            return
        if tag == "br":
            self.line.append(_BREAK)
            return
        if tag in ("td", "th"):
            self.children(el)
            self.line.append(" | ")
            return
        if tag == "tr":
            self.flush()
            self.children(el)
            text = _collapse("".join(self.line)).rstrip(" |").strip()
            self.line = [text]
            self.flush("row")
            return
        if tag == "dt":
            self.flush()
            self.children(el)
            term = _ANCHOR_MARK.sub(" ", _collapse("".join(self.line))).strip()
            self.line = []
            if term:   # a one-word term is a name: "project", "--root", "FULL"
                if " " not in term and "`" not in term:
                    term = inline_code(term)
                self.blocks.append(Block("term", term))
            return
        if tag in _BLOCKS:
            self.flush()
            self.children(el)
            self.flush()
            return
        if tag in _INLINE_CODE and not self.inside_code(el):
            code = el.text_content()
            if code.strip():
                # adjacent code elements ("bisect." + "insort") are one name
                if self.line and self.line[-1].endswith("`"):
                    self.line[-1] = self.line[-1][:-1] + " ".join(code.split()) + "`"
                else:
                    self.line.append(" " + inline_code(code) + " ")
            return
        self.children(el)

    @staticmethod
    def inside_code(el) -> bool:
        parent = el.getparent()
        while parent is not None:
            if isinstance(parent.tag, str) and parent.tag.rsplit("}", 1)[-1].lower() in _INLINE_CODE:
                return True
            parent = parent.getparent()
        return False

    def children(self, el) -> None:
        """The element's text, then each child and the text after it (a child's tail is its parent's text)."""
        if el.text:
            self.line.append(el.text)
        for child in el:
            self.element(child)
            if child.tail:
                self.line.append(child.tail)


def render(tree) -> list[Block]:
    """The blocks of an lxml HTML tree's <body> (the whole tree without one)."""
    renderer = _Renderer()
    body = tree.find(".//body") if tree.tag != "body" else tree
    renderer.element(body if body is not None else tree)
    renderer.flush()
    return renderer.blocks


def as_text(blocks: list[Block]) -> str:
    """Blocks as text in the ``text.structure`` marks."""
    out: list[str] = []
    for i, block in enumerate(blocks):
        if block.kind == "heading":
            out.append(heading_line(block.level, block.text))
        elif block.kind == "code":
            out.append(code_block(block.text))
        elif block.kind == "row" and i and blocks[i - 1].kind == "row":
            out[-1] += "\n" + block.text    # a table's rows are lines of one block
        else:
            out.append(block.text)
    return "\n\n".join(out)


# ---- main content -------------------------------------------------------------------------------------------

def _fold(text: str) -> list[str]:
    return _WORD.findall(text.replace("`", "").casefold())


def _kept(blocks: list[Block], main: list[tuple[bool, tuple[str, ...]]]) -> list[Block]:
    """The blocks trafilatura kept (see the module docstring). ``main``: trafilatura's text, one (is a heading, folded
    words) per element. A block of ``SHORT_WORDS`` words or more is kept when ``MATCH_SHARE`` of its word trigrams are
    in that text, a shorter one ("Next", "Quick search") only when it is a whole element of it; a block that is no
    heading is matched against what is not a heading there, so a page's table of contents, which repeats its
    headings, is not taken for them. A heading is kept when it is found, or when the first block under it is."""
    def index(lines):
        return ({words for words in lines},
                {gram for words in lines for gram in zip(words, words[1:], words[2:])})

    prose = index([words for head, words in main if not head])
    every = index([words for _, words in main])

    def found(block: Block) -> bool:
        folded = tuple(_fold(block.text))
        if not folded:
            return False
        lines, grams = every if block.kind == "heading" else prose
        if len(folded) < SHORT_WORDS:
            return folded in lines
        own = list(zip(folded, folded[1:], folded[2:]))
        return sum(g in grams for g in own) >= MATCH_SHARE * len(own)

    keep = [found(block) for block in blocks]
    # a page's own table of contents: short lines repeating a heading or a term that comes later on the page
    later: set[tuple[str, ...]] = set()
    for i in range(len(blocks) - 1, -1, -1):
        block = blocks[i]
        folded = tuple(_fold(block.text))
        if block.kind in ("text", "row") and keep[i] and len(folded) <= TOC_WORDS and folded in later:
            keep[i] = False
        if block.kind in ("heading", "term"):
            later.add(folded)
    for i in range(len(blocks) - 2, -1, -1):
        if blocks[i].kind == "term" and not keep[i] and keep[i + 1] and blocks[i + 1].kind != "heading":
            keep[i] = True   # a term whose definition is kept (trafilatura drops some terms of API references)
    for i, block in enumerate(blocks):
        if block.kind == "heading" and not keep[i]:
            following = next((j for j in range(i + 1, len(blocks)) if blocks[j].kind != "heading"
                              or blocks[j].level <= block.level), None)
            keep[i] = following is not None and blocks[following].kind != "heading" and keep[following]
    return [block for block, k in zip(blocks, keep) if k]


_TEXT_ELEMENTS = frozenset({"head", "p", "item", "cell", "code", "quote", "row"})


def _inline(element) -> bool:
    """Whether an element of trafilatura's XML runs inside its parent's text (``<p>Call <code>x</code> now</p>``)
    rather than standing as a block of its own: text or another element's text beside it, or a paragraph or heading
    around it."""
    parent = element.getparent()
    if parent is None:
        return False
    if parent.tag in ("p", "head"):
        return True
    before = element.getprevious()
    beside = (before.tail if before is not None else parent.text) or ""
    return bool(beside.strip() or (element.tail or "").strip())


def _elements(xml: str) -> list[tuple[bool, tuple[str, ...]]]:
    """trafilatura's XML as (is a heading, folded words) per text element: the outermost ones, then each text element
    nested in one, whole too. A definition's item holds its paragraphs ("Use this scheme ...", then "Default:
    'http'"): matched only against the item's whole text, a paragraph of under ``SHORT_WORDS`` words inside it was
    dropped from every Sphinx configuration reference (issue 58: the default values its questions ask for). A nested
    element that runs inside its parent's text (``_inline``: inline code) is no element of its own: a short line of
    the page's furniture equal to one (a breadcrumb's "Python »", a sidebar's "index") was kept as main content."""
    from lxml import etree

    try:
        root = etree.fromstring(xml.encode("utf-8"))
    except etree.XMLSyntaxError:
        return []
    out = []

    def walk(element) -> None:
        for child in element:
            if child.tag in ("list", "table"):
                walk(child)
            elif child.tag in _TEXT_ELEMENTS:
                words = tuple(_fold(" ".join(child.itertext())))
                if words:
                    out.append((child.tag == "head", words))
                for inner in child.iterdescendants():
                    if inner.tag in _TEXT_ELEMENTS and inner.tag != "head" and not _inline(inner):
                        words = tuple(_fold(" ".join(inner.itertext())))
                        if words:
                            out.append((False, words))
            else:
                walk(child)

    walk(root)
    return out


def parse_tree(markup: str):
    import lxml.html

    # an XHTML page's XML declaration with an encoding is refused by lxml for str input
    markup = re.sub(r"^\s*<\?xml[^>]*\?>", "", markup)
    return lxml.html.document_fromstring(markup or "<html></html>")


def _anchor_ids_dropped(tree) -> None:
    """Drops the id of each element that opens with a heading and whose id spells that heading's words: an anchor
    that documentation generators derive from the heading (Sphinx's <section id="editing-and-navigation">, pandoc's,
    MkDocs'), which names the section's topic, not its role on the page. trafilatura takes words in an id for the
    element's role and deletes a section whose id holds "nav", "menu", "related", "share", "footer", "comment",
    "tags"...: IDLE's "Menus" and "Editing and Navigation" sections, ctypes' "Loading shared libraries", Flask's
    "Cookies" were lost whole. An id naming a role ("sidebar", "navigation" on an element whose heading says
    otherwise) is kept."""
    for element in tree.xpath("//*[@id][*]"):
        first = next((child for child in element if isinstance(child.tag, str) and child.text_content().strip()), None)
        if first is None or first.tag not in _HEADINGS or (element.text or "").strip():
            continue
        words = {word for word in _WORD.findall(element.get("id").replace("_", " ").casefold()) if not word.isdigit()}
        if words and words <= set(_fold(first.text_content())):
            del element.attrib["id"]


_LISTS = frozenset({"ul", "ol", "dl", "menu", "table"})
_LINK_UNITS = _LISTS | {"p", "pre"} | set(_HEADINGS)
_LINE_BLOCKS = _BLOCKS | _LINK_UNITS | {"td", "th"}
_LANDMARK_LINKS = ("//*[self::nav or self::header or self::footer or self::aside or @role='navigation' or "
                   "@role='banner' or @role='contentinfo' or @role='complementary' or @role='search']//a")
_LETTER = re.compile(r"[^\W\d_]")


def _references_unwrapped(tree) -> None:
    """Turns the links of a paragraph, list or table that has words of its own beside them (cross-references:
    "returning [Py_None] from a C function", the type in "[PyObject] *Py_None", "See also lists of [Objects]") into
    plain text; the links of one that is links alone, or links and marks ("[Python] »", "[Next]", "[a] · [b]", "(12)"),
    stay links. trafilatura deletes a short list or paragraph whose links are mostly short words as a menu;
    documentation's API entries, "See also" lines and changelog items are short and their links are short names, and
    were lost (Sphinx's definition lists of functions and attributes, SQLite's "See also" line on every C API page,
    DocBook's variable lists). Menus, breadcrumbs, tables of contents and indexes are links alone and are still read
    as links. A link in a list or table is judged with the whole list or table (its nested lists apart), not its item,
    as trafilatura judges the list: a list's last item "[hex()], [oct()], [bin()]" is one of a list whose other items
    have words; a link outside one, with its paragraph or heading, else its line.

    An <a> with no href is a link's target (DocBook's index terms, <a name>), no link: unwrapped too, trafilatura
    counted one as a link of no text and deleted a short section holding one and no other link. Links inside what
    the page itself marks as its furniture (<nav>, <header>, <footer>, <aside>, a navigation, banner, contentinfo,
    complementary or search role) stay links: a Sphinx footer's "© Copyright ... Created using [Sphinx]" was kept."""
    for target in tree.xpath("//a[not(@href)]"):
        target.drop_tag()
    furniture = set(tree.xpath(_LANDMARK_LINKS))
    units: dict = {}
    for link in tree.iter("a"):
        if link in furniture:
            continue
        ancestors = [a for a in link.iterancestors() if isinstance(a.tag, str) and a.tag in _LINE_BLOCKS]
        unit = next((a for a in ancestors if a.tag in _LISTS),
                    next((a for a in ancestors if a.tag in _LINK_UNITS), ancestors[0] if ancestors else None))
        if unit is not None:
            units.setdefault(unit, []).append(link)

    def own_words(element, nested: frozenset, top: bool = True) -> str:
        """The element's text outside its links and outside the ``nested`` elements in it."""
        if not top and (element.tag == "a" or element.tag in nested):
            return ""
        return "".join([(element.text or "") if isinstance(element.tag, str) else ""]
                       + [own_words(child, nested, False) + (child.tail or "") for child in element])

    for unit, links in units.items():
        # a list's or table's own words leave out the lists nested in it; a paragraph's or line's, any block in it
        if _LETTER.search(own_words(unit, _LISTS if unit.tag in _LISTS else _LINE_BLOCKS)):
            for link in links:
                link.drop_tag()


def main_content(markup: str) -> tuple[list[Block], list[Block]]:
    """(main blocks, all blocks) of a page: the blocks of ``render`` that trafilatura kept."""
    import trafilatura

    tree = parse_tree(markup)
    blocks = render(tree)
    candidate = copy.deepcopy(tree)
    body = candidate.find(".//body")
    if body is not None and not candidate.xpath("//main|//article|//*[@role='main']"):
        # trafilatura reads a page with no content container it knows (DocBook, SQLite, asciidoc's man pages) as loose
        # text and then keeps no heading and less of the text: the body wrapped as an <article> is read as one
        article = body.makeelement("article", {})
        article.text, body.text = body.text, None
        for child in list(body):
            article.append(child)
        body.append(article)
    # documentation's own markup that trafilatura's rules, made for news and blog pages, take for furniture
    _anchor_ids_dropped(candidate)
    _references_unwrapped(candidate)
    xml = trafilatura.extract(candidate, output_format="xml", include_tables=True,
                              include_formatting=False, include_comments=False, include_images=False,
                              include_links=False, favor_recall=True, deduplicate=False, fast=True,
                              with_metadata=False)
    main = _elements(xml) if xml else []
    return (_kept(blocks, main) if main else []), blocks


def word_count(text: str) -> int:
    return len(text.split())


def is_miss(main_words: int, full_words: int) -> bool:
    """Whether main content this small is taken for a miss (see the module docstring)."""
    return main_words < MIN_MAIN_WORDS and main_words < MIN_MAIN_SHARE * full_words


# ---- the page as a whole ----------------------------------------------------------------------------------

def decoded(data: bytes) -> str:
    """The page's bytes as text, by its byte-order mark, its declared charset, or a guess (bs4's UnicodeDammit)."""
    from bs4.dammit import UnicodeDammit

    markup = UnicodeDammit(data, is_html=True).unicode_markup
    return markup if markup is not None else data.decode("utf-8", errors="replace")


_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def page_title(markup: str) -> str:
    """The page's <title>, entities decoded and whitespace collapsed ("" without one)."""
    import html

    match = _TITLE.search(markup)
    return _collapse(html.unescape(_TAG.sub(" ", match.group(1)))) if match else ""


def full_text(markup: str) -> tuple[str, str]:
    """(text, first h1) of the whole page read as ``render`` reads it: the reading of a page whose main content was
    not found."""
    blocks = render(parse_tree(markup))
    heading = next((b.text for b in blocks if b.kind == "heading" and b.level == 1), "")
    return as_text(blocks), heading
