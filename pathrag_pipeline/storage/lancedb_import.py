"""Importing LanceDB without its REST namespace client: about 0.9 of its 1.3-1.8 s import on these machines.

``import lancedb`` imports ``lance_namespace``, which takes a few request and response models from
``lance_namespace_urllib3_client``: an OpenAPI-generated REST client whose package ``__init__`` imports all nine
API modules (hundreds of pydantic-validated methods; ``python -X importtime -c "import lancedb"`` shows them at
~1.1 s) before any of its models. Local and object-store tables never call that client. Every edit re-index and
every ``pathrag query`` process paid it (issue 23: a one-file edit at 100 MB had ~1.3 s of LanceDB import).

``import_lancedb`` imports the package with its ``__init__`` deferred: the package module exists with its
``__path__``, so its ``models`` submodules import as usual, and the first lookup of any name it does not yet hold
(``lance_namespace_urllib3_client.ApiClient``, ``__version__``) runs the real ``__init__`` in place and answers
from it. Nothing else changes: the finder answers for that one module name, only when it was not imported yet,
and gives way to the normal import when the package cannot be found. Tested in tests/test_vector_location.py.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from types import ModuleType
from typing import Any

DEFERRED_PACKAGE = "lance_namespace_urllib3_client"
_LOCK = threading.Lock()


class _DeferredInit(importlib.abc.Loader):
    """Runs the real loader's ``exec_module`` on the first attribute the package lacks."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None   # the default module: __name__, __path__, __spec__ set from the spec

    def exec_module(self, module: ModuleType) -> None:
        real = self.real
        init_lock = threading.Lock()

        def __getattr__(name: str) -> Any:
            with init_lock:
                if module.__dict__.get("__getattr__") is __getattr__:
                    del module.__dict__["__getattr__"]
                    real.exec_module(module)   # type: ignore[attr-defined]
            return getattr(module, name)

        module.__dict__["__getattr__"] = __getattr__


class _DeferredInitFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != DEFERRED_PACKAGE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _DeferredInit(spec.loader)
        return spec


def import_lancedb() -> ModuleType:
    """``lancedb``, imported (once per process) with the REST client's package ``__init__`` deferred."""
    module = sys.modules.get("lancedb")
    if module is not None:
        return module
    with _LOCK:
        finder = None
        if DEFERRED_PACKAGE not in sys.modules:
            finder = _DeferredInitFinder()
            sys.meta_path.insert(0, finder)
        try:
            import lancedb
        finally:
            if finder is not None:
                sys.meta_path.remove(finder)
        return lancedb
