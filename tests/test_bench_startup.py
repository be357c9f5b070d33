"""The start-up benchmark's runner: it measures a real invocation and refuses to report a failed one."""

import os

import pytest

from pathrag_pipeline.bench.startup import time_command
from pathrag_pipeline.config import PACKAGE_ROOT


def test_time_command_reports_medians_of_a_real_run():
    figures = time_command(["--version"], code_root=PACKAGE_ROOT, env=dict(os.environ), repeats=1)
    assert figures["runs"] == 1
    assert figures["wall_s"] > 0 and figures["cpu_s"] >= 0


def test_a_failing_command_is_an_error_not_a_figure():
    with pytest.raises(RuntimeError, match="no-such-command"):
        time_command(["no-such-command"], code_root=PACKAGE_ROOT, env=dict(os.environ), repeats=1)


def test_before_runs_ahead_of_every_run_warm_up_included(tmp_path):
    calls = []
    time_command(["--version"], code_root=PACKAGE_ROOT, env=dict(os.environ), repeats=2,
                 before=lambda: calls.append(len(calls)))
    assert calls == [0, 1, 2]
