"""DockerSandbox: one container per task, one helper process inside it.

The helper (``envs/helper/pgs_helper.py`` and its modules, written to :data:`HELPER_DIR`) is the
container's main process, under Docker's init (which reaps orphans), with its stdin attached;
every command is a JSON line over the attach socket: well under a millisecond of overhead
instead of the ~80 ms of a ``docker exec`` per command, and each command still runs in a fresh
process group with its own working directory and environment, killed whole on timeout.

The container lives no longer than its owner, this process, whatever ends it (SIGKILL
included): Docker closes the helper's stdin when the attach connection closes (``StdinOnce``);
the helper then kills the running command and exits, the container stops, and Docker removes
it (``auto_remove``), all within a second. :meth:`DockerSandbox.close` removes it at once.

Every process a command started ends with it (the helper is a child subreaper; see its
docstring): nothing a command put in the background edits the repository between steps, and
a fork bomb is frozen and killed when its command ends, so the next command runs.

Hardened by default (each configurable): every capability dropped but ``CAP_CHOWN``,
``CAP_DAC_OVERRIDE`` and ``CAP_FOWNER`` (root may still write, chmod and chown any file of the
repository, pip installs into a venv or ``--user``, git works; no raw sockets, mknod, setuid,
chroot or killing other users' processes), ``no-new-privileges`` (a setuid binary gains
nothing), and a disk limit: a quota from the storage driver where it offers one (overlay2 on
xfs with pquota, btrfs, zfs), else no single file larger than the limit (``RLIMIT_FSIZE``) and
a check of the container's writable layer (Docker's SizeRw) every ``disk_check_interval``
seconds while a command runs, which stops a command that grows it past the limit and says so.

Safe by default: no network (``network=True`` to opt in), memory / CPU / pids limits, no swap
beyond the memory limit, and the labels ``pgs-agent=1``, ``pgs-agent.run=<run id>`` and the
owner's host, pid and start time (``envs/docker_util.py``). The first sandbox of a process
removes the containers whose owner has ended (``reap_orphans``); ``pgs env prune`` removes
every pgs container, live runs' included.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import shlex
import threading
import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from envs.channel import CANCEL, HELPER_BOOT, HelperSandbox, helper_boot
from envs.disk_watch import DiskWatch, megabytes
from envs.docker_changes import changed_paths, written_by_setup
from envs.docker_config import DockerSandboxConfig, parse_size
from envs.docker_io import SocketChannel, tar_path
from envs.docker_util import container_labels, docker_client, remove_container, translate_errors
from envs.errors import ImageNotFound, NotAGitRepository, SandboxError
from envs.sandbox import CommandResult

#: The helper's folder in the container (its files: ``envs.channel.helper_files``).
HELPER_DIR = "/tmp/pgs-helper"
#: Storage drivers that can give a container a size quota (``--storage-opt size``).
QUOTA_DRIVERS = {"overlay2", "btrfs", "zfs"}

logger = logging.getLogger(__name__)


class DockerSandbox(HelperSandbox):
    """A container with the repository at ``config.repo_path``.

    ``repo``: a host repository to copy into the container at start, for images that do not
    already hold it (a repository image from ``pgs env build`` does).
    """

    home = "/root"
    config_class = DockerSandboxConfig

    @classmethod
    def from_config(cls, config: DockerSandboxConfig, *, repo: Path, run_id: str) -> DockerSandbox:
        """The registry's way in (:mod:`envs.registry`): the repository is not copied here;
        pgs copies it when the image does not hold it."""
        return cls(config, run_id=run_id)

    def __init__(
        self, config: DockerSandboxConfig, *, repo: Path | None = None, run_id: str | None = None
    ) -> None:
        # Without a network pip must not wait on an index it cannot reach: only local wheels.
        env = config.env if config.network else {"PIP_NO_INDEX": "1", **config.env}
        super().__init__(timeout=config.timeout, max_output=config.max_output, env=env)
        if not config.image:
            raise ImageNotFound(
                "no image given for the Docker sandbox: build one with `pgs env build`"
            )
        self.config = config
        self.repo_path = config.repo_path
        self.run_id = run_id or uuid.uuid4().hex[:12]
        if repo is not None and not (Path(repo) / ".git").exists():
            raise NotAGitRepository(
                f"{repo} is not a git repository: run `git init` there, or give the folder "
                "that holds .git"
            )
        self.client = docker_client()
        self.container: Any = None
        #: The snapshot images this sandbox's seals made (removed when it closes).
        self._snapshots: list[str] = []
        self._disk_watch: DiskWatch | None = None
        #: How the disk limit is enforced: "quota" (storage driver), "check" or "none".
        self.disk_enforcement = "none"
        try:
            self._start(repo)
        except BaseException:
            self.close()
            raise

    def _start(self, repo: Path | None) -> None:
        cfg = self.config
        _reap_orphans_once(self.client)
        environment = {"HOME": self.home, **({} if cfg.network else {"PIP_NO_INDEX": "1"})}
        limit = parse_size(cfg.disk_limit) if cfg.disk_limit else None
        hardening: dict[str, Any] = {
            "cap_drop": ["ALL"],
            "cap_add": list(cfg.capabilities) or None,
            "security_opt": ["no-new-privileges:true"] if cfg.no_new_privileges else None,
        }
        if limit is not None:
            import docker.types

            # No single file past the limit, whatever the driver: a shell says "File size
            # limit exceeded", Python "File too large".
            hardening["ulimits"] = [docker.types.Ulimit(name="fsize", soft=limit, hard=limit)]
        quota = limit is not None and _storage_driver(self.client) in QUOTA_DRIVERS
        with translate_errors(f"starting a container of image {cfg.image}"):
            try:
                self.container = self._create(
                    environment,
                    {**hardening, "storage_opt": {"size": cfg.disk_limit}} if quota else hardening,
                )
            except Exception as e:
                # overlay2 has quotas only on xfs mounted with pquota: check the size instead.
                if not quota or "storage" not in str(e).lower():
                    raise
                quota = False
                self.container = self._create(environment, hardening)
            # Attached before the start, so that no byte of the helper's output is missed.
            sock = self.client.api.attach_socket(
                self.container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self._channel = channel = SocketChannel(sock)
            self.container.start()
            channel.send(helper_boot(HELPER_DIR))
        self._attach(channel, timeout=cfg.startup_timeout)
        if cfg.contain_processes and not self.contained:
            logger.warning(
                "the sandbox helper cannot be a subreaper here: processes a command moved out "
                "of its process group may outlive it"
            )
        if limit is not None:
            self.disk_enforcement = "quota" if quota else "check"
        if limit is not None and not quota:
            self._disk_watch = DiskWatch(
                self._writable_size, limit, cfg.disk_check_interval, self._send_cancel
            )
        if repo is not None:
            self.upload(Path(repo), cfg.repo_path)

    def _create(self, environment: Mapping[str, str], hardening: Mapping[str, Any]) -> Any:
        cfg = self.config
        return self.client.containers.create(
            cfg.image,
            # As the entrypoint: the image's own entrypoint and command are not run.
            # The helper's files come first on its stdin (envs.channel.helper_boot).
            entrypoint=[cfg.python, "-u", "-c", HELPER_BOOT]
            + ([] if cfg.contain_processes else ["--no-contain"]),
            name=f"pgs-{self.run_id}-{uuid.uuid4().hex[:6]}",
            init=True,
            # An open stdin, not detached: Docker closes the helper's stdin when the attach
            # connection closes (StdinOnce), and removes the container once it stops.
            stdin_open=True,
            detach=False,
            auto_remove=True,
            # The helper's stdout carries every reply (files included): not for a log file.
            log_config={"type": "none"},
            labels=container_labels(self.run_id),
            network_mode="bridge" if cfg.network else "none",
            mem_limit=cfg.memory,
            memswap_limit=cfg.memory,
            nano_cpus=int(cfg.cpus * 1e9),
            pids_limit=cfg.pids_limit,
            working_dir="/",
            environment=dict(environment),
            **hardening,
        )

    def _writable_size(self) -> int:
        """Bytes in the container's writable layer (the daemon walks its files)."""
        found = self.client.api.containers(all=True, size=True, filters={"id": self.container.id})
        return int(found[0].get("SizeRw") or 0)

    def _send_cancel(self) -> None:
        channel = self._channel
        if channel is not None:
            with contextlib.suppress(OSError):
                channel.send(CANCEL)

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        max_output: int | None = None,
        session: str | None = None,
    ) -> CommandResult:
        run = partial(
            super().run,
            command,
            timeout=timeout,
            cwd=cwd,
            env=env,
            max_output=max_output,
            session=session,
        )
        watch = self._disk_watch
        if watch is None:
            return run()
        ticket = watch.begin()
        try:
            result = run()
        finally:
            used = watch.end(ticket)
        if used is None:
            return result
        note = (
            f"\npgs: command stopped: the sandbox's files grew to {megabytes(used)}, over its "
            f"disk limit of {self.config.disk_limit} (sandbox.disk_limit); delete files to go on\n"
        )
        return dataclasses.replace(result, output=result.output + note, exit_code=-9)

    def _helper_stderr(self) -> str:
        channel = self._channel
        if isinstance(channel, SocketChannel) and channel.stderr:
            return "helper said: " + channel.stderr.decode("utf-8", "replace")[-500:]
        return ""

    def upload(self, local: Path, remote: str) -> None:
        remote = self._abs(remote)
        parent, name = remote.rstrip("/").rsplit("/", 1)
        data = tar_path(Path(local), name)
        # The folder made by the helper (not one of the sandbox's commands, which a subclass
        # may count): a `docker exec` costs the daemon a tenth of a second of CPU.
        mkdir = f"mkdir -p -- {shlex.quote(parent or '/')}"
        made = HelperSandbox.run(self, mkdir, cwd="/", timeout=60)
        if not made.ok:
            raise SandboxError(f"could not make {parent} in the sandbox: {made.output.strip()}")
        with translate_errors(f"copying {local} into the sandbox"):
            if not self.container.put_archive(parent or "/", data):
                raise SandboxError(f"could not copy {local} to {remote} in the sandbox")

    def seal(self, base: str, *, own: Sequence[str] = ()) -> DockerSeal:
        """A :class:`~envs.seal.Seal` of the sandbox as it is now (call it before the
        Generator's first command): new containers of the image it started from when nothing
        but the helper (and the caller's ``own`` folders, which it writes into every fresh
        container itself) was written since, else of a snapshot of its container (``docker
        commit``, labelled ``pgs-agent.kind=snapshot``, removed when this sandbox closes)."""
        with translate_errors("listing what the sandbox's set-up wrote"):
            changes = changed_paths(self.container)
        written = written_by_setup(changes, own=[HELPER_DIR, *own])
        if not written:
            image = str(self.container.attrs["Image"])
        else:
            with translate_errors("taking a snapshot of the sandbox for the checks"):
                snapshot = self.container.commit(
                    repository="pgs-snapshot",
                    tag=self.run_id,
                    conf={"Labels": container_labels(self.run_id, kind="snapshot")},
                )
            image = str(snapshot.id)
            self._snapshots.append(image)
        if not re.fullmatch(r"[0-9a-f]{40,64}", base):  # a name ("HEAD"): what it is now
            base = self.run(f"git rev-parse --verify {shlex.quote(base)}^{{commit}}").output
            base = base.strip()
        config = self.config.updated(image=image, network=False)
        return DockerSeal(config, base=base, run_id=self.run_id, snapshot=bool(written))

    def close(self) -> None:
        if self._disk_watch is not None:
            self._disk_watch.close()
        container, self.container = self.container, None
        snapshots, self._snapshots = self._snapshots, []
        try:
            if container is not None:
                import docker.errors

                # Removed before the connection closes: else the helper exits on its own and
                # Docker's auto-removal races with this one.
                try:
                    remove_container(self.client, container.id)
                except docker.errors.DockerException as e:
                    raise SandboxError(
                        f"could not remove container {container.name}: {e}; "
                        "`pgs env prune --orphans` removes it"
                    ) from e
        finally:
            self._close_channel()
            for image in snapshots:
                _remove_image(self.client, image)


def _remove_image(client: Any, image: str) -> None:
    """Remove a snapshot; a failure is a warning (``pgs env prune`` removes what is left)."""
    try:
        client.images.remove(image, force=True, noprune=False)
    except Exception as e:
        logger.warning("could not remove the sandbox snapshot %s: %s", image[:19], e)


class DockerSeal:
    """Fresh containers of the sandbox's image (or snapshot) as it was when it was ready: the
    Generator never ran a command there (:mod:`envs.seal`). No network, whatever the sandbox
    had: a check needs none."""

    sealed = True
    reason: str | None = None

    def __init__(
        self, config: DockerSandboxConfig, *, base: str, run_id: str, snapshot: bool
    ) -> None:
        self.config, self.base, self.run_id = config, base, run_id
        #: True when the seal is a snapshot of the container, False when it is the image.
        self.snapshot = snapshot

    def fresh(self) -> DockerSandbox:
        box = DockerSandbox(self.config, run_id=self.run_id)
        try:
            head = box.run("git rev-parse --verify HEAD^{commit}")
            if head.output.strip() != self.base:
                raise SandboxError(
                    f"a fresh sandbox of {self.config.image} is not at the base commit "
                    f"{self.base[:12]} (it is at {head.output.strip()[:40]!r})"
                )
        except BaseException:
            box.close()
            raise
        return box


#: Taken by the first sandbox of the process, never released: orphans are looked for once.
_first_sandbox = threading.Lock()


def _reap_orphans_once(client: Any) -> None:
    """The first sandbox of a process removes what ended pgs processes left behind; a failure
    there is logged, never raised: it must not cost the run."""
    if not _first_sandbox.acquire(blocking=False):
        return
    from envs.images.housekeeping import reap_orphans

    try:
        removed = reap_orphans(client)
    except Exception as e:
        logger.warning("could not remove the containers of ended pgs runs: %s", e)
        return
    if removed:
        logger.info("removed %d container(s) of ended pgs runs", removed)


#: The storage driver of each daemon (by address) this process asked: `docker info` is slow.
_drivers: dict[str, str] = {}


def _storage_driver(client: Any) -> str:
    where = str(getattr(client.api, "base_url", ""))
    if where not in _drivers:
        try:
            _drivers[where] = str(client.info().get("Driver", ""))
        except Exception:  # the daemon answers create, it will say what is wrong there
            return ""
    return _drivers[where]
