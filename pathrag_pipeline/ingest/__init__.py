"""Ingest: folder -> ``documents`` -> ``chunks``. Scans a folder incrementally (content hashes), parses
each supported format, records bad files as per-document errors, and chunks text into token windows.

May import: ``errors``, ``config``, ``text``, ``storage``.
"""
