"""The seal (envs/seal.py): a fresh sandbox holds the original code and nothing the Generator
did outside its patch; the patch is computed by a git the repository's config cannot steer."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.docker_util import PID_LABEL, container_labels
from envs.errors import SandboxError
from envs.images.housekeeping import reap_orphans
from envs.local import LocalSandbox
from envs.sandbox import Sandbox
from envs.seal import Unsealed, seal_of

#: Commands of a Generator that plants things outside its patch, and how to see each one.
PLANTED = {
    "a .pth file in site-packages": (
        'echo "import os" > "$(python3 -c \'import site; print(site.getsitepackages()[0])\')"'
        "/zz_pgs_attack.pth",
        "ls \"$(python3 -c 'import site; print(site.getsitepackages()[0])')\"/zz_pgs_attack.pth",
    ),
    "a conftest.py above the repository": ("echo 'x = 1' > /conftest.py", "test -e /conftest.py"),
    "a file git ignores": (
        "echo helper.py >> .git/info/exclude && echo 'X = 1' > helper.py",
        "test -e helper.py",
    ),
    "git's global config": ("git config --global core.fsmonitor true", "test -e ~/.gitconfig"),
    "a fake python3 on PATH": (
        "printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/python3 && "
        "chmod +x /usr/local/bin/python3",
        "test -e /usr/local/bin/python3",
    ),
}


def _head(box: Sandbox) -> str:
    return box.run("git rev-parse HEAD").output.strip()


def _snapshots(client: Any, *, anyones: bool = False) -> set[str]:
    """The ids of this process's snapshots (other test workers share the daemon), or
    ``anyones``: as the daemon lists them, without inspecting each (which fails on one another
    worker removes in between)."""
    found = ["pgs-agent.kind=snapshot"] + ([] if anyones else [f"{PID_LABEL}={os.getpid()}"])
    return {row["Id"] for row in client.api.images(filters={"label": found})}


def test_a_fresh_sandbox_holds_the_base_commit_and_nothing_the_generator_planted(
    base_image: str, small_repo: Path, docker_client: Any
) -> None:
    before = _snapshots(docker_client)
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        base = _head(box)
        seal = seal_of(box, base)
        assert seal.sealed and seal.reason is None
        for plant, _seen in PLANTED.values():
            assert box.run(plant).ok
        box.run("echo 'def add(a, b):\n    return 0' > calc.py && git commit -qam wrong")
        taken = _snapshots(docker_client) - before
        assert len(taken) == 1  # the repository was copied in: a snapshot holds it
        fresh = seal.fresh()
        try:
            assert _head(fresh) == base
            assert fresh.read_file("calc.py") == b"def add(a, b):\n    return a + b\n"
            for name, (_plant, seen) in PLANTED.items():
                assert not fresh.run(seen).ok, f"{name} reached the fresh sandbox"
            # No network in a check, and the Generator's sandbox is left as it was.
            assert "lo" in fresh.run("ls /sys/class/net").output.split()
            assert fresh.run("ls /sys/class/net").output.split() == ["lo"]
        finally:
            fresh.close()
        assert box.run("test -e /conftest.py").ok
    # The snapshot ends with its sandbox.
    assert not (_snapshots(docker_client) & taken)


def test_a_sandbox_nothing_was_written_to_seals_with_its_own_image(
    base_image: str, small_repo: Path, docker_client: Any
) -> None:
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        base = _head(box)
        first = seal_of(box, base)
        assert getattr(first, "snapshot", None) is True
        image = first.config.image  # type: ignore[attr-defined]
        # A sandbox of that snapshot holds the repository already: its seal is the image itself.
        with DockerSandbox(DockerSandboxConfig(image=image)) as ready:
            before = _snapshots(docker_client)
            seal = seal_of(ready, base)
            assert getattr(seal, "snapshot", None) is False
            assert _snapshots(docker_client) == before
            with seal.fresh() as fresh:
                assert _head(fresh) == base


@pytest.fixture(scope="module")
def repo_image(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A repository image (the repository at /repo; cached by content: the attack suite's)."""
    from envs.images import build_repo_image
    from tests.support.example_repos import DEDUPE

    return build_repo_image(DEDUPE.make(tmp_path_factory.mktemp("seal") / "listutils")).tag


def test_a_sandbox_of_a_repository_image_seals_with_that_image(
    repo_image: str, docker_client: Any
) -> None:
    """Nothing but the helper (and Docker's own init) was written: no snapshot is taken, so a
    check starts from the image at once (a snapshot costs seconds; an unneeded one, on a driver
    that shows docker-init in the writable layer, was taken for every run)."""
    with DockerSandbox(DockerSandboxConfig(image=repo_image)) as box:
        before = _snapshots(docker_client)
        seal = seal_of(box, _head(box))
        assert getattr(seal, "snapshot", None) is False
        assert seal.config.image == box.container.attrs["Image"]  # type: ignore[attr-defined]
        assert _snapshots(docker_client) == before


@pytest.mark.parametrize("listing", ["host", "docker-diff"])
def test_what_set_up_wrote_is_listed_the_same_by_the_host_and_by_docker(
    repo_image: str, listing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seal's listing of the writable layer: read from this machine's layer folder where it
    can be, else ``docker diff``; both see what a set-up wrote, changed or deleted, and leave
    out pgs's helper folder, /tmp itself and Docker's init."""
    from envs import docker_changes

    with DockerSandbox(DockerSandboxConfig(image=repo_image)) as box:
        assert box.run(
            "rm /etc/issue && mkdir -p /opt/made/inner && echo x > /root/new && "
            "echo y > /tmp/left && echo z > /tmp/pgs-helper/extra"
        ).ok
        if listing == "docker-diff":
            monkeypatch.setattr(docker_changes, "upper_dir", lambda container: None)
        elif docker_changes.upper_dir(box.container) is None:
            pytest.skip("this daemon's writable layers are not readable here (docker diff only)")
        seen = docker_changes.changed_paths(box.container)
        written = docker_changes.written_by_setup(seen, own=["/tmp/pgs-helper"])
        diff = sorted(c["Path"] for c in box.container.diff())
    expected = ["/etc", "/etc/issue", "/opt", "/opt/made", "/opt/made/inner", "/root"]
    assert written == [*expected, "/root/new", "/tmp/left"]
    assert set(seen) == set(diff)


def test_a_fresh_sandbox_not_at_the_base_commit_is_an_error(
    base_image: str, small_repo: Path
) -> None:
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        seal = seal_of(box, "0" * 40)
        with pytest.raises(SandboxError, match="not at the base commit"):
            seal.fresh()


def _snapshot(box: DockerSandbox, tag: str, *, run: str = "", ended: bool = False) -> str:
    """The id of a snapshot of ``box`` (of run ``run``, or ``tag``) labelled as this process's,
    or as an ended process's (its owner gone: an orphan, which a pgs starting on another worker
    may remove at once, so it is not inspected here)."""
    labels = container_labels(run or tag, kind="snapshot")
    if ended:
        gone = subprocess.Popen(["true"])
        gone.wait()
        labels[PID_LABEL] = str(gone.pid)
    made = box.container.client.api.commit(
        box.container.id, repository="pgs-snapshot", tag=tag, conf={"Labels": labels}
    )
    return str(made["Id"])


def test_snapshots_of_ended_runs_are_reaped(
    base_image: str, small_repo: Path, docker_client: Any
) -> None:
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        left = _snapshot(box, "reaptest", ended=True)
        mine = seal_of(box, _head(box))
        reap_orphans(docker_client)
        ids = _snapshots(docker_client, anyones=True)
        assert left not in ids
        assert mine.config.image in ids  # type: ignore[attr-defined]  # a live run's stays


def test_a_snapshot_another_process_reaped_first_is_no_error(
    base_image: str, small_repo: Path, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pgs processes starting at once both reap the same ended run's snapshot: the one
    that finds it gone already goes on (seen with two suites on one daemon)."""
    from envs.images import housekeeping

    # Owned by this live process, so no pgs starting on another worker reaps it first (an
    # ended run's snapshot is anyone's to remove): it stands for one listed as an orphan.
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        left = docker_client.images.get(_snapshot(box, "reaptwice"))
    assert left.id not in {i.id for i in housekeeping.orphan_snapshots(docker_client)}
    listed = [left]
    docker_client.images.remove(left.id, force=True)  # the other process, in between
    monkeypatch.setattr(housekeeping, "orphan_snapshots", lambda client: listed)
    reap_orphans(docker_client)  # no error for the one already gone; the others go
    assert not {i.id for i in listed} & _snapshots(docker_client, anyones=True)


def test_an_image_removed_while_pgs_lists_its_images_is_left_out_not_an_error(
    base_image: str, small_repo: Path, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon lists images, then each is inspected: one removed in between (a run
    closing, a pgs reaping ended runs' snapshots) is no longer there, which is no error: the
    listing made each pgs start-up fail its reaping while a second suite ran (found with a
    reaper in a loop beside this suite)."""
    import docker.models.images

    from envs.images import housekeeping

    run = f"listed-{uuid.uuid4().hex[:8]}"
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=small_repo) as box:
        gone, kept = (_snapshot(box, f"{run}-{n}", run=run) for n in range(2))
    inspect = docker.models.images.ImageCollection.get

    def removed_first(self: Any, name: str) -> Any:  # the other process, in between
        if name == gone:
            docker_client.images.remove(gone, force=True)
        return inspect(self, name)

    monkeypatch.setattr(docker.models.images.ImageCollection, "get", removed_first)
    try:
        listed = housekeeping.list_pgs(docker_client, run_id=run).images
        assert [i.id for i in listed] == [kept]
        housekeeping.orphan_snapshots(docker_client)  # no error either
    finally:
        monkeypatch.undo()
        housekeeping.prune(docker_client, run_id=run)


def test_the_local_sandbox_is_unsealed_and_says_why(small_repo: Path) -> None:
    with LocalSandbox(small_repo) as box:
        seal = seal_of(box, _head(box))
        assert isinstance(seal, Unsealed) and not seal.sealed
        assert "--sandbox local" in (seal.reason or "")
        assert seal.fresh() is box


#: git set-ups in the sandbox that would change what plain git reports as the patch.
DIFF_TRICKS = {
    "a clean filter in .git/config": (
        "git config filter.f.clean 'sed s/a/HIDDEN/' && "
        "echo 'calc.py filter=f' > .git/info/attributes"
    ),
    "a global attributes file with a textconv": (
        "git config --global diff.t.textconv 'sed s/a/HIDDEN/' && "
        "echo 'calc.py diff=t' > ~/.gitattr && git config --global core.attributesFile ~/.gitattr"
    ),
    "an external diff": "git config --global diff.external /bin/true",
    "a replace ref for the base commit": (
        "git replace $(git rev-parse HEAD) $(echo fake | git -c user.name=x -c user.email=x@y "
        "commit-tree $(git hash-object -w -t tree /dev/null))"
    ),
    # Beside the repository: the local sandbox's is the test's own folder, not the host's /tmp.
    "core.worktree pointing elsewhere": (
        'mkdir -p ../elsewhere && git config core.worktree "$(cd ../elsewhere && pwd -P)"'
    ),
    "a system config": "git config --system diff.noprefix true",
}


@pytest.mark.parametrize("trick", sorted(DIFF_TRICKS))
def test_the_patch_is_what_the_working_tree_holds_whatever_git_is_told(
    sandbox: Sandbox, trick: str
) -> None:
    """Both sandboxes (tests/envs/conftest.py); the local one has a home of its own, so its
    "global" config is the sandbox's, never the user's."""
    box = sandbox
    base = _head(box)
    box.write_file("calc.py", "def add(a, b):\n    return a + b + 0\n")
    box.write_file("new_module.py", "VALUE = 'a'\n")
    honest = box.diff(base=base)
    if "system" in trick and isinstance(box, LocalSandbox):
        pytest.skip("the host's system config is not the test's to change")
    done = box.run(DIFF_TRICKS[trick])
    assert done.ok, done.output
    patch = box.diff(base=base)
    assert patch == honest
    assert "+    return a + b + 0" in patch and "+VALUE = 'a'" in patch
    assert "HIDDEN" not in patch
