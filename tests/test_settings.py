"""Every query setting is declared once (query/params.py) and the CLI, the Dagster config and the docs come from it
(issue 60, item 2)."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from click.testing import CliRunner

from pathrag_pipeline.cli import main
from pathrag_pipeline.config import PACKAGE_ROOT
from pathrag_pipeline.query.params import PRESETS, SETTINGS, QueryParams, parse_setting, settings_markdown


def test_the_docs_table_is_the_declaration():
    page = (PACKAGE_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    start = page.index("<!-- settings table: generated")
    table = page[page.index("\n", start) + 1:page.index("<!-- end of settings table -->")]
    assert table == settings_markdown(), "regenerate the table: python -c 'from pathrag_pipeline.query.params " \
                                         "import settings_markdown; print(settings_markdown())'"


def test_every_field_is_declared_with_help_origin_and_a_valid_default():
    assert set(SETTINGS) == {f.name for f in fields(QueryParams)}
    for spec in SETTINGS.values():
        assert spec.help and "\n" not in spec.help and spec.origin
        spec.check(spec.default)
    QueryParams().resolved()
    for preset in PRESETS.values():
        QueryParams(**preset).resolved()


@pytest.mark.parametrize("name,text,value", [("max_hops", "14", 14), ("theta", "none", None), ("alpha", "0.6", 0.6),
                                             ("seed_pass", "true", True), ("revert", "none", ()),
                                             ("revert", "seed_gate,damping", ("seed_gate", "damping")),
                                             ("prompt", "paths", "paths")])
def test_a_setting_parses_from_text(name, text, value):
    assert parse_setting(name, text) == value


@pytest.mark.parametrize("name,text,message", [("max_hops", "0", "max_hops=0 is out of range: allowed 1..20"),
                                               ("alpha", "0", "alpha=0.0 is out of range: allowed (0, 1]"),
                                               ("prompt", "chain", "prompt='chain' is not one of"),
                                               ("seed_pass", "maybe", "must be true or false"),
                                               ("top_k", "ten", "must be an integer"),
                                               ("max_hop", "3", "did you mean max_hops")])
def test_a_bad_setting_names_itself_and_what_is_allowed(name, text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        parse_setting(name, text)


def test_ask_help_fits_one_screen_and_lists_the_settings_on_request():
    runner = CliRunner()
    help_text = runner.invoke(main, ["ask", "--help"], terminal_width=100).output
    assert len(help_text.splitlines()) <= 50 and "--set NAME=VALUE" in help_text
    assert "--np-candidates" not in help_text   # reachable, not shown
    listing = runner.invoke(main, ["ask", "--settings"], terminal_width=250)
    assert listing.exit_code == 0
    for name in SETTINGS:
        assert name in listing.output


def _ask_options(monkeypatch, *args: str) -> tuple[int, str, dict]:
    """What `pathrag ask ARGS` passes to the engine (the engine replaced by a recorder)."""
    seen: dict = {}

    class Recorder:
        def __init__(self, settings, **kwargs):
            pass

        def query(self, question, mode, **options):
            seen.update(options, mode=mode)
            raise ValueError("recorded")

    monkeypatch.setattr("pathrag_pipeline.query.engine.PathRAG", Recorder)
    result = CliRunner().invoke(main, ["ask", "q", "--local", *args])
    return result.exit_code, result.output, seen


def test_ask_passes_only_what_the_command_line_sets(monkeypatch, home):
    code, _, seen = _ask_options(monkeypatch, "--set", "max_hops=14", "--prompt", "paths", "--set", "revert=none",
                                 "--excerpts")
    assert code == 1 and seen == {"mode": "path", "max_hops": 14, "prompt": "paths", "revert": (), "excerpts": True}
    code, _, seen = _ask_options(monkeypatch, "--preset", "paper", "--set", "prompt=passages")
    assert seen["prompt"] == "passages" and seen["passages"] == PRESETS["paper"]["passages"]
    code, _, seen = _ask_options(monkeypatch, "--preset", "public-code")
    assert (seen["variant"], seen["prompt"], seen["seed_query"]) == ("reference", "public", "joined")
    assert json.dumps(seen)   # what goes to a query service is JSON


@pytest.mark.parametrize("args,message", [
    (("--set", "max_hop=3"), "did you mean max_hops"),
    (("--set", "max_hops"), "give NAME=VALUE"),
    (("--max-hops", "3", "--set", "max_hops=4"), "max_hops is given twice"),
    (("--mode", "naive", "--set", "alpha=0.5"), "--alpha shape path mode only"),
    (("--mode", "path", "--np-candidates", "5"), "--np-candidates shape neuropath mode only"),
])
def test_ask_refuses_a_bad_setting_before_loading_anything(monkeypatch, home, args, message):
    code, output, seen = _ask_options(monkeypatch, *args)
    assert code == 2 and message in output and seen == {}
