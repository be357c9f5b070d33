"""Ask a folder's questions of one home, in a process of its own: the answering half of ``bench real-folders``.

Run as a script (``python real_folder_probe.py HOME DOCS QUESTIONS MODES OUT``) with ``PYTHONPATH`` naming the code
to measure, this checkout's or an older revision's (``--baseline``), so it uses only what every revision has:
``Settings.from_env`` and ``PathRAG.query``. Writes ``{"answers": {mode: [answer text, ...]}, "seconds": {mode: s}}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(home: str, docs: str, questions: str, modes: str, out: str) -> None:
    from pathrag_pipeline.config import Settings
    from pathrag_pipeline.query.engine import PathRAG

    rows = [json.loads(line) for line in Path(questions).read_text(encoding="utf-8").splitlines() if line.strip()]
    rag = PathRAG(Settings.from_env(env={}, home=Path(home), docs=Path(docs)), record=False)
    answers: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    for mode in modes.split(","):
        started = time.perf_counter()
        answers[mode] = [rag.query(row["question"], mode=mode).answer for row in rows]
        seconds[mode] = round(time.perf_counter() - started, 2)
    Path(out).write_text(json.dumps({"answers": answers, "seconds": seconds}), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:6])
