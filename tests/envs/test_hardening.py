"""The Docker sandbox's hardening: capabilities, no-new-privileges, the disk limit; and the work a
coding agent does still works under it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig, parse_size

pytestmark = pytest.mark.docker

#: CAP_CHOWN (0), CAP_DAC_OVERRIDE (1), CAP_FOWNER (3).
KEPT = 0b1011


def _status(box: DockerSandbox) -> dict[str, str]:
    lines = box.run("cat /proc/self/status").output.splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


@pytest.fixture
def hardened(base_image: str, small_repo: Path) -> Iterator[DockerSandbox]:
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        yield box


def test_only_the_needed_capabilities_and_no_new_privileges(hardened: DockerSandbox) -> None:
    status = _status(hardened)
    for field in ("CapEff", "CapPrm", "CapBnd"):
        assert int(status[field], 16) == KEPT, f"{field} {status[field]}"
    assert status["NoNewPrivs"] == "1"
    refused = hardened.run("mknod /tmp/null2 c 1 3")  # CAP_MKNOD is gone
    assert not refused.ok and "Operation not permitted" in refused.output


def test_the_work_of_a_coding_agent_still_works(hardened: DockerSandbox) -> None:
    # git, files of another owner (a repository copied from the host keeps its uid), chown,
    # a venv, and pip installs as root into it and into --user.
    script = """
set -e
git config --global user.email a@b.c; git config --global user.name agent
echo 'def sub(a, b):' > extra.py; echo '    return a - b' >> extra.py
git add -A && git commit -qm extra && echo GIT_OK
chown 1000:1000 calc.py && chmod 600 calc.py && echo '# edited' >> calc.py && chmod 644 calc.py
chown root:root calc.py && touch -d 2001-01-01 calc.py && echo OWNER_OK
mkdir -p /tmp/pkg/tiny && echo 'X = 1' > /tmp/pkg/tiny/__init__.py
printf 'from setuptools import setup\\nsetup(name="tiny", version="1", packages=["tiny"])\\n' \
    > /tmp/pkg/setup.py
python3 -m venv --system-site-packages /tmp/venv
/tmp/venv/bin/pip install -q --no-index --no-build-isolation /tmp/pkg 2>&1 | tail -n 3
/tmp/venv/bin/python -c 'import tiny; print("VENV_OK", tiny.X)'
python3 -m pip install -q --user --no-index --no-build-isolation /tmp/pkg 2>&1 | tail -n 3
cd / && python3 -c 'import tiny, site; print("USER_OK", site.USER_SITE in tiny.__file__)'
"""
    result = hardened.run(script, timeout=300)
    assert result.ok, result.output
    for mark in ("GIT_OK", "OWNER_OK", "VENV_OK 1", "USER_OK True"):
        assert mark in result.output, result.output
    assert "# edited" in hardened.diff()


def test_the_hardening_is_configurable(base_image: str, small_repo: Path) -> None:
    config = DockerSandboxConfig(
        image=base_image, capabilities=["CHOWN"], no_new_privileges=False, disk_limit=None
    )
    with DockerSandbox(config, repo=small_repo) as box:
        status = _status(box)
        assert int(status["CapEff"], 16) == 1 and status["NoNewPrivs"] == "0"
        assert box.disk_enforcement == "none"
    assert DockerSandboxConfig(image=base_image, disk_limit="none").disk_limit is None
    with pytest.raises(ValidationError, match="not a size"):
        DockerSandboxConfig(image=base_image, disk_limit="lots")


def test_writing_past_the_disk_limit_fails_clearly_and_the_sandbox_goes_on(
    base_image: str, small_repo: Path, docker_client: Any
) -> None:
    limit = "30m"
    config = DockerSandboxConfig(image=base_image, disk_limit=limit, disk_check_interval=1)
    with DockerSandbox(config, repo=small_repo) as box:
        # One file past the limit: cut at the limit, whatever the storage driver.
        big = box.run("head -c 40000000 /dev/zero > big.bin; echo rc=$?; stat -c %s big.bin")
        assert "File size limit exceeded" in big.output or "No space left" in big.output
        assert int(big.output.split()[-1]) <= parse_size(limit)
        # Many files under the limit each, past it together: the command is stopped.
        fill = box.run(
            "i=0; while :; do head -c 5000000 /dev/zero > fill$i.bin; i=$((i+1)); sleep 0.2; done",
            timeout=600,
        )
        assert not fill.ok and not fill.timed_out
        if box.disk_enforcement == "check":
            assert "over its disk limit of 30m (sandbox.disk_limit)" in fill.output
        else:
            assert "No space left on device" in fill.output
        after = box.run("rm -f *.bin && echo cleaned && git status --short")
        assert after.ok and after.output.startswith("cleaned")
        assert box.run("echo next").output == "next\n"


def test_a_driver_that_refuses_the_quota_falls_back_to_the_size_check(
    base_image: str, small_repo: Path, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Taken for a quota driver, the daemon's own driver refuses `--storage-opt size` (overlay2
    # on ext4 does the same): the sandbox starts anyway, with the size check.
    import envs.docker_sandbox as module

    driver = docker_client.info()["Driver"]
    monkeypatch.setattr(module, "QUOTA_DRIVERS", {*module.QUOTA_DRIVERS, driver})
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        assert box.disk_enforcement in ("check", "quota")
        if box.disk_enforcement == "check":
            host = docker_client.containers.get(box.container.id).attrs["HostConfig"]
            assert not host.get("StorageOpt")
        assert box.run("echo up").output == "up\n"
