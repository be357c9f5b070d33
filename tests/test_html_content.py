"""HTML pages read for their main content: the site's furniture goes, the page's structure stays, and a page whose
cleaning empties is read whole with one warning naming it."""

from __future__ import annotations

from pathrag_pipeline.ingest.parsing import parse_file

PARA = ("The Kestle gauge was installed on Marrow Hill in 1874 and read every morning by the observer, who sent the "
        "readings to Pellingham by post each week. ")

PAGE = f"""<!DOCTYPE html><html><head><title>Gauges — Varne Docs 2.1 documentation</title></head><body>
<div class="related" role="navigation"><h3>Navigation</h3><ul><li><a href="index.html">Varne Docs »</a></li>
<li><a href="genindex.html">Index</a></li></ul></div>
<div id="cookie-banner">This site uses cookies. <button>Accept</button></div>
<div class="sphinxsidebar"><h3>Quick search</h3><h3>On this page</h3><ul><li><a href="#g">Gauges</a></li>
<li><a href="#o">Options</a></li></ul><a href="_sources/gauges.rst.txt">Show Source</a></div>
<div class="body" role="main">
<h1>Gauges<a class="headerlink" href="#g">¶</a></h1>
<p>{PARA * 3}</p>
<p>Call <code class="docutils literal"><span class="pre">read_gauge()</span></code> to read one.</p>
<h2>Options<a class="headerlink" href="#o">¶</a></h2>
<dl><dt><code>--interval</code></dt><dd><p>Seconds between two readings. The default is 3600.</p></dd>
<dt>units</dt><dd><p>The unit of the reading, millimetres by default.</p></dd>
<dt><code>STATION_SCHEME</code></dt><dd><p>Use this scheme for the station codes of the readings.</p>
<p>Default: <code>'kestle'</code></p></dd></dl>
<ul><li>{PARA}</li><li>The float gauge at Corran Ford drew a continuous trace.</li></ul>
<table><tr><th>site</th><th>gauge</th></tr><tr><td>Hesketh Mill</td><td>staff</td></tr></table>
<pre>gauge --interval 60
gauge --units mm</pre>
</div>
<div class="footer">&copy; Copyright 2024, the Varne Valley Trust. Created using Sphinx 5.3.0.
<a href="https://example.org/edit">Edit this page</a></div>
</body></html>"""


def one(tmp_path, name: str, html: str):
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    [doc] = parse_file(path, name, max_bytes=10**7)
    return doc


def test_furniture_goes_and_structure_stays(tmp_path):
    doc = one(tmp_path, "gauges.html", PAGE)
    for furniture in ("Navigation", "Varne Docs »", "cookies", "Quick search", "On this page", "Show Source",
                      "Copyright", "Edit this page", "¶"):
        assert furniture not in doc.text, furniture
    assert doc.title == "Gauges" and doc.warning is None          # the page's one <h1>, not the site's <title>
    assert doc.text.startswith("# Gauges\n\nThe Kestle gauge")
    assert "\n## Options\n" in doc.text
    assert "Call `read_gauge()` to read one." in doc.text           # inline code marked
    assert "`--interval`\n\nSeconds between two readings. The default is 3600." in doc.text   # terms as lines
    assert "`units`\n\nThe unit of the reading" in doc.text         # a one-word term is a name
    # a definition's short paragraph (trafilatura keeps it inside the definition's item, not as an element alone)
    assert "Use this scheme for the station codes of the readings.\n\nDefault: `'kestle'`" in doc.text
    assert "The float gauge at Corran Ford drew a continuous trace." in doc.text   # list items kept
    assert "site | gauge\nHesketh Mill | staff" in doc.text
    assert "```\ngauge --interval 60\ngauge --units mm\n```" in doc.text          # code keeps its lines
    # the folder's template lines are counted on the whole page, where a site's furniture is on every page
    from pathrag_pipeline.ingest.template_lines import line_key

    assert line_key("Show Source") in doc.page_lines and line_key("Quick search") not in doc.page_lines   # a heading


def test_a_page_without_a_content_container_keeps_its_headings(tmp_path):
    # DocBook and SQLite pages have no <main> or <article>: trafilatura is given the body as one
    body = "".join(f"<h2>Part {i}</h2><p>{PARA}</p>" for i in range(3))
    doc = one(tmp_path, "docbook.html", f"<html><head><title>VACUUM</title></head><body>"
                                        f"<div class='navheader'><a>Prev</a> <a>Next</a></div>{body}</body></html>")
    assert [line for line in doc.text.split("\n") if line.startswith("#")] == ["## Part 0", "## Part 1", "## Part 2"]
    assert doc.title == "VACUUM"


def test_a_page_that_cleaning_empties_is_read_whole_with_a_warning(tmp_path, monkeypatch):
    import trafilatura

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **kw: None)   # a page the library finds nothing in
    doc = one(tmp_path, "gauges.html", PAGE)
    assert doc.warning and doc.warning.startswith("gauges.html: main-content extraction kept 0 of ")
    assert "The Kestle gauge" in doc.text and "Quick search" in doc.text     # the whole page, its menus included
    assert "\n## Options\n" in doc.text                                       # still read with its structure


def test_a_warning_reaches_the_index_report_and_the_documents_table(tmp_path, monkeypatch):
    import trafilatura

    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.ingest.folder_sync import sync_folder
    from pathrag_pipeline.storage.store import Store

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **kw: None)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "gauges.html").write_text(PAGE, encoding="utf-8")
    settings = Settings.from_env(env={}, home=tmp_path / "home", docs=docs)
    report = sync_folder(settings, folder=docs)
    assert len(report.warnings) == 1 and report.warnings[0].startswith("gauges.html: ") and not report.failed
    with Store.for_settings(settings).connect(read_only=True) as con:
        assert con.execute("SELECT status, warning FROM documents").fetchone() == ("indexed", report.warnings[0])


def test_the_tokens_cleaning_saves_count_every_page_whole_and_cleaned(tmp_path, monkeypatch):
    """`pathrag bench html`'s "What an LLM reads": the furniture's tokens are the saving, and a page whose cleaning
    empties counts whole on both sides."""
    import trafilatura

    from pathrag_lab.bench.html_extractors import llm_tokens
    from pathrag_pipeline.text.tokenizer import count_tokens

    (tmp_path / "gauges.html").write_text(PAGE, encoding="utf-8")
    once = llm_tokens({"varne": tmp_path})["varne"]
    assert once["pages"] == 1 and once["fallback_pages"] == 0
    assert once["tokens_whole"] > once["tokens_cleaned"] == count_tokens(one(tmp_path, "gauges.html", PAGE).text)
    assert 0 < once["saved_share"] < 1
    monkeypatch.setattr(trafilatura, "extract", lambda *a, **kw: None)   # a page the library finds nothing in
    missed = llm_tokens({"varne": tmp_path})["varne"]
    assert missed["fallback_pages"] == 1 and missed["tokens_cleaned"] == missed["tokens_whole"] == once["tokens_whole"]


def sphinx_page(content: str, related: str = "") -> str:
    """A Sphinx page: a breadcrumb bar, the content in a role=main div, a sidebar and a footer."""
    return f"""<!DOCTYPE html><html><head><title>Gauges — Varne Docs</title></head><body>
<div class="related" role="navigation"><h3>Navigation</h3><ul><li><a href="index.html">genindex</a></li>
{related}</ul></div>
<div class="document"><div class="body" role="main">
<section id="gauges"><h1>Gauges<a class="headerlink" href="#gauges">¶</a></h1>
<p>{PARA * 2}</p>
{content}
</section></div>
<div class="sphinxsidebar" role="navigation"><h3>This Page</h3><ul><li><a href="_sources/g.rst.txt">Show Source</a>
</li></ul></div></div>
<div class="footer" role="contentinfo">&copy; <a href="copyright.html">Copyright</a> 2024, the Varne Valley Trust.
Created using <a href="https://www.sphinx-doc.org/">Sphinx</a> 5.3.0.</div>
</body></html>"""


def test_an_api_entry_whose_links_are_short_names_is_kept(tmp_path):
    # trafilatura deletes a short list whose links are mostly short words as a menu: an API entry's type and its
    # permalink are two such links ("PyObject", "¶"), and a C API page lost every entry
    entry = """<dl class="c var"><dt class="sig sig-object c" id="c.Kestle_None">
<a class="reference internal" href="structures.html#c.PyObject"><span class="pre">PyObject</span></a>
<span class="pre">*</span><span class="sig-name descname"><span class="pre">Kestle_None</span></span>
<a class="headerlink" href="#c.Kestle_None">¶</a><br /></dt>
<dd><p>The gauge that reads nothing, denoting a missing reading.</p></dd></dl>"""
    doc = one(tmp_path, "gauges.html", sphinx_page(entry))
    assert "PyObject *Kestle_None\n\nThe gauge that reads nothing, denoting a missing reading." in doc.text
    assert "Show Source" not in doc.text and "Copyright" not in doc.text      # the furniture's links are still links


def test_a_section_whose_anchor_names_a_role_is_kept(tmp_path):
    # documentation generators give a section its heading's words as id; trafilatura reads "navigation", "menu",
    # "related", "share" in an id as the element's role and deleted the section whole
    sections = {
        "Editing and Navigation": "An observer corrects a reading in the ledger with a single red line, initialled, "
                                  "and moves between the stations by the numbers painted on their posts.",
        "Context menus": "Each station keeps a card beside its gauge listing what may be done there: read, clean, "
                         "drain after a storm, or report a broken float to the office at Pellingham.",
        "Shared readings": "Readings taken by two observers on the same morning are averaged before they are sent, "
                           "and both names are written in the margin of the weekly return.",
        "Related gauges": "The Corran Ford float gauge and the Hesketh Mill staff gauge were read against the Kestle "
                          "gauge every spring to check that the three agreed within a millimetre."}
    html = "".join(f"""<section id="{title.lower().replace(' ', '-')}"><h2>{title}<a class="headerlink"
href="#{title.lower().replace(' ', '-')}">¶</a></h2><p>{text}</p></section>""" for title, text in sections.items())
    doc = one(tmp_path, "gauges.html", sphinx_page(html))
    for title, text in sections.items():
        assert f"## {title}\n\n{text}" in doc.text, title


def test_a_breadcrumb_equal_to_inline_code_is_not_kept(tmp_path):
    # a breadcrumb's "Varne »" was kept as main content because the page's text has `varne` as inline code
    content = "<p>Install <code class='docutils literal'>varne</code> to read the gauges of the valley.</p>"
    doc = one(tmp_path, "gauges.html", sphinx_page(content, '<li><a href="https://varne.example/">Varne</a> &#187;</li>'))
    assert doc.text.startswith("# Gauges\n\nThe Kestle gauge"), doc.text[:80]
    assert "Install `varne` to read the gauges of the valley." in doc.text
