"""Importing openai, LanceDB and igraph without the parts we never use (generated models, checks, matplotlib).

openai and LanceDB ship packages whose ``__init__`` only re-exports its submodules' names (``from .x import X as
X``, a few literals such as ``__all__``): ``openai.types`` (124 names), ``openai.types.beta`` (253),
``openai.types.responses`` (233), ``openai.resources`` (every API resource), LanceDB's REST namespace client
``lance_namespace_urllib3_client`` (all nine API modules) and its ``models`` (146 pydantic models). Importing such a
package runs every one of those submodules, though a process that indexes or answers looks up a handful of names. On
an AMD EPYC (2 cores, medians of 3), importing openai with its chat and embeddings resources took 0.48 s and takes
0.17 s lazily, LanceDB 0.36 s and 0.33 s (its REST client's ``__init__`` alone was ~0.9 s on a Xeon, issue 23);
every new process that calls an endpoint or opens a vector table pays them (a one-file edit through ``pathrag
index``, a new ``pathrag ask``).

While ``import_openai`` or ``import_lancedb`` runs, such a package under ``openai`` or
``lance_namespace_urllib3_client`` is made *lazy*: its ``__init__`` is read (not run) and, if every statement is a
docstring, a re-export from one of its own submodules or a literal assignment, the package answers each name on
first lookup by importing only the submodule that defines it, binding it as the ``__init__`` would have. It is the
same object, bound under the same name; a name the ``__init__`` does not bind raises ``AttributeError`` as before;
``dir()`` and ``from pkg import *`` see every name. What differs: the package's ``__dict__`` holds a name only once
it was looked up. A package whose ``__init__`` does anything else (a version of openai that adds a
``model_rebuild()``, say) imports as usual, so a change of either library costs speed, never behaviour. Packages
imported after the call returns import as usual (the finder is installed only for the call). Tested in
tests/test_slim_imports.py.

LanceDB on Python 3.11 marks its 105 overriding methods with ``overrides.override``, which checks each method
against its base class when the class is created: it reads the base class's name by disassembling the whole
defining module's code up to that point (``dis``), once per method. On Python 3.12 and later LanceDB uses
``typing.override`` instead, which only sets ``__override__ = True``. ``import_lancedb`` lends LanceDB that one
while it imports (``overrides.override`` is put back when the import returns): the same classes and methods as
on 3.12, and ~70 ms less of every process that opens a vector table (0.40 -> 0.33 s to import LanceDB, AMD EPYC,
medians of 3). What is not done: the check of LanceDB's own signatures (a LanceDB bug would raise at its import,
not ours) and copying a base method's docstring onto an overriding method that has none (as on 3.12).

igraph is imported without matplotlib (``import_igraph``): ``import igraph`` imports its drawing package, whose
shape drawers call ``find_matplotlib()`` at import time, ``import matplotlib`` and ``matplotlib.pyplot`` when it is
installed (`pathrag-pipeline[dev]` and ``[bench]`` install it for the lab's plots): ~1.1 s of igraph's 1.15 s on
these machines, in every `pathrag ask` process and engine load, for drawing code the product never calls (answer
pages are our own SVG, query/answer_page.py). matplotlib is hidden while igraph imports (an entry of ``None`` in
``sys.modules`` makes its import raise ImportError, which igraph handles by drawing without it), then the entry is
taken away, so the process can import matplotlib itself afterwards. The one thing lost: igraph's own matplotlib
backend (``igraph.plot`` onto a matplotlib axes) in a process that imported igraph this way first. When matplotlib or
igraph is already imported, nothing is hidden. Tested in tests/test_architecture.py.
"""

from __future__ import annotations

import __future__
import ast
import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

LAZY_ROOTS = ("openai", "lance_namespace_urllib3_client")
HIDDEN_FROM_IGRAPH = ("matplotlib", "matplotlib.pyplot")
_LOCK = threading.RLock()


@dataclass
class ReexportIndex:
    """What a re-export-only ``__init__`` binds: ``lazy`` names come from a submodule (``name -> (submodule,
    attribute)``, attribute None for the submodule itself), ``eager`` ones are set when the package is created
    (its docstring, literals, ``from __future__`` features)."""

    lazy: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    eager: dict[str, Any] = field(default_factory=dict)

    def bind(self, name: str, entry: tuple[str, str | None] | None = None, value: Any = None) -> None:
        """Bind ``name`` as a later statement would: it replaces what earlier ones bound."""
        self.lazy.pop(name, None)
        self.eager.pop(name, None)
        if entry is None:
            self.eager[name] = value
        else:
            self.lazy[name] = entry

    @property
    def submodules(self) -> set[str]:
        """The submodules the ``__init__`` imports, each bound under its first component as a side effect."""
        return {target.split(".")[0] for target, _ in self.lazy.values()}


def reexport_index(source: str, package: str) -> ReexportIndex | None:
    """The names the ``__init__`` source of ``package`` binds, if all it does is re-export from its own submodules
    and assign literals; ``None`` when it does anything else."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    index = ReexportIndex(eager={"__doc__": None})
    for position, statement in enumerate(tree.body):
        if position == 0 and isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            index.eager["__doc__"] = statement.value.value
            continue
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__" and statement.level == 0:
            for alias in statement.names:   # the import binds the feature's name in the module, too
                index.bind(alias.asname or alias.name, value=getattr(__future__, alias.name, None))
            continue
        if isinstance(statement, ast.ImportFrom):
            if statement.level == 1:
                base = statement.module or ""
            elif statement.level == 0 and statement.module and statement.module.startswith(package + "."):
                base = statement.module[len(package) + 1:]
            else:
                return None
            for alias in statement.names:
                if alias.name == "*":
                    return None
                index.bind(alias.asname or alias.name, (base, alias.name) if base else (alias.name, None))
            continue
        if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            try:
                value = ast.literal_eval(statement.value)
            except Exception:   # not a literal (a call, a name): ValueError, TypeError, ...
                return None
            index.bind(statement.targets[0].id, value=value)
            continue
        return None
    submodules = index.submodules
    if any(name in submodules and index.lazy.get(name) != (name, None) for name in [*index.lazy, *index.eager]):
        return None   # a name that is both a submodule and something else: which wins depends on import order
    return index


class _LazyPackage(importlib.abc.Loader):
    """Creates the package module (``__path__`` and all) and gives it a ``__getattr__`` answering from the index."""

    def __init__(self, index: ReexportIndex) -> None:
        self.index = index

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        package, lazy, implied = module.__name__, self.index.lazy, self.index.submodules
        module.__dict__.update(self.index.eager)

        def load(name: str) -> Any:
            target, attribute = lazy[name]
            submodule = importlib.import_module(f"{package}.{target}")
            return submodule if attribute is None else getattr(submodule, attribute)

        # No lock: imports are thread-safe on their own and a binding is the same object whoever makes it (a lock
        # held across the import could deadlock against a thread importing that submodule).
        def __getattr__(name: str) -> Any:
            if name in lazy:
                value = load(name)
            elif name in implied:
                value = importlib.import_module(f"{package}.{name}")
            else:
                if name == "__all__":   # ``from pkg import *`` without one reads __dict__: fill it first
                    for other in lazy:
                        module.__dict__.setdefault(other, load(other))
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            module.__dict__[name] = value
            return value

        def __dir__() -> list[str]:
            return sorted(set(module.__dict__) | set(lazy) | implied)

        module.__dict__["__getattr__"] = __getattr__
        module.__dict__["__dir__"] = __dir__


class LazyPackageFinder(importlib.abc.MetaPathFinder):
    """Makes the re-export-only packages under ``roots`` lazy when they are first imported."""

    def __init__(self, roots: tuple[str, ...] = LAZY_ROOTS) -> None:
        self.roots = roots

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] not in self.roots:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if (spec is None or spec.submodule_search_locations is None or not spec.origin
                or not spec.origin.endswith("__init__.py")):
            return None
        try:
            with open(spec.origin, encoding="utf-8") as handle:
                index = reexport_index(handle.read(), fullname)
        except (OSError, ValueError):   # unreadable, not UTF-8: import it as usual
            return None
        if index is None:
            return None
        spec.loader = _LazyPackage(index)
        return spec


def _import_lazily(*names: str) -> ModuleType:
    """Import ``names`` in order with the lazy packages' finder installed; the first one's module. Once the first
    is in ``sys.modules`` it is imported as usual: ``import_module`` waits for another thread still running its
    ``__init__`` (a module found there is not necessarily initialised yet)."""
    if names[0] in sys.modules:
        return importlib.import_module(names[0])
    with _LOCK:
        finder = LazyPackageFinder()
        sys.meta_path.insert(0, finder)
        try:
            modules = [importlib.import_module(name) for name in names]
        finally:
            sys.meta_path.remove(finder)
        return modules[0]


def import_openai() -> ModuleType:
    """``openai``, with its re-export packages lazy, including ``openai.resources`` (a client's ``.chat`` or
    ``.embeddings`` imports it) and ``openai.types.chat`` (instructor reads its names)."""
    return _import_lazily("openai", "openai.resources", "openai.types.chat")


def _marked_override(method: Any) -> Any:
    """What ``typing.override`` does (Python 3.12+): mark the method, check nothing."""
    try:
        method.__override__ = True
    except (AttributeError, TypeError):   # an object that takes no attributes: typing.override leaves it as it is
        pass
    return method


def import_lancedb() -> ModuleType:
    """``lancedb``, with its REST namespace client's re-export packages lazy, and on Python 3.11 with the
    ``@override`` that it uses on 3.12 and later (see the module docstring)."""
    if "lancedb" in sys.modules or sys.version_info >= (3, 12):
        return _import_lazily("lancedb")
    with _LOCK:
        try:
            import overrides
        except ImportError:   # not installed (a lancedb that no longer needs it): nothing to swap
            return _import_lazily("lancedb")
        checked = overrides.override
        overrides.override = _marked_override
        try:
            return _import_lazily("lancedb")
        finally:
            overrides.override = checked


def import_igraph() -> ModuleType:
    """``igraph``, imported once per process without importing matplotlib (see the module docstring). Once igraph
    is in ``sys.modules`` it is imported as usual (``import_module`` waits for a thread still importing it)."""
    if "igraph" in sys.modules:
        return importlib.import_module("igraph")
    with _LOCK:
        hidden = [name for name in HIDDEN_FROM_IGRAPH if name not in sys.modules]
        if len(hidden) < len(HIDDEN_FROM_IGRAPH):
            hidden = []   # matplotlib is already here: igraph may as well use it
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]
        try:
            return importlib.import_module("igraph")
        finally:
            for name in hidden:
                if sys.modules.get(name, 0) is None:
                    del sys.modules[name]
