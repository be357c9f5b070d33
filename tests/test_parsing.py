"""Parsers: every format on the bundled sample corpus, and every kind of bad input."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import sys
import zipfile
from pathlib import Path

import docx
import pytest
from pypdf import PdfWriter

from pathrag_pipeline.ingest.parsing import (
    SUPPORTED,
    TITLE_MAX_CHARS,
    ParsedDocument,
    ParseError,
    is_supported,
    looks_like_text,
    supported_by_name,
    normalise_text,
    parse_file,
)

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"
BIG = 10 * 1024 * 1024


def _sample(name: str) -> list[ParsedDocument]:
    return parse_file(SAMPLE / name, name, max_bytes=BIG)


def _one(path: Path, rel: str | None = None, max_bytes: int = BIG) -> ParsedDocument:
    docs = parse_file(path, rel or path.name, max_bytes=max_bytes)
    assert len(docs) == 1
    return docs[0]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _words(text: str) -> list[str]:
    return re.findall(r"\S+", text)


@pytest.fixture(scope="module")
def make_sample_docs():
    """The generator script, loaded as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("make_sample_docs", ROOT / "scripts" / "make_sample_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


# ---- the sample corpus, format by format -------------------------------------------------------------

def test_every_sample_file_parses_cleanly():
    files = sorted(p for p in SAMPLE.iterdir() if is_supported(p))
    suffixes = {p.suffix for p in files}
    assert {".md", ".txt", ".html", ".pdf", ".docx", ".jsonl"} <= suffixes
    ids = []
    for path in files:
        for doc in parse_file(path, path.name, max_bytes=BIG):
            assert doc.error is None, doc.error
            assert doc.text.strip() and doc.title.strip()
            assert "\r" not in doc.text and "\x00" not in doc.text and "\n\n\n" not in doc.text
            ids.append(doc.id)
    assert len(ids) == len(set(ids))


def test_markdown_title_is_first_h1_and_text_is_what_a_reader_sees():
    raw = (SAMPLE / "varne_valley_geography.md").read_bytes()
    [doc] = _sample("varne_valley_geography.md")
    assert doc.id == "varne_valley_geography.md"
    assert doc.format == "md"
    assert doc.title == "The Varne Valley: A Regional Overview"
    assert doc.content_hash == _sha(raw)
    assert "The market village of Marrowby stands on the Tamsin" in doc.text
    # issue 25: emphasis and lists without their markup; headings marked as heading lines (text/structure.py), so
    # their readers know them for headings ("# Method" became an entity when they did not)
    assert doc.text.startswith("# The Varne Valley: A Regional Overview\n\nA gazetteer note")
    assert "\n\n## Setting\n\n" in doc.text and "*" not in doc.text
    assert [line for line in doc.text.split("\n") if "#" in line] == [
        line for line in doc.text.split("\n") if line.startswith(("# ", "## ", "### "))]


def test_markdown_lists_tables_links_and_code_lose_their_markup(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\n- See [the guide](http://example.org) for **setup** with `pell --fast`.\n\n"
                    "| tool | use |\n| --- | --- |\n| Pell | survey |\n\n```sh\nrun --fast\n```\n", encoding="utf-8")
    text = _one(path).text
    # headings, code blocks and inline code keep the marks text/structure.py reads; the rest is plain text
    assert text == ("# Notes\n\nSee the guide for setup with `pell --fast`.\n\ntool; use\n\nPell; survey\n\n"
                    "```sh\nrun --fast\n```")


def test_text_file_title_is_first_line():
    [doc] = _sample("varne_navigation_company.txt")
    assert doc.format == "txt"
    assert doc.title == "THE VARNE NAVIGATION COMPANY: A SHORT HISTORY"
    assert "founded in 1822 at Saltmouth by Elias Pell" in doc.text


def test_html_drops_page_furniture_and_keeps_blocks_apart():
    [doc] = _sample("great_flood_of_1887.html")
    assert doc.format == "html"
    assert doc.title == "The Great Flood of 1887"      # the page's one <h1>, without the site's name
    assert doc.warning is None
    for noise in ("dataLayer", "font-family", "Visit us", "Registered charity", "enable JavaScript",
                  "uses cookies", "Preserving the history", "localStorage"):
        assert noise not in doc.text
    assert doc.text.startswith("# The Great Flood of 1887\n\nIn the middle of October 1887")
    assert "\n## The rain\n" in doc.text
    assert "Hesketh Mill | 22\nCorran Ford | 7" in doc.text
    # Source line breaks inside a paragraph are not breaks in HTML.
    assert "stalled over the eastern hills. Rain began to fall" in doc.text
    assert "  " not in doc.text


def test_pdf_extracts_every_page_in_order(make_sample_docs):
    [doc] = _sample("kestle_observatory.pdf")
    assert doc.format == "pdf"
    assert doc.title == make_sample_docs.OBSERVATORY_TITLE  # from the PDF metadata
    source_words = _words(" ".join(text for _, text in make_sample_docs.OBSERVATORY))
    assert _words(doc.text) == source_words
    assert doc.content_hash == _sha((SAMPLE / "kestle_observatory.pdf").read_bytes())


def test_sample_pdf_has_several_pages():
    from pypdf import PdfReader

    assert len(PdfReader(SAMPLE / "kestle_observatory.pdf").pages) >= 2


def test_docx_keeps_headings_paragraphs_and_table_in_order():
    [doc] = _sample("corran_ford_bridge.docx")
    assert doc.format == "docx"
    assert doc.title == "Corran Ford Bridge"
    assert "Designer | Isabel Fairley" in doc.text
    assert "Steelwork | Tarrant Yard, Saltmouth" in doc.text
    order = [doc.text.index(s) for s in ("Summary", "It was designed by the engineer Isabel Fairley",
                                          "Specifications", "Item | Detail", "Later history")]
    assert order == sorted(order)


def test_committed_binaries_match_the_generator(make_sample_docs):
    """The PDF and DOCX in data/sample/ are exactly what scripts/make_sample_docs.py builds."""
    m = make_sample_docs
    author = "pathrag-pipeline sample corpus (fictional)"
    assert m.build_pdf(m.OBSERVATORY, title=m.OBSERVATORY_TITLE, author=author) == \
        (SAMPLE / "kestle_observatory.pdf").read_bytes()
    assert m.build_docx(m.BRIDGE, title=m.BRIDGE_TITLE, author=author) == \
        (SAMPLE / "corran_ford_bridge.docx").read_bytes()


def test_generated_pdf_wraps_within_the_margin(make_sample_docs):
    m = make_sample_docs
    width = m.PAGE_W - 2 * m.MARGIN
    for kind, text in m.OBSERVATORY:
        _, size, _ = m.STYLES[kind]
        lines = m.wrap(text, size, width, bold=kind != "p")
        assert " ".join(lines) == " ".join(text.split())
        assert all(m.text_width(line, size, bold=kind != "p") <= width for line in lines)


def test_jsonl_records_become_documents():
    lines = (SAMPLE / "biographical_dictionary.jsonl").read_bytes().splitlines()
    docs = _sample("biographical_dictionary.jsonl")
    assert len(docs) == len(lines) == 6
    by_id = {d.id: d for d in docs}
    morrow = by_id["biographical_dictionary.jsonl#agnes-morrow"]
    assert morrow.title == "Morrow, Agnes (1851–1928)"
    assert "born in 1851 in the village of Hesketh Mill" in morrow.text
    assert morrow.format == "jsonl"
    assert [d.content_hash for d in docs] == [_sha(line) for line in lines]


# ---- titles and normalisation ------------------------------------------------------------------------

def test_markdown_without_h1_uses_first_line_without_hashes(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("\n\n## Minutes of the board\n\nThe board met.\n", encoding="utf-8")
    assert _one(path).title == "Minutes of the board"


def test_long_first_line_title_is_cut(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("word " * 200, encoding="utf-8")
    title = _one(path).title
    assert len(title) <= TITLE_MAX_CHARS and title.endswith("…") and title.startswith("word word")


def test_bom_crlf_nul_and_blank_runs_are_normalised(tmp_path):
    path = tmp_path / "bom.txt"
    # A NUL beyond the binary sniff window is stripped, not fatal.
    data = b"\xef\xbb\xbfTitle line\r\n\r\n\r\n\r\n\r\nbody  \r\n" + b"x" * 9000 + b"\x00end"
    path.write_bytes(data)
    doc = _one(path)
    assert doc.title == "Title line"
    assert doc.text.startswith("Title line\n\nbody\n")
    assert doc.text.endswith("xend")
    assert doc.content_hash == _sha(data)


def test_normalise_text():
    assert normalise_text("a\r\nb\rc\x00d \n\n\n\n\ne  ") == "a\nb\ncd\n\ne"


def test_html_title_falls_back_to_h1_and_honours_declared_charset(tmp_path):
    path = tmp_path / "page.htm"
    path.write_bytes('<html><head><meta charset="iso-8859-1"></head><body><h1>Caf\xe9 Varne</h1>'
                     '<p>Open<br>daily</p><ul><li>one</li><li>two</li></ul></body></html>'.encode("latin-1"))
    doc = _one(path)
    assert doc.title == "Café Varne"
    assert doc.format == "htm"
    assert doc.text == "# Café Varne\n\nOpen\ndaily\n\none\n\ntwo"


def test_docx_title_falls_back_to_first_heading(tmp_path):
    document = docx.Document()
    document.add_paragraph("preface text")
    document.add_heading("Real Heading", level=1)
    path = tmp_path / "report.docx"
    document.save(path)
    assert _one(path).title == "Real Heading"


def test_is_supported():
    assert is_supported(Path("a/b.MD")) and is_supported("x.jsonl") and is_supported("y.HTM")
    assert not is_supported("data.csv") and not is_supported("README")   # no such file: it is not text
    assert all(is_supported(f"f{s}") for s in SUPPORTED)
    # a name string is judged as its Path would be (the scanner passes names, not Paths)
    for name in ("file.", ".md", "a/.md", "dir.md/file", "x.tar.md", "b..TXT", "c.md.", "notes.Md"):
        assert is_supported(name) == is_supported(Path(name)), name


def test_names_with_no_suffix_and_gzipped_names():
    """A name alone decides, except with no suffix: then the content does (``looks_like_text``)."""
    assert supported_by_name("README") is None and supported_by_name("NEWS.gz") is None
    assert supported_by_name("README.md.gz") and supported_by_name("page.HTML.GZ") and supported_by_name("a.pdf.gz")
    for name in ("site.tar.gz", "x.gz.gz", "data.csv.gz", "changelog.Debian.gz", "file.", "file.gz."):
        assert supported_by_name(name) is False, name


def test_a_file_with_no_suffix_is_read_as_plain_text_when_it_is_text(tmp_path):
    readme = tmp_path / "README"
    readme.write_text("Harbour Tools\n=============\n\nHarbour Tools charts the tides of Port Aster.\n")
    assert is_supported(readme) and looks_like_text(readme)
    doc = _one(readme)
    assert (doc.format, doc.title) == ("text", "Harbour Tools") and "tides of Port Aster" in doc.text
    program = tmp_path / "tool"
    program.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(64) + b"text after the header")
    latin = tmp_path / "NOTES"
    latin.write_bytes("Caf\u00e9 notes, written in Latin-1.\n".encode("latin-1"))
    assert is_supported(latin) and _one(latin).text == "Caf\u00e9 notes, written in Latin-1." and _one(latin).warning
    noisy = tmp_path / "DATA"
    noisy.write_bytes(bytes(range(1, 256)) * 4)   # no NUL, but control bytes throughout: binary
    empty = tmp_path / "TODO"
    empty.write_bytes(b"  \n")
    for path in (program, noisy, empty, tmp_path / "missing", tmp_path):
        assert not is_supported(path), path.name
    # a UTF-8 character cut by the end of the sniffed bytes is still text
    cut = tmp_path / "LONG"
    cut.write_bytes(b"a" * 8191 + "\u00e9 and more".encode())
    assert looks_like_text(cut)


def test_a_fifo_with_no_suffix_is_never_opened(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(tmp_path / "pipe")
    assert not is_supported(tmp_path / "pipe")   # would block forever if it were opened for reading


def test_gzipped_files_are_read_as_the_file_inside(tmp_path):
    import gzip

    md = tmp_path / "README.md.gz"
    md.write_bytes(gzip.compress(b"# Tide Tables\n\nThe tide tables of **Port Aster** are printed yearly.\n"))
    doc = _one(md)
    assert (doc.id, doc.format, doc.title) == ("README.md.gz", "md.gz", "Tide Tables")
    assert "**" not in doc.text and "printed yearly" in doc.text
    news = tmp_path / "NEWS.gz"
    news.write_bytes(gzip.compress(b"Version 2.1\n\nThe harbour map gained the north pier.\n")
                     + gzip.compress(b"Version 2.0\n\nFirst release.\n"))   # two gzip members, as cat makes
    assert is_supported(news)
    doc = _one(news)
    assert doc.format == "text.gz" and "north pier" in doc.text and "First release" in doc.text
    assert doc.content_hash == _sha(gzip.decompress(news.read_bytes()))
    page = tmp_path / "changelog.html.gz"
    page.write_bytes(gzip.compress(b"<html><title>Changes</title><body><main><h1>Release history</h1>"
                                   b"<p>Version 3 added full-text search to the harbour archive.</p></main></body></html>"))
    assert _one(page).format == "html.gz" and "full-text search" in _one(page).text
    binary = tmp_path / "search.gz"
    binary.write_bytes(gzip.compress(bytes(range(256)) * 4))
    assert not is_supported(binary)


def test_a_damaged_or_inflating_gzip_file_is_a_clear_error(tmp_path):
    import gzip

    cut = tmp_path / "notes.txt.gz"
    cut.write_bytes(gzip.compress(b"The ferry leaves at noon. " * 200)[:60])
    with pytest.raises(ParseError, match=r"notes.txt.gz is not a readable gzip file"):
        parse_file(cut, "notes.txt.gz", max_bytes=BIG)
    junk = tmp_path / "old.md.gz"
    junk.write_bytes(b"this was never compressed")
    with pytest.raises(ParseError, match=r"old.md.gz is not a readable gzip file"):
        parse_file(junk, "old.md.gz", max_bytes=BIG)
    bomb = tmp_path / "bomb.txt.gz"
    bomb.write_bytes(gzip.compress(b"a" * (8 * 1024 * 1024)))   # 8 MiB of text in ~8 KiB
    assert bomb.stat().st_size < 64 * 1024
    with pytest.raises(ParseError, match=r"bomb.txt.gz decompresses to more than the limit of 1,048,576 bytes "
                                         r"\(PATHRAG_MAX_FILE_BYTES\)"):
        parse_file(bomb, "bomb.txt.gz", max_bytes=1024 * 1024)


# ---- bad input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", sorted(SUPPORTED))
def test_zero_byte_file_is_empty(tmp_path, suffix):
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(b"")
    with pytest.raises(ParseError, match=rf"empty{re.escape(suffix)} is empty"):
        parse_file(path, path.name, max_bytes=BIG)


@pytest.mark.parametrize("name, data", [
    ("blank.txt", b" \n\t\r\n  "),
    ("bom-only.md", b"\xef\xbb\xbf\n"),
    ("blank.jsonl", b"\n\n   \n"),
    ("scripts-only.html", b"<html><head><script>var x = 1;</script><style>p{}</style></head><body> </body></html>"),
])
def test_whitespace_only_content_is_empty(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ParseError, match="empty"):
        parse_file(path, name, max_bytes=BIG)


def test_docx_without_text_is_empty(tmp_path):
    path = tmp_path / "blank.docx"
    docx.Document().save(path)
    with pytest.raises(ParseError, match="blank.docx is empty"):
        parse_file(path, "blank.docx", max_bytes=BIG)


@pytest.mark.parametrize("name", ["image.txt", "image.md", "image.html"])
def test_binary_file_is_rejected(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(ParseError, match=rf"{name} looks like a binary file"):
        parse_file(path, name, max_bytes=BIG)


@pytest.mark.parametrize("data, offset, text", [(b"hello \xff world", 6, "hello \u00ff world"),
                                                (b"\xef\xbb\xbfab\xe9cd", 5, "ab\u00e9cd"),   # the BOM is no text
                                                (b"caf\xe9 \x81 ok", 3, "caf\u00e9 \x81 ok")])
def test_text_that_is_not_utf8_is_read_as_windows_1252_with_a_warning_naming_the_byte(tmp_path, data, offset, text):
    """Debian installs upstream text as it comes (ed's AUTHORS, make's NEWS are Latin-1): an error saying "re-save it
    as UTF-8" could not be acted on for files a package owns. 0x81 has no Windows-1252 character: Latin-1's."""
    path = tmp_path / "latin.txt"
    path.write_bytes(data)
    doc = _one(path)
    assert doc.text == text
    assert re.fullmatch(rf"latin.txt is not UTF-8 \(byte {offset}: .*\): read as Windows-1252 \(Latin-1\); .*",
                        doc.warning), doc.warning


def test_a_notebook_or_jsonl_that_is_not_utf8_is_still_an_error(tmp_path):
    path = tmp_path / "n.ipynb"
    path.write_bytes(b'{"cells": [], "caf\xe9": 1}')
    with pytest.raises(ParseError, match=r"n.ipynb is not valid UTF-8: byte 18"):
        parse_file(path, "n.ipynb", max_bytes=BIG)


def test_file_over_the_size_limit(tmp_path):
    path = tmp_path / "big.md"
    path.write_bytes(b"# x\n" + b"y" * 2000)
    with pytest.raises(ParseError) as info:
        parse_file(path, "sub/big.md", max_bytes=2000)
    message = str(info.value)
    assert "sub/big.md" in message and "2,004 bytes" in message and "2,000" in message
    assert "PATHRAG_MAX_FILE_BYTES" in message
    assert _one(path, max_bytes=2004).title == "x"  # exactly at the limit is allowed


@pytest.mark.parametrize("data", [
    b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n",
    b"%PDF-1.7\n" + bytes(range(256)) * 8,
    b"this is not a pdf at all, just text with a pdf suffix\n",
])
def test_corrupt_pdf(tmp_path, data, capfd):
    path = tmp_path / "broken.pdf"
    path.write_bytes(data)
    with pytest.raises(ParseError, match="broken.pdf is a corrupt or unreadable PDF"):
        parse_file(path, "broken.pdf", max_bytes=BIG)
    assert capfd.readouterr().err == ""   # pypdf's own warnings ("invalid pdf header") name no file: not printed


def test_a_pdf_the_reader_warns_about_is_read_with_the_warning_naming_it(tmp_path, capfd):
    path = tmp_path / "prefixed.pdf"
    path.write_bytes(b"junk before the header\n" + (SAMPLE / "kestle_observatory.pdf").read_bytes())
    doc = _one(path, rel="docs/prefixed.pdf")
    assert "Rupert Hallam" in doc.text
    assert doc.warning is not None and doc.warning.startswith("docs/prefixed.pdf: the PDF reader warned: ")
    assert capfd.readouterr().err == ""


def _pdf_copy_of_sample(tmp_path: Path, name: str, **encrypt) -> Path:
    writer = PdfWriter(clone_from=SAMPLE / "kestle_observatory.pdf")
    if encrypt:
        writer.encrypt(algorithm="RC4-128", **encrypt)
    path = tmp_path / name
    with path.open("wb") as fh:
        writer.write(fh)
    return path


def test_encrypted_pdf_needs_a_password(tmp_path):
    path = _pdf_copy_of_sample(tmp_path, "locked.pdf", user_password="secret", owner_password="owner")
    with pytest.raises(ParseError, match="locked.pdf is an encrypted PDF that needs a password"):
        parse_file(path, "locked.pdf", max_bytes=BIG)


def test_pdf_encrypted_with_empty_user_password_is_read(tmp_path):
    path = _pdf_copy_of_sample(tmp_path, "owner-only.pdf", user_password="", owner_password="owner")
    assert "Rupert Hallam" in _one(path).text


def test_aes_pdf_without_crypto_support_says_so(tmp_path, monkeypatch):
    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    path = _pdf_copy_of_sample(tmp_path, "aes.pdf", user_password="", owner_password="owner")

    def no_crypto(self, password):
        raise DependencyError("cryptography>=3.1 is required for AES algorithm")

    monkeypatch.setattr(PdfReader, "decrypt", no_crypto)
    with pytest.raises(ParseError, match="aes.pdf is an encrypted PDF that cannot be decrypted here.*install 'cryptography'"):
        parse_file(path, "aes.pdf", max_bytes=BIG)


def test_pdf_without_text_layer(tmp_path):
    writer = PdfWriter()
    writer.add_blank_page(width=595, height=842)
    writer.add_blank_page(width=595, height=842)
    path = tmp_path / "scan.pdf"
    with path.open("wb") as fh:
        writer.write(fh)
    with pytest.raises(ParseError, match=r"scan.pdf: PDF has no text layer \(2 pages.*OCR is not supported"):
        parse_file(path, "scan.pdf", max_bytes=BIG)


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("data", [
    b"PK\x03\x04 truncated zip header and nothing else",
    b"plain text saved with a docx suffix",
    _zip_bytes({"hello.txt": b"a zip, but not a word document"}),
])
def test_corrupt_docx(tmp_path, data):
    path = tmp_path / "broken.docx"
    path.write_bytes(data)
    with pytest.raises(ParseError, match="broken.docx is a corrupt or unreadable DOCX"):
        parse_file(path, "broken.docx", max_bytes=BIG)


def test_truncated_docx_is_corrupt(tmp_path):
    data = (SAMPLE / "corran_ford_bridge.docx").read_bytes()
    path = tmp_path / "cut.docx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match="cut.docx is a corrupt or unreadable DOCX"):
        parse_file(path, "cut.docx", max_bytes=BIG)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_by_permissions(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("hidden", encoding="utf-8")
    path.chmod(0)
    try:
        with pytest.raises(ParseError, match="cannot read secret.txt: Permission denied"):
            parse_file(path, "secret.txt", max_bytes=BIG)
    finally:
        path.chmod(0o644)


def test_unreadable_file_simulated(tmp_path, monkeypatch):
    """Runs as root too: opening the file fails the way a permission problem does."""
    path = tmp_path / "secret.txt"
    path.write_text("hidden", encoding="utf-8")

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(ParseError, match="cannot read secret.txt: Permission denied; check"):
        parse_file(path, "secret.txt", max_bytes=BIG)


def test_missing_file(tmp_path):
    with pytest.raises(ParseError, match="cannot read gone.md: No such file"):
        parse_file(tmp_path / "gone.md", "gone.md", max_bytes=BIG)


def test_unsupported_suffix(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(ParseError, match=r"table.csv: unsupported file type '.csv'; supported are .*\.docx"):
        parse_file(path, "table.csv", max_bytes=BIG)


# ---- JSONL: bad lines do not spoil good ones ----------------------------------------------------------

def _write_lines(path: Path, lines: list[bytes]) -> list[bytes]:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return lines


def test_malformed_jsonl_lines_become_error_records(tmp_path):
    path = tmp_path / "entries.jsonl"
    lines = _write_lines(path, [
        json.dumps({"id": "a", "title": "Alpha", "text": "First entry."}).encode(),   # 1 good
        b'{"id": "b", "text": "unterminated',                                         # 2 bad JSON
        b"[1, 2, 3]",                                                                 # 3 not an object
        json.dumps({"id": "d", "title": "No text"}).encode(),                          # 4 missing text
        json.dumps({"id": "e", "text": "   "}).encode(),                               # 5 empty text
        json.dumps({"id": "f", "text": 42}).encode(),                                  # 6 non-string text
        json.dumps({"id": ["g"], "text": "bad id"}).encode(),                          # 7 bad id type
        b"",                                                                          # 8 blank: skipped
        b'{"text": "caf\xe9"}',                                                        # 9 not UTF-8
        json.dumps({"text": "No id here.\nSecond line."}).encode(),                    # 10 good, default id
        json.dumps({"id": 7, "text": "Integer id."}).encode(),                         # 11 good, int id
    ])
    docs = parse_file(path, "dir/entries.jsonl", max_bytes=BIG)
    by_id = {d.id: d for d in docs}
    assert len(docs) == 10 and len(by_id) == 10  # the blank line yields nothing

    good = [d for d in docs if d.error is None]
    assert [d.id for d in good] == ["dir/entries.jsonl#a", "dir/entries.jsonl#line-10", "dir/entries.jsonl#7"]
    assert by_id["dir/entries.jsonl#a"].title == "Alpha"
    assert by_id["dir/entries.jsonl#line-10"].title == "No id here."
    assert by_id["dir/entries.jsonl#line-10"].text == "No id here.\nSecond line."

    expected = {2: "invalid JSON", 3: "expected a JSON object", 4: 'missing the required "text"',
                5: '"text" is empty', 6: '"text" must be a string, got int', 7: '"id" must be a string or an integer',
                9: "not valid UTF-8"}
    for number, fragment in expected.items():
        doc = by_id[f"dir/entries.jsonl#line-{number}"]
        assert doc.text == "" and doc.format == "jsonl"
        assert doc.error.startswith(f"dir/entries.jsonl line {number}: ")
        assert fragment in doc.error
        assert doc.content_hash == _sha(lines[number - 1])


def test_duplicate_jsonl_id_marks_the_later_record(tmp_path):
    path = tmp_path / "dup.jsonl"
    _write_lines(path, [json.dumps({"id": "x", "text": "first"}).encode(),
                        json.dumps({"id": "y", "text": "other"}).encode(),
                        json.dumps({"id": "x", "text": "second"}).encode()])
    docs = parse_file(path, "dup.jsonl", max_bytes=BIG)
    assert [(d.id, d.text) for d in docs] == [("dup.jsonl#x", "first"), ("dup.jsonl#y", "other"),
                                              ("dup.jsonl#line-3", "")]
    assert "duplicate id 'x' (first used on line 1)" in docs[2].error


def test_jsonl_id_cannot_take_another_lines_default_id(tmp_path):
    path = tmp_path / "clash.jsonl"
    _write_lines(path, [json.dumps({"id": "line-2", "text": "claims line 2"}).encode(),
                        b"not json",
                        json.dumps({"id": "line-3", "text": "its own line number is fine"}).encode()])
    docs = parse_file(path, "clash.jsonl", max_bytes=BIG)
    assert [d.id for d in docs] == ["clash.jsonl#line-1", "clash.jsonl#line-2", "clash.jsonl#line-3"]
    assert "reserved for line 2" in docs[0].error
    assert "invalid JSON" in docs[1].error
    assert docs[2].error is None


def test_jsonl_with_crlf_and_bom(tmp_path):
    path = tmp_path / "win.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "text": "one"}\r\n{"id": "b", "text": "two"}\r\n')
    docs = parse_file(path, "win.jsonl", max_bytes=BIG)
    assert [(d.id, d.text, d.error) for d in docs] == [("win.jsonl#a", "one", None), ("win.jsonl#b", "two", None)]


RST = """=================
Valmere University
=================

Valmere University was founded by *Ada Halden* in 1851, see `the site <https://example.org>`_.

.. include:: {secret}

.. raw:: html

   <script>alert(1)</script>

History
-------

- Founded in Port Aster.
- Moved to **Carrick** in 1880.

.. note:: The archive is in the Pell Library.
"""


def test_an_rst_file_that_only_includes_another_says_so(tmp_path):
    """pip's docs hold `.. include:: ../../../src/pip/_vendor/README.rst` and nothing else: "is empty" read as a
    broken file."""
    path = tmp_path / "vendoring-policy.rst"
    path.write_text(".. include:: ../../../src/pip/_vendor/README.rst\n")
    with pytest.raises(ParseError, match=r"only includes other files \(`\.\. include::` is not followed\)"):
        parse_file(path, "vendoring-policy.rst", max_bytes=BIG)
    path.write_text(".. comment only\n")
    with pytest.raises(ParseError, match=r"is empty"):
        parse_file(path, "vendoring-policy.rst", max_bytes=BIG)


def test_rst_is_read_without_its_markup_and_never_reaches_outside_the_file(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET CONTENT")
    path = tmp_path / "valmere.rst"
    path.write_text(RST.format(secret=secret))
    [doc] = parse_file(path, "valmere.rst", max_bytes=10**6)
    assert doc.title == "Valmere University" and doc.format == "rst"
    assert "Valmere University was founded by Ada Halden in 1851, see the site." in doc.text
    assert "Moved to Carrick in 1880." in doc.text and "The archive is in the Pell Library." in doc.text
    for markup in ("===", "---", "*Ada", "**", ".. ", "<script>", "TOP SECRET", "https://"):
        assert markup not in doc.text


def test_an_empty_rst_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "empty.rst"
    path.write_text(".. just a comment\n")
    with pytest.raises(ParseError, match="empty.rst"):
        parse_file(path, "empty.rst", max_bytes=10**6)


def test_rst_sphinx_roles_read_as_the_rendered_text(tmp_path):
    path = tmp_path / "guide.rst"
    path.write_text("Guide\n=====\n\nSee :ref:`results`, :ref:`the setup <setup>`, :func:`~pkg.mod.run` and "
                    ":class:`pkg.Thing`.\n", encoding="utf-8")
    assert _one(path).text == "# Guide\n\nSee results, the setup, `run` and `pkg.Thing`."   # code roles as code


def test_rst_sphinx_container_directives_keep_their_body(tmp_path):
    path = tmp_path / "dataset.rst"
    path.write_text("Wine\n====\n\nThe data.\n\n.. dropdown:: References\n   :open:\n\n"
                    "   Aeberhard, S. of James Cook University.\n\n"
                    ".. versionadded:: 1.2\n   Added by Ada Halden.\n\n"
                    ".. toctree::\n   api\n", encoding="utf-8")
    text = _one(path).text
    assert "References\n\nAeberhard, S. of James Cook University." in text
    assert "Added by Ada Halden." in text
    assert "dropdown" not in text and ":open:" not in text and "api" not in text


def test_a_notebook_reads_its_markdown_and_code_cells_but_not_outputs(tmp_path):
    path = tmp_path / "tour.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Valmere tour\n", "\n", "Ada **Halden** built it."]},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "print('Carrick')",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["SECRET OUTPUT\n"]}]},
        {"cell_type": "markdown", "metadata": {}, "source": ""}]}), encoding="utf-8")
    doc = _one(path)
    assert doc.title == "Valmere tour" and doc.format == "ipynb"
    assert doc.text == "# Valmere tour\n\nAda Halden built it.\n\n```\nprint('Carrick')\n```"


def test_a_broken_notebook_is_an_error_naming_it(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": ', encoding="utf-8")
    with pytest.raises(ParseError, match=r"broken.ipynb is not a Jupyter notebook"):
        parse_file(path, "broken.ipynb", max_bytes=10**6)


def test_mdx_reads_as_markdown(tmp_path):
    path = tmp_path / "page.mdx"
    path.write_text("# Page\n\n<Note>Valmere is *old*.</Note>\n\nText with `code`.\n", encoding="utf-8")
    doc = _one(path)
    assert doc.title == "Page" and doc.text.startswith("# Page\n") and "*" not in doc.text
    assert "Text with `code`." in doc.text
