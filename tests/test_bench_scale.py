"""`pathrag bench scale`: the generated corpus and the report section (the measured run itself is slow)."""

from __future__ import annotations

import pytest

from pathrag_lab.bench.report import scale_section
from pathrag_lab.bench.scale import generate_big_jsonl, generate_scale_corpus, memory_growth, run_scale_bench


def test_corpus_reaches_its_size_and_is_deterministic(tmp_path):
    a = generate_scale_corpus(tmp_path / "a", 0.5, 40)
    b = generate_scale_corpus(tmp_path / "b", 0.5, 40)
    assert a == b and a["files"] == 40 and a["bytes"] >= 0.5 * 1_000_000 * 0.99
    assert sorted(p.read_text() for p in (tmp_path / "a").rglob("*.*")) == \
        sorted(p.read_text() for p in (tmp_path / "b").rglob("*.*"))
    assert generate_big_jsonl(tmp_path / "r.jsonl", 50) == (tmp_path / "r.jsonl").stat().st_size
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 50


def _entry(mb, rss, seconds):
    return {"size_mb": mb, "files": 10, "full": {"peak_rss_mib": rss, "seconds": {"total": seconds}}}


def test_memory_growth_is_the_line_through_two_sizes():
    growth = memory_growth([_entry(10, 1100, 50), _entry(50, 1500, 250)])
    assert growth["mib_per_mb"] == 10 and growth["base_mib"] == 1000 and growth["predicted_1gb_mib"] == 11000
    assert memory_growth([_entry(10, 1100, 50)]) is None


def test_memory_growth_is_read_between_the_two_largest_sizes():
    """With a third, larger build (--memory-mb) the slope is the upper range's: memory held by bounded batches
    stops growing once the corpus fills them, which a line from the smallest size would hide."""
    growth = memory_growth([_entry(300, 2100, 900), _entry(25, 1000, 60), _entry(100, 2000, 300)])
    assert (growth["from_mb"], growth["to_mb"]) == (100, 300)
    assert growth["mib_per_mb"] == 0.5 and growth["base_mib"] == 1950


@pytest.mark.slow
def test_a_third_size_is_built_for_the_memory_growth_and_not_edited(tmp_path):
    result = run_scale_bench(size_mb=0.2, files=10, small_fraction=0.5, parts="corpus", workdir=tmp_path,
                             memory_mb=0.4, edits=2)
    assert [round(s["size_mb"], 1) for s in result["sizes"]] == [0.1, 0.2, 0.4]
    assert [s["files"] for s in result["sizes"]] == [5, 10, 20]
    assert len(result["sizes"][1]["edits"]) == 2 and "edits" not in result["sizes"][2]
    # each edit says how many of its write connections merged DuckDB row groups (one in 64 does)
    assert all(isinstance(e["row_group_merges"], int) for e in result["sizes"][1]["edits"])
    assert "2 files of the 0.2 MB corpus edited" in scale_section(result)
    asks = result["sizes"][1]["asks"]                 # new `pathrag ask` processes: after the build, again, after an edit
    assert set(asks) == {"first", "next", "after_edit"} and all(a["wall_s"] > 0 for a in asks.values())
    assert "A new `pathrag ask` process on the" in scale_section(result)
    assert (result["growth"]["from_mb"], result["growth"]["to_mb"]) == (result["sizes"][1]["size_mb"],
                                                                        result["sizes"][2]["size_mb"])
    assert "--memory-mb 0.4" in scale_section(result)
    with pytest.raises(ValueError, match="memory_mb"):
        run_scale_bench(size_mb=0.2, files=10, parts="corpus", workdir=tmp_path, memory_mb=0.1)


@pytest.mark.slow
def test_small_scale_run_and_its_section(tmp_path):
    result = run_scale_bench(size_mb=0.4, files=40, big_txt_mb=0.3, jsonl_lines=300, workdir=tmp_path)
    section = scale_section(result)
    assert section.startswith("## Scale") and "peak RSS MiB" in section and "failed" not in section
    assert result["growth"] is not None and result["sizes"][-1]["edit"]["chunks_extracted"] >= 1


@pytest.mark.slow
def test_a_kept_workdir_is_built_again_from_scratch(tmp_path):
    """A workdir an earlier ``--keep`` run left (homes and edited corpora) must not turn the full build into a
    re-merge of the old home: the full build extracts every chunk again."""
    first = run_scale_bench(size_mb=0.2, files=10, parts="corpus", workdir=tmp_path, keep=True)
    again = run_scale_bench(size_mb=0.2, files=10, parts="corpus", workdir=tmp_path, keep=True)
    for a, b in zip(first["sizes"], again["sizes"]):
        assert b["full"]["chunks_extracted"] == a["full"]["chunks_extracted"] > 0


def test_the_section_says_which_parts_ran():
    corpus = scale_section({"size_mb": 100, "files": 10, "memory_mb": 300, "parts": "corpus", "sizes": []})
    assert "--memory-mb 300 --parts corpus" in corpus and "JSONL" not in corpus and "300 MB built" in corpus
    files = scale_section({"size_mb": 100, "files": 10, "parts": "files", "sizes": []})
    assert "--parts files" in files and "One large .txt file" in files and "two sizes" not in files
    whole = scale_section({"size_mb": 100, "files": 10, "sizes": []})
    assert "--parts" not in whole and "two sizes" in whole and "JSONL" in whole


def test_the_section_says_which_edits_merged_row_groups():
    def edit(total, merges):
        return {"file": "a.txt", "seconds": {"ingest": 0, "extraction": 0, "merge": 0, "embeddings": 0, "total": total},
                "graph": {}, "row_group_merges": merges}

    def section(edits):
        size = {"size_mb": 100, "files": 10, "full": {"error": "x"}, "edits": edits}
        return scale_section({"size_mb": 100, "files": 10, "parts": "corpus", "sizes": [size]})

    both = section([edit(2.0, 0), edit(3.5, 1), edit(2.2, 0)])
    assert "median **2.20 s**" in both and "1 of them merged DuckDB row groups" in both and ": 3.50 s;" in both
    assert "None of them merged" in section([edit(2.0, 0)])
    old = edit(2.0, 0)
    del old["row_group_merges"]   # results of a run from before the count: no claim either way
    assert "merged DuckDB" not in section([old])


def test_the_one_process_build_is_of_the_main_size_in_a_home_of_its_own(tmp_path, monkeypatch):
    """Issue 23 sets the build time at --size-mb and asks for the speedup over one process: the one-process build
    is of that corpus, and the edits run on the home the workers built."""
    from pathrag_lab.bench import scale

    calls = []

    def fake_measure(home, folder, timeout_s=0, processes=0):
        calls.append((home.name, folder.name, processes))
        seconds = {s: 1.0 for s in ("ingest", "extraction", "merge", "embeddings", "total")}
        return {"seconds": seconds, "peak_rss_mib": 1.0, "extract_processes": processes or 2,
                "graph": {"entities": 1, "relations": 1}, "chunks_written": 1}

    monkeypatch.setattr(scale, "measure_index", fake_measure)
    result = run_scale_bench(size_mb=0.2, files=10, small_fraction=0.5, parts="corpus", workdir=tmp_path, edits=1)
    assert calls == [("home-0.1MB", "corpus-0.1MB", 0), ("home-0.2MB", "corpus-0.2MB", 0),
                     ("home-0.2MB-one-process", "corpus-0.2MB", 1), ("home-0.2MB", "corpus-0.2MB", 0)]
    assert "one_process" in result["sizes"][1] and "one_process" not in result["sizes"][0]
    assert "the 0.2 MB one also with its offline extraction and embedding in one process" in scale_section(result)
    assert f"Both cores ({result['sizes'][1]['size_mb']} MB)" in scale_section(result)
