"""Answers end to end through a real local LLM server (``pathrag bench answers``).

Starts llama-cpp-python's OpenAI-compatible server on 127.0.0.1 with a small GGUF model shipped inside
packages on the package index, runs ``pathrag eval answers`` on a QA dataset (musique-100) through it, and
writes the "Answers through a local LLM" section of docs/benchmarks.md with the model, the machine and the
time taken. Nothing here is needed by the pipeline itself: it is an optional, documented bench.

- The server: ``pip install "../shared/wheels/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl[server]"``
  (a portable x86-64 AVX2 build; ``pip install "llama-cpp-python[server]"`` compiles the same from source in
  20-30 minutes).
- The model (bench/local_models.py): ``pip install -e ".[local-llm-model]"`` installs six packages that together
  hold the GGUF of Qwen2.5-Coder-0.5B-Instruct (q4_k_m, 491 MB), the default; ``".[local-llm-model-1-5b]"``
  twenty-two that hold Qwen2.5-Coder-1.5B-Instruct (q4_k_m, 1.1 GB; ``--local-model qwen2.5-coder-1.5b``). The
  parts are joined, in order, into one file.
- Or ``base_url`` + ``model``: any running OpenAI-compatible endpoint, no server started.

The evaluation resumes: a killed or time-limited bench keeps its answers (``eval_answers``) and the same
command continues where it stopped. The server is stopped with SIGKILL: llama-cpp-python's server keeps
generating after SIGTERM while a connection is open.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathrag_lab.bench.local_models import (DEFAULT_LOCAL_MODEL, QWEN_05B, BenchSetupError, LocalModel,
                                                 assemble_model, local_model)
from pathrag_lab.bench.report_sections import repo_path
from pathrag_pipeline.evaluation.bootstrap import format_figures


def machine() -> dict[str, Any]:
    from pathrag_lab.bench.report import machine_info   # the report's machine facts, imported when measured

    return machine_info()

Log = Callable[[str], None]

SERVER_MODULE = "llama_cpp.server"
WHEEL_HINT = ('pip install "../shared/wheels/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl[server]" (or pip '
              'install "llama-cpp-python[server]", which compiles for 20-30 minutes)')
CONTEXT = 8192
DEFAULT_LIMIT = 50
DEFAULT_BUDGET = 1000
LOCAL_TIMEOUT = 600   # seconds per request to the bench's own server (a judgement of two long answers)
# The verdict (default path mode against the best flat prompt, and the best path layout) is decided on more
# questions than the grid of every mode: musique-100's hundred. A 0.5B model's F1 is noisy; at 50 questions
# neither difference could be told from zero.
DEFAULT_VERDICT_LIMIT = 100
HEADING = "Answers through a local LLM"


def server_installed() -> bool:
    try:
        return importlib.util.find_spec(SERVER_MODULE) is not None
    except ModuleNotFoundError:
        return False


def missing(model: LocalModel = QWEN_05B) -> str | None:
    """What to install before the bench can start its own server with ``model``, or None when both are there."""
    needs = []
    if not server_installed():
        needs.append(f"the llama.cpp server: {WHEEL_HINT}")
    if model.parts() is None:
        needs.append(f"the model ({model.name}): {model.hint}")
    return "; ".join(needs) or None


def check_endpoint(command: str, base_url: str | None, model: str | None, local: str) -> LocalModel:
    """The local model ``pathrag bench <command>`` serves itself (checked installed, with what to install when
    not), unless ``base_url`` and ``model`` name a running endpoint."""
    if (base_url is None) != (model is None):
        raise BenchSetupError("give --base-url and --model together (a running endpoint), or neither (the bench "
                              "starts its own llama.cpp server)")
    chosen = local_model(local)
    if base_url is None:
        need = missing(chosen)
        if need:
            raise BenchSetupError(f"pathrag bench {command} starts a local llama.cpp server and needs {need}")
    return chosen


def local_model_flag(local: str) -> str:
    """``--local-model`` as a reproducing command must give it (nothing for the default)."""
    return f" --local-model {local}" if local != DEFAULT_LOCAL_MODEL else ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalServer:
    """llama-cpp-python's server on 127.0.0.1 for one model file; a context manager."""

    model: Path
    log_path: Path
    threads: int = max(1, os.cpu_count() or 1)
    port: int = 0
    startup_timeout: float = 300.0
    process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def command(self) -> list[str]:
        return [sys.executable, "-m", SERVER_MODULE, "--model", str(self.model), "--model_alias", self.model.name,
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(CONTEXT),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads), "--flash_attn", "true"]

    def __enter__(self) -> "LocalServer":
        self.port = self.port or _free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchSetupError(f"the llama.cpp server exited with code {self.process.returncode} at start; "
                                      f"see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                    if reply.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.__exit__(None, None, None)
        raise BenchSetupError(f"the llama.cpp server did not answer within {self.startup_timeout:.0f} s; see "
                              f"{self.log_path}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)   # SIGTERM leaves it generating (STACK-NOTES)
            self.process.wait(timeout=30)


# What the LLM does at query time besides answering, each against the same mode with it or without it: keywords
# from LightRAG's keyword prompt (path:llm_keywords against path, which takes the offline rules; hybrid against
# hybrid:offline_keywords) and NeuroPath's LLM tracker against the heuristic one.
LLM_USE_MODES = ("path", "path:llm_keywords", "hybrid", "hybrid:offline_keywords", "neuropath",
                 "neuropath:offline_tracker")


def run_llm_answers_bench(dataset: Path, workdir: Path, *, limit: int = DEFAULT_LIMIT, budget: int = DEFAULT_BUDGET,
                          modes: list[str] | None = None, time_limit: float | None = None,
                          base_url: str | None = None, model: str | None = None, embed_model: str | None = None,
                          verdict_limit: int = DEFAULT_VERDICT_LIMIT, local: str = DEFAULT_LOCAL_MODEL,
                          log: Log = print) -> dict[str, Any]:
    """Start the local server (unless ``base_url``/``model`` name a running endpoint), run the answer
    evaluation of ``dataset`` with its triples graph, then recall with the LLM's keywords against the offline
    rules on the same questions; return the figures with the model, the machine and the
    time. ``workdir``: ``<workdir>/answers/home`` keeps the runs (resumable), ``<workdir>/retrieval/triples[-minilm]``
    the dataset's index (the same folder ``pathrag bench retrieval`` uses), ``<workdir>/models`` the joined GGUF.
    ``embed_model``: the embedder (default: MiniLM when its extra is installed, else the offline hashing one).
    ``verdict_limit``: then answer ``path``, the flat prompt and the path layout with the best F1 on the grid on
    that many questions (the grid's answers are reused) and state the verdict there too. ``local``: the key of the
    model the bench serves itself (bench/local_models.py).
    The judged win rates are ``pathrag bench winrate`` (bench/llm_winrate.py), a run of their own."""
    from pathrag_lab.bench.embedding_runtime import minilm_available, minilm_model

    served = check_endpoint("answers", base_url, model, local)
    if embed_model is None and minilm_available():
        embed_model = minilm_model()
    index = workdir / "retrieval" / ("triples" + ("-minilm" if embed_model else ""))
    started = time.perf_counter()
    result: dict[str, Any] = {
        "model": model or served.name, "server": {}, "embedder": embed_model or "offline hashing",
        "dataset": dataset.name,
        "command": (("HF_HUB_OFFLINE=1 " if embed_model else "") + "pathrag bench answers" + local_model_flag(local)
                    + (f" --limit {limit}" if limit != DEFAULT_LIMIT else "")
                    + (f" --budget {budget}" if budget != DEFAULT_BUDGET else "")
                    + (f" --dataset {repo_path(dataset)}" if dataset.name != "musique-100" else "")
                    + (f" --verdict-limit {verdict_limit}" if verdict_limit != DEFAULT_VERDICT_LIMIT else "")
                    + (f" --modes {','.join(modes)}" if modes else "")
                    + " --update-docs docs/benchmarks.md")}

    def run(url: str, name: str) -> None:
        settings = bench_settings(url, name, embed_model, own_server=base_url is None,
                                  home=workdir / "answers" / "home")
        grid = answer_all(settings, dataset, index, limit, budget, modes, time_limit, log)
        result["evaluation"] = grid.to_dict()
        detail = grid.verdict_detail()
        from pathrag_pipeline.evaluation.retrieval_eval import load_dataset

        available = len(load_dataset(dataset).questions)
        if min(verdict_limit, available) > len(grid.complete_questions) and detail is not None and not grid.stopped:
            picked = list(dict.fromkeys(["path", detail["baseline"], detail["best_layout"]]))
            log(f"the verdict on {verdict_limit} questions: {', '.join(picked)}")
            wider = answer_all(settings, dataset, index, verdict_limit, budget, picked, time_limit, log)
            result["verdict_study"] = {**wider.to_dict(), "picked_on": limit}
        result["keywords"] = llm_use_recall(settings, dataset, index, limit, log)
        result.update(machine=machine(), seconds=round(time.perf_counter() - started, 1))

    result["server"] = on_endpoint(workdir, base_url, model, run, log, served)
    return result


def on_endpoint(workdir: Path, base_url: str | None, model: str | None, run: Callable[[str, str], None],
                log: Log, local: LocalModel = QWEN_05B) -> dict[str, Any]:
    """``run(url, model name)`` against the running endpoint ``base_url``/``model``, or against the bench's own
    llama.cpp server started for the call with ``local`` joined in ``workdir/models``; the server's facts for the
    report (empty for an endpoint given)."""
    if base_url is not None:
        assert model is not None
        run(base_url, model)
        return {}
    path = assemble_model(workdir / "models", local)
    log(f"starting llama.cpp server with {path.name}")
    with LocalServer(path, workdir / "models" / "server.log") as running:
        server = {"command": " ".join(running.command[1:]).replace(str(path), path.name),
                  "threads": running.threads, "context": CONTEXT}
        run(running.base_url, path.name)
    return server


def bench_settings(url: str, name: str, embed_model: str | None, *, own_server: bool, home: Path) -> Any:
    """Settings of a bench that talks to ``url``/``name`` (and embeds with ``embed_model`` when given); the
    caller's own environment wins, except for the endpoint, the model and the embedder."""
    from pathrag_pipeline.config import Settings

    env = {"PATHRAG_LLM_BASE_URL": url, "PATHRAG_LLM_MODEL": name,
           **({"PATHRAG_EMBED_MODEL": embed_model} if embed_model else {})}
    if own_server:
        # our own llama.cpp server answers one request at a time (STACK-NOTES): the judge's parallel calls
        # queued there past the 120 s timeout and stopped the client; one at a time, with room for a long
        # judgement on a busy machine (the caller's own settings win)
        env = {"PATHRAG_LLM_MAX_CONCURRENCY": "1", "PATHRAG_LLM_TIMEOUT": str(LOCAL_TIMEOUT), **env}
    return Settings.from_env(env={**env, **os.environ, **{k: v for k, v in env.items() if k in (
        "PATHRAG_LLM_BASE_URL", "PATHRAG_LLM_MODEL", "PATHRAG_EMBED_MODEL")}}, home=home)


def answer_all(settings: Any, dataset: Path, index: Path, limit: int, budget: int, modes: list[str] | None,
               time_limit: float | None, log: Log) -> Any:
    """``evaluate_answers`` of the bench (resumes the newest run of the same configuration)."""
    from pathrag_pipeline.evaluation.answer_eval import evaluate_answers
    from pathrag_pipeline.query.params import QueryParams

    done = [0]

    def progress(mode: str, answered: int, total: int) -> None:
        if answered // 25 > done[0] // 25 or answered == total:
            log(f"answers: {answered}/{total} ({mode})")
        done[0] = answered

    log(f"answering {limit} questions of {dataset.name} in every mode through {settings.llm_model}")
    return evaluate_answers(settings, dataset, modes=modes, limit=limit, budget=budget, use_triples=True,
                            workdir=index, params=QueryParams(), time_limit=time_limit, on_answer=progress,
                            index_progress=lambda d, t: None)


def llm_use_recall(settings: Any, dataset: Path, index: Path, limit: int, log: Log) -> dict[str, Any]:
    """Recall of path and hybrid with the LLM's keywords against the offline keyword rules, and of NeuroPath
    with its LLM tracker against its heuristic (offline) tracker, same questions (``eval retrieval --modes`` LLM_USE_MODES;
    stored in eval_runs)."""
    from pathrag_pipeline.evaluation.retrieval_eval import evaluate_retrieval, save_evaluation
    from pathrag_pipeline.storage.store import Store

    log(f"recall with the LLM's keywords and NeuroPath's LLM tracker against the offline ones on {limit} questions")
    e = evaluate_retrieval(settings, dataset, modes=list(LLM_USE_MODES), limit=limit, use_triples=True,
                           workdir=index, budgets=())
    save_evaluation(Store.for_settings(settings), e)
    return e.to_dict()


def _llm_use_parts(k: dict[str, Any] | None) -> list[str]:
    from pathrag_lab.bench.report import md_table

    if not k:
        return []
    keys = [f"recall@{x}" for x in k["ks"]]
    rows = []
    for mode, m in k["modes"].items():
        delta = m.get("delta", {}).get("mean_recall")
        rows.append([f"`{mode}`", *[f"{m[key]:.3f}" for key in keys], f"{m['mean_recall']:.3f}",
                     f"{m['llm_calls']:.1f}", f"{m['llm_tokens']:.0f}",
                     f"{format_figures(delta)} {delta['outcome']} vs `{m['vs']}`" if delta else ""])
    modes = k["modes"]
    tracker = ""
    if "neuropath" in modes and "neuropath:offline_tracker" in modes:
        on, off = modes["neuropath"], modes["neuropath:offline_tracker"]
        tracker = (f" NeuroPath's LLM tracker costs {on['llm_calls'] - off['llm_calls']:.1f} calls and "
                   f"{on['llm_tokens'] - off['llm_tokens']:.0f} tokens per question beyond the keyword call both "
                   "NeuroPath rows make (the heuristic tracker makes none).")
    return [
        f"**What the LLM adds besides the answer** (`pathrag eval retrieval --dataset ... --use-triples "
        f"--budgets '' --modes {','.join(modes)} --limit {k['questions']}`, the same model): recall of the "
        f"passages each mode ranks, {k['questions']} questions. `path` and the `*:offline_keywords` rows take the "
        "keywords from the offline rules, as without an LLM; `path:llm_keywords`, `hybrid` and the NeuroPath rows "
        "from LightRAG's keyword prompt (one call per question); `neuropath:offline_tracker` tracks paths with the "
        "heuristic (offline) tracker instead of the LLM. Δ is the row minus the mode it is compared with." + tracker,
        md_table(["mode", *[key.replace("recall", "R") for key in keys], "mean R", "LLM calls/q", "LLM tokens/q",
                  "Δ mean R (the row − the mode named)"], rows),
    ]


def _mode_rows(e: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for mode, m in e["modes"].items():
        delta = m.get("delta", {})
        rows.append([f"`{mode}`" + (f" ({m['note']})" if m.get("note") else ""), f"{m['f1']:.3f}",
                     f"{m['exact_match']:.3f}", f"{m['answer_in_context']:.2f}",
                     "" if m.get("f1_in_context") is None else f"{m['f1_in_context']:.3f}", f"{m['recall@5']:.3f}",
                     f"{m['median_prompt_tokens']:.0f}", f"{m['llm_calls']:.1f}", f"{m['llm_tokens']:.0f}",
                     f"{m['median_latency_ms'] / 1000:.1f}", m.get("failed", 0),
                     f"{format_figures(delta['f1'])} {delta['f1']['outcome']}{_against(m)}" if delta else "",
                     f"{format_figures(delta['answer_in_context'])}{_against(m)}" if delta else ""])
    return rows


MODE_COLUMNS = ["mode", "F1", "EM", "in context", "F1 if in context", "R@5", "prompt tokens", "LLM calls/q",
                "LLM tokens/q", "median s/q", "failed", "Δ F1 vs path (or as named)",
                "Δ in context vs path (or as named)"]


def _verdict_study_parts(v: dict[str, Any] | None) -> list[str]:
    from pathrag_lab.bench.report import md_table

    if not v:
        return []
    picked = [m for m in v["modes"] if m != "path"]
    return [
        f"**The verdict on {v['questions']} questions.** `path`, the flat prompt with the best F1 above and the "
        f"path layout with the best F1 above ({', '.join(f'`{m}`' for m in picked)}, picked on the first "
        f"{v['picked_on']}) answered every question of {v['dataset']}; the first {v['picked_on']} answers are the "
        "ones above (reused, not asked again). The pick favours the picked modes on those questions.",
        md_table(MODE_COLUMNS, _mode_rows(v)),
        f"**Verdict on {v['questions']} questions:** {v['verdict']}" if v.get("verdict") else "",
    ]


def _diagnosis_parts(e: dict[str, Any] | None) -> list[str]:
    """The hop diagnosis of a run (its ``diagnosis`` and ``verdict_detail``): where each mode's evidence went."""
    from pathrag_lab.bench.report import md_table
    from pathrag_pipeline.evaluation.answer_diagnosis import DIAGNOSIS_COLUMNS, diagnosis_row, diagnosis_sentence

    if not e or not e.get("diagnosis"):
        return []
    d = e["diagnosis"]
    detail = e.get("verdict_detail") or {}
    return [
        f"**Where the evidence went** ({e['questions']} questions; `evaluation/answer_diagnosis.py` reads the stored "
        "prompts and answers against MuSiQue's hops, no LLM involved): passages each prompt quoted; whether it "
        "quoted the last hop's passage (the one holding the final answer) and where the mode ranked it (the median "
        "rank over the questions where it is among the mode's first 20); whether "
        "the prompt opens with the first hop's passage; and the kind of answer: right (F1 > 0), a bridge (the "
        "answer of an earlier hop: the chain stopped half way), a refusal, or other.",
        md_table(list(DIAGNOSIS_COLUMNS), [[f"`{m}`", *diagnosis_row(m, x)[1:]] for m, x in d.items()]),
        diagnosis_sentence(d, "path", detail["baseline"]) if detail.get("baseline") else "",
    ]


def _against(m: dict[str, Any]) -> str:
    """A delta cell's reference when it is not ``path`` (NeuroPath's heuristic tracker is compared with neuropath)."""
    return f" vs `{m['vs']}`" if m.get("vs") and m["vs"] != "path" else ""


def llm_answers_section(r: dict[str, Any]) -> str:
    """The docs/benchmarks.md section of one bench run."""
    from pathrag_lab.bench.report import md_table

    e = r["evaluation"]
    mach = r["machine"]
    stopped = f" The run stopped early: {e['stopped']}." if e.get("stopped") else ""
    parts = [
        f"## {HEADING}",
        f"Reproduce: `{r['command']}` (needs the llama.cpp server and the model: see docs/llm-endpoints.md).",
        f"{e['questions']} questions of {r['dataset']} (the first {e['planned']}), every mode answering from its own "
        f"prompt at a {e['budget']}-token budget through **{r['model']}** " + (
            f"served by llama-cpp-python on {mach['usable_cores']} CPU cores ({r['server']['threads']} threads, context "
            f"{r['server']['context']})" if r["server"] else "at the endpoint given with --base-url")
        + f", graph from the dataset's triples, embedder {r['embedder']}. The model is asked for the answer alone "
        "(a short phrase); EM and F1 are SQuAD's, against every gold answer and alias. \"in context\": a gold "
        "answer occurs in the prompt the model read; \"F1 if in context\": the mean F1 over those questions alone, "
        "how well the model reads what retrieval gave it. LLM calls and tokens count what each query spends on its "
        "own (keywords, NeuroPath tracking, the answer). Δ: paired difference from `path` (the heuristic tracker's from `neuropath`) over the "
        "same questions with its 95% bootstrap interval (10,000 resamples, seed 0): \"beats\" only when the interval "
        f"lies above zero.{stopped}",
        md_table(MODE_COLUMNS, _mode_rows(e)),
        f"**Verdict on {e['questions']} questions:** {e['verdict']}" if e.get("verdict") else "",
        *_verdict_study_parts(r.get("verdict_study")),
        *_diagnosis_parts(r.get("verdict_study") or e),
        *_llm_use_parts(r.get("keywords")),
        f"_Measured {mach['date']} with {r['model']} on {mach['usable_cores']} cores ({mach['cpu']}, "
        f"{mach['memory_gib']} GiB, Python {mach['python']}, 1-min load {(mach['load_average'] or ['?'])[0]} at the "
        f"end). The {e['resumed'] + e.get('reused', 0) + e['answered']} answers took "
        f"{e['query_seconds'] / 60:.0f} min of query time in all, the sum of their wall times"
        + (f" ({e['resumed']} from earlier invocations of the run, {e['answered']} in the last)" if e['resumed'] else "")
        + (f"; {e['reused']} were copied from earlier runs that asked the same question with the same per-mode "
           "configuration (eval_answers.answer_key), with the time they took there" if e.get("reused") else "")
        + f"; run {e['run_id'][:12]}._",
    ]
    return "\n\n".join(p for p in parts if p)


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=1)
