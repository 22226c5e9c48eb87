"""A real Spark standalone cluster (a master and N workers) on one machine, for tests and demos.

:class:`StandaloneCluster` starts ``org.apache.spark.deploy.master.Master`` and ``N`` x
``org.apache.spark.deploy.worker.Worker`` from the installed pyspark (``<pyspark>/bin/spark-class``), every
one bound to 127.0.0.1 (``SPARK_LOCAL_IP``) on free ports, and returns once the master reports ``N`` ALIVE
workers. A driver in *another* process (one SparkContext per process) then runs on it with
:func:`floodmark.spark.driver.session.cluster_session`::

    with StandaloneCluster(workers=2, cores=1, memory="1g") as cluster:
        subprocess.run([sys.executable, "my_job.py", cluster.master_url])   # cluster_session(master_url)
        ...
        cluster.kill_worker(0)             # SIGKILL: the worker and its executors, as if the machine died

Everything the cluster writes stays in its work dir: ``master.log``, ``worker-<i>.log`` (the daemons'
output), ``worker-<i>/`` (each worker's work dir: the executors' ``stdout``/``stderr`` per application, relayed
by the worker: a killed worker's executors log no more), ``local-<i>/`` (the executors' shuffle and block
files) and ``conf/`` (the daemons' ``SPARK_CONF_DIR``: the machine's Spark configuration is not used; no REST
submission server, whose port would be fixed). Each daemon runs in its own session (process
group), so a Ctrl-C of the caller does not reach it and :meth:`~StandaloneCluster.stop` can end its whole
process group. :meth:`~StandaloneCluster.processes` lists every process of the cluster (daemons,
executors, their Python workers; read from ``/proc``, Linux), which :meth:`~StandaloneCluster.stop` also
ends, so that nothing is left behind.

Engine-free: it needs Java and the installed pyspark's files, but does not import pyspark.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from floodmark.jvm import ensure_java
from floodmark_dev.processes import free_port, signal_group, tail

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through $http_proxy
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def pyspark_home() -> Path:
    """The installed pyspark's directory: a Spark distribution (``bin/spark-class``, ``jars/``).

    Not ``$SPARK_HOME``: the daemons must be the Spark version the driver's pyspark is.
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed (pip install floodmark[spark])")
    return Path(next(iter(spec.submodule_search_locations)))


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers on loopback (see the module docstring).

    :arg workers: how many workers.
    :arg cores: cores each worker offers (one executor per worker and application by default).
    :arg memory: memory each worker offers to executors (``spark.executor.memory`` must fit: Spark's default
        executor is 1g).
    :arg work_dir: where logs and the workers' files go (default: a temporary folder removed on stop).
    :arg daemon_memory: the master's and workers' own JVM heap (``SPARK_DAEMON_MEMORY``).
    :arg host: the address every daemon binds to and advertises.
    """

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        work_dir: str | Path | None = None,
        daemon_memory: str = "512m",
        host: str = "127.0.0.1",
    ) -> None:
        if workers < 1 or cores < 1:
            raise ValueError(f"a cluster needs at least one worker with one core, got {workers} x {cores}")
        self.worker_count = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.host = host
        self._owns_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="floodmark-spark-"))
        self.spark_home = pyspark_home()
        self.port = 0
        self.web_port = 0
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._seen: dict[int, int] = {}  # pid -> start time: every process of the cluster seen so far

    # ------------------------------------------------------------- lifecycle
    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``: what ``cluster_session`` (``spark.master``) takes."""
        if not self.port:
            raise RuntimeError("the cluster is not started")
        return f"spark://{self.host}:{self.port}"

    @property
    def master_web_url(self) -> str:
        """The master's web UI (on loopback); ``/json/`` is its state as JSON."""
        if not self.web_port:
            raise RuntimeError("the cluster is not started")
        return f"http://{self.host}:{self.web_port}"

    def start(self, timeout_s: float = 120.0) -> StandaloneCluster:
        """Start the master, then the workers; return once the master reports every worker ALIVE."""
        if self.master is not None:
            raise RuntimeError("the cluster is already started")
        atexit.register(self.stop)
        try:
            deadline = time.monotonic() + timeout_s
            self.port, self.web_port = free_port(), free_port()
            self.master = self._launch(
                "master",
                [MASTER_CLASS, "--host", self.host, "--port", str(self.port), "--webui-port", str(self.web_port)],
                {},
            )
            self._wait(lambda: self.state() is not None, deadline, "the master to serve its state")
            for i in range(self.worker_count):
                worker_dir = self.work_dir / f"worker-{i}"
                worker_dir.mkdir(parents=True, exist_ok=True)
                self.workers.append(
                    self._launch(
                        f"worker-{i}",
                        # Port 0: any free port (the worker registers it with the master).
                        [
                            *(WORKER_CLASS, "--host", self.host, "--port", "0", "--webui-port", "0"),
                            *("--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(worker_dir)),
                            self.master_url,
                        ],
                        {"SPARK_LOCAL_DIRS": str(self.work_dir / f"local-{i}")},
                    )
                )
            self._wait(
                lambda: self.alive_workers() == self.worker_count, deadline, f"{self.worker_count} ALIVE workers"
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop every process the cluster started (workers first, then the master), even after a failure.

        Each daemon's process group gets SIGTERM (a worker then stops its executors), SIGKILL after
        ``timeout_s``; any process of the cluster still alive after that (an executor, a Python worker) gets
        SIGKILL. A temporary work dir is removed.
        """
        self.processes()  # remember the executors and Python workers before their parents go
        daemons = [p for p in [*self.workers, self.master] if p is not None]
        for process in daemons:
            signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in daemons:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                signal_group(process, signal.SIGKILL)
                process.wait()
        for process in daemons:  # executors the groups' signals left behind
            signal_group(process, signal.SIGKILL)
        for pid, started in list(self._seen.items()):
            if _start_time(pid) == started:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self.master, self.workers = None, []
        atexit.unregister(self.stop)
        if self._owns_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start() if self.master is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ operations
    def kill_worker(self, index: int, executors: bool = True) -> None:
        """SIGKILL worker ``index`` (no clean shutdown: what a machine crash looks like to Spark).

        :arg executors: also its executors (the worker's process group: they die with it, as on a lost
            machine; their Python workers exit once their executor is gone). ``False`` kills the worker JVM
            only: its executors notice the lost worker and exit by themselves.
        """
        process = self.workers[index]
        self.processes()
        if executors:
            signal_group(process, signal.SIGKILL)
        else:
            process.kill()
        process.wait()

    def state(self) -> dict[str, Any] | None:
        """The master's state (``/json/``: workers, applications), ``None`` while it does not answer."""
        try:
            with _DIRECT.open(f"{self.master_web_url}/json/", timeout=5) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def alive_workers(self) -> int:
        """How many workers the master reports ALIVE (a killed worker stops counting once the master noticed)."""
        state = self.state() or {}
        return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")

    def processes(self, worker: int | None = None) -> list[int]:
        """Pids of every live process of the cluster: daemons, executors, their Python workers (Linux ``/proc``).

        :arg worker: only worker ``worker``'s (the worker, its executors and their Python workers).

        Also remembered, so that :meth:`stop` ends them even after their parent died.
        """
        daemons = [self.master, *self.workers] if worker is None else [self.workers[worker]]
        roots = [p.pid for p in daemons if p is not None and p.poll() is None]
        found = _descendants(roots)
        for pid in found:
            started = _start_time(pid)
            if started is not None:
                self._seen.setdefault(pid, started)
        return sorted(found)

    # ------------------------------------------------------------- internals
    def _launch(self, name: str, args: list[str], extra_env: dict[str, str]) -> subprocess.Popen:
        ensure_java()
        # The daemons' own configuration, not the machine's (no spark-env.sh): no REST submission server (its
        # port is fixed, 6066), every other port is chosen at start.
        conf_dir = self.work_dir / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        (conf_dir / "spark-defaults.conf").write_text("spark.master.rest.enabled false\n")
        env = {
            **os.environ,
            "SPARK_HOME": str(self.spark_home),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            **extra_env,
        }
        with open(self.work_dir / f"{name}.log", "wb") as log:
            process = subprocess.Popen(
                [str(self.spark_home / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.work_dir,
                start_new_session=True,
            )
        return process

    def _wait(self, done, deadline: float, what: str) -> None:
        while not done():
            for name, process in [("master", self.master), *((f"worker-{i}", w) for i, w in enumerate(self.workers))]:
                if process is not None and process.poll() is not None:
                    raise RuntimeError(
                        f"the Spark {name} exited while starting:\n{tail(self.work_dir / f'{name}.log')}"
                    )
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}; logs in {self.work_dir}")
            time.sleep(0.2)


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (field 3 onwards), ``None`` if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot): tells a pid from a later process that reused it."""
    fields = _proc_stat(pid)
    return int(fields[19]) if fields else None


def _descendants(roots: list[int]) -> set[int]:
    """``roots`` and every live process below them (empty where there is no ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        fields = _proc_stat(int(entry.name))
        if fields and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    pending = [pid for pid in roots if _proc_stat(pid) is not None]
    while pending:
        pid = pending.pop()
        if pid not in found:
            found.add(pid)
            pending.extend(children.get(pid, []))
    return found
