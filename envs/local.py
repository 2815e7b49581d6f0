"""LocalSandbox: the Sandbox protocol on the host, in a copy of the repository.

For users without Docker. It offers NO isolation: commands run as you, with your network and
your files. Only the repository is copied, so the original working tree is never modified; the
folders pgs made for its results (``trajectories/``, :data:`envs.sandbox.RESULTS_GITIGNORE`) are
left out of the copy.
What a command starts ends with it, as in the Docker sandbox: the helper is a child subreaper
and ends its own descendants only, never another process of yours. The helper runs in a session
of its own, as a container's would: a Ctrl-C in the terminal reaches pgs alone, which cancels
the running command and closes the sandbox.

The environment is not the host's: commands see only the variables of :data:`HOST_ENV` (and
``LC_*``) taken from the host, ``HOME`` set to the sandbox's own folder, and ``sandbox.env``;
API keys, tokens and every other host variable stay out. (A command can still read what your
user can read, ``/proc/<pid>/environ`` of your other processes included: this hides the keys
from an ordinary ``env``, it does not contain a hostile command. Use the Docker sandbox for
that; pgs redacts secret values from everything it writes either way, :mod:`agent.core.secrets`.)
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field

from envs import scratch
from envs.channel import HELPER_SCRIPT, HelperSandbox, helper_files
from envs.errors import NotAGitRepository
from envs.registry import SandboxSettings
from envs.sandbox import DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT, RESULTS_GITIGNORE
from envs.seal import Unsealed

#: The host variables commands in the local sandbox see: what programs need to find programs,
#: speak the user's language and verify certificates; nothing that carries a credential.
HOST_ENV = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)


def sandbox_environ(home: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the local sandbox's helper: :data:`HOST_ENV` and ``LC_*`` of
    ``environ`` (the host's by default), ``HOME`` the sandbox's own (``sandbox.env`` is added
    to each command)."""
    environ = os.environ if environ is None else environ
    kept = {k: v for k, v in environ.items() if k in HOST_ENV or k.startswith("LC_")}
    return {**kept, "HOME": home}


def _results_folders(folder: str, names: list[str]) -> list[str]:
    """What of ``folder`` the copy leaves out: all of it when it is a folder pgs made for its
    results (:data:`envs.sandbox.RESULTS_GITIGNORE`), so earlier runs' files stay out."""
    if ".gitignore" not in names:
        return []
    try:
        with open(os.path.join(folder, ".gitignore"), encoding="utf-8") as f:
            marked = f.read(len(RESULTS_GITIGNORE) + 1) == RESULTS_GITIGNORE
    except (OSError, UnicodeDecodeError):
        return []
    return names if marked else []


class LocalSandboxConfig(SandboxSettings):
    """Run on the host in a temporary copy of the repository (no isolation)."""

    model_config = ConfigDict(extra="forbid")
    copies_repo: ClassVar[bool] = True
    type: Literal["local"] = "local"
    timeout: float = Field(DEFAULT_TIMEOUT, description="default time limit per command (s)")
    max_output: int = Field(DEFAULT_MAX_OUTPUT, description="bytes of output kept per command")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    contain_processes: bool = Field(
        True,
        description="end every process a command started when it ends, whatever group or "
        "session it moved to; never touches a process the command did not start (off: only "
        "its process group; for benchmarks)",
    )


class _PipeChannel:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read_lines, daemon=True).start()

    def send(self, data: bytes) -> None:
        self._stdin.write(data)
        self._stdin.flush()

    def readline(self, timeout: float | None) -> bytes:
        # One reader thread for the helper's life, lines in a queue: a wait cut short by an
        # interrupt or a timeout leaves the line for the next call.
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None

    def _read_lines(self) -> None:
        while True:
            line = self._stdout.readline()
            self._lines.put(line)
            if not line:
                return

    def close(self) -> None:
        # The helper may be gone (a hang-up reaches it too): what was not sent no longer matters,
        # and an error here would replace the interrupt that is unwinding.
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stdout.close()


class LocalSandbox(HelperSandbox):
    config_class = LocalSandboxConfig

    @classmethod
    def from_config(cls, config: LocalSandboxConfig, *, repo: Path, run_id: str) -> LocalSandbox:
        """The registry's way in (:mod:`envs.registry`)."""
        return cls(repo, config)

    def __init__(self, repo: Path, config: LocalSandboxConfig | None = None) -> None:
        config = config or LocalSandboxConfig()
        super().__init__(timeout=config.timeout, max_output=config.max_output, env=config.env)
        repo = Path(repo).resolve()
        if not (repo / ".git").exists():
            raise NotAGitRepository(
                f"{repo} is not a git repository: run `git init` there, or give --repo the "
                "folder that holds .git"
            )
        self._tmp = scratch.mkdtemp("pgs-local-")  # its owner in its name (envs.scratch)
        try:
            self.repo_path = str(self._tmp / "repo")
            self.home = str(self._tmp / "home")
            shutil.copytree(repo, self.repo_path, symlinks=True, ignore=_results_folders)
            os.makedirs(self.home)
            helper = self._tmp / "helper"
            helper.mkdir()
            for name, data in helper_files().items():
                (helper / name).write_bytes(data)
            proc = subprocess.Popen(
                [sys.executable, "-u", str(helper / HELPER_SCRIPT)]
                + ["--state-dir", str(self._tmp / "sessions")]
                + ([] if config.contain_processes else ["--no-contain"]),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=self.repo_path,
                env=sandbox_environ(self.home),
                # Out of the terminal's process group: a Ctrl-C reaches pgs only, which cancels
                # the command and closes the helper (no helper traceback on the terminal).
                start_new_session=True,
            )
            self._attach(_PipeChannel(proc))
        except BaseException:
            scratch.remove_tree(self._tmp)
            raise

    def upload(self, local: Path, remote: str) -> None:
        target = Path(self._abs(remote))
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(local).is_symlink():  # a link stays a link: its target's content stays out
            target.unlink(missing_ok=True)
            target.symlink_to(os.readlink(local))
        elif Path(local).is_dir():
            shutil.copytree(local, target, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(local, target)

    def seal(self, base: str, *, own: Sequence[str] = ()) -> Unsealed:
        """No fresh sandbox here: the checks run in the working copy the Generator edited
        (:mod:`envs.seal`), and every verdict says so."""
        return Unsealed(
            self, "--sandbox local isolates nothing: the check ran in the Generator's copy"
        )

    def close(self) -> None:
        self._close_channel()
        scratch.remove_tree(self._tmp)
