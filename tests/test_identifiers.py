"""Technical names become entities offline, defined by the sentence after their term line, related to the name their
section is about; headings give no entity of their own words, and code blocks none but the names a shell command, an
import or a header string declares."""

from __future__ import annotations

import pytest

from pathrag_pipeline.index.identifiers import bare_names, code_line_names, code_name, is_term
from pathrag_pipeline.index.offline_extraction import extract_offline


@pytest.mark.parametrize("code, name", [
    ("insort(a, x)", "insort"), ("--jobs=N", "--jobs"), ("git-rebase(1)", "git-rebase"), ("git rebase", "git rebase"),
    ("PRAGMA journal_mode", "PRAGMA journal_mode"), ("sqlite3_open_v2()", "sqlite3_open_v2"),
    ("True", None), ("0", None), ("'utf-8'", None), ("x = 1", None), ("<branch>", None), ("a", None),
    ("git log <upstream>..HEAD", None),
])
def test_a_code_span_gives_the_name_it_holds(code, name):
    assert code_name(code) == name


def test_bare_names_are_the_shapes_only_code_takes():
    sentence = ("Use lru_cache or functools.lru_cache() with getrecursionlimit() and JSONDecodeError, see "
                "git-rebase(1) and --autosquash, e.g. index.html, in MiB.")
    assert [n for n, _, _ in bare_names(sentence)] == ["lru_cache", "functools.lru_cache", "getrecursionlimit",
                                                       "JSONDecodeError", "git-rebase", "--autosquash"]
    assert bare_names("The Kestle gauge was read every morning.") == []


def test_operators_prose_calls_operators_are_names_and_entities():
    sentence = "Since 3.38.0 the -> and ->> operators extract parts of JSON; a -> b is an arrow, not a name."
    assert [n for n, _, _ in bare_names(sentence)] == ["->", "->>"]
    assert [n for n, _, _ in bare_names("Join with the || operator or os.path.join().")] == ["||", "os.path.join"]
    got = extract_offline("The ->> operator returns an SQL TEXT value. The -> operator returns JSON.")
    assert {"->", "->>"} <= {e.name for e in got.entities}


def test_an_operator_reaches_the_entities_table(tmp_path):
    import duckdb

    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.index.extraction_models import name_problem
    from pathrag_pipeline.index.pipeline import run_indexing

    assert name_problem("->>") is None and name_problem("—") is not None   # a dash alone is still no name
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "json.md").write_text("# JSON\n\nThe ->> operator returns an SQL TEXT value. The -> operator returns "
                                  "JSON text.\n")
    home = tmp_path / "home"
    run_indexing(Settings.from_env(env={"PATHRAG_HOME": str(home)}, docs=docs), folder=docs)
    con = duckdb.connect(str(home / "pathrag.duckdb"), read_only=True)
    try:
        names = {row[0] for row in con.execute("SELECT name FROM entities").fetchall()}
    finally:
        con.close()
    assert {"->", "->>"} <= names


def test_a_term_line_is_only_names():
    assert is_term("`--autosquash`, `--no-autosquash`") and is_term("`bisect.insort` (a, x, lo=0, hi=len(a))")
    assert is_term("--root") and not is_term("The project name.") and not is_term("Number of Instances")


DOC = """# `bisect` — Array bisection algorithm

This module provides support for maintaining a list in sorted order.

## Functions

`bisect.insort_left` (a, x, lo=0, hi=len(a))

Insert x in a in sorted order. This function first runs `bisect_left()` to locate an insertion point.

## Writing Better Code

```
import Foo Bar
Kestle Observatory = 1
```
"""


def test_documentation_text_gives_its_names_their_definitions_and_the_sections_subject():
    got = extract_offline(DOC, "bisect — Array bisection algorithm — Python 3.12 documentation")
    entities = {e.name: e for e in got.entities}
    assert {"bisect", "bisect.insort_left", "bisect_left"} <= set(entities)
    assert entities["bisect.insort_left"].description.startswith(
        "`bisect.insort_left` (a, x, lo=0, hi=len(a)): Insert x in a in sorted order.")
    # the page is about its title's head, whose section defines the term
    relations = {(r.source, r.target): r for r in got.relations}
    assert relations[("bisect", "bisect.insort_left")].keywords == "defines"
    # no entity from a heading's own words ("Functions", "Writing Better Code"), none from code, none from "Insert"
    assert not {"Functions", "Writing Better Code", "Array", "Foo Bar", "Kestle Observatory", "Insert"} & set(entities)


def test_a_run_in_label_is_read_with_its_sentence():
    got = extract_offline("**Hesketh Mill.** A mill village on the River Lode, below Kestle Moor.".replace("**", ""))
    pairs = {frozenset((r.source, r.target)) for r in got.relations}
    assert frozenset(("Hesketh Mill", "River Lode")) in pairs


def test_a_hyphenated_header_name_as_a_heading_is_an_entity_defined_by_its_section():
    """flask-doc's security page: each HTTP header is a section heading, named in prose nowhere else (issue 58)."""
    doc = ("# Security Headers\n\n## X-Content-Type-Options\n\nForces the browser to honor the response content "
           "type instead of trying to detect it.\n\n## Getting Started\n\nRead the tutorial first.\n")
    entities = {e.name: e for e in extract_offline(doc, "Security Considerations").entities}
    assert "X-Content-Type-Options" in entities
    assert entities["X-Content-Type-Options"].description.startswith("X-Content-Type-Options: Forces the browser")
    assert not {"Getting Started", "Security Headers", "Getting"} & set(entities)


@pytest.mark.parametrize("line, names", [
    ("$ gunicorn -k gevent 'hello:create_app()'", ["gunicorn", "-k"]),
    ("$ FLASK_APP=hello flask run --debug --port=5000 | tee -a log", ["flask", "--debug", "--port"]),
    ("$ sudo apt-get install -y git  # as root", ["apt-get", "-y"]),
    ("$ cd hello-app", []), ("$ . venv/bin/activate", []), ("$ export FLASK_DEBUG=1", []),
    ("from asgiref.wsgi import WsgiToAsgi", ["asgiref", "asgiref.wsgi", "WsgiToAsgi"]),
    (">>> from bisect import insort, bisect_left as bl", ["bisect", "insort", "bisect_left"]),
    ("import os.path as p, sys", ["os", "os.path", "sys"]),
    ("from . import views", []), ("import Foo Bar", []),
    ("response.headers['Strict-Transport-Security'] = 'max-age=31536000'", ["Strict-Transport-Security"]),
    ("app = Flask(__name__)", []), ("x = 'utf-8'", []), ("git rebase --onto main", []),
])
def test_a_code_line_declares_names_only_as_a_command_an_import_or_a_header(line, names):
    found = code_line_names(line)
    assert [name for name, _, _ in found] == names
    assert all(line[start:end] == name for name, start, end in found)


def test_code_lines_give_entities_related_as_they_stand_and_to_their_section():
    """flask-doc (issue 58): "-k" is written only in a shell line, "asgiref" only in an import and lower-case prose,
    "Strict-Transport-Security" only in code; other code gives nothing."""
    doc = ("# Deploying\n\n## Gunicorn\n\nGunicorn is a WSGI server.\n\n```\n$ gunicorn -k gevent 'hello:app'\n"
           "Listening at: http://127.0.0.1:8000 (x)\n```\n\n## ASGI\n\nThe asgiref adapter is recommended.\n\n"
           "```python\nfrom asgiref.wsgi import WsgiToAsgi\nasgi_app = WsgiToAsgi(app)\nKestle Observatory = 1\n```\n")
    got = extract_offline(doc, "Deploying")
    names = {e.name: e for e in got.entities}
    assert {"-k", "asgiref", "asgiref.wsgi", "WsgiToAsgi"} <= set(names)
    assert names["-k"].description == "$ gunicorn -k gevent 'hello:app'"
    assert not {"Listening", "Kestle Observatory", "asgi_app", "app"} & set(names)
    pairs = {frozenset((r.source, r.target)): r for r in got.relations}
    assert frozenset(("Gunicorn", "-k")) in pairs and frozenset(("asgiref", "WsgiToAsgi")) in pairs
    assert pairs[frozenset(("Deploying", "asgiref"))].keywords == "uses"   # the section's subject: the title here
