"""Technical names in text: the identifiers documentation writes, which capitalisation rules never find.

Documentation names its subjects the way code does: ``lru_cache``, ``os.path.join``, ``JSONDecodeError``,
``getrecursionlimit()``, ``--autosquash``, ``git-rebase(1)``, ``PRAGMA journal_mode``. The offline extractor found
names by capitalisation, so most of these never became entities (8 of 17 checked on a real folder). This module
finds them, in three ways:

- inline code (``text.structure``: single backticks, what every parser writes for ``<code>``, ``literal`` and
  Markdown code spans): its content is a name when it is shaped like one (``code_name``), with a call's arguments,
  an option's value and a man page's section number cut off;
- operators prose calls operators ("the ``->`` and ``->>`` operators");
- bare words of a shape only code has (``bare_names``): snake_case, dotted.names, camelCase and CamelCase with an
  inner capital, calls ``f()``, long options ``--flag`` and man page references ``git-rebase(1)``.

A line made only of such names (a definition term, a signature, an option list: ``--autosquash, --no-autosquash``)
is a *term line* (``is_term``): what follows it defines them.

Code blocks are not prose and are not read for these shapes (a listing holds hundreds of local names). Three kinds of
code line declare the names a page is about, and ``code_line_names`` reads only those: a shell command line
(``$ gunicorn -k gevent app``: the command and its options), a Python import (``from asgiref.wsgi import
WsgiToAsgi``: the package, the module and what it imports) and a string that is one hyphenated capitalised word
(``headers['Strict-Transport-Security']``: an HTTP header, the shape ``heading_name`` takes as a name). Standard
library only.
"""

from __future__ import annotations

import re

MAX_CODE_NAME_CHARS = 60
MAX_CODE_NAME_WORDS = 4

CODE_SPAN = re.compile(r"`([^`\n]{1,200})`")
# a call's or signature's argument list, an option's value, a man page section: cut from the name
_ARGUMENTS = re.compile(r"\s*\(.*\)\s*$|(?<=\w)=.*$|\s*\[.*\]\s*$")
_CODE_WORD = re.compile(r"[A-Za-z_][\w.:/+#-]*|--?[A-Za-z][\w-]*|\.[A-Za-z_][\w.-]*|\*")
MAX_TERM_WORDS = 8
_SEPARATORS = re.compile(r"[\s,/|:*]+|\b(?:or|and)\b")
_OP = r"(?=[^\s]*[<>|&:=!~])[-<>|&:=!~+*/%^]{2,3}"   # two or three symbols, one of them no arithmetic sign
_OPERATOR = re.compile(_OP)
# operators prose names as operators: "the ->> operator", "the -> and ->> operators", "||, && or ! operators"
_NAMED_OPERATORS = re.compile(rf"(?<![^\s(])({_OP}(?:(?:\s*,\s*|\s+(?:and|or)\s+){_OP})*)\s+operators?\b")
_OP_TOKEN = re.compile(rf"(?<!\S){_OP}(?!\S)")
_GROUP = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_LITERALS = frozenset("true false none null nil nan undefined self this yes no on off".split())
_HAS_LETTER = re.compile(r"[A-Za-z]")
# Bare names in prose, each a shape ordinary words never take (plain lowercase words are left to code spans).
_SNAKE = r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
_CAMEL = r"[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Z]{2,}[a-z][A-Za-z0-9]*"
BARE_NAME = re.compile(
    rf"(?<![\w.`/-])(?:"
    rf"(?P<call>(?:{_DOTTED}|{_SNAKE}|[A-Za-z_][A-Za-z0-9_]*)\(\))"          # f(), os.getcwd()
    rf"|(?P<man>[a-z][a-z0-9_.+-]*\([1-8]\))"                               # git-rebase(1)
    rf"|(?P<option>--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)"                        # --autosquash
    rf"|(?P<name>{_DOTTED}|{_SNAKE}|{_CAMEL})"
    rf")(?![\w`-]|\.[A-Za-z_])"
)
# what every alternative of BARE_NAME holds somewhere: an underscore, "()", "--", a dot between word characters,
# a section number in parentheses, or a capital inside a word
_MAYBE_NAME = re.compile(r"_|\(\)|--|\w\.\w|\([1-8]\)|[a-z][A-Z]|[A-Z][A-Z0-9]*[a-z][a-z0-9]*[A-Z]")
# dotted words that are prose, not names
_DOTTED_PROSE = frozenset("e.g i.e etc.al et.al a.m p.m u.s vs.".split())
_UNITS = frozenset("KiB MiB GiB TiB PiB KByte MByte GByte kHz MHz GHz".split())
_FILE_SUFFIXES = frozenset("html htm txt md rst pdf png jpg gif svg css js json xml yml yaml toml ini cfg conf "
                           "py c h cpp sh db sql csv tsv gz zip tar log".split())


def code_name(code: str) -> str | None:
    """The name an inline code span gives, or None when it holds no name (a literal, a number, a snippet).

    ``insort(a, x)`` -> ``insort``; ``--jobs=N`` -> ``--jobs``; ``git-rebase(1)`` -> ``git-rebase``; ``git rebase``
    and ``PRAGMA journal_mode`` stay (up to ``MAX_CODE_NAME_WORDS`` words, each shaped like a code word);
    ``True``, ``0``, ``'utf-8'``, ``x = 1``, ``<branch>`` and one letter are not names.
    """
    name = code.strip().strip(";,")
    while True:
        cut = _ARGUMENTS.sub("", name)
        if cut == name:
            break
        name = cut.strip()
    name = name.rstrip(".:")
    if _OPERATOR.fullmatch(name):
        return name   # an operator documentation names: `->>`, `||`, `::`
    if not name or len(name) > MAX_CODE_NAME_CHARS or not _HAS_LETTER.search(name):
        return None
    if name[0] in "'\"<{[/$~" or name[-1] in "'\">}" or any(ch in name for ch in "=<>{}\"',;|\\"):
        return None
    words = name.split()
    if len(words) > MAX_CODE_NAME_WORDS or not all(_CODE_WORD.fullmatch(word) for word in words):
        return None
    if len(name) == 1 or name.casefold() in _LITERALS:
        return None
    return name


def is_operator(name: str) -> bool:
    """Whether a name is an operator (``->>``, ``||``, ``::``): symbols only, kept verbatim as its own key."""
    return bool(_OPERATOR.fullmatch(name))


def bare_names(sentence: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of each bare technical name in ``sentence`` (see the module docstring), in order; the
    span covers what is written (``f()``, ``git-rebase(1)``), the name drops the parentheses."""
    out = []
    if "operator" in sentence:
        for match in _NAMED_OPERATORS.finditer(sentence):
            for op in _OP_TOKEN.finditer(match.group(1)):
                out.append((op.group(), match.start(1) + op.start(), match.start(1) + op.end()))
    if not _MAYBE_NAME.search(sentence):
        return out   # most sentences hold no character a bare name needs: not scanned
    for match in BARE_NAME.finditer(sentence):
        text = match.group()
        kind = match.lastgroup
        if kind == "call":
            name = text[:-2]
        elif kind == "man":
            name = text[:text.index("(")]
        else:
            name = text
        if kind == "name" and "." not in name and "_" not in name and (len(name) < 4 or name in _UNITS):
            continue   # "MiB", "KiB": units, not names
        if kind == "name" and "." in name:
            parts = name.split(".")
            if (name.casefold() in _DOTTED_PROSE or parts[-1].casefold() in _FILE_SUFFIXES and len(parts) == 2
                    or any(len(p) < 2 for p in parts) or all(p[:1].isupper() for p in parts)):
                continue   # "e.g.", "index.html" (a file, not a code name), "U.S", "Mr.Smith"
        out.append((name, match.start(), match.end()))
    return sorted(out, key=lambda found: found[1]) if out and "operator" in sentence else out


def is_term(line: str) -> bool:
    """Whether a line is only names: code spans and bare names separated by commas, slashes, "or"/"and", with a
    signature's argument list or a trailing colon allowed ("`--autosquash`, `--no-autosquash`", "`insort` (a, x)")."""
    spans = CODE_SPAN.findall(line) if "`" in line else []
    rest = CODE_SPAN.sub(" ", line) if spans else line
    while True:   # arguments and optional parts, nested ones too: "(a, x, lo=0, hi=len(a))"
        cut = _GROUP.sub(" ", rest)
        if cut == rest:
            break
        rest = cut
    if len(rest.split()) > MAX_TERM_WORDS:
        return False   # prose: more words than a term line's names and separators
    bare = bare_names(rest)
    if not bare and not any(code_name(span) for span in spans):
        return False
    for _, start, end in reversed(bare):
        rest = rest[:start] + " " + rest[end:]
    return not _SEPARATORS.sub("", rest)


_KEYWORD = re.compile(r"[A-Z][A-Z0-9_]*")
# a heading that is one word of capitalised parts joined by hyphens names one thing: HTTP headers
# ("X-Content-Type-Options", "Strict-Transport-Security") and hyphenated proper names ("Austria-Hungary"). In a
# sentence the capitalisation rules find such words; a heading's words are never read that way.
_HYPHENATED_NAME = re.compile(r"[A-Z][A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)+")


def heading_name(heading: str) -> str | None:
    """A heading that is one name as a whole: keywords in capitals and a code name, at most ``MAX_CODE_NAME_WORDS``
    words ("PRAGMA cache_size", "`git rebase --onto`"), or one hyphenated capitalised word ("X-Frame-Options"); else
    None. A heading of plain words ("Options", "NAME", "Getting started") is not."""
    text = heading.strip().strip(":.;").replace("`", "")
    if _HYPHENATED_NAME.fullmatch(text):
        return text
    words = text.split()
    if not words or len(words) > MAX_CODE_NAME_WORDS or len(words) < 2:
        return None
    names = [w for w in words if bare_names(w) or code_name(w) and not _KEYWORD.fullmatch(w) and not w.isalpha()]
    if not names or not all(_KEYWORD.fullmatch(w) or w in names for w in words):
        return None
    return text


# Names declared by code lines (``code_line_names``).
_PROMPT_LINE = re.compile(r"\s*\$\s+(.*)")
_SHELL_PREFIXES = frozenset("sudo env time nohup exec command".split())
# shell builtins: the command word of such a line is no name a page is about ("cd", "export FOO=1")
_SHELL_BUILTINS = frozenset("cd export source set unset alias echo exit pwd ls mkdir rm cp mv cat true false".split())
_COMMAND_WORD = re.compile(r"[a-z][a-z0-9_.+-]*[a-z0-9]")
_OPTION_WORD = re.compile(r"(--?[A-Za-z][A-Za-z0-9-]*)(?:=\S*)?")
_SHELL_STOP = frozenset("| || && ; > >> < 2> #".split())
_IMPORT_LINE = re.compile(r"\s*(?:>>>\s+|\.\.\.\s+)?(?:from\s+(?P<module>[A-Za-z_][\w.]*)\s+import\s+(?P<names>[^#]*)"
                          r"|import\s+(?P<modules>[A-Za-z_][\w.]*(?:\s+as\s+\w+)?(?:\s*,\s*[A-Za-z_][\w.]*(?:\s+as\s+\w+)?)*))"
                          r"\s*(?:#.*)?$")
_QUOTED_HYPHENATED = re.compile(r"(?<=['\"])(?:[A-Z][A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)+)(?=['\"])")
MAX_CODE_LINE_CHARS = 300


def code_line_names(line: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of the names one line of a code block declares (see the module docstring), in order;
    [] for every other line. ``$ gunicorn -k gevent 'hello:app'`` -> gunicorn, -k; ``from asgiref.wsgi import
    WsgiToAsgi`` -> asgiref, asgiref.wsgi, WsgiToAsgi; ``r.headers['X-Frame-Options'] = 'DENY'`` -> X-Frame-Options."""
    if len(line) > MAX_CODE_LINE_CHARS:
        return []
    prompt = _PROMPT_LINE.match(line)
    if prompt:
        return _shell_names(line, prompt.start(1))
    found = _import_names(line)
    if found:
        return found
    if "-" in line and ("'" in line or '"' in line):
        return [(m.group(), m.start(), m.end()) for m in _QUOTED_HYPHENATED.finditer(line)]
    return []


def _shell_names(line: str, start: int) -> list[tuple[str, int, int]]:
    words = [(m.group(), m.start()) for m in re.finditer(r"\S+", line[start:])]
    k = 0
    while k < len(words) and (words[k][0] in _SHELL_PREFIXES or "=" in words[k][0]):
        k += 1   # "sudo", "FOO=1 cmd"
    if k == len(words) or words[k][0] in _SHELL_BUILTINS or not _COMMAND_WORD.fullmatch(words[k][0]):
        return []
    command, at = words[k]
    out = [(command, start + at, start + at + len(command))]
    for word, at in words[k + 1:]:
        if word in _SHELL_STOP or word.startswith("#"):
            break
        option = _OPTION_WORD.fullmatch(word)
        if option:
            out.append((option.group(1), start + at, start + at + len(option.group(1))))
    return out


def _import_names(line: str) -> list[tuple[str, int, int]]:
    match = _IMPORT_LINE.fullmatch(line)
    if not match:
        return []
    out: list[tuple[str, int, int]] = []

    def module(name: str, at: int) -> None:
        if len(name) < 2:
            return
        if "." in name:   # the package first: "asgiref" of "asgiref.wsgi"
            top = name.split(".", 1)[0]
            out.append((top, at, at + len(top)))
        out.append((name, at, at + len(name)))

    def imported(name: str, at: int) -> None:
        if len(name) > 1:
            out.append((name, at, at + len(name)))

    if match.group("module"):
        module(match.group("module"), match.start("module"))
        names = match.group("names")
        offset = match.start("names")
        if names.lstrip().startswith("("):   # "from x import (a, b," : the names on this line
            offset += names.index("(") + 1
            names = names[names.index("(") + 1:]
        _unaliased(names, offset, imported)
    else:
        _unaliased(match.group("modules"), match.start("modules"), module)
    return out


def _unaliased(names: str, offset: int, take) -> None:
    """Calls ``take(name, start)`` for each name of an import list, the alias of "X as Y" left out."""
    skip_next = False
    for word in re.finditer(r"[A-Za-z_][\w.]*", names):
        if skip_next:
            skip_next = False
        elif word.group() == "as":
            skip_next = True
        else:
            take(word.group(), offset + word.start())
