"""Worker processes end with their parent (issue 61, item 7): kill -9 the parent, and no worker of it lives on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

PARENT = """
import os, sys, time
from pathrag_pipeline.worker_processes import worker_pool

if __name__ == "__main__":
    pool = worker_pool(2)
    [f.result() for f in [pool.submit(os.getpid) for _ in range(8)]]   # start both workers
    print(" ".join(map(str, pool._processes)), flush=True)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for this purpose (it waits for its new parent, init, to collect it)
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_end_when_their_parent_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(p) for p in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30      # a bound on the wait, not a timing claim: the watch looks every 1 s
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in workers)
    finally:
        if parent.poll() is None:
            parent.kill()


INTERRUPTED = """
import signal, sys, time
from pathrag_pipeline.worker_processes import worker_pool

if __name__ == "__main__":
    # as a command run from a terminal: Ctrl-C raises KeyboardInterrupt (the test runner may have started this
    # process with SIGINT ignored, which a child inherits)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    pool = worker_pool(2)
    [f.result() for f in [pool.submit(sum, [1]) for _ in range(4)]]   # both workers started
    jobs = [pool.submit(time.sleep, 2) for _ in range(2)]
    try:
        print("ready", flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        pool.shutdown(wait=True, cancel_futures=True)   # the workers, ignoring Ctrl-C, finish their job and stop
        sys.exit(130)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups")
def test_ctrl_c_reaches_the_parent_alone_and_no_worker_prints_a_traceback(tmp_path):
    """Ctrl-C signals the whole process group; the workers leave it to the parent (issue 61, item 5)."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        os.killpg(parent.pid, signal.SIGINT)
        _, err = parent.communicate(timeout=60)
        assert parent.returncode == 130 and "Traceback" not in err and err.strip() == "interrupted"
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
