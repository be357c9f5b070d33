"""The indexed folder's ignore file: paths a user keeps out of the index, in .gitignore's syntax.

A folder exported from a wiki or a documentation build holds what a user wants asked about beside what they do
not (``_static/`` scripts and styles, changelogs, generated indexes, a drafts folder). ``.pathragignore`` at the
folder's top holds patterns exactly as a ``.gitignore`` does (``pathspec``'s ``GitIgnoreSpec``: ``*.log``,
``drafts/``, ``/changelog*``, ``!keep.md``, ``**/build/``), matched against paths relative to the folder. A file it
matches is not read; a folder it matches is not entered (as git does: a ``!`` pattern cannot bring back a file
inside an ignored folder). The file is hidden, so it is never indexed itself.

What a scan skips this way leaves the index as a deleted file does, on the next run; the run reports how many files
it ignored. The usual refusals still hold: a pattern that would leave the folder empty of supported files while
the home holds documents is refused (``home_folder``), nothing changed. An ignore file that cannot be read or holds
a pattern that cannot be compiled stops the run before it changes anything (``IgnoreFileError``): going on without
it could index what the user meant to keep out.
"""

from __future__ import annotations

import os
import stat as stat_module
from pathlib import Path

from pathrag_pipeline.errors import PipelineError

IGNORE_FILE = ".pathragignore"
MAX_IGNORE_BYTES = 1024 * 1024   # an ignore file is a few lines; anything larger is not one


class IgnoreFileError(PipelineError, ValueError):
    """The folder's ignore file cannot be used; the message names it, the problem and the fix."""


class IgnoreRules:
    """The compiled patterns of one folder's ignore file (``of_folder``)."""

    def __init__(self, lines: list[str], source: Path) -> None:
        import pathspec

        self.source = source
        try:
            self._spec = pathspec.GitIgnoreSpec.from_lines(lines)
        except (ValueError, TypeError) as exc:   # pathspec's GitWildMatchPatternError is a ValueError
            raise IgnoreFileError(f"{source}: {exc}; fix or remove that line (the syntax is .gitignore's). Nothing "
                                  "was changed") from None

    @classmethod
    def of_folder(cls, root: Path) -> "IgnoreRules | None":
        """The rules of ``root/.pathragignore``; None when there is no such file (everything is read)."""
        source = Path(root) / IGNORE_FILE
        try:
            os.lstat(source)   # the name itself: a link to nothing is an ignore file that cannot be read, not none
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _unreadable(source, exc) from None
        try:
            info = os.stat(source)
        except OSError as exc:
            raise _unreadable(source, exc) from None
        if not stat_module.S_ISREG(info.st_mode):
            raise IgnoreFileError(f"{source} is not a regular file; make it a text file of .gitignore patterns or "
                                  "remove it. Nothing was changed")
        if info.st_size > MAX_IGNORE_BYTES:
            raise IgnoreFileError(f"{source} is {info.st_size:,} bytes, over {MAX_IGNORE_BYTES:,} for a list of "
                                  "patterns; is it the right file? Nothing was changed")
        try:
            text = source.read_bytes().decode("utf-8-sig")
        except OSError as exc:
            raise _unreadable(source, exc) from None
        except UnicodeDecodeError as exc:
            raise IgnoreFileError(f"{source} is not UTF-8 text (byte {exc.start}); save it as UTF-8. Nothing was "
                                  "changed") from None
        return cls(text.splitlines(), source)

    def ignores_file(self, rel_path: str) -> bool:
        return self._spec.match_file(rel_path)

    def ignores_folder(self, rel_folder: str) -> bool:
        """Whether a subfolder (its path relative to the folder, no trailing slash) is left out with all it holds."""
        return self._spec.match_file(rel_folder + "/")


def _unreadable(source: Path, exc: OSError) -> IgnoreFileError:
    return IgnoreFileError(f"cannot read {source}: {exc.strerror or exc}; fix it (its permissions, or where it links "
                           "to) or remove it: the run stops rather than index what it may list. Nothing was changed")
