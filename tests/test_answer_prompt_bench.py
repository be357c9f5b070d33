"""The rule that picks the default answer prompt from measured cells (issue 59, bench/answer_prompt.py)."""

from __future__ import annotations

import pytest

from pathrag_lab.bench.answer_prompt import CANDIDATES, FALLBACK, Cell, cell_of, decide, markdown


def _cell(reader: str, qs: str, f1: dict[str, float], trails: tuple[str, ...] = ()) -> Cell:
    vs = {m: {"diff": f1[m] - f1["naive"], "low": -0.1, "high": 0.1, "outcome": "trails" if m in trails else "ties"}
          for m in f1 if m not in ("naive", "bm25+dense")}
    return Cell(reader, qs, 30, f1, "naive", vs)


def _grid(trails_in_one: tuple[str, ...]) -> list[Cell]:
    f1 = {"path": 0.20, "path:passages_first_prompt": 0.25, "path:passages_prompt:paths_in_walk": 0.30,
          FALLBACK: 0.31, "path:paper": 0.10, "naive": 0.30, "bm25+dense": 0.28}
    return [_cell(r, q, f1, trails_in_one if (r, q) == ("0.5b", "musique-100") else ())
            for r in ("0.5b", "1.5b") for q in ("musique-100", "git-doc")]


def test_the_best_qualifying_candidate_is_chosen_and_one_trailing_cell_disqualifies():
    decision = decide(_grid(trails_in_one=("path:passages_prompt:paths_in_walk",)))
    assert decision["complete"] and "path:passages_prompt:paths_in_walk" not in decision["qualifying"]
    assert decision["chosen"] == "path:passages_first_prompt"     # best mean F1 among those that never trail
    assert set(decision["qualifying"]) == {"path", "path:passages_first_prompt"}


def test_with_no_qualifying_candidate_the_passages_ranked_by_path_mode_are_the_default():
    decision = decide(_grid(trails_in_one=CANDIDATES))
    assert decision["qualifying"] == [] and decision["chosen"] == FALLBACK


def test_too_few_cells_say_what_is_missing_and_the_section_says_it_sets_nothing():
    cells = [c for c in _grid(()) if c.reader == "0.5b"]
    decision = decide(cells)
    assert not decision["complete"] and "2 readers" in decision["missing"][0]
    text = markdown(cells, decision, "pathrag bench answer-prompt --workdir DIR")
    assert "default stays as it is" in text and text.count("| 0.5b |") == 2


@pytest.mark.e2e
def test_a_cell_is_read_from_an_answer_evaluation(tmp_path):
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.evaluation.answer_eval import evaluate_answers
    from pathrag_pipeline.query import graph_cache
    from tests.test_evaluation import write_dataset

    graph_cache.clear_cache()
    dataset = write_dataset(tmp_path / "tiny-qa")
    e = evaluate_answers(Settings.from_env(env={"PATHRAG_HOME": str(tmp_path / "home")}), dataset,
                         modes=["path", "naive", "bm25+dense"], use_triples=True, budget=600)
    cell = cell_of("offline", "tiny-qa", e)
    assert cell.questions == 3 and cell.best_flat in ("naive", "bm25+dense")
    assert set(cell.vs_flat) == {"path", "path:paper"} and set(cell.f1) == {"path", "path:paper", "naive",
                                                                              "bm25+dense"}
