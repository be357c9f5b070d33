"""The hop diagnosis of stored answers (evaluation/answer_diagnosis.py): quoted passages in every prompt
layout, the last hop's passage, and the kind of wrong answer."""

import json

from pathrag_pipeline.evaluation.answer_diagnosis import (
    Hops,
    answer_kind,
    diagnose_run,
    diagnosis_sentence,
    quoted_passages,
)

CORPUS = [
    {"id": "p1", "title": "Dai Jitao", "text": "Dai Jitao (1891 - 1949) was a Chinese journalist and an early Kuomintang member."},
    {"id": "p2", "title": "Debt", "text": "The largest foreign holder of US debt was China, with about $1.18 trillion in 2017."},
    {"id": "p3", "title": "Steel", "text": "In 2011 China was the largest producer of steel in the world, with 45 percent."},
]
QUESTION = {"id": "q1", "question": "How much US debt does the country of Dai Jitao hold?",
            "answers": ["$1.18 trillion"], "gold_ids": ["p1", "p2"],
            "hops": [{"question": "Dai Jitao >> country", "answer": "China", "gold_id": "p1"},
                     {"question": "how much US debt does #1 hold", "answer": "$1.18 trillion", "gold_id": "p2"}]}


def _signatures():
    from pathrag_pipeline.evaluation.answer_diagnosis import _words

    return {p["id"]: " ".join(_words(p["text"]).split()[:12]) for p in CORPUS}


def test_quoted_passages_found_in_plain_and_csv_layouts_in_prompt_order():
    sig = _signatures()
    plain = f"Source passages follow.\n\n[Steel] {CORPUS[2]['text']}\n\n[Dai Jitao] {CORPUS[0]['text']}\n\nQuestion: ..."
    assert quoted_passages(plain, ["p1", "p2", "p3"], sig) == ["p3", "p1"]
    # LightRAG's CSV: a row id glued to the quoted text, quotes doubled; a passage cut by the budget still counts
    csv = ('id,content\n0,"' + CORPUS[1]["text"].replace("US", '""US""') + '"\n1,"'
           + CORPUS[0]["text"][:90] + '"')
    assert quoted_passages(csv, ["p1", "p2", "p3"], sig) == ["p2", "p1"]
    assert quoted_passages("nothing quoted here", ["p1"], sig) == []


def test_answer_kinds():
    hops = Hops(("p1", "p2"), ("China", "$1.18 trillion"))
    assert answer_kind("1.18 trillion dollars", 0.5, hops) == "right"
    assert answer_kind("The People's Republic of China", 0.0, hops) == "bridge"
    assert answer_kind("China", 0.0, hops) == "bridge"
    assert answer_kind("I do not know.", 0.0, hops) == "refused"
    assert answer_kind("Japan", 0.0, hops) == "other"
    assert answer_kind("", 0.0, hops) == "other"


def test_diagnose_run_over_a_dataset_folder(tmp_path):
    # a malformed or non-object line is skipped, never stops the diagnosis
    (tmp_path / "corpus.jsonl").write_text("[1, 2]\n{broken\n" + "\n".join(json.dumps(p) for p in CORPUS) + "\n")
    no_hops = {"id": "q2", "question": "x?", "answers": ["y"], "gold_ids": ["p3"]}
    (tmp_path / "questions.jsonl").write_text(json.dumps(QUESTION) + "\n\n" + json.dumps(no_hops) + "\n")
    path_prompt = f"[Dai Jitao] {CORPUS[0]['text']}\n\n[Steel] {CORPUS[2]['text']}\n\nQuestion"
    flat_prompt = f"[Debt] {CORPUS[1]['text']}\n\n[Dai Jitao] {CORPUS[0]['text']}"
    rows = {"path": {"q1": {"answer": "China", "f1": 0.0, "passage_ids": ["p1", "p3", "p2"], "prompt": path_prompt},
                     "q2": {"answer": "y", "f1": 1.0, "passage_ids": ["p3"], "prompt": "..."}},
            "naive": {"q1": {"answer": "$1.18 trillion", "f1": 1.0, "passage_ids": ["p2", "p1"], "prompt": flat_prompt},
                      "q2": {"answer": "y", "f1": 1.0, "passage_ids": ["p3"], "prompt": "..."}}}
    d = diagnose_run(tmp_path, rows, ["q1", "q2"])
    assert d["path"]["questions"] == 1          # q2 has no hops: not diagnosed
    assert d["path"]["quoted_per_question"] == 2.0
    assert d["path"]["last_hop_quoted"] == 0.0 and d["path"]["last_hop_top5"] == 1.0
    assert d["path"]["last_hop_median_rank"] == 3.0
    assert d["path"]["first_hop_leads"] == 1.0 and d["path"]["bridge"] == 1.0
    assert d["naive"]["last_hop_quoted"] == 1.0 and d["naive"]["first_hop_leads"] == 0.0
    assert d["naive"]["right"] == 1.0 and d["naive"]["last_hop_median_rank"] == 1.0
    sentence = diagnosis_sentence(d, "path", "naive")
    assert "2.0 passages per question against `naive`'s 2.0" in sentence and "in 0% of them against 100%" in sentence
    # a dataset without hops has no diagnosis
    (tmp_path / "questions.jsonl").write_text(json.dumps(no_hops) + "\n")
    assert diagnose_run(tmp_path, rows, ["q1", "q2"]) == {}
