"""`pathrag bench startup`: wall and CPU time of a whole CLI invocation, as a user waits for it.

Each command runs as a fresh process (``python -c "from pathrag_pipeline.cli import main; main()"``) against
a home holding the sample corpus indexed offline, ``repeats`` times after one unmeasured warm-up run (which
also compiles bytecode); medians are reported. CPU is user + system time of the child process, which is
what import cost shows as on a busy machine where wall time is noisy.

``quickstart (fresh home)`` runs the README's first command in a home removed before every run (the warm-up
included), ``quickstart (second run)`` the same command again in a home it already built. The fresh row also
says where its time goes (``parts``): the stage times its own index report prints, and the rest of the process
(imports before the run, the showcase answer).

``index (one file changed)`` and ``index --runless (one file changed)`` run against their own home and a copy
of the sample, appending a sentence to one file before every run (warm-up included): each is a real index of
a small change, recorded as an `index_folder` run, or as runless materialisations. The no-op rows find
nothing to do (the current code answers them without Dagster).

``baseline`` (a git revision of this repository) measures that revision's code the same way in the same
run: it is checked out into a temporary git worktree and put first on ``PYTHONPATH``, with this
environment's installed libraries, so both sides differ only in the project's own code.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pathrag_pipeline.config import PACKAGE_ROOT, SAMPLE_DOCS, Settings

SAMPLE_QUESTION = "Who founded the Pellingham Institute of Hydrology?"
COMMANDS: dict[str, list[str]] = {
    "--version": ["--version"],
    "--help": ["--help"],
    'sql "SELECT 1"': ["sql", "SELECT 1"],
    "status": ["status"],
    "ask": ["ask", SAMPLE_QUESTION],
    "index (no-op)": ["index", str(SAMPLE_DOCS)],   # re-index of the unchanged sample: no run needed
    "index --runless (no-op)": ["index", "--runless", str(SAMPLE_DOCS)],
}
CHANGED = "index (one file changed)"   # a recorded Dagster run of a one-sentence edit (see the module docstring)
CHANGED_RUNLESS = "index --runless (one file changed)"   # the same edit, stages run without Dagster, then recorded
EDITED_FILE = "varne_valley_geography.md"
QUICKSTART_FRESH = "quickstart (fresh home)"     # what the README's first command runs after the install
QUICKSTART_AGAIN = "quickstart (second run)"     # the same home again: nothing to index, the showcase answered
LAUNCH = "import sys; from pathrag_pipeline.cli import main; sys.exit(main())"
# the index report's last line: "time: 4.7 s in all (ingest 1.0 s, graph 0.6 s, embeddings 1.8 s, the run around
# them 1.4 s)" (cli/indexing.py)
TIME_LINE = re.compile(r"^time: ([\d.]+) s in all \((.*)\)$", re.M)
PART = re.compile(r"([a-z][a-z ]*?) ([\d.]+) s")


def report_parts(stdout: str) -> dict[str, float]:
    """The index run's stage times from the report a command printed (``TIME_LINE``); {} when it printed none."""
    found = TIME_LINE.search(stdout)
    if found is None:
        return {}
    parts = {"index run": float(found.group(1))}
    parts.update((name.strip(), float(value)) for name, value in PART.findall(found.group(2)))
    return parts


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(args: list[str], *, code_root: Path, env: dict[str, str], repeats: int,
                 before: Callable[[], None] | None = None) -> dict[str, Any]:
    """Median wall and CPU seconds of ``pathrag ARGS`` run from ``code_root``; the first run is a warm-up.
    ``before`` (untimed) runs before every run, e.g. to edit the folder."""
    env = dict(env, PYTHONPATH=str(code_root))
    walls: list[float] = []
    cpus: list[float] = []
    parts: list[dict[str, float]] = []
    for i in range(repeats + 1):
        if before is not None:
            before()
        cpu0, t0 = _children_cpu(), time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", LAUNCH, *args], cwd=code_root, env=env,
                              capture_output=True, text=True, timeout=600)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        if proc.returncode != 0:
            raise RuntimeError(f"`pathrag {' '.join(args)}` from {code_root} exited {proc.returncode}: "
                               f"{proc.stderr.strip()[-500:]}")
        if i:
            walls.append(wall)
            cpus.append(cpu)
            found = report_parts(proc.stdout)
            if found:
                parts.append(dict(found, **{"the process around it": max(0.0, wall - found["index run"])}))
    figures = {"wall_s": round(statistics.median(walls), 3), "cpu_s": round(statistics.median(cpus), 3),
               "runs": repeats}
    if parts and len(parts) == len(walls):   # where an indexing command's wall time went, median of each part
        figures["parts"] = {name: round(statistics.median(p[name] for p in parts), 2)
                            for name in parts[0] if all(name in p for p in parts)}
    return figures


def _worktree(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(PACKAGE_ROOT), "worktree", "add", "--detach", str(where), rev],
                   check=True, capture_output=True, text=True)
    return where


def _remove_worktree(where: Path) -> None:
    subprocess.run(["git", "-C", str(PACKAGE_ROOT), "worktree", "remove", "--force", str(where)],
                   capture_output=True, text=True)


def run_startup_bench(repeats: int = 5, baseline: str | None = None, workdir: Path | None = None,
                      log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Returns ``{"repeats", "baseline", "rows": [{"command", "wall_s", "cpu_s", "baseline_wall_s", ...}]}``."""
    from pathrag_pipeline.index.pipeline import run_indexing

    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-startup-"))
    home = base / "home"
    log("startup: indexing the sample corpus offline")
    edited_docs, edited_home = base / "edited-docs", base / "edited-home"
    shutil.copytree(SAMPLE_DOCS, edited_docs)
    for where, docs in ((home, SAMPLE_DOCS), (edited_home, edited_docs)):
        run_indexing(Settings.from_env(env={}, home=where, docs=docs), folder=docs, trigger="bench")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATHRAG_", "OPENAI_"))}
    env.update(PATHRAG_HOME=str(home), PATHRAG_DOCS=str(SAMPLE_DOCS))
    edits = iter(range(1, 10_000))

    def edit() -> None:
        with open(edited_docs / EDITED_FILE, "a", encoding="utf-8") as fh:
            fh.write(f"\nThe survey of the river was repeated, time {next(edits)}.\n")

    cases = {name: (args, env, None) for name, args in COMMANDS.items()}
    edited_env = dict(env, PATHRAG_HOME=str(edited_home), PATHRAG_DOCS=str(edited_docs))
    cases[CHANGED] = (["index", str(edited_docs)], edited_env, edit)
    cases[CHANGED_RUNLESS] = (["index", "--runless", str(edited_docs)], edited_env, edit)
    # the README's first command after its install: a fresh home every run, then the same command again on it
    fresh_home, again_home = base / "quickstart-fresh", base / "quickstart-again"
    quick_env = {k: v for k, v in env.items() if k not in ("PATHRAG_HOME", "PATHRAG_DOCS")}
    cases[QUICKSTART_FRESH] = (["quickstart"], dict(quick_env, PATHRAG_HOME=str(fresh_home)),
                               lambda: shutil.rmtree(fresh_home, ignore_errors=True))
    cases[QUICKSTART_AGAIN] = (["quickstart"], dict(quick_env, PATHRAG_HOME=str(again_home)), None)
    roots = {"current": PACKAGE_ROOT}
    tree = None
    if baseline:
        tree = _worktree(baseline, base / "baseline")
        roots["baseline"] = tree
    rows = []
    try:
        for name, (args, case_env, before) in cases.items():
            row: dict[str, Any] = {"command": f"pathrag {name}"}
            for side, root in roots.items():
                log(f"startup: {side} pathrag {name}")
                prefix = "" if side == "current" else "baseline_"
                try:
                    figures = time_command(args, code_root=root, env=case_env, repeats=repeats, before=before)
                except RuntimeError:
                    if side == "current":
                        raise
                    figures = {"wall_s": None, "cpu_s": None}   # the baseline has no such command or option
                row[prefix + "wall_s"], row[prefix + "cpu_s"] = figures["wall_s"], figures["cpu_s"]
                if side == "current" and name == QUICKSTART_FRESH and figures.get("parts"):
                    row["parts"] = figures["parts"]
            if baseline:
                row["cpu_ratio"] = (round(row["baseline_cpu_s"] / row["cpu_s"], 1)
                                    if row["cpu_s"] and row["baseline_cpu_s"] else None)
            rows.append(row)
    finally:
        if tree is not None:
            _remove_worktree(tree)
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    return {"repeats": repeats, "baseline": baseline, "rows": rows}
