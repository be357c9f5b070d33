"""`pathrag bench dagster`: what running the pipeline through Dagster costs and how the sensor scales.

Measured (medians of ``repeats`` unless said otherwise):

- sensor latency: a new file (a copy of a sample document under a new name) is dropped into a folder
  holding the indexed sample corpus; the sensor is evaluated against a persistent instance and the one
  run it requests is executed (in-process executor) until the file's chunks are in `chunks` and its
  entities in `entities`. Wall time from the write to the rows. The daemon's tick interval (30 s at most
  between ticks) and the run launcher's process start-up (next item) come on top when the daemon runs it.
- run start-up: `dagster job execute` of `index_folder` on the unchanged sample folder in a fresh process,
  from spawning the process to the run's first STEP_START event (what every launched run pays), and
  RUN_START to STEP_START inside the run (what the in-process executor adds).
- CLI cost: `index_folder` through Dagster (as `pathrag index` runs it) against `run_indexing` without
  Dagster, on the unchanged sample folder, in this process; and `import assets.runs` in a fresh process.
- asks in the catalog: asks made outside Dagster (the Python API here, as `pathrag ask` and `serve` make them)
  write only their rows; the sensor's tick (and `pathrag dev`'s start) reports them to the asset catalog as one
  runless materialisation per query table for all the asks since the last report. Measured: one ask offline in
  this process, then one report after 1 and after 100 asks (reading the log's growth and recording the three
  events), and one with nothing new; per ask, the 100-ask report divided by 100.
- sensor at scale: tick time with ``files`` small files in the folder (first tick, then an unchanged
  tick), runs requested for 1,000 new files, and for comparison the per-file dynamic partitions the
  sensor used to maintain: adding ``files`` partition keys and reading them back.

Dagster and the assets are imported inside the functions (the CLI's `bench --help` stays light).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from pathrag_pipeline.config import PACKAGE_ROOT, SAMPLE_DOCS, Settings

Log = Callable[[str], None]


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def _settings(home: Path, docs: Path) -> Settings:
    return Settings.from_env(env={"PATHRAG_HOME": str(home), "PATHRAG_DOCS": str(docs)})


def sensor_latency(base: Path, repeats: int, log: Log) -> dict[str, Any]:
    import dagster as dg

    from assets.automation import document_folder_sensor
    from assets.resources import PathragResource, RunReports
    from assets.runs import index_folder, instance_for
    from assets.definitions import defs
    from pathrag_pipeline.storage.store import Store

    docs, home = base / "docs", base / "home"
    shutil.copytree(SAMPLE_DOCS, docs)
    settings = _settings(home, docs)
    index_folder(settings, trigger="bench")
    instance = instance_for(settings)
    resources = {"pathrag": PathragResource(home=str(home), docs=str(docs)), "reports": RunReports(keep=False)}
    job = defs.resolve_job_def("index_folder")
    files_before = len(list(docs.iterdir()))
    cursor = document_folder_sensor(dg.build_sensor_context(instance=instance, resources=resources)).cursor
    source = (SAMPLE_DOCS / "pellingham_institute_of_hydrology.md").read_text()
    walls, ticks, runs_requested = [], [], []
    try:
        for i in range(repeats):
            name = f"dropped_{i}.md"
            t0 = time.perf_counter()
            (docs / name).write_text(source.replace("Pellingham", f"Pellingham{i}"))
            ctx = dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor)
            result = document_folder_sensor(ctx)
            ticks.append(time.perf_counter() - t0)
            cursor = result.cursor
            runs_requested.append(len(result.run_requests))
            for request in result.run_requests:
                job.execute_in_process(instance=instance, tags=request.tags, resources=resources,
                                       run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}})
            with Store(settings.duckdb_path).connect(read_only=True) as con:
                chunks = con.execute("SELECT count(*) FROM chunks WHERE document_id = ?", [name]).fetchone()[0]
                entities = con.execute("SELECT count(*) FROM entities WHERE list_contains(document_ids, ?)",
                                       [name]).fetchone()[0]
            walls.append(time.perf_counter() - t0)
            if not (chunks and entities):
                raise RuntimeError(f"{name}: no chunks or entities after the sensor's run")
            log(f"sensor latency {i + 1}/{repeats}: {walls[-1]:.2f} s")
    finally:
        instance.dispose()
    return {"files_in_folder": files_before, "drop_to_tables_s": _median(walls),
            "tick_s": _median(ticks), "runs_per_drop": max(runs_requested)}


def run_startup(base: Path, repeats: int, log: Log) -> dict[str, Any]:
    import dagster as dg

    from assets.runs import index_folder, instance_for

    docs, home = base / "docs", base / "home"
    shutil.copytree(SAMPLE_DOCS, docs)
    settings = _settings(home, docs)
    index_folder(settings, trigger="bench")
    env = dict(os.environ, DAGSTER_HOME=str(settings.dagster_home), PATHRAG_HOME=str(home), PATHRAG_DOCS=str(docs))
    dagster_cli = str(Path(sys.executable).parent / "dagster")
    to_first_step, in_run = [], []
    for i in range(repeats):
        t0 = time.time()
        proc = subprocess.run([dagster_cli, "job", "execute", "-m", "assets.definitions", "-j", "index_folder"],
                              cwd=PACKAGE_ROOT, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"dagster job execute failed: {proc.stderr[-500:]}")
        instance = instance_for(settings)
        try:
            run = instance.get_runs(limit=1)[0]
            events: dict[str, float] = {}
            for e in instance.all_logs(run.run_id):
                if e.dagster_event is None:
                    continue
                kind = e.dagster_event.event_type
                for name, wanted in (("RUN_START", dg.DagsterEventType.RUN_START),
                                     ("STEP_START", dg.DagsterEventType.STEP_START)):
                    if kind == wanted and name not in events:
                        events[name] = e.timestamp
        finally:
            instance.dispose()
        to_first_step.append(events["STEP_START"] - t0)
        in_run.append(events["STEP_START"] - events["RUN_START"])
        log(f"run start-up {i + 1}/{repeats}: {to_first_step[-1]:.2f} s to the first step")
    return {"executor": "in_process", "process_to_first_step_s": _median(to_first_step),
            "run_start_to_first_step_s": _median(in_run)}


def cli_cost(base: Path, repeats: int, log: Log) -> dict[str, Any]:
    from assets.runs import index_folder
    from pathrag_pipeline.index.pipeline import run_indexing

    docs, home = base / "docs", base / "home"
    shutil.copytree(SAMPLE_DOCS, docs)
    settings = _settings(home, docs)
    t0 = time.perf_counter()
    index_folder(settings, trigger="bench")
    first_dagster = time.perf_counter() - t0
    plain_home = base / "plain"
    t0 = time.perf_counter()
    run_indexing(replace(settings, home=plain_home), trigger="bench")
    first_plain = time.perf_counter() - t0
    with_dagster, without = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        index_folder(settings, trigger="bench")
        with_dagster.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        run_indexing(replace(settings, home=plain_home), trigger="bench")
        without.append(time.perf_counter() - t0)
    imports = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import assets.runs"], cwd=PACKAGE_ROOT, check=True, timeout=300)
        imports.append(time.perf_counter() - t0)
    log("CLI cost measured")
    return {"full_build_dagster_s": round(first_dagster, 3), "full_build_plain_s": round(first_plain, 3),
            "unchanged_dagster_s": _median(with_dagster), "unchanged_plain_s": _median(without),
            "import_assets_runs_s": _median(imports)}


def asks_in_catalog(base: Path, repeats: int, log: Log) -> dict[str, Any]:
    from assets.automation import asks_outside_runs
    from assets.runs import instance_for
    from pathrag_pipeline.index.pipeline import run_indexing
    from pathrag_pipeline.query.engine import PathRAG
    from pathrag_pipeline.storage.store import Store

    settings = _settings(base / "home", SAMPLE_DOCS)
    run_indexing(settings, folder=SAMPLE_DOCS, trigger="bench")
    rag = PathRAG(settings)
    store = Store(settings.duckdb_path)
    questions = ["Who founded the Pellingham Institute of Hydrology?", "Where was Agnes Morrow born?",
                 "Which river flows through Corran Ford?"]
    instance = instance_for(settings)

    def report() -> tuple[float, int]:
        t0 = time.perf_counter()
        events = asks_outside_runs(instance, store, "bench")
        for event in events:
            instance.report_runless_asset_event(event)
        return time.perf_counter() - t0, len(events)

    try:
        report()   # the catalog starts level with the log
        asks, after_one, after_many, nothing = [], [], [], []
        for i in range(repeats):
            t0 = time.perf_counter()
            rag.query(questions[i % len(questions)])
            asks.append(time.perf_counter() - t0)
            seconds, events = report()
            assert events == 3, events
            after_one.append(seconds)
            for j in range(100):
                rag.query(questions[j % len(questions)])
            seconds, events = report()
            assert events == 3, events
            after_many.append(seconds)
            seconds, events = report()
            assert events == 0, events
            nothing.append(seconds)
    finally:
        instance.dispose()
    log("catalog reports of asks measured")
    return {"ask_s": _median(asks), "report_after_1_s": _median(after_one), "report_after_100_s": _median(after_many),
            "report_nothing_new_s": _median(nothing), "per_ask_ms": round(_median(after_many) * 1000 / 100, 2)}


def sensor_scale(base: Path, n_files: int, new_files: int, log: Log) -> dict[str, Any]:
    import dagster as dg

    from assets.automation import document_folder_sensor
    from assets.resources import PathragResource

    docs = base / "docs"
    for i in range(n_files):
        sub = docs / f"part{i // 1000:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"doc{i:05d}.txt").write_text(f"Document {i}.\n\nPerson{i} Halden founded Institute{i % 97}.\n")
    log(f"{n_files} files written")
    resources = {"pathrag": PathragResource(home=str(base / "home"), docs=str(docs))}
    (base / "dagster").mkdir()
    with dg.DagsterInstance.from_config(str(base / "dagster")) as instance:
        t0 = time.perf_counter()
        first = document_folder_sensor(dg.build_sensor_context(instance=instance, resources=resources))
        first_tick = time.perf_counter() - t0
        t0 = time.perf_counter()
        same = document_folder_sensor(dg.build_sensor_context(instance=instance, resources=resources,
                                                              cursor=first.cursor))
        unchanged_tick = time.perf_counter() - t0
        extra = docs / "new"
        extra.mkdir()
        for i in range(new_files):
            (extra / f"new{i:05d}.txt").write_text(f"New document {i} about Institute{i}.\n")
        t0 = time.perf_counter()
        burst = document_folder_sensor(dg.build_sensor_context(instance=instance, resources=resources,
                                                               cursor=first.cursor))
        burst_tick = time.perf_counter() - t0
        log("sensor ticks measured; now the per-file partitions for comparison")
        keys = [f"part{i // 1000:02d}/doc{i:05d}.txt" for i in range(n_files)]
        t0 = time.perf_counter()
        instance.add_dynamic_partitions("documents_bench", keys)
        add_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = instance.get_dynamic_partitions("documents_bench")
        get_s = time.perf_counter() - t0
        assert len(got) == n_files
    return {"files": n_files, "first_tick_s": round(first_tick, 3), "unchanged_tick_s": round(unchanged_tick, 3),
            "runs_first_tick": len(first.run_requests), "runs_unchanged_tick": len(same.run_requests or []),
            "new_files": new_files, "runs_for_new_files": len(burst.run_requests), "tick_with_new_files_s":
            round(burst_tick, 3), "cursor_bytes": len(first.cursor or ""),
            "partitions_add_s": round(add_s, 3), "partitions_get_s": round(get_s, 3),
            "old_design_runs_for_new_files": new_files + 1}


def run_dagster_bench(*, repeats: int = 3, files: int = 10_000, new_files: int = 1000,
                      workdir: Path | None = None, log: Log = lambda _: None) -> dict[str, Any]:
    base = Path(workdir or tempfile.mkdtemp(prefix="pathrag-bench-dagster-"))
    base.mkdir(parents=True, exist_ok=True)
    result = {"repeats": repeats}
    result["sensor_latency"] = sensor_latency(base / "latency", repeats, log)
    result["run_startup"] = run_startup(base / "startup", repeats, log)
    result["cli"] = cli_cost(base / "cli", repeats, log)
    result["asks"] = asks_in_catalog(base / "asks", repeats, log)
    result["sensor_scale"] = sensor_scale(base / "scale", files, new_files, log)
    result["load_average_1min"] = round(os.getloadavg()[0], 2)
    result["usable_cores"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return result


def markdown_section(r: dict[str, Any]) -> str:
    lat, st, cli, sc = r["sensor_latency"], r["run_startup"], r["cli"], r["sensor_scale"]
    return f"""## Dagster

`pathrag bench dagster` (medians of {r['repeats']}; {r.get('usable_cores', '?')} cores, 1-minute load average {r.get('load_average_1min', '?')} at the end). Every index run started by the CLI, the sensor,
the schedule or the UI is one `index_folder` run with the in-process executor (see [scaling.md](scaling.md) for why).

| measurement | value |
| --- | --- |
| sensor: new file dropped into the sample folder ({lat['files_in_folder']} files) → its chunks and entities in the tables (tick + run, no daemon interval) | {lat['drop_to_tables_s']} s |
| sensor: tick time on that folder | {lat['tick_s']} s |
| runs requested per dropped file | {lat['runs_per_drop']} |
| sensor tick with {sc['files']:,} files, first tick (hash every file) | {sc['first_tick_s']} s |
| sensor tick with {sc['files']:,} files, nothing changed | {sc['unchanged_tick_s']} s |
| runs requested for {sc['files']:,} files on the first tick | {sc['runs_first_tick']} |
| runs requested for {sc['new_files']:,} new files | {sc['runs_for_new_files']} (per-file design: {sc['old_design_runs_for_new_files']:,}) |
| sensor cursor size | {sc['cursor_bytes']} bytes |
| per-file dynamic partitions (old design): adding {sc['files']:,} keys / reading them back | {sc['partitions_add_s']} s / {sc['partitions_get_s']} s |
| run start-up, fresh process → first step (`dagster job execute`, in-process executor) | {st['process_to_first_step_s']} s |
| run start-up inside the run, RUN_START → first STEP_START | {st['run_start_to_first_step_s']} s |
| `pathrag index` cost of Dagster: full sample build with / without a recorded run | {cli['full_build_dagster_s']} s / {cli['full_build_plain_s']} s |
| same, unchanged folder (re-index) | {cli['unchanged_dagster_s']} s / {cli['unchanged_plain_s']} s |
| `import assets.runs` (Dagster + the code location) in a fresh process | {cli['import_assets_runs_s']} s |
{_asks_rows(r.get("asks"))}
The daemon evaluates the sensor at most every 30 s and launches each run as a new process, so a dropped
file reaches the tables within about tick interval + run start-up + the latency above.

"""


def _asks_rows(asks: dict[str, Any] | None) -> str:
    if not asks:
        return ""
    return (f"| an ask outside Dagster (offline, Python API, in process), for scale | {asks['ask_s']} s |\n"
            f"| asks in the catalog: the tick's report after 1 ask / after 100 asks (3 runless materialisations) | "
            f"{asks['report_after_1_s']} s / {asks['report_after_100_s']} s |\n"
            f"| same, per ask when 100 are reported together / a tick with no new ask | {asks['per_ask_ms']} ms / "
            f"{asks['report_nothing_new_s']} s |\n")


def to_json(result: dict) -> str:
    return json.dumps(result, indent=1)
