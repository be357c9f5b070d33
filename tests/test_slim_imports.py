"""slim_imports: a re-export-only package answers each name from the one submodule that defines it, and otherwise
behaves as the package imported as usual (same objects, same names, same errors)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from pathrag_pipeline.slim_imports import LazyPackageFinder, reexport_index

PACKAGE = {
    "__init__.py": '''"""A package that only re-exports."""
from __future__ import annotations
from .light import Light as Light, shade
from .heavy import Heavy as Heavy
from .deep.inner import Inner as Renamed
from . import extra
from lazypkg_probe.heavy import HEAVY_CONSTANT
__all__ = ["Light", "Heavy", "Renamed", "shade"]
VERSION = (1, 2)
''',
    "light.py": "import lazypkg_probe_log as log\nlog.loaded.append('light')\nclass Light: pass\ndef shade(): return 1\n",
    "heavy.py": "import lazypkg_probe_log as log\nlog.loaded.append('heavy')\nclass Heavy: pass\nHEAVY_CONSTANT = 7\n",
    "extra.py": "import lazypkg_probe_log as log\nlog.loaded.append('extra')\n",
    "unlisted.py": "import lazypkg_probe_log as log\nlog.loaded.append('unlisted')\nX = 1\n",
    "deep/__init__.py": "",
    "deep/inner.py": "import lazypkg_probe_log as log\nlog.loaded.append('inner')\nclass Inner: pass\n",
}

_PROBE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
import lazypkg_probe_log as log
lazy = sys.argv[2] == "lazy"
if lazy:
    from pathrag_pipeline.slim_imports import LazyPackageFinder
    finder = LazyPackageFinder(("lazypkg_probe",))
    sys.meta_path.insert(0, finder)
import lazypkg_probe as pkg
if lazy:
    sys.meta_path.remove(finder)
out = {"after_import": list(log.loaded)}
light = pkg.Light
out["after_light"] = list(log.loaded)
out["light_is_the_submodules"] = light is sys.modules["lazypkg_probe.light"].Light
out["renamed"] = pkg.Renamed.__module__ + "." + pkg.Renamed.__qualname__
out["version"] = list(pkg.VERSION)
out["constant"] = pkg.HEAVY_CONSTANT
out["extra_is_module"] = pkg.extra is sys.modules["lazypkg_probe.extra"]
try:
    pkg.missing
    out["missing"] = "no error"
except AttributeError as exc:
    out["missing"] = type(exc).__name__
from lazypkg_probe import unlisted
out["unlisted"] = unlisted.X
out["dir"] = sorted(n for n in dir(pkg) if not n.startswith("__"))
out["doc"] = pkg.__doc__
namespace = {}
exec("from lazypkg_probe import *", namespace)
out["star"] = sorted(n for n in namespace if not n.startswith("__"))
out["all_loaded"] = sorted(log.loaded)
print(json.dumps(out))
"""


def _probe(tmp_path, how: str) -> dict:
    root = tmp_path / "site"
    for name, text in PACKAGE.items():
        path = root / "lazypkg_probe" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "lazypkg_probe_log.py").write_text("loaded = []\n")
    script = tmp_path / "probe.py"
    script.write_text(_PROBE)
    run = subprocess.run([sys.executable, str(script), str(root), how], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_a_lazy_package_loads_only_what_is_looked_up_and_answers_as_the_package_does(tmp_path):
    plain, lazy = _probe(tmp_path, "plain"), _probe(tmp_path, "lazy")
    assert plain["after_import"] == ["light", "heavy", "inner", "extra"]   # the probe itself is sound
    assert lazy["after_import"] == []
    assert lazy["after_light"] == ["light"]
    for key in ("light_is_the_submodules", "renamed", "version", "constant", "extra_is_module", "missing", "unlisted",
                "dir", "star", "doc"):
        assert lazy[key] == plain[key], key
    assert lazy["light_is_the_submodules"] is True and lazy["missing"] == "AttributeError"
    assert "Renamed" in lazy["dir"] and "deep" in lazy["dir"] and "HEAVY_CONSTANT" in lazy["dir"]


@pytest.mark.parametrize("source", [
    "from .a import A\nA.x = 1\n",                 # a statement that runs code
    "from .a import *\n",                          # names unknown until run
    "from other_package.a import A\n",             # another package's names
    "from .a import a\n",                          # `a` is the submodule or its attribute, by import order
    "import os\n",
    "X = make()\n",                                # not a literal
    "def f():\n    pass\n",
    "if True:\n    from .a import A\n",
])
def test_an_init_that_does_anything_but_re_export_imports_as_usual(source):
    assert reexport_index(source, "pkg") is None


def test_the_index_keeps_the_last_binding_and_literals():
    index = reexport_index('"""doc"""\nfrom .a import A\nfrom pkg.b import B as A\nN = [1, "x"]\nfrom .c import N\n'
                           'M = 2\n', "pkg")
    assert index.lazy == {"A": ("b", "B"), "N": ("c", "N")}
    assert index.eager == {"__doc__": "doc", "M": 2} and index.submodules == {"b", "c"}


_OPENAI = """
import json, sys
from pathrag_pipeline.slim_imports import import_openai
openai = import_openai()
out = {"graders_loaded": "openai.types.graders" in sys.modules, "beta_response_loaded":
       "openai.types.beta.beta_response" in sys.modules}
client = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
out["resources"] = [type(client.chat.completions).__name__, type(client.embeddings).__name__]
from openai.types import EvalCreateParams
out["eval_module"] = EvalCreateParams.__module__
import instructor
out["instructor"] = type(instructor.from_openai(client)).__name__
for package in ("openai.types", "openai.types.beta", "openai.resources"):
    module = sys.modules[package]
    out[package] = sorted(n for n in dir(module) if not n.startswith("__") and getattr(module, n) is not None)
print(json.dumps(out))
"""


def _script_output(tmp_path, source: str) -> dict:
    """What the script ``source`` printed as JSON, run in a fresh interpreter (a process's first imports)."""
    script = tmp_path / "script.py"
    script.write_text(source)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_openai_imports_without_its_unused_models_and_every_name_still_resolves(tmp_path):
    out = _script_output(tmp_path, _OPENAI)
    assert not out["graders_loaded"] and not out["beta_response_loaded"], out
    assert out["resources"] == ["Completions", "Embeddings"]
    assert out["eval_module"] == "openai.types.eval_create_params"
    assert out["instructor"] == "Instructor"
    plain = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import json, importlib
        out = {}
        for package in ("openai.types", "openai.types.beta", "openai.resources"):
            module = importlib.import_module(package)
            out[package] = sorted(n for n in dir(module) if not n.startswith("__"))
        print(json.dumps(out))""")], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    for package, names in json.loads(plain.stdout).items():
        assert out[package] == names, package


_RACE = """
import sys, threading, time
from pathrag_pipeline.slim_imports import import_openai
started = threading.Event()
def plain():
    started.set()
    import openai   # a plain import in another thread (instructor's, say), still running its __init__
threading.Thread(target=plain).start()
started.wait()
while "openai" not in sys.modules:
    time.sleep(0.0005)
openai = import_openai()
print(hasattr(openai, "OpenAIError"), hasattr(openai, "OpenAI"))
"""


def test_openai_being_imported_by_another_thread_is_waited_for_not_handed_out_half_made(tmp_path):
    script = tmp_path / "race.py"
    script.write_text(_RACE)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True"]


_CLIENTS = """
import json, sys
from pydantic import BaseModel
from pathrag_pipeline.llm.client import LLMClient
from pathrag_pipeline.llm.embedding import OpenAIEmbedder
class Answer(BaseModel):
    text: str = ""
vectors = OpenAIEmbedder(sys.argv[1], "e").embed(["a b", "c"])   # the embedder first, as a query's threads may
client = LLMClient(sys.argv[1], "m")
text = client.complete([{"role": "user", "content": "hi"}], stage="answer").text
instructor_for_a_completion = "instructor" in sys.modules   # a plain answer needs none of it
result = client.structured([{"role": "user", "content": "hi"}], Answer, stage="keywords")
print(json.dumps({"vectors": len(vectors), "text": text, "instructor_for_a_completion": instructor_for_a_completion,
                  "answer": type(result.value).__name__, "graders": "openai.types.graders" in sys.modules}))
"""


def test_the_llm_client_and_the_embedder_import_openai_slim(tmp_path, openai_server):
    """Every way the product reaches openai goes through slim_imports first (a plain ``import openai`` or instructor's
    before it would load every model), and instructor only comes with the first structured call."""
    script = tmp_path / "clients.py"
    script.write_text(_CLIENTS)
    run = subprocess.run([sys.executable, str(script), openai_server.base_url], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"vectors": 2, "text": "echo: hi", "instructor_for_a_completion": False,
                                      "answer": "Answer", "graders": False}
    assert openai_server.count("embeddings") == 1 and openai_server.count("chat") == 2


def test_igraph_being_imported_by_another_thread_is_waited_for_not_handed_out_half_made(tmp_path):
    script = tmp_path / "race_igraph.py"
    script.write_text(_RACE.replace("import_openai", "import_igraph").replace("import openai", "import igraph")
                      .replace('"openai"', '"igraph"').replace("openai = ", "ig = ")
                      .replace('hasattr(openai, "OpenAIError"), hasattr(openai, "OpenAI")',
                               'hasattr(ig, "Graph"), hasattr(ig, "Graph")'))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True"]


_LANCEDB = """
import json, sys
import overrides
implementation = sys.modules["overrides.overrides"]   # the package binds its function "overrides" over the name
checked, calls = overrides.override, []
real = implementation._get_base_class_names   # the check's costly part: it disassembles the caller's code
implementation._get_base_class_names = lambda frame: calls.append(1) or real(frame)
from pathrag_pipeline.slim_imports import import_lancedb
lancedb = import_lancedb()
from lancedb.db import LanceDBConnection
during_import = len(calls)
class Later:
    def method(self): pass
class Sub(Later):
    @overrides.override
    def method(self): pass
print(json.dumps({"checks": during_import, "restored": overrides.override is checked,
                  "marked": getattr(LanceDBConnection.open_table, "__override__", None),
                  "later_checked": len(calls)}))
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="LanceDB uses typing.override itself on 3.12 and later")
def test_lancedb_imports_with_the_marking_override_and_gives_the_checking_one_back(tmp_path):
    out = _script_output(tmp_path, _LANCEDB)
    # none while LanceDB imported; the process's own use of overrides.override afterwards checks as before
    assert out["marked"] is True and out["restored"] is True, out
    assert out["checks"] == 0 and out["later_checked"] == 1, out
