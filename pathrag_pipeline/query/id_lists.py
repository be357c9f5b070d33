"""Per-row lists of ids (an entity's or relation's chunk ids, document ids) held as integer codes.

The graph snapshot keeps, for every entity and relation, the chunks and documents it was extracted from
(``source_chunk_ids``, ``document_ids``: up to 300 each). A query reads those lists for the few rows on its
kept paths and seeds; holding every reference as a Python string in a tuple made loading the graph pay one
string object per reference (2.3M of them on a 100 MB folder: most of a new ``pathrag ask``'s graph stage and
~200 MB). :class:`IdLists` holds them as a CSR layout instead: ``offsets`` (one per row, plus the end),
``codes`` (int32, one per reference) into ``names`` (each distinct id once, in order of first appearance), and
builds a row's tuple only when it is read; rows are put in another order by their codes (``take``), never by
copying their strings. It is a ``Sequence[tuple[str, ...]]``, so callers index it as they
indexed the list of tuples it replaces.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence

import numpy as np


class IdLists(Sequence):
    """Rows of ids as CSR codes into one vocabulary; ``lists[i]`` is row ``i``'s ids, a tuple of strings."""

    __slots__ = ("_bounds", "_codes", "names", "first_seen")

    def __init__(self, offsets: np.ndarray, codes: np.ndarray, names: list[str], *, first_seen: bool) -> None:
        # held as arrays of the standard library: a row read from them is ~2x faster than through numpy's scalar
        # indexing and slicing (~0.3 us against ~0.6), and ``offsets``/``codes`` are numpy views of them
        self._bounds = array("q", np.ascontiguousarray(offsets, dtype=np.int64).tobytes())
        self._codes = array("i", np.ascontiguousarray(codes, dtype=np.int32).tobytes())
        self.names = names   # each id once (ids no row holds may remain after ``take``)
        # names numbered in order of first appearance over the rows, each held by some row (from_rows, from_arrow)
        self.first_seen = first_seen

    @property
    def offsets(self) -> np.ndarray:
        """Row ``i`` is ``codes[offsets[i]:offsets[i + 1]]`` (int64, one more than the rows)."""
        return np.frombuffer(self._bounds, dtype=np.int64)

    @property
    def codes(self) -> np.ndarray:
        """Each reference's index into ``names`` (int32)."""
        return np.frombuffer(self._codes, dtype=np.int32)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[str] | None]) -> IdLists:
        """From Python sequences (``None`` counts as empty)."""
        index: dict[str, int] = {}
        offsets, codes = [0], []
        for row in rows:
            codes.extend(index.setdefault(i, len(index)) for i in (row or ()))
            offsets.append(len(codes))
        return cls(np.asarray(offsets), np.asarray(codes), list(index), first_seen=True)

    @classmethod
    def from_arrow(cls, column) -> IdLists:
        """From an Arrow list-of-strings array or chunked array (DuckDB's ``VARCHAR[]``), without a Python string
        per reference: the values are dictionary-encoded by Arrow (codes in first-appearance order). A null row
        counts as empty."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
        if column.null_count:
            column = pc.if_else(column.is_null(), pa.scalar([], column.type), column)
        offsets = column.offsets.to_numpy().astype(np.int64)   # a sliced array's offsets start past 0
        values = column.flatten()                               # the slice's values only
        encoded = pc.dictionary_encode(values)
        return cls(offsets - offsets[0], encoded.indices.to_numpy(zero_copy_only=False),
                   encoded.dictionary.to_pylist(), first_seen=True)

    def take(self, rows: np.ndarray) -> IdLists:
        """These rows, in this order, with the same names (so no longer numbered in order of first appearance:
        :meth:`renumbered` does that). Moves integer codes only: putting rows of Arrow strings in order copied
        every string (~0.1-0.5 s for a 100 MB folder's relations, varying with the allocator)."""
        rows = np.asarray(rows, dtype=np.int64)
        offsets = self.offsets
        starts = offsets[rows]
        lengths = offsets[rows + 1] - starts
        bounds = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        gather = np.repeat(starts - bounds[:-1], lengths) + np.arange(bounds[-1], dtype=np.int64)
        return IdLists(bounds, self.codes[gather], self.names, first_seen=False)

    def renumbered(self) -> IdLists:
        """The same rows with names numbered in order of first appearance and only the names some row holds (what
        ``from_rows`` of these rows gives): ``self`` when they already are."""
        if self.first_seen:
            return self
        codes = self.codes
        used, first = np.unique(codes, return_index=True)
        order = used[np.argsort(first, kind="stable")]     # old codes, by first appearance
        new_code = np.empty(len(self.names), dtype=np.int32)
        new_code[order] = np.arange(len(order), dtype=np.int32)
        return IdLists(self.offsets, new_code[codes], [self.names[c] for c in order.tolist()], first_seen=True)

    def __len__(self) -> int:
        return len(self._bounds) - 1

    def __getitem__(self, row: int) -> tuple[str, ...]:   # type: ignore[override]
        n = len(self._bounds) - 1
        if not -n <= row < n:
            raise IndexError(f"row {row} of {n}")
        if row < 0:
            row += n
        names = self.names
        return tuple([names[c] for c in self._codes[self._bounds[row]:self._bounds[row + 1]]])

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        names, codes, bounds = self.names, self._codes, self._bounds
        for lo, hi in zip(bounds, bounds[1:]):
            yield tuple([names[c] for c in codes[lo:hi]])

    def rows(self) -> np.ndarray:
        """The row of each code (``codes[k]`` belongs to row ``rows()[k]``)."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.offsets))

    def reference_count(self) -> int:
        return len(self.codes)
