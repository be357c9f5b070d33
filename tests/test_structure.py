"""The marks every parser writes (headings, code fences, inline code) and what their readers make of them: blocks,
the headings a window sits under, and the prefix that makes a chunk read as it does in place."""

from __future__ import annotations

from pathrag_pipeline.ingest.chunking import chunk_text
from pathrag_pipeline.text.structure import Outline, blocks, code_block, heading_line, inline_code, plain

TEXT = ("# Guide\n\nIntro text.\n\n## Install\n\nRun it:\n\n```sh\n# not a heading\npip install x\n```\n\n"
        "Done `x`.\n\n### Deep\n\nMore.")


def test_blocks_tell_headings_code_and_prose_apart():
    got = [(b.kind, b.text, b.level) for b in blocks(TEXT)]
    assert got == [("heading", "Guide", 1), ("text", "Intro text.", 0), ("heading", "Install", 2),
                   ("text", "Run it:", 0), ("code", "# not a heading\npip install x", 0), ("text", "Done `x`.", 0),
                   ("heading", "Deep", 3), ("text", "More.", 0)]
    # a fence left open (a chunk cut inside code) runs to the end
    assert [b.kind for b in blocks("Intro.\n\n```\nx = 1\n# comment")] == ["text", "code"]


def test_the_outline_gives_the_headings_above_any_offset_and_the_prefix_a_window_needs():
    outline = Outline(TEXT)
    inside_code = TEXT.index("pip install")
    assert outline.at(inside_code).section == "Guide > Install" and outline.at(inside_code).in_code
    assert outline.at(inside_code).prefix("pip install x") == "# Guide\n## Install\n```\n"
    deep = TEXT.index("More.")
    assert outline.at(deep).section == "Guide > Install > Deep"
    # a window opening on a heading needs only the headings above that heading's level
    at_heading = TEXT.index("### Deep")
    assert outline.at(at_heading).prefix("### Deep") == "# Guide\n## Install\n\n"
    assert outline.at(0).prefix("# Guide") == ""


def test_chunks_start_with_the_headings_they_sit_under_and_record_the_section():
    text = "# Manual\n\n## Options\n\n" + " ".join(f"word{i}" for i in range(300)) + "\n\n## Exit status\n\nZero."
    chunks = chunk_text("manual.md", text, max_tokens=120, overlap=10)
    assert chunks[0].text.startswith("# Manual\n\n## Options") and chunks[0].section == "Manual"   # where it starts
    middle = chunks[2]
    assert middle.text.startswith("# Manual\n## Options\n\nword") and middle.section == "Manual > Options"
    assert text[middle.char_start:middle.char_end] in middle.text   # the window itself, after its prefix
    assert chunks[-1].section == "Manual > Exit status" or chunks[-1].text.endswith("Zero.")


def test_marks_are_made_one_way():
    assert heading_line(9, "  Deep   heading ") == "###### Deep heading"
    assert code_block("```inner\nx") == "```\n ```inner\nx\n```"     # a fence inside code cannot close it
    assert inline_code("a `b` c") == "`a 'b' c`" and inline_code("   ") == ""
    assert plain("## `bisect` — **Array** bisection") == "bisect — Array bisection"
