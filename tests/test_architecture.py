"""The package layout is the data flow: each subpackage imports only the stages before it, no module
imports another that (directly or through others) imports it back, the lab (pathrag_lab: benchmarks and test
doubles) imports the product and never the other way, and the CLI starts without loading the heavy libraries it
does not need."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pathrag_pipeline"
LAB = ROOT / "pathrag_lab"
TOPS = ("pathrag_pipeline", "pathrag_lab")

# Each group may import its own and any earlier group, never a later one.
LAYERS = [
    {"errors"},
    {"config", "dagster_home", "dagster_state", "worker_processes", "blas_threads", "slim_imports"},
    {"text"},
    {"llm"},
    {"storage"},
    {"ingest"},
    {"index"},
    {"query"},
    {"evaluation"},
    {"cli"},
    # the lab, after the whole product: it imports the product, the product never imports it
    {"lab.testing"},  # test doubles shared by the tests and the benchmarks (standard library only)
    {"lab.bench"},
    {"lab.cli"},
]
PRODUCT_LAYERS = LAYERS.index({"cli"}) + 1
LAYER_OF = {name: i for i, group in enumerate(LAYERS) for name in group}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_imports(path: Path, known: set[str]) -> set[str]:
    """Every pathrag_pipeline module ``path`` imports anywhere (top level, functions, TYPE_CHECKING)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import mod` depends on the module pkg.mod when there is one, else on pkg itself
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                     for a in node.names]
        else:
            continue
        out.update(n for n in names if n.split(".")[0] in TOPS)
    return out


def graph() -> dict[str, set[str]]:
    files = sorted([*PACKAGE.rglob("*.py"), *LAB.rglob("*.py")])
    known = {module_name(f) for f in files}
    return {module_name(f): project_imports(f, known) - {module_name(f)} for f in files}


def layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None
    return LAYER_OF.get(parts[1]) if parts[0] == "pathrag_pipeline" else LAYER_OF.get(f"lab.{parts[1]}")


def test_every_module_belongs_to_a_layer():
    unplaced = [m for m in graph() if m not in TOPS and layer(m) is None]
    assert not unplaced, f"add these to LAYERS (and to the package docstring): {unplaced}"


def test_imports_follow_the_data_flow():
    wrong = [f"{m} -> {d}" for m, deps in graph().items() for d in deps
             if layer(m) is not None and layer(d) is not None and layer(d) > layer(m)]
    assert not wrong, "a module imports a later stage:\n" + "\n".join(sorted(wrong))


def test_no_import_circles():
    g = graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(g.get(m, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d in g and d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# The CLI and the benchmarks run Dagster (`pathrag index` runs the `index_folder` job in-process, `pathrag
# bench dagster` times it); they are not the core and import it only inside the functions that need it.
RUNS_DAGSTER = {"cli", "lab.bench", "lab.cli"}


def _imported_names(node) -> list[str]:
    return ([a.name for a in node.names] if isinstance(node, ast.Import)
            else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])


def test_core_never_imports_dagster_or_the_assets():
    offenders = []
    for f in [*PACKAGE.rglob("*.py"), *LAB.rglob("*.py")]:
        tree = ast.parse(f.read_text())
        if layer(module_name(f)) is not None and LAYERS[layer(module_name(f))] & RUNS_DAGSTER:
            nodes = tree.body  # module level only: inside a command function is allowed
        else:
            nodes = list(ast.walk(tree))
        for node in nodes:
            offenders += [f"{module_name(f)}: {n}" for n in _imported_names(node)
                          if n.split(".")[0] in {"dagster", "assets"}]
    assert not offenders, offenders


def test_the_assets_use_the_core_not_the_cli_or_benchmarks():
    known = set(graph())
    wrong = [f"{f.name} -> {d}" for f in (ROOT / "assets").glob("*.py") for d in project_imports(f, known)
             if d.startswith("pathrag_lab") or (layer(d) is not None and LAYERS[layer(d)] & {"cli"})]
    assert not wrong, wrong


def test_the_product_never_imports_the_lab():
    """Issue 60 item 1: the product (pathrag_pipeline, assets) imports nothing of pathrag_lab, neither with an
    import statement nor by name through the import machinery; `pathrag bench` reaches the product's CLI through
    the `pathrag.commands` entry point."""
    g = graph()
    wrong = [f"{m} -> {d}" for m, deps in g.items() for d in deps
             if m.startswith("pathrag_pipeline") and d.startswith("pathrag_lab")]
    wrong += [f"{f.name} -> {d}" for f in (ROOT / "assets").glob("*.py") for d in project_imports(f, set(g))
              if d.startswith("pathrag_lab")]
    for f in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "assets").rglob("*.py")]):
        for n in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.match(r"pathrag_lab\b", n.value):
                wrong.append(f"{f.relative_to(ROOT)}:{n.lineno}: names the lab in {n.value!r}")
    assert not wrong, "the product imports the lab:\n" + "\n".join(wrong)


def test_the_lab_reaches_the_cli_through_its_entry_point():
    from importlib.metadata import entry_points

    from pathrag_pipeline.cli.lazy import plugin_commands
    from pathrag_pipeline.cli.main import PLUGIN_GROUP

    assert any(p.value == "pathrag_lab.cli:bench" for p in entry_points(group=PLUGIN_GROUP)), \
        "reinstall the project (pip install -e .): the entry point is declared in pyproject.toml"
    module, attribute, help_line = plugin_commands(PLUGIN_GROUP)["bench"]
    assert (module, attribute) == ("pathrag_lab.cli", "bench") and help_line.startswith("Benchmarks")


def test_a_declared_command_runs_without_scanning_the_installed_packages_for_plugins(monkeypatch):
    """The root group reads the entry points (importlib.metadata and every installed package's metadata, ~30 ms)
    only to list its commands or to find one it does not declare, such as the lab's `bench`."""
    import click

    from pathrag_pipeline.cli import lazy
    from pathrag_pipeline.cli.main import COMMANDS, PLUGIN_GROUP

    probe = "import sys\nimport pathrag_pipeline.cli\nprint('importlib.metadata' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False"], done.stderr
    scans: list[str] = []
    real = lazy.plugin_commands
    monkeypatch.setattr(lazy, "plugin_commands", lambda group: scans.append(group) or real(group))
    group = lazy.LazyGroup(name="pathrag", lazy_commands=COMMANDS, plugin_group=PLUGIN_GROUP)
    ctx = click.Context(group)
    assert group.get_command(ctx, "sql").name == "sql" and scans == []
    assert group.get_command(ctx, "bench").name == "bench" and scans == [PLUGIN_GROUP]
    assert "bench" in group.list_commands(ctx) and scans == [PLUGIN_GROUP]   # scanned once


# The package never imports the test suite, neither with an import statement nor through the import machinery
# (``importlib.import_module("tests.x")``, ``spec_from_file_location(..., ROOT / "tests" / "x.py")``, ...): an
# installed package has no ``tests`` to import, and a test double the package needs belongs in ``testing``.
IMPORT_MACHINERY = {"import_module", "__import__", "spec_from_file_location", "run_path", "run_module",
                    "SourceFileLoader", "SourcelessFileLoader", "load_source", "find_spec"}
TESTS_NAME = re.compile(r"(^|[^A-Za-z0-9_])tests($|[./\\])")  # "tests", "tests.x", "tests/x", "../tests/x"


def _is_tests_module(name: str | None) -> bool:
    return bool(name) and (name == "tests" or name.startswith("tests."))


def imports_of_tests(source: str, filename: str = "<source>") -> list[str]:
    """Every place in ``source`` that imports the ``tests`` package, as ``file:line: what``."""
    tree = ast.parse(source, filename)
    strings = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
               and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
               for t in n.targets if isinstance(t, ast.Name)}  # MODULE = "tests.x"; import_module(MODULE)
    machinery = set(IMPORT_MACHINERY)
    for n in ast.walk(tree):  # from importlib import import_module as load
        if isinstance(n, ast.ImportFrom):
            machinery |= {a.asname for a in n.names if a.name in IMPORT_MACHINERY and a.asname}
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            found += [f"{filename}:{n.lineno}: import {a.name}" for a in n.names if _is_tests_module(a.name)]
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and _is_tests_module(n.module):
            found.append(f"{filename}:{n.lineno}: from {n.module} import ...")
        elif isinstance(n, ast.Call):
            func = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
            if func not in machinery:
                continue
            for arg in [*n.args, *(k.value for k in n.keywords)]:
                for leaf in ast.walk(arg):
                    text = (leaf.value if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str)
                            else strings.get(leaf.id) if isinstance(leaf, ast.Name) else None)
                    if text is not None and TESTS_NAME.search(text):
                        found.append(f"{filename}:{n.lineno}: {func}(... {text!r} ...)")
    return found


def test_the_package_and_the_assets_never_import_the_tests():
    found = [hit for f in sorted([*PACKAGE.rglob("*.py"), *LAB.rglob("*.py"), *(ROOT / "assets").rglob("*.py")])
             for hit in imports_of_tests(f.read_text(), str(f.relative_to(ROOT)))]
    assert not found, ("the package imports the test suite (move what it needs into pathrag_lab/testing):\n"
                       + "\n".join(found))


@pytest.mark.parametrize("source", [
    "import tests",
    "import tests.openai_server as s",
    "from tests.openai_server import FakeOpenAIServer",
    "from tests import openai_server",
    "def f():\n    from tests.openai_server import FakeOpenAIServer",
    "import importlib\nimportlib.import_module('tests.openai_server')",
    "from importlib import import_module\nimport_module('tests.openai_server')",
    "from importlib import import_module as load\nload('tests')",
    "import importlib\nimportlib.import_module('.openai_server', package='tests')",
    "MODULE = 'tests.openai_server'\nimport importlib\nimportlib.import_module(MODULE)",
    "__import__('tests.openai_server')",
    "import builtins\nbuiltins.__import__('tests')",
    "import importlib.util\nimportlib.util.spec_from_file_location('s', ROOT / 'tests' / 'openai_server.py')",
    "import importlib.util\nimportlib.util.spec_from_file_location('s', f'{ROOT}/tests/openai_server.py')",
    "import runpy\nrunpy.run_path('tests/openai_server.py')",
    "import runpy\nrunpy.run_module('tests.openai_server')",
    "from importlib.machinery import SourceFileLoader\nSourceFileLoader('s', str(ROOT / 'tests/openai_server.py'))",
])
def test_the_tests_import_check_catches(source):
    assert imports_of_tests(source), source


@pytest.mark.parametrize("source", [
    "import pathrag_lab.testing.openai_server",
    "from pathrag_lab.testing.openai_server import FakeOpenAIServer",
    "import importlib\nimportlib.import_module('pathrag_lab.bench.ingest')",
    "import importlib\nimportlib.import_module('contests.x')",
    '"""The scripted server used to live in tests/openai_server.py."""',
    "print('tests/openai_server.py')",
    "import testsuite",
])
def test_the_tests_import_check_lets_pass(source):
    assert not imports_of_tests(source), imports_of_tests(source)


def test_every_subpackage_says_what_it_owns_and_may_import():
    for init in [*PACKAGE.glob("*/__init__.py"), *LAB.glob("*/__init__.py"), LAB / "__init__.py"]:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in doc, f"{init.relative_to(ROOT)} needs a docstring with 'May import: ...'"


HEAVY = ("dagster", "lancedb", "igraph", "openai", "instructor", "torch", "sentence_transformers")

PROBE = """
import json, sys
import click
from pathrag_pipeline.cli import main
try:
    main(sys.argv[2:], standalone_mode=False)
except (SystemExit, click.ClickException):
    pass
with open(sys.argv[1], "w") as out:
    json.dump(sorted({m.split(".")[0] for m in sys.modules}), out)
"""


def loaded_after(args: list[str], tmp_path: Path, env: dict[str, str]) -> set[str]:
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(out.read_text()))


@pytest.fixture()
def cli_env(tmp_path):
    import os

    from pathrag_pipeline.storage.store import Store

    home = tmp_path / "home"
    with Store(home / "pathrag.duckdb").connect():
        pass  # an empty index: status and sql have something to read
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATHRAG_", "OPENAI_"))}
    env["PATHRAG_HOME"] = str(home)
    return env


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["bench", "--help"]])
def test_version_and_help_load_no_heavy_library(args, tmp_path, cli_env):
    loaded = loaded_after(args, tmp_path, cli_env)
    assert not loaded & set(HEAVY), f"`pathrag {' '.join(args)}` imported {sorted(loaded & set(HEAVY))}"


@pytest.mark.parametrize("args", [["sql", "SELECT count(*) FROM documents"], ["status"]])
def test_sql_and_status_load_no_dagster_or_lancedb(args, tmp_path, cli_env):
    loaded = loaded_after(args, tmp_path, cli_env)
    assert "duckdb" in loaded  # the probe really ran the command
    assert not loaded & set(HEAVY), f"`pathrag {' '.join(args)}` imported {sorted(loaded & set(HEAVY))}"


def test_declared_command_help_matches_each_command():
    import click

    from pathrag_pipeline.cli.main import COMMANDS, main

    ctx = click.Context(main)
    for name, (_, _, short) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None
        assert (command.help or "").strip().splitlines()[0] == short, name


def test_offline_ask_loads_no_model_client_dagster_or_plotting_library(tmp_path, cli_env):
    loaded = loaded_after(["ask", "Who founded Valmere University?"], tmp_path, cli_env)
    assert "igraph" in loaded  # the query engine was loaded (the empty index then stops the query; LanceDB
    # itself is imported only when a vector table is opened)
    # matplotlib: igraph imports it when installed (the dev and bench extras), ~1 s (slim_imports.import_igraph)
    unwanted = {"dagster", "openai", "instructor", "torch", "matplotlib"}
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_a_noop_index_loads_no_dagster_or_lancedb(tmp_path, cli_env):
    """A re-index that finds nothing to do is answered before Dagster or LanceDB is imported (and before any
    model client): that is what keeps `pathrag index` on an unchanged folder fast."""
    from pathrag_pipeline.config import SAMPLE_DOCS, Settings
    from pathrag_pipeline.index.pipeline import run_indexing

    settings = Settings.from_env(env={}, home=Path(cli_env["PATHRAG_HOME"]), docs=SAMPLE_DOCS)
    run_indexing(settings, folder=SAMPLE_DOCS)
    loaded = loaded_after(["index", str(SAMPLE_DOCS)], tmp_path, cli_env)
    assert "duckdb" in loaded  # the probe really ran the command
    assert not loaded & set(HEAVY), f"a no-op `pathrag index` imported {sorted(loaded & set(HEAVY))}"


def python_prints(code: str, env: dict[str, str] | None = None) -> str:
    """What ``python -c CODE`` prints in a fresh interpreter from the repository root (it must exit 0)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_igraph_is_imported_without_matplotlib_which_the_process_can_still_import():
    code = ("import sys; from pathrag_pipeline.slim_imports import import_igraph; ig = import_igraph(); "
            "assert ig.Graph([(0, 1)]).ecount() == 1; print('matplotlib' in sys.modules); "
            "import matplotlib.pyplot; print(matplotlib.pyplot.__name__)")
    printed = python_prints(code)
    assert printed.split() == ["False", "matplotlib.pyplot"]


def test_the_mode_of_llm_settings_is_described_without_importing_the_model_client():
    """`pathrag index`'s no-op check and reports need the extractor's and embedder's identities, not clients: openai
    and instructor (about 1.5-2 s) are imported when a client first calls its endpoint (issue 64: 3.8 s of a
    one-file edit's 11.9 s)."""
    code = ("import sys; from pathrag_pipeline.config import Settings; "
            "from pathrag_pipeline.index.pipeline import describe_mode; "
            "mode = describe_mode(Settings.from_env()); print(mode['extractor'], mode['embedder']); "
            "print(sorted({'openai', 'instructor', 'httpx'} & set(sys.modules)))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATHRAG_", "OPENAI_"))}
    env.update(PATHRAG_LLM_BASE_URL="http://127.0.0.1:9/v1", PATHRAG_LLM_MODEL="some-model",
               PATHRAG_EMBED_BASE_URL="http://127.0.0.1:9/v1", PATHRAG_EMBED_MODEL="some-embedder")
    printed = python_prints(code, env)
    assert printed.splitlines() == ["llm:some-model:extract-v1:glean1 openai:some-embedder", "[]"]


def test_a_client_that_never_called_is_not_stopped_and_imports_nothing_to_say_so():
    """Every extraction run resumes its client first (extraction_stage.run_extraction); a run with no chunk to
    extract (a delete) must not import openai for that (issue 64: a one-file delete's graph stage took 2.5 s in a
    fresh process, 0.5 s warm)."""
    code = ("import sys; from pathrag_pipeline.llm.client import LLMClient; "
            "c = LLMClient('http://127.0.0.1:9/v1', 'm', max_concurrency=3); c.resume(); "
            "print(c.stopped, c.concurrency_limit, 'openai' in sys.modules)")
    printed = python_prints(code)
    assert printed.split() == ["None", "3", "False"]
