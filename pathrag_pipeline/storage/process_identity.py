"""Which process a run belongs to, and whether that process is still alive.

A Dagster run killed with ``kill -9`` (an OOM kill, a reboot) stays STARTED in the instance and keeps the
``duckdb`` pool slot its step claimed; every later run waits for it forever (issue 22). Each pathrag run
records ``identity()`` in a run tag; before a new run waits for the pool, ``is_alive`` tells a dead holder
from a live one.

An identity is ``host:pid:start`` where ``start`` is the process's start time in clock ticks since boot
(``/proc/PID/stat`` field 22), so a pid reused by a later process does not pass for the dead one. Where
``/proc`` is missing (not Linux) ``start`` is empty and the pid alone is checked. A process on another host
cannot be checked from here: ``is_alive`` answers None (unknown) and callers treat it as alive.
No Dagster import: plain process facts.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat from field 3 (the state) on, or [] where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # the command name (field 2) is in parentheses and may hold spaces or parentheses: split after the last ')'
    return stat[stat.rfind(")") + 2:].split()


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot, or '' where /proc cannot tell."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else ""


def identity(pid: int | None = None) -> str:
    """``host:pid:start`` of this process (or of ``pid`` on this host)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def parse(value: str) -> tuple[str, int, str] | None:
    """(host, pid, start) of an identity, or None when it is not one."""
    host, _, rest = value.rpartition(":")
    host, _, pid = host.rpartition(":")
    if not host or not pid.isdigit():
        return None
    return host, int(pid), rest


def is_alive(value: str) -> bool | None:
    """Whether the process named by ``value`` still runs: True, False, or None when it cannot be told
    (another host, or not an identity)."""
    parsed = parse(value)
    if parsed is None:
        return None
    host, pid, start = parsed
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # it exists, owned by another user
        pass
    if start and Path("/proc").is_dir():
        fields = _stat(pid)
        # gone, a zombie (killed, not yet reaped by its parent), or a later process that reused the pid
        return len(fields) > 19 and fields[0] != "Z" and fields[19] == start
    return True


def describe(value: str) -> str:
    """'pid N on HOST' for messages (the identity itself when it does not parse)."""
    parsed = parse(value)
    return f"pid {parsed[1]} on {parsed[0]}" if parsed else value
