"""Generate the binary documents of the bundled sample corpus (data/sample/*.pdf, *.docx).

The sample corpus is original fictional prose written for this project. Its text files are kept as
they are; the PDF and DOCX are built here so that they can be regenerated and reviewed as source.
No PDF writer is a dependency of the project, so a small one is included: Helvetica text objects,
word-wrapped with the font's real glyph widths, several pages, a correct xref table. Outputs are
byte-for-byte reproducible (fixed dates, fixed zip timestamps), so regenerating does not churn git.

Run from the checkout root:  python scripts/make_sample_docs.py
"""

from __future__ import annotations

import datetime as dt
import io
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"

# ---- content -------------------------------------------------------------------------------------

OBSERVATORY_TITLE = "The Kestle Observatory on Marrow Hill"
OBSERVATORY = [
    ("h1", OBSERVATORY_TITLE),
    ("p", "A history prepared for the visitors' centre of the observatory museum."),
    ("h2", "Foundation"),
    ("p", "The Kestle Observatory stands on the summit of Marrow Hill, above the village of Marrowby. It was "
          "founded in 1868 by Aldermere University, on land given for the purpose by Sir Hugh Kestle, whose family "
          "had held Marrow Hill and much of Kestle Moor for three centuries. Sir Hugh was a keen amateur astronomer "
          "who had watched the valley mists from his library windows for many years and had noticed that the top of "
          "the hill nearly always stood clear of them. In 1866 he offered the summit to the university on condition "
          "that the observatory should bear his family's name and should be open to the public one night in every month."),
    ("p", "The university senate accepted the gift and launched a public subscription, to which the merchants of "
          "Pellingham and Saltmouth contributed generously. The foundation stone was laid in April 1868, and the "
          "observatory was governed from the beginning by a board of the university, which appointed its directors "
          "and approved its programme of work."),
    ("h2", "The first director"),
    ("p", "The university chose as the first director a man who was not then a professional astronomer at all. "
          "Rupert Hallam had spent fifteen years as a navigation officer on the river, calculating tide tables and "
          "charting the shifting sandbanks of the estuary, and in his own time he had become the most careful "
          "observer of variable stars in the valley. His long series of observations, made with a small refracting "
          "telescope on the roof of his lodgings, had been printed in The Varne Review and had impressed the "
          "university's professor of natural philosophy. Hallam was appointed in 1867, supervised the building of "
          "the observatory, and directed it from its opening in 1868 until his retirement in 1898."),
    ("p", "Hallam was a patient, methodical director who believed that an observatory's first duty was to keep "
          "long and trustworthy records. He introduced the practice, still followed, of entering every observation "
          "in two independent registers kept by different hands. His observations of the great comet of 1882, "
          "which he followed for more than four months, were reprinted in several national journals and brought "
          "the observatory a reputation well beyond the valley."),
    ("h2", "Instruments"),
    ("p", "The principal instrument was a twelve-inch refracting telescope made by the Aldermere instrument maker "
          "Jonas Wren. Its heavy iron equatorial mounting was cast in the foundries of Pellingham and was brought up "
          "the Tamsin valley in sections on the newly opened Marrowby branch of the Varne Valley Railway in 1870, "
          "then hauled up the hill by teams of horses. The dome, twenty-two feet across, was turned by hand on "
          "cannon balls running in an iron track. A smaller transit instrument in a separate building was used for "
          "timekeeping, and from 1874 the observatory sent a daily time signal by telegraph to the railway stations "
          "of the valley."),
    ("h2", "The meteorological station"),
    ("p", "In 1872 the board added a meteorological station to the observatory, partly because the university "
          "wished to study the climate of the valley and partly because clouds so often made astronomical work "
          "impossible. Rain gauges, thermometers, a barometer and a wind vane were installed in an enclosure on the "
          "south side of the summit. The first meteorological observer was Edwin Sallow, a former clerk from "
          "Aldermere who had attended evening classes at the university. Sallow read the instruments three times a "
          "day, every day, for more than thirty years, and his rainfall record is the longest continuous weather "
          "series in the region."),
    ("p", "From 1873 the monthly rainfall tables of the station were printed in The Varne Review. They became the "
          "basis of almost everything later written about the climate of the valley, and they proved their worth in "
          "October 1887, when Sallow's readings of the great storm provided the only instrumental measurement of "
          "the rain that caused the Great Flood."),
    ("h2", "Assistants and students"),
    ("p", "The observatory was small, and its staff rarely numbered more than five. Hallam took on assistants "
          "from among the graduates of the university, and several of them went on to distinguished careers. The "
          "most notable was Agnes Morrow, who joined the observatory in 1874, a year after taking her degree. "
          "Morrow reduced the meteorological readings and computed the monthly tables, and in doing so she became "
          "the first person in the valley to study its rainfall statistically. Her study of the relation between "
          "rain on Kestle Moor and the level of the River Lode, begun at the observatory in the early 1880s, was "
          "unfinished when the flood of 1887 gave it a tragic urgency. She left the observatory in 1890 to take up "
          "a new post in Pellingham."),
    ("p", "Other assistants included Lucas Brand, who succeeded Hallam as director in 1898, and Thomas Ince, the "
          "son of the toll keeper at Corran Ford, who later became the observatory's instrument mechanic."),
    ("h2", "The observatory and the flood"),
    ("p", "During the storm of 13 to 16 October 1887 Sallow stayed at the observatory for three days and nights, "
          "reading the gauges every three hours and emptying the largest of them by lamplight when it threatened "
          "to overflow. His notebook records 213 millimetres of rain in the three days. The observatory's records "
          "were used by the public inquiry in 1888, and the inquiry's report praised the station as the one part of "
          "the valley that had been measuring what mattered. After the flood the observatory cooperated with the "
          "new hydrological institute at Pellingham in setting up rain gauges on Kestle Moor, and its telegraph "
          "line carried the first flood warning in 1899."),
    ("h2", "Later history"),
    ("p", "Under Lucas Brand the observatory turned increasingly to the photography of the sky, and a "
          "photographic telescope was added in 1905. Light from the growing towns of the valley made serious "
          "astronomical work difficult by the middle of the twentieth century, and the university moved its research "
          "to a new site in 1965. The meteorological station continued to operate, and the rainfall record begun "
          "by Edwin Sallow in 1872 has never been interrupted."),
    ("p", "The old observatory buildings, with the twelve-inch telescope still in its dome, are now a museum run by "
          "the university. In keeping with Sir Hugh Kestle's condition, the telescope is opened to the public one "
          "night in every month."),
    ("h2", "Directors of the Kestle Observatory"),
    ("p", "Rupert Hallam, 1868 to 1898. Lucas Brand, 1898 to 1931. Directors after 1931 were appointed from the "
          "astronomy staff of Aldermere University."),
]

BRIDGE_TITLE = "Corran Ford Bridge"
BRIDGE = [
    ("title", BRIDGE_TITLE),
    ("p", "A report prepared for the county register of historic structures."),
    ("h1", "Summary"),
    ("p", "The Corran Ford Bridge is a steel arch road bridge over the River Varne at Corran Ford, just below the "
          "confluence of the River Lode with the Varne. It was designed by the engineer Isabel Fairley and opened on "
          "12 May 1891. It replaced the timber toll bridge of 1796, which was swept away during the Great Flood of "
          "October 1887."),
    ("h1", "Background"),
    ("p", "For almost a century the crossing at Corran Ford had been served by a timber toll bridge of seven short "
          "spans resting on timber piers. Its narrow openings caught floating debris in every flood, and in October "
          "1887 the debris and the water held back by the railway embankment brought it down. For more than three "
          "years the only crossing between Aldermere and Pellingham was a ferry, and the loss of the bridge divided "
          "the valley."),
    ("p", "In 1888 the county and the boroughs of Aldermere and Pellingham formed the Corran Ford Bridge Trust to "
          "build a new crossing. On the advice of the flood inquiry the trustees required that the new bridge should "
          "cross the river in a single span with no piers in the water, and that it should pass a flood at least a "
          "quarter greater than that of 1887."),
    ("h1", "Design competition"),
    ("p", "The trustees held a design competition in 1889. Eleven designs were submitted. The winning design, a "
          "two-hinged steel arch of sixty-four metres span, was submitted by Isabel Fairley of Pellingham. Fairley had "
          "learned her profession as a pupil in the railway drawing office at Pellingham, where she had worked on "
          "bridge renewals along the main line of the Varne Valley Railway before setting up her own practice."),
    ("p", "The assessors praised the design for its economy of material and for its flood opening. Fairley had set "
          "the height of the arch springing and the clear opening using measurements of the discharge of the River "
          "Lode made by the newly founded Pellingham Institute of Hydrology, then under the direction of Agnes Morrow, "
          "and she was the only competitor to do so."),
    ("h1", "Construction"),
    ("p", "The main contract was let to Hext and Cobb of Pellingham, who built the abutments of local limestone. "
          "The steelwork of the arch ribs and deck was fabricated at the Tarrant Yard in Saltmouth, better known as "
          "builders of river steamers, and brought up the Varne by barge. The two halves of the arch were erected "
          "from the banks on timber staging and closed at the crown in November 1890. The bridge was opened on "
          "12 May 1891 by Clara Pell, who as chairman of the flood relief committee had campaigned for its rebuilding."),
    ("h1", "Specifications"),
    ("table", [
        ("Item", "Detail"),
        ("Designer", "Isabel Fairley"),
        ("Type", "Two-hinged steel arch"),
        ("Main span", "64 metres"),
        ("Rise of arch", "9.5 metres"),
        ("Width between parapets", "11 metres"),
        ("Main contractor", "Hext and Cobb, Pellingham"),
        ("Steelwork", "Tarrant Yard, Saltmouth"),
        ("Cost", "23,400 pounds"),
        ("Opened", "12 May 1891"),
    ]),
    ("h1", "Later history"),
    ("p", "The bridge has carried the main road of the valley since 1891. It was strengthened in 1934 for motor "
          "traffic, and a footway was added on its downstream side in 1962. In the flood of 1947, the largest since "
          "1887, the river passed beneath the arch with more than two metres to spare, as Fairley had intended. "
          "The bridge was placed on the county register of historic structures in 1972 as an early and elegant "
          "example of a steel arch designed from river measurements."),
    ("p", "A bronze plaque on the eastern abutment records the names of the designer, the contractors and the "
          "members of the Corran Ford Bridge Trust, and marks the height reached by the flood of 1887."),
]

# ---- a minimal PDF writer --------------------------------------------------------------------------

# Helvetica advance widths (1/1000 em) for printable ASCII, from the standard Adobe AFM metrics.
_HELVETICA_WIDTHS = dict(zip(
    " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~",
    [278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
     556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
     1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
     667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
     333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
     556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584],
))
# Bold glyphs are wider; wrapping headings with this factor keeps them inside the margin.
_BOLD_FACTOR = 1.1

PAGE_W, PAGE_H, MARGIN = 595, 842, 72  # A4 in points, one-inch margins
STYLES = {"h1": ("F2", 18, 26), "h2": ("F2", 13, 20), "p": ("F1", 11, 15)}  # font, size, leading


def text_width(text: str, size: float, bold: bool = False) -> float:
    width = sum(_HELVETICA_WIDTHS.get(ch, 556) for ch in text) * size / 1000
    return width * _BOLD_FACTOR if bold else width


def wrap(text: str, size: float, max_width: float, bold: bool = False) -> list[str]:
    """Greedy word wrap by measured glyph widths."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if line and text_width(candidate, size, bold) > max_width:
            lines.append(line)
            line = word
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


def _pdf_string(text: str) -> bytes:
    raw = text.encode("cp1252")  # WinAnsiEncoding
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def layout_pages(blocks: list[tuple[str, str]]) -> list[bytes]:
    """Lay blocks out top to bottom, starting a new page when one is full; returns content streams."""
    pages: list[list[bytes]] = [[]]
    y = PAGE_H - MARGIN
    for kind, text in blocks:
        font, size, leading = STYLES[kind]
        lines = wrap(text, size, PAGE_W - 2 * MARGIN, bold=font == "F2")
        gap = leading * 0.8 if kind != "p" else leading * 0.6
        # Keep a heading with at least two lines of what follows.
        needed = leading * len(lines) if kind == "p" else leading * len(lines) + 2 * STYLES["p"][2]
        if y - min(needed, leading * 2) < MARGIN:
            pages.append([])
            y = PAGE_H - MARGIN
        elif pages[-1]:
            y -= gap
        for line in lines:
            if y - leading < MARGIN:
                pages.append([])
                y = PAGE_H - MARGIN
            y -= leading
            pages[-1].append(b"BT /%s %d Tf %d %.1f Td %s Tj ET" % (font.encode(), size, MARGIN, y, _pdf_string(line)))
    return [b"\n".join(ops) + b"\n" for ops in pages]


def build_pdf(blocks: list[tuple[str, str]], *, title: str, author: str) -> bytes:
    """A valid PDF 1.4 file: catalog, page tree, two standard fonts, one content stream per page, info."""
    streams = layout_pages(blocks)
    n_pages = len(streams)
    first_page = 5  # objects: 1 catalog, 2 pages, 3 Helvetica, 4 Helvetica-Bold, then page/content pairs
    page_ids = [first_page + 2 * i for i in range(n_pages)]
    info_id = first_page + 2 * n_pages
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % p for p in page_ids), n_pages),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        4: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
        info_id: b"<< /Title %s /Author %s /Producer (pathrag-pipeline make_sample_docs.py) "
                 b"/CreationDate (D:20250101000000Z) >>" % (_pdf_string(title), _pdf_string(author)),
    }
    for page_id, stream in zip(page_ids, streams):
        objects[page_id] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] "
                            b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents %d 0 R >>"
                            % (PAGE_W, PAGE_H, page_id + 1))
        objects[page_id + 1] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for obj_id in sorted(objects):
        offsets[obj_id] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (obj_id, objects[obj_id])
    xref_at = len(out)
    size = max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for obj_id in range(1, size):
        out += b"%010d 00000 n \n" % offsets[obj_id]
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, info_id, xref_at)
    return bytes(out)


# ---- DOCX ----------------------------------------------------------------------------------------

FIXED_TIME = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)


def build_docx(blocks: list[tuple[str, object]], *, title: str, author: str) -> bytes:
    import docx

    document = docx.Document()
    props = document.core_properties
    props.title, props.author, props.last_modified_by = title, author, author
    props.created = props.modified = FIXED_TIME
    props.revision = 1
    for kind, content in blocks:
        if kind == "title":
            document.add_heading(content, level=0)
        elif kind == "h1":
            document.add_heading(content, level=1)
        elif kind == "p":
            document.add_paragraph(content)
        elif kind == "table":
            rows = list(content)
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            table.style = "Table Grid"
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    table.cell(r, c).text = value
            for cell in table.rows[0].cells:
                for run in cell.paragraphs[0].runs:
                    run.bold = True
    raw = io.BytesIO()
    document.save(raw)
    return _reproducible_zip(raw.getvalue())


def _reproducible_zip(data: bytes) -> bytes:
    """Rewrite a zip with fixed member timestamps so the same input gives the same bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            fixed.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


# ---- round-trip checks ---------------------------------------------------------------------------

def _words(text: str) -> list[str]:
    return re.findall(r"\S+", text)


def check_pdf(path: Path, blocks: list[tuple[str, str]]) -> int:
    """Extract the PDF with pypdf and require exactly the source words, in order; returns the page count."""
    from pypdf import PdfReader

    reader = PdfReader(path)
    extracted = "\n".join(page.extract_text() for page in reader.pages)
    expected = _words(" ".join(text for _, text in blocks))
    got = _words(extracted)
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        raise SystemExit(f"{path}: pypdf extraction differs from the source at word {first}: "
                         f"{got[first:first + 5]} vs {expected[first:first + 5]}")
    return len(reader.pages)


def check_docx(path: Path, blocks: list[tuple[str, object]]) -> None:
    import docx

    document = docx.Document(str(path))
    paragraphs = [p.text for p in document.paragraphs]
    for kind, content in blocks:
        if kind != "table" and content not in paragraphs:
            raise SystemExit(f"{path}: paragraph missing after round trip: {content[:60]!r}")
    if not document.tables:
        raise SystemExit(f"{path}: table missing after round trip")


def main() -> int:
    SAMPLE.mkdir(parents=True, exist_ok=True)
    author = "pathrag-pipeline sample corpus (fictional)"
    pdf_path = SAMPLE / "kestle_observatory.pdf"
    pdf_path.write_bytes(build_pdf(OBSERVATORY, title=OBSERVATORY_TITLE, author=author))
    pages = check_pdf(pdf_path, OBSERVATORY)
    docx_path = SAMPLE / "corran_ford_bridge.docx"
    docx_path.write_bytes(build_docx(BRIDGE, title=BRIDGE_TITLE, author=author))
    check_docx(docx_path, BRIDGE)
    print(f"wrote {pdf_path.relative_to(ROOT)} ({pages} pages) and {docx_path.relative_to(ROOT)}; round trips ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
