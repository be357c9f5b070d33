"""`pathrag bench real-folders` scores what it claims: template entities by where their names occur in the folder read
whole, names asked that are entities by name key, answers that state the fact within the first 400 characters."""

from __future__ import annotations

import json

from pathrag_lab.bench.real_folders import (
    encyclopedic_target,
    markdown,
    score_folder,
    states_fact,
    template_names,
)
from pathrag_pipeline.query.params import EXTRACTIVE_LABEL


def test_template_entities_are_names_found_mostly_in_lines_most_pages_repeat(tmp_path):
    for i in range(6):
        (tmp_path / f"p{i}.html").write_text(
            f"<html><body><div>Show Source | Report a Bug</div><p>The Varne gauge {i} was read by Agnes Morrow. "
            f"Show the gauge.</p></body></html>", encoding="utf-8")
    counts = template_names(tmp_path, ["Show Source", "Agnes Morrow", "Report a Bug"])
    assert counts["Show Source"] == {"template": 6, "all": 6}
    assert counts["Agnes Morrow"] == {"template": 0, "all": 6}
    assert counts["Report a Bug"]["template"] == 6


def test_scores_count_names_by_key_and_facts_in_the_first_400_characters():
    rows = [{"question": "Which option?", "answers": ["--autosquash"], "names": ["git rebase", "insort", "--nope"]},
            {"question": "How many?", "answers": ["6700"], "names": []}]
    graph = {"counts": {"documents": 1, "chunks": 1, "entities": 3, "relations": 0},
             "top": [("Show Source", 9), ("Git", 5)], "keys": ["git rebase", "bisect insort", "x"],
             "dotted": ["bisect.insort"]}
    late = EXTRACTIVE_LABEL + " " + "x" * 420 + " 6700"
    answers = {"path": [f"{EXTRACTIVE_LABEL} Use --autosquash.", late], "naive": ["nothing", "nothing"]}
    got = score_folder(rows, graph, answers, {"Show Source": {"template": 9, "all": 9}, "Git": {"template": 1, "all": 5}})
    assert got["template_entities"] == 1 and got["names"] == 3
    assert got["names_exact"] == 1 and got["names_with_dotted"] == 2 and got["missing_names"] == ["--nope"]
    assert got["stated"] == {"path": 1, "naive": 0} and got["anywhere"] == {"path": 2, "naive": 0}
    assert "path_vs_naive" in got
    assert states_fact(f"{EXTRACTIVE_LABEL} The default value is 6700.", ["6700"])
    assert not states_fact(f"{EXTRACTIVE_LABEL} 67000 objects", ["6700"])


def test_the_encyclopedic_sets_are_asked_in_the_same_format(tmp_path):
    folder, questions = encyclopedic_target("sample", tmp_path)
    rows = [json.loads(line) for line in questions.read_text().splitlines()]
    assert folder.name == "sample" and rows[0]["answers"] == ["river lode"] and rows[0]["names"] == []


def test_the_section_names_every_folder_and_side():
    entry = {"current": {"questions": 2, "template_entities": 0, "names": 3, "names_exact": 2, "names_with_dotted": 3,
                         "stated": {"path": 2, "naive": 1}, "counts": {"documents": 1, "chunks": 2, "entities": 3},
                         "build": {"wall_s": 1.0, "cpu_s": 2.0, "peak_rss_mib": 300.0}, "top": [],
                         "new_ask": {"median_s": 1.104, "runs_s": [1.2, 1.104, 1.0], "edited": "a.html",
                                     "edit_s": 2.31, "after_edit_s": 1.4},
                         "missing_names": [], "path_vs_naive": {"diff": 0.5, "low": 0.0, "high": 1.0}},
             "held_out": True, "generator": "Sphinx (HTML)", "path": "/x"}
    text = markdown({"modes": ["path", "naive"], "baseline": None, "folders": {"sphinx-doc": entry}, "skipped": {}})
    assert "| sphinx-doc (held out) | this code | 2 | 0 | 2/3 (3 with dotted) | 2/2 | 1/2 | +0.50 [+0.00, +1.00]" in text
    assert "| 1 (2) | 300 | 1.10 | 2.31, 1.40 | 1 / 2 / 3 |" in text


def test_the_edit_adds_one_sentence_to_the_first_page_of_a_kilobyte(tmp_path):
    from pathrag_lab.bench.real_folders import EDIT_SENTENCE, edit_victim, edited

    (tmp_path / "a.txt").write_text("x" * 2000)
    (tmp_path / "b.html").write_text("<p>tiny</p>")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.html").write_text("<html><body><p>" + "y" * 2000 + "</p></BODY></html>")
    assert edit_victim(tmp_path) == tmp_path / "sub" / "c.html"          # a page first, 1 KB or more
    small = tmp_path / "small"
    small.mkdir()
    (small / "p2.txt").write_text("a short passage")
    (small / "p1.txt").write_text("another short passage")
    assert edit_victim(small) == small / "p1.txt"                         # none that large: the first
    page = edited((tmp_path / "sub" / "c.html").read_text(), ".html")
    assert page.endswith(f"<p>{EDIT_SENTENCE}</p>\n</BODY></html>")
    assert edited("# Title\n\nText.\n", ".md") == f"# Title\n\nText.\n\n{EDIT_SENTENCE}\n"
    lines = edited('{"id": "p1", "text": "One."}\n{"id": "p2", "text": "Two."}\n', ".jsonl").splitlines()
    assert [json.loads(line)["text"] for line in lines] == [f"One. {EDIT_SENTENCE}", "Two."]
