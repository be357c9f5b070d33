"""`pathrag bench offline-width`: recall by width with intervals against the default, on a tiny dataset."""

from __future__ import annotations

import json

from pathrag_lab.bench.offline_width import markdown_section, run_width_bench


def test_width_bench_measures_recall_and_bytes_against_the_default(tmp_path):
    passages = [("p1", "Valmere University", "Valmere University was founded by Ada Halden."),
                ("p2", "Port Aster", "Port Aster is a harbour town where Ada Halden was born."),
                ("p3", "Copper Kettle", "The Copper Kettle bakery sells rye bread in Oldport.")]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps({"id": i, "title": t, "text": x})
                                                     for i, t, x in passages) + "\n")
    (tmp_path / "questions.jsonl").write_text(json.dumps({"id": "q", "question": "Which bakery sells rye bread?",
                                                          "gold_ids": ["p3"]}) + "\n")

    result = run_width_bench(tmp_path, widths=(64, 1024))

    assert [w["dim"] for w in result["widths"]] == [64, 1024] and result["default"] == 1024
    wide = result["widths"][1]
    assert wide["bytes_per_vector"] == 4096 and wide["recall"][2] == 1.0 and wide["vs_default"] == [0.0, 0.0, 0.0]
    assert "| **1024** (default) | 4096 |" in markdown_section(result)
