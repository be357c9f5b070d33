"""The services a cluster run leans on, run on 127.0.0.1 as their own processes: a Redis broker for
dagster-celery and an S3-compatible object store (moto's server) for shard data and LanceDB tables.

Each is started on a free port, waited for until it answers, and stopped (terminate, then kill) on exit; its
output goes to a log file in the given folder. When the program is missing, ``ServiceUnavailable`` says what
to install, so a test can skip with that reason. Standard library only (moto and redis-server are programs
here, not imports).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

S3_KEY_ID = "pathrag-test-key-id"
S3_SECRET = "pathrag-test-secret-key"      # moto accepts any credentials; never a real key
S3_REGION = "us-east-1"


class ServiceUnavailable(RuntimeError):
    """A backing service could not be started here; the message says what to install or check."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(process: subprocess.Popen, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _program(name: str, install: str) -> str:
    """``name`` on PATH or beside this Python (a virtualenv's scripts are not always on PATH); missing,
    ``ServiceUnavailable`` saying how to ``install`` it."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise ServiceUnavailable(f"{name} is not installed: {install}")
    return found


class _ServiceProcess:
    """One server process on a free port of 127.0.0.1."""

    name = "service"
    start_timeout = 20.0

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.port = 0
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        log = open(self.workdir / f"{self.name}.log", "wb")
        try:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.workdir, start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = (self.workdir / f"{self.name}.log").read_text(errors="replace")[-300:]
                raise ServiceUnavailable(f"{self.name} exited at start (code {self.process.returncode}): {tail}")
            if self.ready():
                return self
            time.sleep(0.1)
        self.stop()
        raise ServiceUnavailable(f"{self.name} did not answer on 127.0.0.1:{self.port} within "
                                 f"{self.start_timeout:.0f} s (see {self.workdir / (self.name + '.log')})")

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process, grace=10)
        self.process = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisServer(_ServiceProcess):
    """``redis-server`` with no persistence: the dagster-celery broker and result backend."""

    name = "redis-server"

    def command(self) -> list[str]:
        program = _program("redis-server", "install redis-server (apt-get install redis-server)")
        return [program, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.workdir)]

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"


class S3Server(_ServiceProcess):
    """moto's S3-compatible server (``moto_server`` from ``moto[server]``, the ``distributed`` extra)."""

    name = "moto_server"

    def command(self) -> list[str]:
        program = _program("moto_server", "pip install -e '.[distributed]' (it brings moto[server])")
        return [program, "-H", "127.0.0.1", "-p", str(self.port)]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.endpoint + "/", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True     # it answers: an error status is still a running server
        except OSError:
            return False

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` (moto does not check signatures: a plain PUT does it)."""
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT", data=b"")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def env(self) -> dict[str, str]:
        """The standard AWS_* variables that point boto3 (Dagster's S3 IO manager) and LanceDB at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": S3_KEY_ID,
                "AWS_SECRET_ACCESS_KEY": S3_SECRET, "AWS_REGION": S3_REGION, "AWS_DEFAULT_REGION": S3_REGION,
                "AWS_ALLOW_HTTP": "true"}

    def storage_options(self) -> dict[str, str]:
        """The same as LanceDB storage options (PATHRAG_LANCEDB_STORAGE_OPTIONS), for a process without AWS_*."""
        return {"aws_endpoint": self.endpoint, "aws_access_key_id": S3_KEY_ID,
                "aws_secret_access_key": S3_SECRET, "aws_region": S3_REGION, "allow_http": "true"}


class CeleryWorker:
    """One dagster-celery worker process, as it would be started on another host: ``celery -A dagster_celery.app
    worker`` serving ``queues``, one task at a time in its own main process (``--pool solo``), so the pid a step
    reports is this process's. Broker and result backend come from CELERY_BROKER_URL / CELERY_RESULT_BACKEND;
    the worker gets ``env`` (DAGSTER_HOME, PATHRAG_*, AWS_*) on top of this process's environment."""

    start_timeout = 120.0   # a loaded 2-core machine takes a while to import celery + dagster

    def __init__(self, name: str, queues: list[str], broker: str, env: dict[str, str], workdir: Path) -> None:
        self.name, self.queues, self.broker = name, list(queues), broker
        self.env = {**os.environ, **env, "CELERY_BROKER_URL": broker, "CELERY_RESULT_BACKEND": broker}
        self.log_path = Path(workdir) / f"celery-{name}.log"
        self.process: subprocess.Popen | None = None
        self._pid = 0

    def command(self) -> list[str]:
        program = _program("celery", "pip install -e '.[distributed]'")
        return [program, "-A", "dagster_celery.app", "worker", "--pool", "solo", "--prefetch-multiplier", "1",
                "-Q", ",".join(self.queues), "-n", f"{self.name}@%h", "--loglevel", "INFO",
                "--without-gossip", "--without-mingle", "--without-heartbeat"]

    def start(self) -> "CeleryWorker":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True)
        self._pid = self.process.pid
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            if self.process.poll() is not None:
                raise ServiceUnavailable(f"celery worker {self.name} exited at start: {text[-400:]}")
            if " ready." in text:
                return
            time.sleep(0.2)
        raise ServiceUnavailable(f"celery worker {self.name} not ready within {self.start_timeout:.0f} s "
                                 f"(see {self.log_path})")

    @property
    def pid(self) -> int:
        """The worker's process id (kept after it stops)."""
        return self._pid

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process, grace=30)   # SIGTERM is celery's warm shutdown: it finishes the task in hand
        self.process = None


def start_workers(specs: list[tuple[str, list[str]]], broker: str, env: dict[str, str],
                  workdir: Path) -> list[CeleryWorker]:
    """Start every worker of ``specs`` ((name, queues)) at once, then wait until all are ready; on any failure
    the started ones are stopped."""
    workers = [CeleryWorker(name, queues, broker, env, workdir) for name, queues in specs]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.wait_ready()
    except BaseException:
        for worker in workers:
            worker.stop()
        raise
    return workers
