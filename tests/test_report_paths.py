"""Reproduce lines name paths relative to the repository, never a machine's absolute path (issue 20, item 6)."""

from __future__ import annotations

import re

import pytest

from pathrag_lab.bench.neuropath import command_of
from pathrag_lab.bench.report import QUICK, musique_section
from pathrag_lab.bench.report_sections import repo_path
from pathrag_pipeline.config import PACKAGE_ROOT

MUSIQUE_BESIDE = PACKAGE_ROOT.parent / "shared" / "bench" / "musique-100"


def test_repo_path_is_relative_to_the_checkout():
    assert repo_path(MUSIQUE_BESIDE) == "../shared/bench/musique-100"
    assert repo_path(PACKAGE_ROOT / "docs" / "benchmarks.md") == "docs/benchmarks.md"
    assert repo_path("data/sample") == "data/sample"


def test_section_commands_name_the_dataset_relative_to_the_repository():
    from dataclasses import replace

    assert command_of(MUSIQUE_BESIDE, True, "", ["path"], None) == \
        "pathrag eval retrieval --dataset ../shared/bench/musique-100 --use-triples --modes path"
    result = {"passages": 1, "chunks": 1, "triples": 1, "matched_documents": 1, "malformed_lines": 0, "entities": 1,
              "relations": 1, "seconds": {"total": 1.0}, "unchanged_rerun_s": 0.5}
    text = musique_section(result, replace(QUICK, musique=MUSIQUE_BESIDE))
    assert "--triples ../shared/bench/musique-100/triples.jsonl" in text and str(PACKAGE_ROOT.parent) not in text


def test_published_reproduce_lines_use_relative_paths():
    for doc in (PACKAGE_ROOT / "docs" / "benchmarks.md", PACKAGE_ROOT / "README.md"):
        for line in doc.read_text(encoding="utf-8").splitlines():
            if "Reproduce" in line or "pathrag eval retrieval" in line:
                assert not re.search(r"(?:^|[\s=`])/(?:work|home|tmp|Users)/", line), line


def test_offline_sections_label_neuropath_rows_as_the_heuristic_tracker():
    """Issue 24: a NeuroPath row measured without an LLM says its tracker is a heuristic, in every table."""
    from pathrag_lab.bench.report import offline_label

    assert offline_label("neuropath") == "neuropath (heuristic tracker)"
    assert offline_label("neuropath:ours") == "neuropath:ours (heuristic tracker)"
    assert offline_label("path") == "path" and offline_label("bm25+dense") == "bm25+dense"


@pytest.mark.e2e   # a benchmark writing its docs section (lab): run by .ci/run (pytest -m e2e)
def test_bench_query_replaces_its_own_section_and_key_figure(tmp_path):
    from click.testing import CliRunner

    from pathrag_lab.cli import bench

    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Key figures\n\n- Offline `path` query on the sample corpus: median 1 ms end "
                    "to end.\n\n## Query latency per stage (sample corpus, offline)\n\nold\n\n## Other\n\nkept\n")
    out = CliRunner().invoke(bench, ["query", "--rounds", "1", "--update-docs", str(docs)])
    assert out.exit_code == 0, out.output
    text = docs.read_text()
    assert "\nold\n" not in text and "## Other\n\nkept" in text and "median 1 ms" not in text
    assert "| neuropath (heuristic tracker) |" in text and "_Measured " in text
