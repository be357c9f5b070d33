"""Retrieval evaluation: recall@k scoring, the dataset index and its reuse, stored runs, the CLI's JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pathrag_pipeline.query import graph_cache
from pathrag_pipeline.cli.eval import eval_group
from pathrag_pipeline.config import Settings
from pathrag_pipeline.query.params import QueryParams
from pathrag_pipeline.index.llm_extraction import OfflineExtractor
from pathrag_pipeline.evaluation.retrieval_eval import (
    DatasetError,
    evaluate_retrieval,
    load_dataset,
    mean_recall,
    parse_ks,
    passage_ids,
    recall_at_k,
    save_evaluation,
)
from pathrag_pipeline.storage.store import Store

PASSAGES = {
    "p1": ("Helena Voss", "Helena Voss was a chemist born in Lindenholm. She founded Aldermere University."),
    "p2": ("Aldermere University", "Aldermere University is located in Brackwater, a port on the Varne River."),
    "p3": ("Varne River", "The Varne River flows into the Grey Sea after passing Brackwater."),
    "p4": ("Copper Kettle", "The Copper Kettle is a bakery in Oldport that sells rye bread."),
    "p5": ("Oldport", "Oldport is a fishing town with a lighthouse and a harbour."),
    "p6": ("Tomas Arden", "Tomas Arden taught chemistry to Helena Voss in Lindenholm."),
}
TRIPLES = [
    ("p1", "Helena Voss", "born in", "Lindenholm"),
    ("p1", "Helena Voss", "founded", "Aldermere University"),
    ("p2", "Aldermere University", "located in", "Brackwater"),
    ("p2", "Brackwater", "lies on", "Varne River"),
    ("p3", "Varne River", "flows into", "Grey Sea"),
    ("p4", "Copper Kettle", "located in", "Oldport"),
    ("p5", "Oldport", "has", "lighthouse"),
    ("p6", "Tomas Arden", "taught", "Helena Voss"),
]
# Each question's text is exactly its first gold passage's text, so a chunk search ranks that passage first
# (cosine 1 with any deterministic embedder) and recall@1 is known by hand: 1/len(gold_ids).
QUESTIONS = [
    {"id": "q1", "question": PASSAGES["p1"][1], "answers": ["Lindenholm"], "gold_ids": ["p1"]},
    {"id": "q2", "question": PASSAGES["p2"][1], "answers": ["Grey Sea"], "gold_ids": ["p2", "p3"]},
    {"id": "q3", "question": PASSAGES["p4"][1], "answers": ["x"], "gold_ids": ["p4", "p5", "p6", "p1"]},
]


def write_dataset(folder: Path, passages=PASSAGES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"id": pid, "title": title, "text": text}) + "\n" for pid, (title, text) in passages.items()))
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    (folder / "triples.jsonl").write_text("".join(
        json.dumps({"doc_id": d, "subject": s, "predicate": p, "object": o}) + "\n" for d, s, p, o in TRIPLES))
    return folder


@pytest.fixture
def dataset(tmp_path) -> Path:
    graph_cache.clear_cache()
    return write_dataset(tmp_path / "tiny-qa")


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home")})


# ---- scoring ------------------------------------------------------------------------------------

def test_recall_at_k_counts_gold_among_first_k_distinct_passages():
    ranked = ["p3", "p3", "p9", "p1", "p2"]
    assert recall_at_k(ranked, ["p1", "p2"], 1) == 0.0
    assert recall_at_k(ranked, ["p1", "p2"], 3) == 0.5        # distinct: p3, p9, p1
    assert recall_at_k(ranked, ["p1", "p2"], 4) == 1.0
    assert recall_at_k(ranked, ["p3"], 1) == 1.0
    assert recall_at_k([], ["p1"], 5) == 0.0
    assert mean_recall([["p1"], ["p9", "p2"]], [["p1"], ["p2", "p3"]], 2) == pytest.approx((1.0 + 0.5) / 2)
    with pytest.raises(ValueError, match="k=0"):
        recall_at_k(ranked, ["p1"], 0)
    with pytest.raises(ValueError, match="gold"):
        recall_at_k(ranked, [], 2)


def test_passage_ids_strip_the_corpus_file_and_keep_first_positions():
    docs = ["corpus.jsonl#p7", "notes.md", "corpus.jsonl#p2", "corpus.jsonl#p7", "other.jsonl#p1"]
    assert passage_ids(docs) == ["p7", "p2"]


def test_parse_ks_and_dataset_errors(tmp_path, dataset):
    assert parse_ks("10, 2,5,2") == [2, 5, 10]
    with pytest.raises(ValueError, match="'0'"):
        parse_ks("2,0")
    with pytest.raises(DatasetError, match="questions.jsonl"):
        load_dataset(tmp_path)
    (dataset / "questions.jsonl").write_text('{"id": "q1", "question": "Why?", "gold_ids": []}\n')
    with pytest.raises(DatasetError, match=":1: \"gold_ids\""):
        load_dataset(dataset)


# ---- end to end ---------------------------------------------------------------------------------

def _rows(path: Path, sql: str):
    with Store(path).connect(read_only=True) as con:
        return con.execute(sql).fetchall()


def test_naive_recall_matches_hand_computed_values_and_runs_are_stored(settings, dataset):
    evaluation = evaluate_retrieval(settings, dataset, modes=["naive", "path"], ks=[1, 10], use_triples=True)
    naive = evaluation.modes["naive"]
    # recall@1: the passage equal to the question ranks first -> 1/|gold| per question.
    assert naive.recall["recall@1"] == pytest.approx(round((1 / 1 + 1 / 2 + 1 / 4) / 3, 4))
    # Six passages, top_n=40 chunks: every passage is ranked, so recall@10 is complete.
    assert naive.recall["recall@10"] == 1.0
    assert [q.passages[0] for q in naive.questions] == ["p1", "p2", "p4"]
    for mode in ("naive", "path"):
        for q in evaluation.modes[mode].questions:
            assert q.recall["recall@1"] == recall_at_k(q.passages, q.gold_ids, 1)
    assert evaluation.index["extractor"].startswith("import:") and evaluation.use_triples
    assert evaluation.documents_indexed == len(PASSAGES)

    save_evaluation(Store(settings.duckdb_path), evaluation)
    db = settings.duckdb_path
    assert _rows(db, "SELECT dataset, questions, modes, ks, use_triples, llm FROM eval_runs") == [
        ("tiny-qa", 3, ["naive", "path"], [1, 10], True, "offline")]
    results = {(m, k): r for m, k, r in _rows(db, "SELECT mode, k, recall FROM eval_results")}
    assert results[("naive", 10)] == 1.0 and len(results) == 4
    per_question = _rows(db, "SELECT mode, question_id, passage_ids, recall FROM eval_questions ORDER BY mode, question_id")
    assert len(per_question) == 6
    assert per_question[0][:2] == ("naive", "q1") and per_question[0][2][0] == "p1"
    assert json.loads(per_question[0][3])["recall@1"] == 1.0


@pytest.mark.e2e
def test_second_run_reuses_the_index_and_a_changed_corpus_is_reindexed(settings, dataset):
    first = evaluate_retrieval(settings, dataset, modes=["naive"], ks=[2], use_triples=True)
    second = evaluate_retrieval(settings, dataset, modes=["naive"], ks=[2], use_triples=True)
    assert first.workdir == second.workdir
    assert first.documents_indexed == len(PASSAGES) and second.documents_indexed == 0
    ingest = _rows(Path(second.workdir) / "pathrag.duckdb",
                   "SELECT files_new, files_unchanged, documents FROM ingest_runs ORDER BY started_at")
    assert ingest == [(1, 0, len(PASSAGES)), (0, 1, 0)]
    assert second.modes["naive"].recall == first.modes["naive"].recall

    changed = dict(PASSAGES, p5=("Oldport", "Oldport is a fishing town with two lighthouses."))
    write_dataset(dataset, changed)
    third = evaluate_retrieval(settings, dataset, modes=["naive"], ks=[2], use_triples=True)
    assert third.documents_indexed == 1 and third.dataset_hash != first.dataset_hash


def test_use_triples_without_a_triples_file_is_a_clear_error(settings, dataset):
    (dataset / "triples.jsonl").unlink()
    with pytest.raises(DatasetError, match="no triples.jsonl"):
        evaluate_retrieval(settings, dataset, modes=["naive"], use_triples=True)


def test_cli_json_shape_and_offline_extractor_workdir(tmp_path, dataset, monkeypatch):
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(eval_group, ["retrieval", "--dataset", str(dataset), "--modes",
                                             "path,naive,bm25+dense,path:graph", "--k", "2,5", "--limit", "2",
                                             "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["dataset"] == "tiny-qa" and out["questions"] == 2 and out["ks"] == [2, 5]
    assert list(out["modes"]) == ["path", "naive", "bm25+dense", "path:graph"]
    figures_keys = {"recall@2", "recall@5", "mean_recall", "median_ms", "llm_calls", "llm_tokens", "failed",
                    "prompts"}
    assert out["budgets"] == [1000, 2000, 4000] and out["prompt_verdict"]["baseline"] == "bm25+dense"
    for mode, figures in out["modes"].items():
        assert set(figures["prompts"]) == {"1000", "2000", "4000"}
        compared = {"vs", "delta", "prompt_delta"} if mode != "path" else set()   # every mode against path
        noted = {"note"} if mode == "bm25+dense" else set()
        assert set(figures) == figures_keys | compared | noted, mode
        assert 0.0 <= figures["recall@2"] <= figures["recall@5"] <= 1.0
        assert figures["mean_recall"] == pytest.approx((figures["recall@2"] + figures["recall@5"]) / 2, abs=1e-4)
    # a baseline and an ablation against path: per k and for the per-question mean over the ks
    graph = out["modes"]["path:graph"]
    assert graph["vs"] == "path" and set(graph["delta"]) == {"recall@2", "recall@5", "mean_recall"}
    assert set(graph["delta"]["recall@2"]) == {"diff", "low", "high", "outcome"}
    assert graph["delta"]["recall@2"]["diff"] == pytest.approx(
        graph["recall@2"] - out["modes"]["path"]["recall@2"], abs=1e-3)
    # offline the dense list does not join: bm25+dense is BM25, and every output says so
    assert out["modes"]["bm25+dense"]["note"] == "bm25+dense = bm25 offline (embedder not semantic)"
    assert "bm25+dense = bm25 offline" in out["verdict"] and out["verdict_detail"]["best"]["baseline"] == "bm25+dense"
    assert out["embedder_runtime"] == "offline:hashing-v1" and out["bootstrap"]["resamples"] == 10_000
    assert any("HippoRAG 2-style" in n for n in out["notes"])
    offline = OfflineExtractor().identity
    assert out["index"]["extractor"] == offline and out["index"]["embedder"]
    assert out["params"]["top_n"] == 40 and out["use_triples"] is False
    assert Path(out["workdir"]) == tmp_path / "home" / "eval" / f"tiny-qa-{offline}"
    db = tmp_path / "home" / "pathrag.duckdb"
    assert _rows(db, "SELECT count(*) FROM eval_results") == [(8,)]
    stored = {(m, k): row for m, k, *row in _rows(
        db, "SELECT mode, k, compared_to, diff, ci_low, ci_high, mean_diff, mean_ci_low, mean_ci_high FROM eval_results")}
    assert stored[("path", 2)] == [None] * 7
    d = graph["delta"]
    assert stored[("path:graph", 2)] == ["path", d["recall@2"]["diff"], d["recall@2"]["low"], d["recall@2"]["high"],
                                         d["mean_recall"]["diff"], d["mean_recall"]["low"], d["mean_recall"]["high"]]
    assert _rows(db, "SELECT verdict, embedder_runtime FROM eval_runs") == [(out["verdict"], "offline:hashing-v1")]

    bad = CliRunner().invoke(eval_group, ["retrieval", "--dataset", str(dataset), "--modes", "path,fancy"])
    assert bad.exit_code == 1 and "fancy" in bad.output


@pytest.mark.e2e
def test_table_says_reference_figures_cover_the_whole_set_when_limit_is_given(tmp_path, monkeypatch):
    # The README's reference figures are keyed by dataset name and measured on every question.
    graph_cache.clear_cache()
    named = write_dataset(tmp_path / "musique-100")
    monkeypatch.setenv("PATHRAG_HOME", str(tmp_path / "home"))
    args = ["retrieval", "--dataset", str(named), "--modes", "naive", "--use-triples"]
    limited = CliRunner().invoke(eval_group, [*args, "--limit", "2"], terminal_width=250)
    assert limited.exit_code == 0, limited.output
    assert "BM25" in limited.output and "not the first 2" in limited.output
    whole = CliRunner().invoke(eval_group, args, terminal_width=250)
    assert "BM25" in whole.output and "not the first" not in whole.output


def _outcome(hits2: int, hits5: int, offset: int = 0, n: int = 100):
    """A mode over ``n`` one-gold questions whose gold is in the top 2 for ``hits2`` questions and in the top 5 for
    ``hits5``, counted from question ``offset`` (recall 1 there, 0 elsewhere)."""
    from pathrag_pipeline.evaluation.retrieval_eval import ModeOutcome, QuestionOutcome

    def hit(i: int, hits: int) -> float:
        return float(0 <= i - offset < hits)

    questions = [QuestionOutcome(f"q{i}", ["g"], [], {"recall@2": hit(i, hits2), "recall@5": hit(i, hits5)}, 1.0)
                 for i in range(n)]
    return ModeOutcome(recall={"recall@2": hits2 / n, "recall@5": hits5 / n}, median_ms=1.0, questions=questions)


def _evaluation(modes, **fields):
    from datetime import datetime

    from pathrag_pipeline.evaluation.retrieval_eval import RetrievalEvaluation, add_comparisons

    add_comparisons(modes, [2, 5])
    return RetrievalEvaluation(**{
        "run_id": "r", "started_at": datetime(2026, 1, 1), "dataset": "set", "dataset_path": "/x",
        "dataset_hash": "h", "questions": 100, "ks": [2, 5], "params": {}, "use_triples": False, "index": {},
        "llm": "offline", "workdir": "/w", "index_seconds": 0.0, "documents_indexed": 0, "modes": modes, **fields})


def test_verdict_compares_the_best_graph_mode_with_the_strongest_baseline_with_intervals():
    ev = _evaluation({"path": _outcome(46, 58), "path:seeds": _outcome(42, 64), "bm25": _outcome(43, 51),
                      "dense": _outcome(50, 55, offset=10), "bm25+dense": _outcome(20, 30)})
    detail = ev.verdict_detail()
    # best graph mode by mean recall over the ks (path:seeds 0.53 > path 0.52); strongest baseline dense (0.525),
    # not each baseline and not the weakest
    assert detail["best"]["mode"] == "path:seeds" and detail["best"]["baseline"] == "dense"
    assert detail["default"]["mode"] == "path" and detail["default"]["baseline"] == "dense"
    r2 = detail["best"]["recall@2"]
    assert (r2["mode"], r2["baseline"], r2["diff"]) == (0.42, 0.5, -0.08)
    assert r2["low"] < 0 < r2["high"] and r2["outcome"] == "ties"      # straddles zero: a tie, not "trails"
    assert detail["best"]["recall@5"]["diff"] == 0.09 and detail["best"]["recall@5"]["outcome"] == "beats"
    line = ev.verdict()
    assert line.startswith("set: best graph mode path:seeds (mean R 0.530) vs the strongest flat baseline dense "
                           "(mean R 0.525): ties at R@2 (0.420 vs 0.500, -0.080 [")
    assert "beats at R@5 (0.640 vs 0.550, +0.090 [" in line
    assert "; the default path (mean R 0.520) vs the strongest flat baseline dense" in line
    assert "[paired 95% bootstrap over 100 questions, 10,000 resamples, seed 0]" in line
    # every baseline and ablation row is compared with path
    assert ev.modes["bm25"].vs == "path" and ev.modes["path:seeds"].vs == "path" and ev.modes["path"].vs is None
    assert ev.modes["bm25+dense"].delta["recall@2"].diff == pytest.approx(-0.26)
    assert ev.modes["bm25+dense"].delta["recall@2"].outcome == "trails"

    # identical rankings: diff 0, interval [0, 0], "ties"
    tie = _evaluation({"path": _outcome(40, 50), "bm25": _outcome(40, 50)})
    assert tie.verdict_detail()["best"]["recall@2"] == {"mode": 0.4, "baseline": 0.4, "diff": 0.0, "low": 0.0,
                                                        "high": 0.0, "outcome": "ties"}
    assert tie.verdict_detail()["default"] is None
    # a clear loss trails at every k
    lost = _evaluation({"path": _outcome(10, 20), "bm25": _outcome(43, 51)})
    assert [lost.verdict_detail()["best"][k]["outcome"] for k in ("recall@2", "recall@5", "mean_recall")] == [
        "trails"] * 3


def test_the_verdict_and_notes_label_oracle_hop_questions_and_the_offline_hybrid_baseline():
    from pathrag_pipeline.evaluation.retrieval_eval import HYBRID_BASELINE_OFFLINE

    hybrid = _outcome(43, 51)
    hybrid.note = HYBRID_BASELINE_OFFLINE
    ev = _evaluation({"path": _outcome(60, 70), "bm25": _outcome(43, 51), "bm25+dense": hybrid},
                     dataset="set (oracle hop questions)", hop_level=True)
    line = ev.verdict()
    assert line.startswith("set (oracle hop questions): best graph mode path")
    assert line.endswith("; oracle decomposition (MuSiQue's own hop questions): reported, not used to choose "
                         "anything; bm25+dense = bm25 offline (embedder not semantic)")
    assert ev.verdict_detail()["best"]["baseline"] == "bm25"     # equal to bm25+dense: the one listed first


def test_default_modes_add_the_fused_baseline_and_dense_only_when_semantic():
    from pathrag_pipeline.evaluation.retrieval_eval import default_modes, resolve_mode

    assert default_modes(False) == ["path", "naive", "local", "global", "hybrid", "neuropath", "bm25", "bm25+dense"]
    assert default_modes(True)[-3:] == ["bm25", "dense", "bm25+dense"]
    assert resolve_mode("bm25+dense") == ("naive", {"chunk_search": "hybrid"})


def test_an_older_home_gains_the_new_eval_columns_and_stores_runs(tmp_path, settings, dataset):
    import duckdb

    from pathrag_pipeline.storage.schema import ADDED_COLUMNS

    home = tmp_path / "old-home"
    home.mkdir()
    with duckdb.connect(str(home / "pathrag.duckdb")) as con:   # eval tables as homes before these columns had them
        con.execute("""CREATE TABLE eval_runs (run_id VARCHAR PRIMARY KEY, started_at TIMESTAMP NOT NULL,
            dataset VARCHAR NOT NULL, dataset_path VARCHAR NOT NULL, dataset_hash VARCHAR NOT NULL,
            questions INTEGER NOT NULL, modes VARCHAR[] NOT NULL, ks INTEGER[] NOT NULL, params JSON NOT NULL,
            extractor VARCHAR NOT NULL, embedder VARCHAR NOT NULL, llm VARCHAR NOT NULL, use_triples BOOLEAN NOT NULL,
            workdir VARCHAR NOT NULL, index_seconds DOUBLE, documents_indexed INTEGER, seconds DOUBLE)""")
        con.execute("""CREATE TABLE eval_results (run_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, k INTEGER NOT NULL,
            recall DOUBLE NOT NULL, questions INTEGER NOT NULL, median_ms DOUBLE)""")
    assert {("eval_runs", "verdict"), ("eval_results", "ci_low")} <= {(t, c) for t, c, _ in ADDED_COLUMNS}
    evaluation = evaluate_retrieval(settings, dataset, modes=["path", "bm25"], ks=[1, 2], use_triples=True)
    save_evaluation(Store(home / "pathrag.duckdb"), evaluation)
    db = home / "pathrag.duckdb"
    assert _rows(db, "SELECT verdict, embedder_runtime FROM eval_runs") == [
        (evaluation.verdict(), "offline:hashing-v1")]
    assert _rows(db, "SELECT compared_to, count(*) FROM eval_results GROUP BY ALL ORDER BY 1 NULLS FIRST") == [
        (None, 2), ("path", 2)]


def test_hop_questions_are_the_rows_sub_questions_with_answers_filled_in(tmp_path, dataset):
    rows = [
        {"id": "m1", "question": "Where does the river by the university Helena Voss founded flow?",
         "answers": ["Grey Sea"], "gold_ids": ["p1", "p2", "p3"],
         "hops": [{"question": "Helena Voss >> founded", "answer": "Aldermere University", "gold_id": "p1"},
                  {"question": "Where is #1 located?", "answer": "Brackwater", "gold_id": "p2"},
                  {"question": "Which river flows past #2 ?", "answer": "Varne River", "gold_id": "p3"}]},
        # shares its first hop with m1: that sub-question is asked once
        {"id": "m2", "question": "Who taught the founder?", "answers": ["Tomas Arden"], "gold_ids": ["p1", "p6"],
         "hops": [{"question": "Helena Voss >> founded", "answer": "Aldermere University", "gold_id": "p1"},
                  {"question": "Who taught #9 ?", "answer": "Tomas Arden", "gold_id": "p6"}]},
    ]
    (dataset / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [q.id for q in load_dataset(dataset).questions] == ["m1", "m2"]
    hops = load_dataset(dataset, hop_level=True)
    assert hops.name == "tiny-qa (oracle hop questions)"
    assert [(q.id, q.question, q.gold_ids) for q in hops.questions] == [
        ("m1/hop1", "Helena Voss founded", ("p1",)),
        ("m1/hop2", "Where is Aldermere University located?", ("p2",)),
        ("m1/hop3", "Which river flows past Brackwater ?", ("p3",)),
        ("m2/hop2", "Who taught #9 ?", ("p6",)),        # an out-of-range reference is left as written
    ]
    (dataset / "questions.jsonl").write_text(json.dumps(QUESTIONS[0]) + "\n")
    with pytest.raises(DatasetError, match=r":1: --hop-questions needs MuSiQue-style"):
        load_dataset(dataset, hop_level=True)


def test_hop_question_evaluation_reuses_the_dataset_index(settings, dataset):
    first = evaluate_retrieval(settings, dataset, modes=["bm25"], ks=[1])
    (dataset / "questions.jsonl").write_text(json.dumps(
        {"id": "m1", "question": "x", "gold_ids": ["p1", "p2"],
         "hops": [{"question": PASSAGES["p1"][1], "answer": "a", "gold_id": "p1"},
                  {"question": PASSAGES["p2"][1], "answer": "b", "gold_id": "p2"}]}) + "\n")
    hops = evaluate_retrieval(settings, dataset, modes=["bm25"], ks=[1], hop_level=True)
    assert hops.workdir == first.workdir and hops.documents_indexed == 0
    assert hops.dataset == "tiny-qa (oracle hop questions)" and hops.questions == 2 and hops.hop_level
    assert hops.modes["bm25"].recall["recall@1"] == 1.0     # each hop question is its gold passage's text


def test_prompts_are_scored_per_budget_stored_and_compared_with_the_strongest_chunk_prompt(settings, dataset):
    """What the LLM reads: each mode's prompt at every budget, answer in context and quoted passages, stored
    per question in eval_prompts, with the path prompt compared to the strongest flat chunk prompt."""
    evaluation = evaluate_retrieval(settings, dataset, modes=["path", "bm25", "path:paper_prompt"], ks=[2],
                                    use_triples=True, budgets=[300, 1000])
    bm25 = evaluation.modes["bm25"]
    # q1's answer "Lindenholm" is in p1, the passage bm25 ranks first: quoted at both budgets
    q1 = bm25.questions[0].prompts
    assert sorted(q1) == [300, 1000] and q1[1000].answer_in_context and q1[1000].quoted[0] == "p1"
    assert q1[1000].quoted_recall == 1.0 and q1[300].tokens <= 300
    # the paper's paths-only prompt quotes no passage, whatever its paths say
    paper = evaluation.modes["path:paper_prompt"]
    assert all(not q.prompts[1000].quoted and q.prompts[1000].quoted_recall == 0.0 for q in paper.questions)
    assert paper.prompts["1000"]["quoted_recall"] == 0.0 and paper.vs == "path" and "1000" in paper.prompt_delta
    verdict = evaluation.prompt_verdict()
    assert verdict["baseline"] == "bm25" and verdict["prompt"] == QueryParams.prompt == "passages_paths"
    assert verdict["1000"]["mode"] == evaluation.modes["path"].prompts["1000"]["answer_in_context"]
    assert "answer in context" in evaluation.prompt_verdict_line()

    save_evaluation(Store(settings.duckdb_path), evaluation)
    rows = _rows(settings.duckdb_path, "SELECT mode, question_id, budget, answer_in_context, quoted_ids FROM "
                                       "eval_prompts WHERE mode = 'bm25' AND question_id = 'q1' ORDER BY budget")
    assert [(r[2], r[3], r[4][0]) for r in rows] == [(300, True, "p1"), (1000, True, "p1")]
    assert _rows(settings.duckdb_path, "SELECT count(*) FROM eval_prompts")[0][0] == 3 * 3 * 2


def test_no_budgets_skip_the_prompt_measurement(settings, dataset):
    evaluation = evaluate_retrieval(settings, dataset, modes=["path", "bm25"], ks=[2], use_triples=True, budgets=[])
    assert evaluation.prompt_verdict() is None and not evaluation.modes["path"].prompts
    save_evaluation(Store(settings.duckdb_path), evaluation)      # no prompt rows to store, the run is stored
    assert _rows(settings.duckdb_path, "SELECT count(*) FROM eval_runs")[0][0] == 1
    assert _rows(settings.duckdb_path, "SELECT count(*) FROM eval_prompts")[0][0] == 0
