"""The settings of a Docker sandbox (:class:`DockerSandboxConfig`, the ``sandbox`` section with
``type: docker``): image, limits, hardening, and the disk limit's syntax (:func:`parse_size`).
What each one enforces is told in :mod:`envs.docker_sandbox`."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from envs.registry import SandboxSettings
from envs.sandbox import DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT

#: The capabilities a coding agent's work needs as root (see :mod:`envs.docker_sandbox`).
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER")


class DockerSandboxConfig(SandboxSettings):
    """A Docker container per task; see the module docstring for what is enforced."""

    model_config = ConfigDict(extra="forbid")
    takes_image: ClassVar[bool] = True
    type: Literal["docker"] = "docker"
    image: str | None = Field(
        None, description="image to start; None: the repository's image (`pgs env build`)"
    )
    repo_path: str = Field("/repo", description="where the repository lives in the container")
    network: bool = Field(False, description="give the container network access (off by default)")
    memory: str = Field("4g", description="memory limit (Docker syntax: 512m, 4g)")
    cpus: float = Field(2.0, gt=0, description="CPU limit, in cores")
    pids_limit: int = Field(1024, gt=0, description="maximum number of processes")
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, description="default time limit per command (s)")
    max_output: int = Field(
        DEFAULT_MAX_OUTPUT, gt=0, description="bytes of output kept per command"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    python: str = Field("python3", description="interpreter in the image that runs the helper")
    startup_timeout: float = Field(60.0, gt=0, description="seconds to wait for the helper")
    contain_processes: bool = Field(
        True,
        description="end every process a command started when it ends, whatever group or "
        "session it moved to (off: only its process group; for benchmarks)",
    )
    capabilities: list[str] = Field(
        default_factory=lambda: list(CAPABILITIES),
        description="Linux capabilities kept (all others dropped); Docker's default set: "
        "CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP SETPCAP "
        "NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE",
    )
    no_new_privileges: bool = Field(
        True, description="no process gains privileges through setuid binaries or file caps"
    )
    disk_limit: str | None = Field(
        "8g",
        description="most the sandbox may write to its filesystem (Docker syntax: 500m, 8g); "
        "none: no limit",
    )
    disk_check_interval: float = Field(
        30.0,
        gt=0,
        description="seconds between checks of the container's size while a command runs, "
        "where the storage driver has no quota (each check costs the daemon a walk of the "
        "container's files)",
    )

    @field_validator("disk_limit", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "off", "0"):
            return None
        if isinstance(value, str):
            parse_size(value)
        return value

    def image_tag(self) -> str | None:
        return self.image


def parse_size(text: str) -> int:
    """Bytes in a size written as Docker writes them: 500m, 8g, 1.5G, 1024 (powers of 1024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*", text, re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r} (examples: 500m, 8g)")
    return int(float(match[1]) * 1024 ** " kmgt".index(match[2].lower() or " "))
