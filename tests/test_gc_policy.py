"""The ``pathrag`` process's garbage-collector policy (cli/gc_policy.py): set when a command starts, frozen at exit."""

from __future__ import annotations

import os
import subprocess
import sys

from pathrag_pipeline.cli.gc_policy import THRESHOLDS

# An exit handler registered before the command runs: it runs after the policy's (last-in first-out), so it sees
# the thresholds the command ran with and whether the heap was frozen before the interpreter's own teardown.
PROBE = (
    "import atexit, gc, sys\n"
    "atexit.register(lambda: print('POLICY', gc.get_threshold(), gc.get_freeze_count() > 0, flush=True))\n"
    "from pathrag_pipeline.cli import main\n"
    "sys.argv = ['pathrag', *sys.argv[1:]]\n"
    "sys.exit(main())\n"
)


def _probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_a_command_runs_with_the_policy_and_freezes_the_heap_at_exit():
    done = _probe("status", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout   # the command's own output is intact
    assert f"POLICY {THRESHOLDS} True" in done.stdout


def test_a_failing_command_keeps_its_exit_code_and_message(tmp_path):
    env = {**os.environ, "PATHRAG_HOME": str(tmp_path / "no-home")}
    done = _probe("sql", "SELECT 1", env=env)
    assert done.returncode == 1
    assert "no index at" in done.stderr and "pathrag index" in done.stderr
    assert f"POLICY {THRESHOLDS} True" in done.stdout


def test_importing_the_package_leaves_a_programs_collector_alone():
    probe = ("import gc; before = gc.get_threshold()\n"
             "import pathrag_pipeline.cli, pathrag_pipeline.query.engine\n"
             "print(gc.get_threshold() == before, gc.get_freeze_count())\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "0"], done.stderr
