"""Where the instances of ``pgs batch`` and ``pgs eval`` run: here, or on a Ray cluster.

An :class:`Executor` takes jobs (a module-level function and its arguments, keyed by instance
id), runs them, and hands each result back to the driver as it arrives; the driver (batch.py,
evaluate.py) decides what to submit next, writes every file and enforces the cost limit. Two
implementations:

- :class:`LocalExecutor` (the default): threads in this process. Jobs see the output
  folder and write into it as they go (a ``.traj`` after every step).
- :class:`RayExecutor` (``--executor ray``): each job is a Ray task that needs one unit of the
  custom resource ``docker`` (so it lands only on nodes started with ``--resources
  '{"docker": N}'``, at most N at once per node), builds or reuses its image in that node's
  Docker daemon, and returns what it wrote; the driver writes it. A task whose node dies is
  retried on another node by Ray (``max_retries``; a failure inside the job is a result, never
  retried). Containers belong to the Ray worker process that started them and go with it.

``shares_files`` tells the driver which kind of job to submit: one that writes into the output
folder, or a detached one that works in a scratch folder and returns its files.

Errors: :class:`ExecutorError` (an :class:`~agent.errors.InputError`: one line, exit code 2) when
Ray is missing or the cluster cannot be reached or has no ``docker`` resource.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agent.errors import ExecutorError

#: The custom Ray resource a node offers per instance it may run at once.
RESOURCE = "docker"
#: How often Ray reruns a task whose worker or node died (not a job's own failure).
MAX_RETRIES = 3
ExecutorName = Literal["local", "ray"]


@dataclass
class Done:
    """One finished job: its key and its return value, or the exception it ended with."""

    key: str
    value: Any = None
    error: BaseException | None = None


class Executor(Protocol):
    """Runs jobs, ``workers`` at a time at most, and reports each when it finishes."""

    workers: int
    #: Whether jobs see the driver's files; if not, they must return what they wrote.
    shares_files: bool

    def submit(self, key: str, fn: Callable[..., Any], *args: Any) -> None:
        """Start ``fn(*args)``; ``fn`` must be a module-level function where files are not
        shared (it is shipped by reference to another process)."""
        ...

    def in_flight(self) -> int:
        """Jobs submitted and not yet returned by :meth:`wait`."""
        ...

    def wait(self, timeout: float) -> list[Done]:
        """The jobs that finished, after at most ``timeout`` seconds (maybe none)."""
        ...

    def abandon(self) -> None:
        """Stop every running job now (a second Ctrl-C); their results are not waited for."""
        ...

    def close(self) -> None:
        """Wait for running jobs to end and free what the executor holds."""
        ...


class LocalExecutor:
    """Jobs in threads of this process, one thread per job (the driver submits at most
    ``workers`` at once). The threads are daemons: a job that does not end when the command is
    stopped (a pull or a clone that does not return) never keeps the process from exiting; its
    temporary trees are removed by the next ``pgs`` (:mod:`envs.scratch`)."""

    shares_files = True

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._futures: dict[Future[Any], str] = {}
        self._threads: list[threading.Thread] = []
        self._abandoned = False

    def submit(self, key: str, fn: Callable[..., Any], *args: Any) -> None:
        future: Future[Any] = Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                value = fn(*args)
            except BaseException as e:  # the driver gets it as Done.error
                future.set_exception(e)
            else:
                future.set_result(value)

        thread = threading.Thread(target=job, name=f"pgs-job-{key}", daemon=True)
        self._futures[future] = key
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def in_flight(self) -> int:
        return len(self._futures)

    def wait(self, timeout: float) -> list[Done]:
        if not self._futures:
            return []
        done, _ = wait(self._futures, timeout=timeout, return_when=FIRST_COMPLETED)
        out = []
        for future in done:
            key = self._futures.pop(future)
            error = future.exception()
            out.append(Done(key, None if error else future.result(), error))
        return out

    def abandon(self) -> None:
        """Threads cannot be stopped: their results are no longer waited for (the caller ends
        their work, e.g. by removing their containers)."""
        self._futures.clear()
        self._abandoned = True

    def close(self) -> None:
        for thread in [] if self._abandoned else self._threads:
            if thread is not threading.current_thread():
                thread.join()
        self._threads = []


def _ray() -> Any:
    """The ``ray`` module, or one sentence saying how to get it."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            "--executor ray needs Ray: install the extra with pip install 'pgs-agent[ray]' "
            "(from a checkout: pip install -e '.[ray]')"
        ) from None
    return ray


class RayExecutor:
    """Jobs as Ray tasks on the nodes that offer the ``docker`` resource."""

    shares_files = False

    def __init__(
        self, workers: int, address: str | None = None, *, retries: int = MAX_RETRIES
    ) -> None:
        ray = _ray()
        self.workers = workers
        self.retries = retries
        self._ray = ray
        self._refs: dict[Any, str] = {}
        self._tasks: dict[Callable[..., Any], Any] = {}
        self._started_here = False
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, log_to_driver=False, logging_level="warning")
                else:  # a one-machine cluster for this process, with a Docker slot per worker
                    ray.init(
                        resources={RESOURCE: workers},
                        include_dashboard=False,
                        log_to_driver=False,
                        logging_level="warning",
                    )
                    self._started_here = True
            except (ConnectionError, RuntimeError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ExecutorError(
                    f"cannot connect to the Ray cluster at {address}: {first}; start it with "
                    "`ray start --head --resources '{\"docker\": 1}'` and pass its address"
                ) from None
        if not ray.cluster_resources().get(RESOURCE):
            self.close()
            raise ExecutorError(
                f"the Ray cluster at {address or 'this machine'} has no node with the "
                f"'{RESOURCE}' resource: start each Docker node with "
                f"`ray start ... --resources '{{\"{RESOURCE}\": N}}'` (N instances at once)"
            )

    def submit(self, key: str, fn: Callable[..., Any], *args: Any) -> None:
        if fn not in self._tasks:  # exported to the cluster once, not per instance
            self._tasks[fn] = self._ray.remote(
                num_cpus=0,
                resources={RESOURCE: 1},
                max_retries=self.retries,
                retry_exceptions=False,
            )(fn)
        self._refs[self._tasks[fn].options(name=f"pgs:{key}").remote(*args)] = key

    def in_flight(self) -> int:
        return len(self._refs)

    def wait(self, timeout: float) -> list[Done]:
        if not self._refs:
            return []
        ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            key = self._refs.pop(ref)
            try:
                out.append(Done(key, self._ray.get(ref)))
            except Exception as e:  # the job's own exception, or its retries ran out
                out.append(Done(key, None, _unwrap(e)))
        return out

    def abandon(self) -> None:
        for ref in list(self._refs):
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)  # kills the worker: its containers go with it
        self._refs.clear()

    def close(self) -> None:
        if self._started_here:
            with contextlib.suppress(Exception):
                self._ray.shutdown()


def _unwrap(error: BaseException) -> BaseException:
    """The job's own exception out of Ray's wrapper (``RayTaskError``), when it has one."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


def make_executor(name: ExecutorName, workers: int, address: str | None = None) -> Executor:
    if workers < 1:
        raise ExecutorError("--workers must be at least 1")
    if name == "ray":
        return RayExecutor(workers, address or os.environ.get("RAY_ADDRESS") or None)
    return LocalExecutor(workers)


def add_executor_flags(parser: Any) -> None:
    """``--executor`` and ``--ray-address``, shared by ``pgs batch`` and ``pgs eval``."""
    parser.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="where instances run: threads here (default), or Ray tasks on the cluster's nodes "
        "that offer the 'docker' resource (needs pip install 'pgs-agent[ray]')",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="with --executor ray: the cluster's HOST:PORT (default: $RAY_ADDRESS, else a "
        "one-machine Ray started for this run)",
    )
