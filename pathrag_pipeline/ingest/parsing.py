"""Document parsers: turn one file of the indexed folder into plain-text documents.

Every supported format ends as ``ParsedDocument`` records holding the text the chunker cuts up, so chunk
offsets point into exactly the text stored here: parsers keep text readable and simple rather than
re-rendering it. A file that cannot be used raises ``ParseError`` whose message says what is wrong and
what to do; the ingest step records that message instead of failing the run. A JSONL file is many
documents, so one bad line becomes an error record and the other lines still parse.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import stat as stat_module
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pathrag_pipeline.ingest import template_lines
from pathrag_pipeline.text.structure import code_block, heading_line, inline_code, plain

SUPPORTED = frozenset({".txt", ".md", ".markdown", ".mdx", ".rst", ".html", ".htm", ".pdf", ".docx", ".jsonl",
                       ".ipynb"})
GZIP_SUFFIX = ".gz"
TEXT_FORMAT = "text"
"""``documents.format`` of a file with no extension (``README``, ``NEWS``, ``copyright``), read as plain text when its
content is text (``looks_like_text``; a binary one is skipped as unsupported). Every supported file may also
be gzip-compressed (``README.md.gz``, ``NEWS.gz``: Debian's documentation folders compress most of theirs): it is
read as the file inside, and its format gets ``.gz`` appended (``md.gz``, ``text.gz``)."""
SUPPORTED_SAID = (f"{' '.join(sorted(SUPPORTED))}, text files with no extension, and any of these gzipped "
                  f"({GZIP_SUFFIX})")
"""How reports and refusals name what is read (one place: the CLI, ``home_folder``)."""

# What a parser change is measured by: a home whose documents were read by another PARSER_ID reads every file again
# once (ingest/folder_sync.parsing_current), so no document keeps text an older parser made. v2: headings, code
# blocks and inline code marked (text/structure.py), plain-text headings, HTML main content. v3: a short paragraph
# inside a kept list item or definition is kept ("Default: 'http'", html_content._elements). v4: HTML main content
# loses no section whose id is its heading's words and no API entry or "See also" line for its short links
# (html_content._anchor_ids_dropped, _references_unwrapped), and keeps no furniture line equal to inline code; plain
# text and reStructuredText that are not UTF-8 are read as Windows-1252 with a warning (``_decode_text``), not errors.
PARSER_ID = "parse-v4"

TITLE_MAX_CHARS = 200
BINARY_SNIFF_BYTES = 8192
_UTF8_BOM = b"\xef\xbb\xbf"


class ParseError(Exception):
    """A file cannot be turned into text; the message names the file, the problem and the fix."""


@dataclass
class ParsedDocument:
    id: str                   # rel_path, or f"{rel_path}#{record_id}" for a JSONL record
    title: str
    text: str
    format: str               # the file suffix without the dot: "md", "pdf", "jsonl", ...; "text" for no suffix, "md.gz"
    content_hash: str         # sha256 hex of this document's source bytes (whole file, decompressed for a .gz, or the JSONL line)
    error: str | None = None  # set only for a JSONL line that failed; then text == ""
    warning: str | None = None  # read, but not as intended (an HTML page read whole): one line naming the file
    page_lines: list[int] | None = None
    """For an HTML page: the line keys (``template_lines.line_keys``) of the whole page, furniture included, which is
    where a folder's template lines show (a tagline the main-content extraction keeps on a few pages is on all of
    them); None: the text's own lines."""
    claimed_id: str | None = None
    """For a failed JSONL line: the document id its record would have had, when the line still shows its
    "id" (None when it cannot be read). Lets the sync tell a record that turned malformed from a deleted one."""


def supported_by_name(name: str) -> bool | None:
    """Whether a file of this name is read, by its name alone: True for a supported suffix (case-insensitive), also
    inside ``.gz``; False for another suffix (``data.csv``, ``site.tar.gz``, ``x.gz.gz``); None for a name with no
    suffix (``README``, ``NEWS.gz``): read when its content is text (``looks_like_text``). The suffix is what
    ``Path(name).suffix`` gives (the last dot, not a leading one), found without making a Path: the scanner asks for
    every file of the folder."""
    inner, _gzipped = _inner_name(name)
    suffix = os.path.splitext(inner)[1].lower()
    return suffix in SUPPORTED if suffix else None


def is_supported(path: Path | str) -> bool:
    """Whether the folder scanner picks this file up (``supported_by_name``); for a name with no suffix this reads
    the file's first bytes (``looks_like_text``), so ``path`` must then be the file's own path."""
    known = supported_by_name(os.path.basename(path))
    return looks_like_text(path) if known is None else known


def file_format(name: str) -> str:
    """``documents.format`` of a file of this name: its extension without the dot (the file inside for a ``.gz``),
    ``text`` for none, ``.gz`` appended for a gzipped file; also what a file in error is recorded with."""
    inner, gzipped = _inner_name(name)
    fmt = os.path.splitext(inner)[1].lower().lstrip(".") or TEXT_FORMAT
    return fmt + GZIP_SUFFIX if gzipped else fmt


def _inner_name(name: str) -> tuple[str, bool]:
    """The name of the file inside a ``.gz`` (``README.md.gz`` -> ``README.md``), and whether it is one."""
    if len(name) > len(GZIP_SUFFIX) and name.lower().endswith(GZIP_SUFFIX):
        return name[:-len(GZIP_SUFFIX)], True
    return name, False


def looks_like_text(path: Path | str) -> bool:
    """Whether a file (a ``.gz``: the file inside) starts as text: its first ``BINARY_SNIFF_BYTES`` hold no NUL byte
    and decode as UTF-8 (a character cut at the end of them aside), or, in an 8-bit encoding, hold few control bytes.
    An empty file, an unreadable one and anything but a regular file (a FIFO is never opened) are not."""
    try:
        if not stat_module.S_ISREG(os.stat(path).st_mode):
            return False
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))   # never waits, even if swapped for a FIFO
        with open(fd, "rb") as handle:
            if _inner_name(os.path.basename(path))[1]:
                import gzip

                with gzip.GzipFile(fileobj=handle) as inner:
                    head = inner.read(BINARY_SNIFF_BYTES)
            else:
                head = handle.read(BINARY_SNIFF_BYTES)
    except (OSError, EOFError, ValueError):   # gzip.BadGzipFile and zlib.error are OSErrors
        return False
    if not head.strip() or b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.start >= len(head) - 3:
            return True   # a character cut by the end of the sniffed bytes
        # not UTF-8: text in an 8-bit encoding (read as Windows-1252, with a warning) when control bytes other than
        # whitespace are rare, as in text and unlike in binary data that happens to hold no NUL
        controls = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13) or b == 127)
        return controls <= len(head) // 100
    return True


DEFAULT_MAX_TEXT_BYTES = 50 * 1024 * 1024
DOCX_XML_FACTOR = 4
"""A DOCX's uncompressed parts may be at most this many times the text limit (XML markup around the text)."""


def parse_file(path: Path, rel_path: str, *, max_bytes: int, max_text_bytes: int | None = None) -> list[ParsedDocument]:
    """Parse one file into its documents (one, or one per JSONL line).

    Raises ParseError for a file that is unreadable, over ``max_bytes``, empty, binary, undecodable,
    corrupt, encrypted or without a text layer, or whose extracted text exceeds ``max_text_bytes`` (UTF-8;
    checked while extracting, so a compressed DOCX or PDF that inflates never gets far).
    """
    limit = max_text_bytes or DEFAULT_MAX_TEXT_BYTES
    path = Path(path)
    inner, gzipped = _inner_name(path.name)
    stem, suffix = os.path.splitext(inner)
    suffix = suffix.lower()
    parser = _PARSERS.get(suffix) if suffix else _parse_text
    if parser is None:
        raise ParseError(f"{rel_path}: unsupported file type {suffix!r}; supported are {SUPPORTED_SAID}")
    data = _read_bytes(path, rel_path, max_bytes)
    if gzipped:
        data = _gunzip(data, rel_path, max_bytes)
    if not data.strip():
        raise ParseError(f"{rel_path} is empty ({len(data)} bytes, no text); add content or remove the file")
    fmt = suffix.lstrip(".") or TEXT_FORMAT   # what the parser reads; the documents' format is file_format's
    if parser in (_parse_docx, _parse_pdf):
        docs = parser(data, rel_path, fmt, stem, max_text_bytes=limit)
    else:
        docs = parser(data, rel_path, fmt, stem)
    total = sum(len(d.text.encode("utf-8")) for d in docs)
    if total > limit:
        raise ParseError(_too_much_text(rel_path, total, limit))
    if gzipped:
        for doc in docs:
            doc.format += GZIP_SUFFIX
    return docs


def _gunzip(data: bytes, rel_path: str, max_bytes: int) -> bytes:
    """A ``.gz`` file's content, at most ``max_bytes`` of it (PATHRAG_MAX_FILE_BYTES bounds what is read, so a small
    file that inflates enormously stops there); a damaged file is a ParseError naming it."""
    import gzip

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as inner:
            out = inner.read(max_bytes + 1)
    except (OSError, EOFError) as exc:   # BadGzipFile, zlib.error, a cut-off file
        raise ParseError(f"{rel_path} is not a readable gzip file ({exc or type(exc).__name__}); "
                         "compress it again, or remove it from the folder") from None
    if len(out) > max_bytes:
        raise ParseError(f"{rel_path} decompresses to more than the limit of {max_bytes:,} bytes "
                         "(PATHRAG_MAX_FILE_BYTES); raise that limit if the file is meant to be read (the next run "
                         "reads it again), or remove it")
    return out


def _too_much_text(rel_path: str, size: int | str, limit: int) -> str:
    size = f"{size:,} bytes" if isinstance(size, int) else size
    return (f"{rel_path} extracts to {size} of text, over the limit of {limit:,} bytes; "
            f"raise PATHRAG_MAX_TEXT_BYTES or split the document")


class _TextBudget:
    """Counts extracted text while a parser runs; raises ParseError as soon as it passes the limit."""

    def __init__(self, rel_path: str, limit: int):
        self.rel_path, self.limit, self.used = rel_path, limit, 0

    def add(self, text: str) -> str:
        self.used += len(text)          # characters: a lower bound of the UTF-8 bytes, checked exactly at the end
        if self.used > self.limit:
            raise ParseError(_too_much_text(self.rel_path, f"more than {self.limit:,} characters", self.limit))
        return text


# ---- common helpers ------------------------------------------------------------------------------

def _read_bytes(path: Path, rel_path: str, max_bytes: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ParseError(_too_large(rel_path, size, max_bytes))
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)  # the file may have grown since stat
    except OSError as exc:
        raise ParseError(f"cannot read {rel_path}: {exc.strerror or exc}; check that the file exists and is readable") from None
    if len(data) > max_bytes:
        raise ParseError(_too_large(rel_path, len(data), max_bytes))
    return data


def _too_large(rel_path: str, size: int, max_bytes: int) -> str:
    return (f"{rel_path} is {size:,} bytes, over the limit of {max_bytes:,} bytes; "
            f"raise PATHRAG_MAX_FILE_BYTES or split the file")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_TRAILING_SPACE = re.compile(r"[ \t]+\n")
_MANY_BLANK_LINES = re.compile(r"\n{3,}")


def normalise_text(text: str) -> str:
    """Unify line ends, drop NULs and trailing spaces, keep at most one blank line between blocks."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = _TRAILING_SPACE.sub("\n", text)
    return _MANY_BLANK_LINES.sub("\n\n", text).strip()


def _first_line(text: str) -> str:
    """The first non-empty line, cut at a word boundary to at most TITLE_MAX_CHARS characters."""
    for line in text.split("\n"):
        line = line.strip()
        if line:
            if len(line) <= TITLE_MAX_CHARS:
                return line
            cut = line[:TITLE_MAX_CHARS - 1]
            space = cut.rfind(" ")
            return (cut[:space] if space > TITLE_MAX_CHARS // 2 else cut).rstrip() + "…"
    return ""


def _require_text(text: str, rel_path: str, what: str) -> str:
    if not text:
        raise ParseError(f"{rel_path} is empty: the {what} holds no text once parsed; add content or remove the file")
    return text


def _utf8(data: bytes, rel_path: str) -> tuple[str | None, int, int]:
    """(the text, or None when it is not UTF-8; the offset of its first byte that is not; the BOM's length).
    Binary content (NUL bytes in the first ``BINARY_SNIFF_BYTES``) is a ParseError."""
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ParseError(f"{rel_path} looks like a binary file (NUL bytes in its first {BINARY_SNIFF_BYTES // 1024} KiB), not text; "
                         f"remove it from the folder or convert it to UTF-8 text")
    bom = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    try:
        return data[bom:].decode("utf-8"), 0, bom
    except UnicodeDecodeError as exc:
        return None, bom + exc.start, bom


def _decode_utf8(data: bytes, rel_path: str) -> str:
    """Decode UTF-8 (BOM accepted); binary or undecodable content is a ParseError naming the byte offset."""
    text, offset, _bom = _utf8(data, rel_path)
    if text is None:
        raise ParseError(f"{rel_path} is not valid UTF-8: byte {offset} ({data[offset:offset + 4]!r}) cannot be "
                         "decoded; re-save the file as UTF-8")
    return text


def _decode_text(data: bytes, rel_path: str) -> tuple[str, str | None]:
    """A plain-text format's bytes as text, and a warning when they are not UTF-8: such a file is read as
    Windows-1252 (Latin-1 with its printable extras; any byte decodes), which is what a text file of that age and
    origin almost always is (Debian installs upstream files as they come: ed's AUTHORS, make's NEWS), instead of
    being an error whose fix ("re-save it as UTF-8") a user cannot apply to files a package owns. Binary content
    (NUL bytes) is still an error. JSON formats (JSONL, notebooks) are UTF-8 by definition and keep the error."""
    text, offset, bom = _utf8(data, rel_path)
    if text is not None:
        return text, None
    try:
        text = data[bom:].decode("cp1252")
    except UnicodeDecodeError:   # 0x81, 0x8D, 0x8F, 0x90, 0x9D have no Windows-1252 character
        text = data[bom:].decode("latin-1")
    return text, (f"{rel_path} is not UTF-8 (byte {offset}: {data[offset:offset + 4]!r}): read as Windows-1252 "
                  "(Latin-1); save it as UTF-8 if some characters look wrong")


# ---- plain text and markdown ---------------------------------------------------------------------

_MD_H1 = re.compile(r"^ {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_MD_LEADING_HASHES = re.compile(r"^#{1,6}[ \t]+")


def _parse_text(data: bytes, rel_path: str, fmt: str, stem: str) -> list[ParsedDocument]:
    decoded, warning = _decode_text(data, rel_path)
    text = _require_text(normalise_text(decoded), rel_path, "file")
    title = ""
    if fmt in ("md", "markdown", "mdx"):
        heading = _MD_H1.search(text)
        title = heading.group(1).strip()[:TITLE_MAX_CHARS] if heading else ""
        if not title:
            title = _MD_LEADING_HASHES.sub("", _first_line(text))
        text = markdown_text(text) or text
    else:
        text, first_heading = plain_text_headings(text)
        title = first_heading[:TITLE_MAX_CHARS]
    title = title or _first_line(text) or stem
    return [ParsedDocument(rel_path, title, text, fmt, _sha256(data), warning=warning)]


# Headings of plain text: Markdown's "## Heading" lines, and a line underlined by a run of one of = - ~ ^ (Markdown's
# setext headings, reStructuredText's and AsciiDoc's section titles), the underline about as long as the line.
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(\S.*?)(?:[ \t]+#+)?[ \t]*$")
_UNDERLINE = re.compile(r"^([=~^-])\1{2,}[ \t]*$")
_UNDERLINE_LEVELS = {"=": 1, "-": 2, "~": 3, "^": 4}
_MAX_HEADING_CHARS = 120


def plain_text_headings(text: str) -> tuple[str, str]:
    """A plain text file's headings as heading lines (``text.structure``): "## Setup" keeps its level, a line
    underlined by ``===`` is level 1, ``---`` 2, ``~~~`` 3, ``^^^`` 4 (the underline is dropped); other lines are
    kept as they are. An underlined line counts when it is short, follows a blank line (or starts the file) and its
    underline is at least half its length, so a rule under a paragraph is no heading. Returns the text and its
    first heading."""
    lines = text.split("\n")
    out: list[str] = []
    first = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        atx = _ATX.match(line)
        underline = _UNDERLINE.match(lines[i + 1]) if i + 1 < len(lines) else None
        stripped = line.strip()
        if atx:
            out.append(heading_line(len(atx.group(1)), atx.group(2)))
            first = first or atx.group(2).strip()
            i += 1
            continue
        if (underline and stripped and len(stripped) <= _MAX_HEADING_CHARS and not line.startswith((" ", "\t"))
                and (i == 0 or not lines[i - 1].strip()) and len(lines[i + 1].strip()) * 2 >= len(stripped)
                and not _UNDERLINE.match(line)):
            out.append(heading_line(_UNDERLINE_LEVELS[underline.group(1)], stripped))
            first = first or stripped
            i += 2
            continue
        out.append(line)
        i += 1
    return "\n".join(out), first


def _inline_text(children) -> str:
    parts = []
    for child in children or ():
        if child.type == "text":
            parts.append(child.content)
        elif child.type == "code_inline":
            parts.append(inline_code(child.content))
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(_inline_text(child.children))   # its alt text
    return "".join(parts).strip()


def markdown_text(source: str) -> str:
    """Markdown as the text a reader sees (markdown-it, CommonMark + tables), in the marks of ``text.structure``:
    headings as ``#`` lines, code blocks fenced, inline code in backticks; paragraphs, list items and quotes as
    blocks separated by blank lines, without emphasis, list, table or link syntax; a table row becomes its
    cells joined by "; ". Other markup left in the text became entities ("**Method**") and noise in quoted
    answers (issue 25); headings and code are marked so that their readers can tell them from prose."""
    from markdown_it import MarkdownIt

    blocks: list[str] = []
    row: list[str] | None = None
    level = 0
    for token in MarkdownIt("commonmark").enable("table").parse(source):
        if token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            if row:
                blocks.append("; ".join(cell for cell in row if cell))
            row = None
        elif token.type == "heading_open":
            level = int(token.tag[1:])
        elif token.type == "heading_close":
            level = 0
        elif token.type == "inline":
            text = _inline_text(token.children)
            if row is not None:
                row.append(text)
            elif text:
                blocks.append(heading_line(level, text) if level else text)
        elif token.type in ("fence", "code_block") and token.content.strip():
            blocks.append(code_block(token.content, token.info.split()[0] if token.info.strip() else ""))
        elif token.type == "html_block":
            stripped = re.sub(r"<[^>]+>", " ", token.content)
            if stripped.strip():
                blocks.append(" ".join(stripped.split()))
    return "\n\n".join(blocks)


# ---- Jupyter notebooks -----------------------------------------------------------------------------------

def _parse_notebook(data: bytes, rel_path: str, fmt: str, stem: str) -> list[ParsedDocument]:
    """A Jupyter notebook (nbformat 4): its Markdown cells read as Markdown, its code and raw cells as code
    blocks, in cell order; outputs (images, tables, tracebacks) are not read. The title is the first Markdown
    heading."""
    source = _decode_utf8(data, rel_path)
    try:
        notebook = json.loads(source)
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"{rel_path} is not a Jupyter notebook (nbformat 4 JSON with a cells list: {exc}); fix "
                         "the file or remove it") from None
    blocks: list[str] = []
    title = ""
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        text = cell.get("source", "")
        text = "".join(text) if isinstance(text, list) else str(text)
        if not text.strip():
            continue
        if cell.get("cell_type") == "markdown":
            heading = _MD_H1.search(text)
            title = title or (heading.group(1).strip() if heading else "")
            blocks.append(markdown_text(text) or text)
        else:
            blocks.append(code_block(text))
    text = _require_text(normalise_text("\n\n".join(blocks)), rel_path, "notebook")
    return [ParsedDocument(rel_path, (title or _first_line(text) or stem)[:TITLE_MAX_CHARS], text, fmt, _sha256(data))]


# ---- reStructuredText ------------------------------------------------------------------------------------

# docutils with nothing that reaches outside the file (no `include`, no `raw`, no config files) and no
# messages on stderr: a broken construct stays in the text, as a reader of the source would see it.
_RST_SETTINGS = {"file_insertion_enabled": False, "raw_enabled": False, "_disable_config": True,
                 "report_level": 5, "halt_level": 5, "warning_stream": False, "input_encoding": "utf-8"}


# Sphinx's cross-reference roles, unknown to plain docutils, which leaves them as raw text (":ref:`results`"):
# each is read as the text a rendered page shows, "Title" for `Title <target>`, else the target without ~ or !.
SPHINX_ROLES = ("ref", "doc", "term", "class", "func", "meth", "mod", "attr", "obj", "data", "exc", "const",
                "envvar", "option", "command", "program", "file", "samp", "abbr", "kbd", "guilabel",
                "menuselection", "pep", "rfc", "numref", "any", "download", "keyword", "py:class", "py:func",
                "py:meth", "py:mod", "py:attr", "py:obj", "py:data", "py:exc", "py:const")
_CODE_ROLES = frozenset({"class", "func", "meth", "mod", "attr", "obj", "data", "exc", "const", "envvar", "option",
                         "command", "program", "file", "samp", "kbd"})
_ROLE_TITLE = re.compile(r"^(?P<title>.+?)\s*<[^<>]+>$", re.DOTALL)
_roles_registered = False


def _register_sphinx_roles() -> None:
    global _roles_registered
    if _roles_registered:
        return
    from docutils import nodes
    from docutils.parsers.rst import roles

    def as_text(name, rawtext, text, lineno, inliner, options=None, content=None):  # docutils' role signature
        match = _ROLE_TITLE.match(text)
        if match:
            shown = match.group("title")
        elif text.startswith("~"):   # ~pkg.mod.run shows as "run"
            shown = text[1:].split(".")[-1]
        else:
            shown = text.lstrip("!")
        # a role naming code (a function, an option, a file) renders as code, the others as their text
        kind = nodes.literal if name.split(":")[-1] in _CODE_ROLES else nodes.inline
        return [kind(rawtext, shown)], []

    for name in SPHINX_ROLES:
        roles.register_local_role(name, as_text)
    _roles_registered = True


# Sphinx (and sphinx-design) directives whose body is prose a rendered page shows; plain docutils reports them
# as unknown and the body would be lost with the error message ("References" in a `.. dropdown::`). Each is
# read as a container: its arguments as a line (a dropdown's or a function's title), its body parsed as RST.
SPHINX_CONTAINERS = ("dropdown", "tab-set", "tab-item", "tabs", "tab", "card", "grid", "grid-item",
                     "grid-item-card", "seealso", "versionadded", "versionchanged", "versionremoved", "deprecated",
                     "todo", "only", "centered", "hlist", "glossary", "function", "method", "attribute",
                     "exception", "py:function", "py:method", "py:class", "py:attribute", "py:data",
                     "py:exception", "py:module", "autolink-preface")
_directives_registered = False


def _register_sphinx_directives() -> None:
    global _directives_registered
    if _directives_registered:
        return
    from docutils import nodes
    from docutils.parsers.rst import Directive, directives

    class AsContainer(Directive):
        optional_arguments = 1
        final_argument_whitespace = True
        has_content = True
        option_spec = None  # any option is accepted and ignored (:open:, :class-container:, :noindex:)

        def run(self):
            node = nodes.container()
            if self.arguments:
                node += nodes.paragraph(text=self.arguments[0])
            if self.content:
                self.state.nested_parse(self.content, self.content_offset, node)
            return [node]

    class AnyOptions(dict):  # docutils looks options up here; an empty (falsy) spec would mean "no options"
        def __missing__(self, key):
            return directives.unchanged

        def __bool__(self):
            return True

    AsContainer.option_spec = AnyOptions()
    for name in SPHINX_CONTAINERS:
        directives.register_directive(name, AsContainer)
    _directives_registered = True


_RST_INCLUDE = re.compile(r"^\s*\.\.\s+(?:literal)?include::", re.MULTILINE)


def _parse_rst(data: bytes, rel_path: str, fmt: str, stem: str) -> list[ParsedDocument]:
    """reStructuredText through docutils: the text without its markup (section adornments, directives,
    roles, link targets), paragraphs separated by blank lines; the title is the document's title."""
    from docutils import nodes
    from docutils.core import publish_doctree  # imported here: only .rst needs it

    _register_sphinx_roles()
    _register_sphinx_directives()
    source, warning = _decode_text(data, rel_path)
    try:
        tree = publish_doctree(source, source_path=rel_path, settings_overrides=_RST_SETTINGS)
    except Exception as exc:  # noqa: BLE001 - docutils raises many kinds; the file is what is broken
        raise ParseError(f"{rel_path} is not valid reStructuredText ({type(exc).__name__}: {exc}); fix the "
                         "file or save it as .txt") from None
    for message in list(tree.findall(nodes.system_message)):
        message.parent.remove(message)
    for hidden in list(tree.findall(nodes.comment)) + list(tree.findall(nodes.target)):
        hidden.parent.remove(hidden)
    titled = any(isinstance(child, nodes.title) for child in tree.children)
    blocks = []
    for node in tree.findall(nodes.TextElement):
        if isinstance(node.parent, nodes.TextElement):
            continue
        if isinstance(node, (nodes.literal_block, nodes.doctest_block)):
            blocks.append(code_block(node.astext()) if node.astext().strip() else "")
        elif isinstance(node, nodes.title) and isinstance(node.parent, (nodes.section, nodes.document)):
            depth = sum(1 for parent in _ancestors(node) if isinstance(parent, nodes.section))
            text = _rst_inline(node, nodes).strip()
            blocks.append(heading_line(depth + titled, text) if text else "")
        elif isinstance(node, nodes.subtitle):   # docutils makes a lone second-level section the subtitle
            text = _rst_inline(node, nodes).strip()
            blocks.append(heading_line(2, text) if text else "")
        else:
            blocks.append(_rst_inline(node, nodes).strip())
    text = normalise_text("\n\n".join(b for b in blocks if b))
    if not text and _RST_INCLUDE.search(source):
        raise ParseError(f"{rel_path} holds no text of its own: it only includes other files (`.. include::` is not "
                         "followed); the included file is indexed when it is in the folder with a supported "
                         "extension, or list this one in .pathragignore")
    text = _require_text(text, rel_path, "file")
    title = str(tree.get("title") or "").strip() or _first_line(text) or stem
    return [ParsedDocument(rel_path, title[:TITLE_MAX_CHARS], text, fmt, _sha256(data), warning=warning)]


def _ancestors(node):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _rst_inline(node, nodes) -> str:
    """A docutils text element's text with its inline literals (``code``, code roles) in backticks."""
    parts = []
    for child in node.children:
        if isinstance(child, nodes.literal):
            parts.append(inline_code(child.astext()))
        elif isinstance(child, nodes.Text):
            parts.append(str(child))
        elif isinstance(child, nodes.Element):
            parts.append(_rst_inline(child, nodes))
    return "".join(parts)


# ---- HTML --------------------------------------------------------------------------------------------

def _parse_html(data: bytes, rel_path: str, fmt: str, stem: str) -> list[ParsedDocument]:
    """The page's main content (``html_content``); the whole page, with a warning, when that finds too little.
    The title is the main content's first top-level heading, else the page's <title>."""
    from pathrag_pipeline.ingest import html_content

    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ParseError(f"{rel_path} looks like a binary file (NUL bytes in its first {BINARY_SNIFF_BYTES // 1024} KiB), not HTML; "
                         f"remove it from the folder or re-save it as text")
    markup = html_content.decoded(data)
    main, blocks = html_content.main_content(markup)
    kept = sum(html_content.word_count(b.text) for b in main)
    whole = sum(html_content.word_count(b.text) for b in blocks)
    warning = None
    if html_content.is_miss(kept, whole):
        if whole >= html_content.MIN_MAIN_WORDS:
            warning = (f"{rel_path}: main-content extraction kept {kept} of {whole} words; the whole page is indexed, "
                       "its menus and footers included")
        main = blocks
    text = _require_text(normalise_text(html_content.as_text(main)), rel_path, "page")
    page_lines = template_lines.line_keys(html_content.as_text(blocks))
    # the page's one <h1> is its title; a page with several (numbered sections) or none has its <title>
    top = [b.text for b in blocks if b.kind == "heading" and b.level == 1]
    title = plain((top[0] if len(top) == 1 else "") or html_content.page_title(markup))[:TITLE_MAX_CHARS]
    title = title or _first_line(text) or stem
    return [ParsedDocument(rel_path, title, text, fmt, _sha256(data), warning=warning, page_lines=page_lines)]


# ---- PDF -----------------------------------------------------------------------------------------------

class _PdfWarnings(logging.Handler):
    """pypdf's warnings ("invalid pdf header", "EOF marker not found", ...) while this thread parses a PDF: kept
    for the file's own message instead of reaching stderr on their own, where nothing says which file they are
    about (pypdf logs them to its loggers, which Python prints when nothing handles them). The handler sits on the
    ``pypdf`` logger, which no longer propagates: other threads' records, and any outside a parse, are handed to
    the root logger as propagation would have."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        kept = getattr(self._local, "kept", None)
        if kept is None:
            logging.getLogger().handle(record)
        else:
            kept.append(record.getMessage())

    @contextlib.contextmanager
    def collected(self):
        self._local.kept = kept = []
        try:
            yield kept
        finally:
            self._local.kept = None


_pdf_warnings = _PdfWarnings()
logging.getLogger("pypdf").addHandler(_pdf_warnings)
logging.getLogger("pypdf").propagate = False


def _parse_pdf(data: bytes, rel_path: str, fmt: str, stem: str, *,
               max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> list[ParsedDocument]:
    with _pdf_warnings.collected() as warned:
        parsed = _read_pdf(data, rel_path, fmt, stem, max_text_bytes=max_text_bytes)
    if warned and parsed[0].warning is None:
        parsed[0].warning = f"{rel_path}: the PDF reader warned: {'; '.join(dict.fromkeys(warned))[:300]}"
    return parsed


def _read_pdf(data: bytes, rel_path: str, fmt: str, stem: str, *, max_text_bytes: int) -> list[ParsedDocument]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileNotDecryptedError("a password is required")
        budget = _TextBudget(rel_path, max_text_bytes)
        pages = [budget.add(page.extract_text() or "") for page in reader.pages]
        meta_title = reader.metadata.title if reader.metadata else None
    except FileNotDecryptedError:
        raise ParseError(f"{rel_path} is an encrypted PDF that needs a password; "
                         f"save an unencrypted copy into the folder instead") from None
    except ParseError:
        raise
    except DependencyError as exc:  # AES encryption needs the optional 'cryptography' package
        raise ParseError(f"{rel_path} is an encrypted PDF that cannot be decrypted here ({exc}); "
                         f"install 'cryptography' or save an unencrypted copy into the folder") from None
    except Exception as exc:  # pypdf raises many types (PdfReadError, ValueError, KeyError...) on bad input
        raise ParseError(f"{rel_path} is a corrupt or unreadable PDF ({type(exc).__name__}: {exc}); "
                         f"re-export or repair the file") from None
    text = normalise_text("\n\n".join(normalise_text(page) for page in pages))
    if not text:
        raise ParseError(f"{rel_path}: PDF has no text layer ({len(pages)} pages, likely scanned images); "
                         f"OCR is not supported, so run OCR first or add a text version")
    title = meta_title.strip()[:TITLE_MAX_CHARS] if isinstance(meta_title, str) else ""
    return [ParsedDocument(rel_path, title or _first_line(text) or stem, text, fmt, _sha256(data))]


# ---- DOCX ----------------------------------------------------------------------------------------------

def _docx_inflated_size(data: bytes, rel_path: str) -> int:
    """Total uncompressed size of a DOCX's parts, from the zip directory (nothing is inflated to learn it;
    zipfile never inflates a member past its declared size)."""
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ParseError(f"{rel_path} is a corrupt or unreadable DOCX ({type(exc).__name__}: {exc}); "
                         f"re-save it from a word processor") from None


def _parse_docx(data: bytes, rel_path: str, fmt: str, stem: str, *,
                max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> list[ParsedDocument]:
    import docx
    from docx.table import Table

    inflated = _docx_inflated_size(data, rel_path)
    if inflated > DOCX_XML_FACTOR * max_text_bytes:
        raise ParseError(f"{rel_path} inflates to {inflated:,} bytes when unzipped, over {DOCX_XML_FACTOR} x the text "
                         f"limit of {max_text_bytes:,} bytes (a zip bomb, or a huge document); raise "
                         f"PATHRAG_MAX_TEXT_BYTES or split the document")
    budget = _TextBudget(rel_path, max_text_bytes)
    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        heading = ""
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                blocks.append(budget.add(_docx_table_text(item)))
                continue
            # Only explicitly styled paragraphs can be headings; resolving the default style is slow.
            level = _docx_heading_level(item.style.name) if item._p.style is not None and item.text.strip() else 0
            if level:
                heading = heading or item.text.strip()
                blocks.append(budget.add(heading_line(level, item.text)))
            else:
                blocks.append(budget.add(item.text))
        core_title = document.core_properties.title or ""
    except ParseError:
        raise
    except Exception as exc:  # bad zip, missing parts, broken XML: all mean the file is unusable
        raise ParseError(f"{rel_path} is a corrupt or unreadable DOCX ({type(exc).__name__}: {exc}); "
                         f"re-save it from a word processor") from None
    text = _require_text(normalise_text("\n\n".join(b for b in blocks if b.strip())), rel_path, "document")
    title = (core_title.strip() or heading)[:TITLE_MAX_CHARS] or _first_line(text) or stem
    return [ParsedDocument(rel_path, title, text, fmt, _sha256(data))]


_DOCX_HEADING = re.compile(r"Heading (\d)")


def _docx_heading_level(style: str) -> int:
    """1 for a "Title" paragraph, N for "Heading N" (at most 6), 0 for any other style."""
    if style.startswith("Title"):
        return 1
    match = _DOCX_HEADING.match(style)
    return min(6, int(match.group(1))) if match else 0


def _docx_table_text(table) -> str:
    """One line per row, cells joined by ' | '; a merged cell (repeated by python-docx) appears once."""
    lines = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        lines.append(" | ".join(cells))
    return "\n".join(lines)


# ---- JSONL -------------------------------------------------------------------------------------------

_DEFAULT_ID = re.compile(r"line-(\d+)")


def _parse_jsonl(data: bytes, rel_path: str, fmt: str, stem: str) -> list[ParsedDocument]:
    """One document per non-blank line; a bad line becomes an error record and the rest still parse."""
    docs: list[ParsedDocument] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            continue
        line_hash = _sha256(raw)
        try:
            record_id, title, text = _jsonl_record(raw, number, seen)
        except ValueError as exc:
            claimed = _claimed_id(raw, number)
            docs.append(ParsedDocument(f"{rel_path}#line-{number}", f"{stem} line {number}", "", fmt, line_hash,
                                       error=f"{rel_path} line {number}: {exc}",
                                       claimed_id=f"{rel_path}#{claimed}" if claimed else None))
            continue
        seen[record_id] = number
        docs.append(ParsedDocument(f"{rel_path}#{record_id}", title, text, fmt, line_hash))
    if not docs:
        raise ParseError(f"{rel_path} is empty (no JSONL records); add content or remove the file")
    return docs


_ID_FIELD = re.compile(rb'"id"\s*:\s*(?:"((?:[^"\\\n]|\\.)*)"|(-?\d+)\s*[,}])')


def _claimed_id(raw: bytes, number: int) -> str | None:
    """The record id a malformed line still shows: its "id" if it parses as an object, else the first
    `"id": "..."` (or a number) the raw text holds; None if there is none, or it is ambiguous."""
    try:
        record = json.loads(raw.decode("utf-8", errors="replace"))
        if isinstance(record, dict):
            raw_id = record.get("id")
            if raw_id is None:
                return f"line-{number}"
            return str(raw_id).strip() or None if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else None
    except ValueError:
        pass
    found = _ID_FIELD.findall(raw)
    if len(found) != 1:
        return None
    text, digits = found[0]
    if digits:
        return digits.decode()
    try:
        value = json.loads(b'"' + text + b'"')
    except ValueError:
        return None
    return value.strip() or None


def _jsonl_record(raw: bytes, number: int, seen: dict[str, int]) -> tuple[str, str, str]:
    """(id, title, text) of one JSONL line; ValueError says what is wrong with it."""
    if b"\x00" in raw:
        raise ValueError("contains NUL bytes; each line must be a JSON object of UTF-8 text")
    try:
        record = json.loads((raw.removeprefix(_UTF8_BOM) if number == 1 else raw).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 at byte {exc.start} of the line; re-save the file as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at column {exc.colno}); fix or remove the line") from None
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object with a \"text\" field, got {type(record).__name__}")
    text = record.get("text")
    if text is None:
        raise ValueError("missing the required \"text\" field")
    if not isinstance(text, str):
        raise ValueError(f"\"text\" must be a string, got {type(text).__name__}")
    text = normalise_text(text)
    if not text:
        raise ValueError("\"text\" is empty")
    raw_id = record.get("id")
    if raw_id is None:
        record_id = f"line-{number}"
    elif isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        raise ValueError(f"\"id\" must be a string or an integer, got {type(raw_id).__name__}")
    else:
        record_id = str(raw_id).strip()
        if not record_id:
            raise ValueError("\"id\" is empty; give a non-empty id or leave the field out")
        default = _DEFAULT_ID.fullmatch(record_id)
        if default and int(default.group(1)) != number:
            # "line-N" is the id given to line N when it has no id (or fails), so it must stay free.
            raise ValueError(f"id {record_id!r} is reserved for line {default.group(1)}; choose another id")
    if record_id in seen:
        raise ValueError(f"duplicate id {record_id!r} (first used on line {seen[record_id]}); ids must be unique within a file")
    title = record.get("title")
    title = " ".join(title.split())[:TITLE_MAX_CHARS] if isinstance(title, str) else ""
    return record_id, title or _first_line(text) or record_id, text


_PARSERS: dict[str, Callable[[bytes, str, str, str], list[ParsedDocument]]] = {
    ".txt": _parse_text,
    ".md": _parse_text,
    ".markdown": _parse_text,
    ".mdx": _parse_text,
    ".ipynb": _parse_notebook,
    ".rst": _parse_rst,
    ".html": _parse_html,
    ".htm": _parse_html,
    ".pdf": _parse_pdf,
    ".docx": _parse_docx,
    ".jsonl": _parse_jsonl,
}
