"""A document's structure as its text carries it: the Markdown marks every parser writes into ``documents.text``.

Every format is stored as plain text with three marks, the ones Markdown uses and every LLM reads:

- a heading is a line of its own, ``#`` repeated by its level (1-6), a space, the heading: ``## Options``;
- a code block is fenced by lines opening with three backticks (the opening one may name a language);
- inline code is in single backticks: ``insort(a, x)``.

Nothing else is marked (lists, emphasis and links are plain text), so the text reads as what a reader sees. Its
readers tell headings, code and prose apart with ``blocks``; the chunker gives each chunk the headings it sits
under (``Outline``), so a window cut out of a long page still says where it is. Standard library only.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

MAX_LEVEL = 6
FENCE = "```"
SECTION_SEPARATOR = " > "

_HEADING = re.compile(r"(#{1,6}) +(\S.*?)\s*$")
_INLINE_MARKS = re.compile(r"`+|\*\*|__")


def heading_line(level: int, text: str) -> str:
    """``text`` as a heading line of ``level`` (clamped to 1-6), its inner whitespace collapsed."""
    return "#" * min(MAX_LEVEL, max(1, level)) + " " + " ".join(text.split())


def code_block(code: str, language: str = "") -> str:
    """``code`` fenced; a line of the code that would close the fence is indented by a space."""
    lines = [(" " + line if line.lstrip().startswith(FENCE) else line) for line in code.strip("\n").split("\n")]
    return f"{FENCE}{language}\n" + "\n".join(lines) + f"\n{FENCE}"


def inline_code(code: str) -> str:
    """``code`` in backticks, whitespace collapsed; backticks inside it become quotes, so the span stays one."""
    code = " ".join(code.replace("`", "'").split())
    return f"`{code}`" if code else ""


def plain(text: str) -> str:
    """A heading or a line without its marks: no leading ``#``, no backticks or bold marks."""
    match = _HEADING.fullmatch(text.strip())
    if match:
        text = match.group(2)
    return " ".join(_INLINE_MARKS.sub("", text).split())


def is_fence(line: str) -> bool:
    return line.lstrip().startswith(FENCE)


@dataclass(frozen=True, slots=True)
class Block:
    """A heading line, a code block (fences excluded) or a run of prose lines between blank lines."""

    kind: str        # "heading", "code" or "text"
    text: str        # heading: its text without '#'; code: the lines inside the fences; text: the lines
    level: int = 0   # heading level, 0 for the other kinds
    start: int = 0   # offset of the block's first character in the text it was read from


def blocks(text: str) -> list[Block]:
    """The text as headings, code blocks and prose paragraphs, in order. A fence left open runs to the end (a chunk
    cut inside a code block); a ``#`` line inside code is code."""
    out: list[Block] = []
    prose: list[str] = []
    prose_start = 0
    code: list[str] | None = None
    code_start = 0
    offset = 0

    def end_prose() -> None:
        if prose:
            out.append(Block("text", "\n".join(prose), 0, prose_start))
            prose.clear()

    for line in text.split("\n"):
        here, offset = offset, offset + len(line) + 1
        if code is not None:
            if is_fence(line):
                out.append(Block("code", "\n".join(code), 0, code_start))
                code = None
            else:
                code.append(line)
            continue
        if is_fence(line):
            end_prose()
            code, code_start = [], here
            continue
        match = _HEADING.fullmatch(line)
        if match:
            end_prose()
            out.append(Block("heading", match.group(2), len(match.group(1)), here))
        elif line.strip():
            if not prose:
                prose_start = here
            prose.append(line)
        else:
            end_prose()
    end_prose()
    if code is not None and any(line.strip() for line in code):
        out.append(Block("code", "\n".join(code), 0, code_start))
    return out


@dataclass(frozen=True, slots=True)
class Context:
    """Where an offset of a text sits: the headings above it (outermost first, as (level, text)) and whether it is
    inside a code block."""

    headings: tuple[tuple[int, str], ...] = ()
    in_code: bool = False

    @property
    def section(self) -> str:
        """The heading path as one line, marks removed: "Git User Manual > Branching"."""
        return SECTION_SEPARATOR.join(plain(text) for _, text in self.headings)

    def prefix(self, first_line: str = "") -> str:
        """What a window starting here needs before its text to read as it does in place: the headings above it
        as heading lines (those a heading opening the window, ``first_line``, replaces are left out) and an
        opening fence when it starts inside code; empty when none is needed."""
        headings = self.headings
        match = None if self.in_code else _HEADING.fullmatch(first_line)
        if match:
            level = len(match.group(1))
            headings = tuple(h for h in headings if h[0] < level)
        lines = [heading_line(level, text) for level, text in headings]
        if self.in_code:
            lines.append(FENCE)
        return "\n".join(lines) + ("\n\n" if lines and not self.in_code else "\n" if lines else "")


class Outline:
    """The headings and code blocks of one text, to answer ``at(offset)`` for any offset (one scan, then bisection)."""

    def __init__(self, text: str):
        self._events: list[int] = []                                # offsets where the context changes
        self._contexts: list[Context] = [Context()]                 # the context from each event on
        stack: list[tuple[int, str]] = []
        in_code = False
        offset = 0
        for line in text.split("\n"):
            here, offset = offset, offset + len(line) + 1
            if is_fence(line):
                in_code = not in_code
                # the fence line itself belongs to the code block it opens or closes
                self._push(here if in_code else offset, Context(tuple(stack), in_code))
                continue
            if in_code:
                continue
            match = _HEADING.fullmatch(line)
            if match:
                level = len(match.group(1))
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, match.group(2)))
                self._push(here, Context(tuple(stack), False))

    def _push(self, offset: int, context: Context) -> None:
        if self._events and self._events[-1] == offset:
            self._contexts[-1] = context
        else:
            self._events.append(offset)
            self._contexts.append(context)

    def at(self, offset: int) -> Context:
        """The context of the character at ``offset`` (a heading line is under itself)."""
        return self._contexts[bisect.bisect_right(self._events, offset)]
