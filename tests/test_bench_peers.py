"""`pathrag bench peers`: the scripted model's three formats, its request classification, the corpus and the report.

The fast tests check each format against the format rules read from the peer's parser (``peer_formats.parse_*``)
and ours against our own parser (``ChunkExtraction``). The slow ones run the peers' own parsers in their side
environments (skipped when those are not installed: ``pathrag bench peers`` creates them).
"""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

from pathrag_lab.bench import peer_formats as pf
from pathrag_lab.bench.peers import DEFAULT_ENVS, DRIVERS, env_python, gold_share, markdown_section, select_passages
from pathrag_pipeline.index.extraction_models import ChunkExtraction
from pathrag_pipeline.index.llm_extraction import (EXTRACTION_SYSTEM_PROMPT, EXTRACTION_USER_PROMPT, GLEANING_PROMPT,
                                                   SUMMARY_PROMPT)
from pathrag_pipeline.query.engine import KEYWORD_PROMPT

TRIPLES = [
    ("Journal of Mathematical Physics", "published by", "American Institute of Physics"),
    ("Journal of Mathematical Physics", "first published in", "January 1960"),
    ("Journal of Mathematical Physics", "current editor is", "Jan Philip Solovej"),
    ("Jan Philip Solovej", "is from", "University of Copenhagen"),
    ("Jan Philip Solovej", "is from", "University of Copenhagen"),        # a repeated pair: one relation
    ("Journal of Mathematical Physics", "is", "journal of mathematical physics"),   # a self-loop: dropped
    ("Journal of Mathematical Physics", 'has "impact"', "1.355 in 2018"),   # quotes cannot break a format
]
TEXT = ("The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the American Institute "
        "of Physics. The current editor is Jan Philip Solovej from University of Copenhagen.")


@pytest.fixture
def graph() -> pf.PassageGraph:
    return pf.PassageGraph.of("p0000", "Journal of Mathematical Physics", TEXT, TRIPLES)


def _whole(g: pf.PassageGraph) -> pf.Parsed:
    return {n for n, _ in g.entities}, {(s, t) for s, t, _, _ in g.relations}


def test_a_passage_graph_is_its_triples_without_self_loops_or_repeated_pairs(graph):
    names, pairs = _whole(graph)
    assert names == {"Journal of Mathematical Physics", "American Institute of Physics", "January 1960",
                     "Jan Philip Solovej", "University of Copenhagen", "1.355 in 2018"}
    assert len(graph.relations) == 5 == len(pairs)
    assert all('"' not in d for _, d in graph.entities)


def test_the_first_pass_and_gleaning_split_the_graph_without_loss(graph):
    first, glean = graph.passes()
    assert first.entities and glean.entities
    assert set(first.entities) | set(glean.entities) == set(graph.entities)
    assert set(first.relations) | set(glean.relations) == set(graph.relations)
    firsts = {n for n, _ in first.entities}
    assert all(s in firsts and t in firsts for s, t, _, _ in first.relations)


@pytest.mark.parametrize("fmt, parse", [(pf.ours_format, pf.parse_ours), (pf.lightrag_format, pf.parse_lightrag),
                                        (pf.nano_format, pf.parse_nano)])
def test_each_format_parses_back_to_the_same_entities_and_relations(graph, fmt, parse):
    names, pairs = set(), set()
    for part in graph.passes():
        n, p = parse(fmt(part))
        names |= n
        pairs |= p
    assert (names, pairs) == _whole(graph)


def test_our_format_is_what_our_extraction_model_reads(graph):
    parsed = ChunkExtraction.model_validate_json(pf.ours_format(graph))
    assert {e.name for e in parsed.entities} == _whole(graph)[0]
    assert {(r.source, r.target) for r in parsed.relations} == _whole(graph)[1]


def test_the_formats_carry_their_completion_markers(graph):
    assert pf.lightrag_format(graph).endswith("\n<|COMPLETE|>")
    assert pf.nano_format(graph).endswith(")<|COMPLETE|>")
    assert pf.nano_format(graph).count("##") == len(graph.entities) + len(graph.relations) - 1


def _ours_extraction(g: pf.PassageGraph, glean: bool = False) -> dict:
    msgs = [{"role": "system", "content": EXTRACTION_SYSTEM_PROMPT.format(entity_types="person, concept")},
            {"role": "user", "content": EXTRACTION_USER_PROMPT.format(title=g.title, text=g.file_text)}]
    if glean:
        msgs += [{"role": "assistant", "content": "{}"}, {"role": "user", "content": GLEANING_PROMPT}]
    return {"messages": msgs}


def _lightrag_extraction(g: pf.PassageGraph, glean: bool = False) -> dict:
    user = f"---Task---\nExtract entities\n\n---Input Text---\n```\n{g.file_text}\n```\n\n---Output---\n"
    msgs = [{"role": "system", "content": f"---Role---\n{pf.LR_EXTRACT} from the text"},
            {"role": "user", "content": user}]
    if glean:
        msgs += [{"role": "assistant", "content": "x"},
                 {"role": "user", "content": f"---Task---\n{pf.LR_GLEAN} entities"}]
    return {"messages": msgs}


def _nano_extraction(g: pf.PassageGraph, step: str = "extract") -> dict:
    hint = (f"-Goal-\n{pf.NANO_EXTRACT}, identify all entities\n-Real Data-\n######################\n"
            f"Entity_types: organization,person\nText: {g.file_text}\n######################\nOutput:\n")
    msgs = [{"role": "user", "content": hint}]
    if step != "extract":
        msgs += [{"role": "assistant", "content": "x"},
                 {"role": "user", "content": pf.NANO_GLEAN if step == "glean" else pf.NANO_IF_LOOP}]
    return {"messages": msgs}


def test_each_system_s_prompts_are_told_apart(graph):
    assert pf.classify(_ours_extraction(graph)) == ("ours", "extract")
    assert pf.classify(_ours_extraction(graph, glean=True)) == ("ours", "glean")
    assert pf.classify(_lightrag_extraction(graph)) == ("lightrag", "extract")
    assert pf.classify(_lightrag_extraction(graph, glean=True)) == ("lightrag", "glean")
    assert pf.classify(_nano_extraction(graph)) == ("nano", "extract")
    assert pf.classify(_nano_extraction(graph, "glean")) == ("nano", "glean")
    assert pf.classify(_nano_extraction(graph, "if_loop")) == ("nano", "if_loop")
    summary = SUMMARY_PROMPT.format(max_words=50, kind="Entity", name="X", descriptions="- a\n- b")
    assert pf.classify({"messages": [{"role": "user", "content": summary}]}) == ("ours", "summary")
    assert pf.classify({"messages": [{"role": "system", "content": KEYWORD_PROMPT},
                                     {"role": "user", "content": "Question: who?"}]}) == ("ours", "keywords")
    assert pf.classify({"messages": [{"role": "user", "content": "hello"}]}) == ("unknown", "unknown")


def test_the_model_answers_every_system_with_the_same_graph(graph):
    other = pf.PassageGraph.of("p0001", "Person-centered therapy", "Person-centered therapy is a therapy.",
                               [("Person-centered therapy", "developed by", "Carl Rogers")])
    model = pf.PeerModel([other, graph])
    got = {}
    for system, ask, parse in (("ours", _ours_extraction, pf.parse_ours),
                               ("lightrag", _lightrag_extraction, pf.parse_lightrag)):
        first = parse(model(ask(graph)))
        second = parse(model(ask(graph, True)))
        got[system] = (first[0] | second[0], first[1] | second[1])
    first = pf.parse_nano(model(_nano_extraction(graph)))
    second = pf.parse_nano(model(_nano_extraction(graph, "glean")))
    got["nano"] = (first[0] | second[0], first[1] | second[1])
    assert got["ours"] == got["lightrag"] == got["nano"] == _whole(graph)
    assert model(_nano_extraction(graph, "if_loop")) == "NO"
    assert model.unmatched == 0
    assert model.totals("lightrag")["calls"] == 2 and model.totals("nano")["by_kind"] == {"extract": 1, "glean": 1,
                                                                                         "if_loop": 1}


def test_near_duplicate_passages_are_told_apart_by_their_whole_text():
    # musique-100 holds paragraphs of one article whose first 80 characters are equal (p0207 and p0211)
    opening = "The atomic bombings of Hiroshima and Nagasaki were conducted by the United States during the final"
    a = pf.PassageGraph.of("a", "Atomic bombings", opening + " stage of the war, killing 90,000 -- 146,000.",
                           [("Atomic bombings", "killed", "90,000 -- 146,000 people")])
    b = pf.PassageGraph.of("b", "Atomic bombings", opening + " stage of World War II. Truman ordered them.",
                           [("Harry S. Truman", "ordered", "Atomic bombings")])
    model = pf.PeerModel([a, b])
    for g in (a, b):
        assert model.passage_in("Document title: x\nText:\n" + g.file_text + "\nAn added line.") is g


def test_an_unknown_passage_is_counted_not_invented(graph):
    model = pf.PeerModel([graph])
    stranger = pf.PassageGraph.of("p9", "Elsewhere", "Nothing about journals at all here.", [])
    assert pf.parse_lightrag(model(_lightrag_extraction(stranger))) == (set(), set())
    assert model.unmatched == 1


def test_keywords_are_the_graph_names_in_the_question_for_both_keyword_prompts(graph):
    model = pf.PeerModel([graph])
    q = "Where is the current editor of the Journal of Mathematical Physics from?"
    low, high = model.keywords(q)
    assert low == ["Journal of Mathematical Physics"]
    assert "editor" in high and "Journal" not in high
    ours = json.loads(model({"messages": [{"role": "system", "content": KEYWORD_PROMPT},
                                          {"role": "user", "content": f"Question: {q}"}]}))
    lr = json.loads(model({"messages": [{"role": "system", "content": f"---Role---\n{pf.LR_KEYWORDS}.\n"
                                                                      f"---Real Data---\nUser Query: {q}\n\n"
                                                                      "---Output---\nOutput:"}]}))
    assert ours["low_level"] == lr["low_level_keywords"] == low


def test_gold_titles_are_looked_for_in_the_answer_prompt_without_the_question(graph):
    model = pf.PeerModel([graph])
    q1 = "Who edits the Journal of Mathematical Physics?"
    q2 = "What did Carl Rogers found?"
    model({"messages": [{"role": "system", "content": pf.OURS_ANSWER + ". Context: Person-centered therapy ..."},
                        {"role": "user", "content": q2}]})
    model({"messages": [{"role": "system", "content": pf.OURS_ANSWER + ". Context: nothing useful"},
                        {"role": "user", "content": q1}]})
    questions = [{"question": q1, "gold_titles": ["Journal of Mathematical Physics"]},
                 {"question": q2, "gold_titles": ["Person-centered therapy", "Carl Rogers"]},
                 {"question": "never asked", "gold_titles": ["X"]}]
    share = gold_share(model, "ours", questions)
    # q1's title is only in the question; q2 has one of its two titles in the context
    words = sorted(len(p.split()) for _, p in model.answer_prompts)
    assert share == {"all_gold_titles": 0.0, "gold_titles_share": round(0.5 / 3, 2), "questions_without_prompt": 1,
                     "answer_prompt_words": sum(words) / 2}


def test_the_bow_embedding_is_deterministic_and_lexical():
    a, b, c = (pf.bow_embedding(t) for t in ("Jan Philip Solovej editor", "editor Jan Solovej", "tariffs on steel"))
    assert a == pf.bow_embedding("Jan Philip Solovej editor") and len(a) == pf.EMBED_DIM
    dot = lambda x, y: sum(i * j for i, j in zip(x, y))   # noqa: E731
    assert dot(a, b) > 0.5 > dot(a, c)


def test_the_corpus_holds_every_gold_passage_and_fills_from_their_neighbours():
    corpus = [{"id": f"p{i}"} for i in range(50)]
    questions = [{"gold_ids": ["p3", "p5"]}, {"gold_ids": ["p40"]}]
    ids = select_passages(corpus, questions, 9)
    # gold first, then round-robin: each question's nearest passage not yet taken (ties in dataset order)
    assert ids == ["p3", "p5", "p40", "p2", "p39", "p4", "p41", "p6", "p38"]


def _result(nano_delete: bool = False) -> dict:
    def fig(wall, calls):
        return {"wall_s": wall, "cpu_s": wall / 2, "calls": calls, "prompt_tokens": 10, "completion_tokens": 5,
                "by_kind": {"extract": calls}, "embedding_requests": 3, "unmatched_extractions": 0,
                "driver": {"entities": 7, "relations": 5}}
    query = {"query_median_s": 0.4, "all_gold_titles": 0.9, "gold_titles_share": 0.95}
    systems = {
        "ours": {"figures": {"index": fig(40.0, 400), "edit": fig(20.0, 2), "edit_runless": fig(15.0, 2),
                             "edit_api": fig(8.0, 2), "delete_api": fig(6.0, 0),
                             "delete": fig(18.0, 0), "edit_served": fig(3.0, 2), "delete_served": fig(2.0, 0),
                             "noop_served": fig(0.4, 0), "ask_served": fig(0.7, 2),
                             "ask_cold": fig(1.2, 2),
                             "query": dict(fig(1.0, 20), **query, by_kind={"answer": 20}),
                             "query_llm_keywords": dict(fig(1.0, 40), query_median_s=0.8, all_gold_titles=0.85)}},
        "lightrag": {"figures": {"index": fig(200.0, 430), "edit": dict(fig(10.0, 2), step_s=4.0),
                                 "delete": dict(fig(9.0, 0), step_s=1.0),
                                 "query": dict(fig(1.0, 40), **query, by_kind={"keywords": 20, "answer": 20})}},
        "nano": {"figures": {"index": fig(50.0, 800), "edit": dict(fig(18.0, 6), step_s=6.0),
                             "query": dict(fig(1.0, 20), **query, by_kind={"answer": 20})}},
    }
    from pathrag_lab.bench.report import machine_info
    return {"dataset": "musique-100", "questions": 20, "passages": 200, "scripted_entities": 900,
            "scripted_relations": 800, "delay_s": 0.05, "repeats": 3, "embedding_dim": 384,
            "modes": {"ours": "path", "lightrag": "hybrid", "nano": "local"},
            "packages": {"lightrag": ["lightrag-hku==1.5.7"], "nano": ["nano-graphrag==0.0.8.2"]},
            "systems": systems, "machine": machine_info(), "seconds": 100.0}


def test_the_section_has_the_table_the_ratios_and_the_unfairness(tmp_path):
    section = markdown_section(_result())
    assert section.startswith("## Peers\n")
    index_row = next(line for line in section.splitlines() if line.startswith("| full index, wall / CPU"))
    assert "| 0.20 | 0.80 |" in index_row          # ours / LightRAG 40/200, ours / nano 40/50
    delete_row = next(line for line in section.splitlines() if line.startswith("| delete one file"))
    assert "not supported" in delete_row and "| 2.00 | n/a |" in delete_row
    assert "`--runless` 15.00 s" in section and "keeps the old copy" in section
    # the Python API without Dagster (run_indexing) beside the peers' own new-process edit and delete
    api = next(line for line in section.splitlines() if line.startswith("| edit one file through the Python API"))
    assert "| 8.00 s / 4.00 s | 10.00 s / 5.00 s (delete + insert) |" in api and "| 0.80 | 0.44 |" in api, api
    api = next(line for line in section.splitlines() if line.startswith("| delete one file through the Python API"))
    assert "| 6.00 s / 3.00 s | 9.00 s / 4.50 s | not supported | 0.67 | n/a |" in api, api
    # in a running process: ours handed to `pathrag serve` (wall / CPU) against the peers' work alone
    running = next(line for line in section.splitlines() if line.startswith("| edit one file in a running process"))
    assert "3.00 s / 1.50 s" in running and "4.00 s (the work alone)" in running and "| 0.75 | 0.50 |" in running
    running = next(line for line in section.splitlines() if line.startswith("| delete one file in a running"))
    assert "| 2.00 | n/a |" in running and "not supported" in running
    assert next(line for line in section.splitlines() if "`pathrag ask` as a new process" in line).count("0.70 s") == 1
    cold = next(line for line in section.splitlines() if "no background service running" in line)
    assert "| 1.20 s / 0.60 s | n/a | n/a |" in cold, cold
    # after a command that started the background service: ours handed to it against the peers' new-process edit
    after = next(line for line in section.splitlines() if line.startswith("| edit one file, a new process after"))
    assert "| 3.00 s / 1.50 s | 10.00 s / 5.00 s (delete + insert) | 18.00 s / 9.00 s (keeps the old copy) | 0.30 | " \
           "0.17 |" in after
    after = next(line for line in section.splitlines() if line.startswith("| delete one file, a new process after"))
    assert "| 2.00 s / 1.00 s | 9.00 s / 4.50 s | not supported | 0.22 | n/a |" in after, after
    first = next(line for line in section.splitlines() if line.startswith("| the background service's first run"))
    assert "| n/a |" in first   # none measured in this result
    assert section.count("\n- **") >= 10
    # PathRAG's keyword call: ours with `keywords=llm` against LightRAG's hybrid query (0.8 / 0.4), two calls each
    two = next(line for line in section.splitlines() if line.startswith("| query with PathRAG's keyword call"))
    assert "| 0.80 s | 0.40 s | n/a (one call) |" in two and "| 2.00 |" in two
    titles = next(line for line in section.splitlines()
                  if line.startswith("| every gold passage title in the context, PathRAG's keyword call"))
    assert "| 0.85 |" in titles

    from pathrag_lab.bench.report_sections import read_section, splice

    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Scale\n\nold\n")
    splice(doc, "Peers", section)
    splice(doc, "Peers", section)
    assert doc.read_text().count("## Peers") == 1 and read_section(doc, "Scale") == "## Scale\n\nold"


# ---- the peers' own parsers (their side environments) --------------------------------------------------

def _side_python(peer: str):
    python = env_python(DEFAULT_ENVS, peer)
    if not python.exists():
        pytest.skip(f"no side environment at {python.parent.parent}: `pathrag bench peers` creates it")
    return python


def _run_side(peer: str, script: str, payload: str) -> dict:
    done = subprocess.run([str(_side_python(peer)), "-c", textwrap.dedent(script)], input=payload, text=True,
                          capture_output=True, timeout=120, cwd=DRIVERS)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_lightrag_s_own_parser_reads_the_scripted_reply(graph):
    script = """
        import asyncio, json, sys
        from lightrag.operate import _process_extraction_result
        nodes, edges = asyncio.run(_process_extraction_result(sys.stdin.read(), "chunk-1", 0, "f.txt"))
        print(json.dumps({"entities": sorted(nodes), "relations": sorted(map(list, edges))}))
    """
    names, pairs = set(), set()
    for part in graph.passes():
        got = _run_side("lightrag", script, pf.lightrag_format(part))
        names |= set(got["entities"])
        pairs |= {tuple(p) for p in got["relations"]}
    assert (names, pairs) == _whole(graph)


@pytest.mark.slow
def test_nano_graphrag_s_own_parser_reads_the_scripted_reply(graph):
    script = """
        import asyncio, json, re, sys
        from nano_graphrag._op import (_handle_single_entity_extraction, _handle_single_relationship_extraction,
                                       split_string_by_multi_markers)
        from nano_graphrag.prompt import PROMPTS
        reply = sys.stdin.read()
        records = split_string_by_multi_markers(reply, [PROMPTS["DEFAULT_RECORD_DELIMITER"],
                                                        PROMPTS["DEFAULT_COMPLETION_DELIMITER"]])
        entities, relations = [], []
        for record in records:
            found = re.search(r"\\((.*)\\)", record)
            if found is None:
                continue
            attrs = split_string_by_multi_markers(found.group(1), [PROMPTS["DEFAULT_TUPLE_DELIMITER"]])
            e = asyncio.run(_handle_single_entity_extraction(attrs, "chunk-1"))
            if e is not None:
                entities.append(e["entity_name"])
                continue
            r = asyncio.run(_handle_single_relationship_extraction(attrs, "chunk-1"))
            if r is not None:
                relations.append([r["src_id"], r["tgt_id"]])
        print(json.dumps({"entities": entities, "relations": relations}))
    """
    got = _run_side("nano", script, pf.nano_format(graph))
    names, pairs = _whole(graph)
    # nano-graphrag upper-cases names and keeps the double quotes its prompt's examples put around them
    assert set(got["entities"]) == {f'"{n.upper()}"' for n in names}
    assert {tuple(p) for p in got["relations"]} == {(f'"{s.upper()}"', f'"{t.upper()}"') for s, t in pairs}


def test_the_peer_drivers_run_with_our_commands_collector_policy():
    """Every child the benchmark starts gets our `pathrag` command's garbage-collector thresholds
    (``PEER_GC_THRESHOLDS``), and a peer driver applies them when it imports its common module, before the peer's
    own imports: no system's new-process figure gains from the policy alone."""
    import sys

    from pathrag_lab.bench.peers import _base_env
    from pathrag_pipeline.cli.gc_policy import THRESHOLDS

    env = _base_env()
    assert env["PEER_GC_THRESHOLDS"] == ",".join(map(str, THRESHOLDS))
    probe = "import gc, _peer_common; print(gc.get_threshold())"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                          cwd=DRIVERS)
    assert done.stdout.strip() == str(THRESHOLDS), done.stderr


def test_ours_is_byte_compiled_before_it_is_measured(tmp_path, monkeypatch):
    """Like the peers' pip-installed packages: with PYTHONDONTWRITEBYTECODE set, an editable checkout would be
    compiled again by every process the benchmark times."""
    import pathrag_pipeline.config as config
    from pathrag_lab.bench.peers import compile_ours

    for package in ("pathrag_pipeline", "assets"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "module.py").write_text("X = 1\n")
    monkeypatch.setattr(config, "PACKAGE_ROOT", tmp_path)
    compile_ours()
    for package in ("pathrag_pipeline", "assets"):
        assert list((tmp_path / package / "__pycache__").glob("module.*.pyc")), package


def test_the_python_api_step_indexes_without_importing_dagster(tmp_path):
    """The benchmark's "through the Python API, no Dagster run" rows time ``OURS_INDEX_API``: it must index the
    folder (documents and a graph in the home) and never import Dagster, or the row would not be what it says."""
    import os
    import sys

    from pathrag_lab.bench.peers import OURS_INDEX_API, _base_env
    from pathrag_pipeline.config import PACKAGE_ROOT

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.\n")
    (docs / "b.txt").write_text("Charles Babbage designed the Difference Engine.\n")
    probe = OURS_INDEX_API + "\nprint('DAGSTER', sorted(m for m in sys.modules if m.split('.')[0] == 'dagster'))\n"
    env = dict(_base_env(), PYTHONPATH=str(PACKAGE_ROOT), PATHRAG_HOME=str(tmp_path / "home"),
               PATHRAG_DOCS=str(docs), PATHRAG_AUTO_SERVE="never")
    done = subprocess.run([sys.executable, "-c", probe, str(docs)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=PACKAGE_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "DAGSTER []" in done.stdout, done.stdout
    import duckdb

    with duckdb.connect(str(tmp_path / "home" / "pathrag.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM documents WHERE status = 'indexed'").fetchone()[0] == 2
        assert con.execute("SELECT count(*) FROM entities").fetchone()[0] > 0
    assert not os.path.exists(tmp_path / "home" / "dagster" / "history")
