"""Entity precision against hand labels (``pathrag bench extractor``)."""
from pathlib import Path

import pytest

from pathrag_lab.bench import entity_precision
from pathrag_lab.bench.entity_precision import LabelError, load_labels, measure, wilson


def _folder(tmp_path: Path, labels: str) -> Path:
    (tmp_path / "heldout").mkdir(exist_ok=True)
    (tmp_path / "heldout" / "note.md").write_text(
        "# Notes\n\nAda Halden founded Valmere University in Port Aster.\n", encoding="utf-8")
    (tmp_path / "heldout" / "empty.md").write_text("")   # a file the pipeline refuses: skipped, not a crash
    (tmp_path / "README.md").write_text("Zebedee Quill is not read: top-level files describe the folder.\n")
    (tmp_path / "entities.tsv").write_text(labels, encoding="utf-8")
    return tmp_path


def test_precision_counts_labels_and_lists_what_is_not_labelled(tmp_path):
    found = entity_precision.extracted_entities(_folder(tmp_path, ""))
    names = {name: typ for (_, name), typ in found.items()}
    assert "Ada Halden" in names and "Valmere University" in names and "Zebedee Quill" not in names
    labels = "# comment\n" + "".join(
        f"heldout/note.md\t{name}\t{'-' if name != 'Ada Halden' else 'person'}\n"
        for name in names if name != "Valmere University")
    r = measure(_folder(tmp_path, labels))
    part = r["splits"]["heldout"]
    assert part["entities"] == len(names) and part["unlabelled"] == 1 and part["labelled"] == len(names) - 1
    assert part["name_precision"] == round(1 / (len(names) - 1), 4)
    typed_ok = names["Ada Halden"] == "person"
    assert part["typed_precision"] == (part["name_precision"] if typed_ok else 0.0)
    assert r["unlabelled_names"] == [["heldout/note.md", "Valmere University", names["Valmere University"]]]
    assert r["formats"]["md"]["entities"] == len(names)


def test_a_malformed_label_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "entities.tsv"
    path.write_text("a.md\tName\tperson\nbroken line\n", encoding="utf-8")
    with pytest.raises(LabelError, match=r"entities.tsv:2"):
        load_labels(path)


def test_wilson_interval_brackets_the_proportion_and_narrows_with_n():
    lo, hi = wilson(5, 10)
    assert lo < 0.5 < hi
    lo2, hi2 = wilson(50, 100)
    assert lo < lo2 < 0.5 < hi2 < hi
    assert wilson(0, 0) == (0.0, 0.0)


def test_the_bundled_labels_cover_every_name_the_extractor_finds():
    """The published figure needs every name labelled; a rule change that adds names must add labels too."""
    r = measure()
    assert r["unlabelled_names"] == []
    assert set(r["splits"]) == {"dev", "heldout"} and set(r["formats"]) == {"html", "md", "rst"}


def test_bench_extractor_publishes_the_precision_section(tmp_path):
    from click.testing import CliRunner

    from pathrag_pipeline.cli.main import main as cli

    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## Offline extractor rules\n\nold\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["bench", "extractor", "--dataset", str(tmp_path / "none"),
                                      "--update-docs", str(report)])
    assert result.exit_code == 0, result.output
    text = report.read_text(encoding="utf-8")
    assert text.index("## Entity precision on real documentation") < text.index("## Offline extractor rules")
    held = measure()["splits"]["heldout"]
    assert f"| heldout | {held['entities']} | {held['labelled']} | {held['name_precision']} |" in text
    assert "old" in text   # no dataset: the LLM-list section is left as it was
