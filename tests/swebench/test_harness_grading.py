"""``pgs eval`` grades as the official harness does: the installed swebench's own patch
commands (run as its ``run_instance`` runs them, in tiny real git repositories here), a report
for an empty patch, and tests that failed for want of the network told apart as not checkable
here instead of counted as unresolved.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.swebench.grading import END_TEST_OUTPUT, START_TEST_OUTPUT, network_failure
from agent.swebench.patching import _before_setup, _without_leftovers, apply_commands, apply_patch
from tests.support.swe_dataset import ENV, I1, I2, Dataset, eval_summary, make_dataset

# A model's patch made in an image whose setup changed p.toml without committing it (so the
# setup change is in the diff), evaluated where the setup change is in place: the harness's
# `git apply` and `--reject` fail on p.toml, and its `patch --batch` (no --forward) takes the
# already-present change for a reversed patch and exits 0.
SETUP_AND_FIX = """diff --git a/p.toml b/p.toml
--- a/p.toml
+++ b/p.toml
@@ -1,3 +1,3 @@
 a
-requires = ["setuptools",
+requires = ["setuptools==68.0.0",
 c
diff --git a/s.py b/s.py
--- a/s.py
+++ b/s.py
@@ -1,3 +1,3 @@
 x
-y = 1
+y = 2
 z
"""
# A model patch whose code connects to a closed port: its tests fail by a refused connection.
REFUSED = """diff --git a/textkit/core.py b/textkit/core.py
--- a/textkit/core.py
+++ b/textkit/core.py
@@ -9,2 +9,4 @@ def slugify(text):
     \"\"\"Lower-case words joined by dashes.\"\"\"
-    return "-".join(text.split())
+    import socket
+    socket.create_connection(("127.0.0.1", 9), timeout=5).close()
+    return "-".join(text.lower().split())
"""


@dataclass
class Ran:
    ok: bool
    output: str


class Checkout:
    """A git work tree that runs commands as the sandbox does (``box.run``), on the host."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ran: list[str] = []

    def run(self, command: str) -> Ran:
        self.ran.append(command)
        done = subprocess.run(
            command.replace("/tmp/patch.diff", str(self.root.parent / "patch.diff")),
            shell=True,
            cwd=self.root,
            capture_output=True,
            text=True,
            env=ENV,
        )
        return Ran(done.returncode == 0, done.stdout + done.stderr)


def checkout(tmp_path: Path, *, setup_committed: bool) -> Checkout:
    root = tmp_path / "testbed"
    root.mkdir()
    (root / "p.toml").write_text('a\nrequires = ["setuptools",\nc\n')
    (root / "s.py").write_text("x\ny = 1\nz\n")
    git = ["git", "-c", "user.name=pgs", "-c", "user.email=pgs@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=root, check=True, env=ENV)
    (root / "p.toml").write_text('a\nrequires = ["setuptools==68.0.0",\nc\n')  # the setup's sed
    if setup_committed:
        message = "pgs: changes made by the environment setup"
        subprocess.run([*git, "commit", "-qam", message], cwd=root, check=True, env=ENV)
    (tmp_path / "patch.diff").write_text(SETUP_AND_FIX)
    return Checkout(root)


@pytest.mark.parametrize("setup_committed", [True, False])
def test_the_patch_is_applied_by_the_installed_harness_s_commands(
    tmp_path: Path, setup_committed: bool
) -> None:
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS

    box = checkout(tmp_path, setup_committed=setup_committed)
    applied, output = apply_patch(box, apply_commands())
    # Accepted, as the official harness accepts it (pgs's old chain, with --3way and
    # `patch --forward` after a reset, refused it) ...
    assert applied
    # ... by running exactly the harness's commands, in order, in one tree (no reset between).
    assert box.ran == [f"{c} /tmp/patch.diff" for c in GIT_APPLY_CMDS]
    assert "Reversed (or previously applied) patch detected" in output
    # ... leaving the tree the harness leaves: `--reject` applied s.py, then `patch --batch`
    # took it for applied and reversed it with p.toml. Grading sees what the harness sees.
    assert (box.root / "s.py").read_text() == "x\ny = 1\nz\n"
    assert (box.root / "p.toml").read_text() == 'a\nrequires = ["setuptools",\nc\n'


def test_the_cloud_harness_s_commands_keep_the_fix(tmp_path: Path) -> None:
    box = checkout(tmp_path, setup_committed=True)
    applied, _ = apply_patch(box, apply_commands("cloud"))
    assert applied
    assert box.ran == [
        "git apply -v /tmp/patch.diff",
        "patch --batch --fuzz=5 -p1 -i /tmp/patch.diff",
    ]
    # Without the `--reject` step, `patch --batch` reverses only the setup change.
    assert (box.root / "s.py").read_text() == "x\ny = 2\nz\n"
    assert (box.root / "p.toml").read_text() == 'a\nrequires = ["setuptools",\nc\n'


def test_a_patch_carrying_the_setup_changes_goes_onto_the_tree_before_the_setup(
    tmp_path: Path,
) -> None:
    # As the official evaluation applied such patches (sphinx-7440: the fix and `pytest -rA`
    # in, every official status reproduced), not reversed by `patch --batch`.
    box = checkout(tmp_path, setup_committed=True)
    note = _before_setup(box)
    applied, _ = apply_patch(box, apply_commands())
    assert "carries the setup changes: p.toml" in note and applied
    assert box.ran[-1] == "git apply --verbose /tmp/patch.diff"
    assert (box.root / "s.py").read_text() == "x\ny = 2\nz\n"
    assert (box.root / "p.toml").read_text() == 'a\nrequires = ["setuptools==68.0.0",\nc\n'


def test_a_patch_without_the_setup_changes_keeps_them(tmp_path: Path) -> None:
    box = checkout(tmp_path, setup_committed=True)
    (tmp_path / "patch.diff").write_text(SETUP_AND_FIX[SETUP_AND_FIX.index("diff --git a/s.py") :])
    assert _before_setup(box) == ""
    assert apply_patch(box, apply_commands())[0]
    assert (box.root / "s.py").read_text() == "x\ny = 2\nz\n"
    assert (box.root / "p.toml").read_text() == 'a\nrequires = ["setuptools==68.0.0",\nc\n'


def test_a_patch_no_command_applies_is_refused_with_git_s_reason(tmp_path: Path) -> None:
    box = checkout(tmp_path, setup_committed=True)
    (tmp_path / "patch.diff").write_text(
        "diff --git a/s.py b/s.py\n--- a/s.py\n+++ b/s.py\n@@ -1,1 +1,1 @@\n-nowhere\n+elsewhere\n"
    )
    applied, output = apply_patch(box, apply_commands())
    assert not applied
    assert "Failed to apply patch to container: patch --batch --fuzz=5 -p1 -i" in output


# A model's patch made in an image whose install left build/lib (a copy of the package) in the
# tree: its `git add -A` took the copy in as new files, and the CR of a CRLF file was lost on
# the way (psf__requests-1142 under mini-swe-agent). With the fix to s.py.
LEFTOVER_AND_FIX = """diff --git a/build/lib/crlf.py b/build/lib/crlf.py
new file mode 100644
--- /dev/null
+++ b/build/lib/crlf.py
@@ -0,0 +1,2 @@
+a = 1
+b = 2
diff --git a/s.py b/s.py
--- a/s.py
+++ b/s.py
@@ -1,3 +1,3 @@
 x
-y = 1
+y = 2
 z
"""


def checkout_with_leftovers(tmp_path: Path) -> Checkout:
    """The tree of an image whose install left ``build/lib/crlf.py`` (CRLF), as pgs's image
    build leaves it: untracked and listed in ``.git/info/exclude``."""
    box = checkout(tmp_path, setup_committed=True)
    (box.root / "build" / "lib").mkdir(parents=True)
    (box.root / "build" / "lib" / "crlf.py").write_bytes(b"a = 1\r\nb = 2\r\n")
    with (box.root / ".git" / "info" / "exclude").open("a") as f:
        f.write("/build/lib/crlf.py\n")
    (tmp_path / "patch.diff").write_text(LEFTOVER_AND_FIX)
    return box


def test_a_patch_recreating_install_leftovers_is_refused_on_a_tree_with_them(
    tmp_path: Path,
) -> None:
    # What the official report contradicts (applied, resolved): every harness command fails.
    box = checkout_with_leftovers(tmp_path)
    applied, output = apply_patch(box, apply_commands())
    assert not applied
    assert "already exists in working directory" in output
    assert "different line endings" in output


def test_files_a_patch_creates_that_the_install_left_are_removed_first(tmp_path: Path) -> None:
    box = checkout_with_leftovers(tmp_path)
    note = _without_leftovers(box)
    assert "creates 1 files the install left in the tree (build/lib/crlf.py)" in note
    applied, _ = apply_patch(box, apply_commands())
    assert applied and box.ran[-1] == "git apply --verbose /tmp/patch.diff"
    assert (box.root / "build" / "lib" / "crlf.py").read_bytes() == b"a = 1\nb = 2\n"
    assert (box.root / "s.py").read_text() == "x\ny = 2\nz\n"


def test_files_that_are_not_install_leftovers_stay(tmp_path: Path) -> None:
    # The same untracked file, not left by the install (not in .git/info/exclude): the
    # patch meets it as the harness would.
    box = checkout_with_leftovers(tmp_path)
    (box.root / ".git" / "info" / "exclude").write_text("")
    assert _without_leftovers(box) == ""
    assert (box.root / "build" / "lib" / "crlf.py").read_bytes() == b"a = 1\r\nb = 2\r\n"
    assert not apply_patch(box, apply_commands())[0]


# ------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


def run_eval(dataset: Dataset, preds: dict[str, str | None], out: Path) -> dict[str, Any]:
    path = dataset.write_preds(out / "preds.json", preds)
    return eval_summary(path, dataset.instances_file, out, "--repos-dir", str(dataset.repos_dir))


def report_of(out: Path, iid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "report" / "m" / iid / "report.json").read_text())
    return data[iid]


def test_an_empty_patch_gets_the_harness_s_report(dataset: Dataset, tmp_path: Path) -> None:
    summary = run_eval(dataset, {I2: ""}, tmp_path)
    assert summary["empty_patch_ids"] == [I2] and summary["empty_patch_instances"] == 1
    assert summary["completed_ids"] == [] and summary["unresolved_ids"] == []
    assert report_of(tmp_path, I2) == {
        "patch_is_None": False,
        "patch_exists": False,
        "patch_successfully_applied": False,
        "resolved": False,
    }
    assert (tmp_path / "report" / "m" / I2 / "patch.diff").read_text() == ""


@pytest.mark.docker
def test_tests_failing_by_a_refused_connection_are_not_checkable_here(
    dataset: Dataset, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = run_eval(dataset, {I1: REFUSED}, tmp_path)
    assert summary["unresolved_ids"] == [] and summary["resolved_ids"] == []
    assert summary["not_checkable_ids"] == [I1] and summary["not_checkable_instances"] == 1
    reason = summary["not_checkable"][I1]
    assert "Connection refused" in reason and "--network" in reason
    report = report_of(tmp_path, I1)
    assert report["not_checkable"] == reason and not report["resolved"]
    assert "not checkable here: acme__textkit-1" in capsys.readouterr().err


def test_a_log_that_only_names_a_network_error_stays_checkable() -> None:
    # pytest's own tests print the builtins (as pytest-dev__pytest-6197's log does): a name
    # is not a failure, and the instance stays unresolved, as the official harness grades it.
    log = (
        f"{START_TEST_OUTPUT}\n"
        "<ParsedCall 'pytest_pycollect_makeitem'(**{'obj': {'ConnectionRefusedError': "
        "<class 'ConnectionRefusedError'>}})>\n"
        "FAILED testing/test_collection.py::test_collect_pyargs_with_testpaths - AssertionError\n"
        f"{END_TEST_OUTPUT}\n"
    )
    assert network_failure(log) is None
    refused = log.replace(
        "AssertionError", "ConnectionRefusedError: [Errno 111] Connection refused"
    )
    assert "Connection refused" in (network_failure(refused) or "")


def test_a_commit_missing_from_the_repository_copy_is_not_checkable_here(
    dataset: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A snapshot fetched without the record's commit (astropy-14995's, once): a problem of the
    # data here, not of the patch, so neither an error nor unresolved.
    record = {**dataset.record(I1), "base_commit": "0123456789abcdef" * 2 + "01234567"}
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps([record]))
    preds = dataset.write_preds(tmp_path / "preds.json", {I1: REFUSED})
    repos = ("--repos-dir", str(dataset.repos_dir), "--eval-scripts", "harness")
    summary = eval_summary(preds, instances, tmp_path, *repos)
    assert summary["not_checkable_ids"] == [I1] and summary["not_checkable_instances"] == 1
    assert summary["error_ids"] == [] and summary["unresolved_ids"] == []
    reason = summary["not_checkable"][I1]
    assert reason.startswith("the commit is not in the repository snapshot (base_commit 012345")
    assert report_of(tmp_path, I1)["not_checkable"] == reason
    said = capsys.readouterr().err
    assert f"not checkable here: {I1}: the commit is not in the repository" in said


def test_a_file_missing_from_the_repository_copy_is_named(tmp_path: Path) -> None:
    # A snapshot without a large file's object (astropy-14995: its IERS table): the commit is
    # there, its checkout is not; the reason names the file.
    from agent.swebench.images import _unreadable
    from envs.errors import ImageBuildError
    from envs.images import history_clone

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=pgs", "-c", "user.email=pgs@example.com", "-C", str(repo)]
    (repo / "small.py").write_text("x = 1\n")
    (repo / "table.dat").write_text("a large table\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True, env=ENV)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    blob = subprocess.run([*git, "rev-parse", "HEAD:table.dat"], capture_output=True, text=True)
    (repo / ".git" / "objects" / blob.stdout[:2] / blob.stdout.strip()[2:]).unlink()
    with pytest.raises(ImageBuildError) as failed:
        history_clone(repo / ".git", sha.strip(), tmp_path / "clone")
    reason = _unreadable(repo / ".git", sha.strip(), str(failed.value))
    assert reason == "a file of the commit is not in the repository snapshot (table.dat)"


def test_the_harness_s_own_evaluation_script_on_request() -> None:
    # A record carrying its own eval_script (a later fix of the dataset, as astropy-8872's
    # `export SETUPTOOLS_USE_DISTUTILS=stdlib`): pgs runs it; reports graded before the fix
    # ran the one the harness writes from its table, which scripts="harness" gives.
    from agent.swebench import Instance, eval_script, instance_spec

    record = {
        "repo": "astropy/astropy",
        "instance_id": "astropy__astropy-1",
        "base_commit": "b750a0e6ee76fb6b8a099a4d16ec51977be46bf6",
        "environment_setup_commit": "2e89d074b3b2abc2da80e437c93b1d5516a0ca57",
        "version": "3.1",
        "test_patch": "diff --git a/t/test_q.py b/t/test_q.py\n--- a/t/test_q.py\n+++ "
        "b/t/test_q.py\n@@ -1 +1 @@\n-a\n+b\n",
        "FAIL_TO_PASS": ["t/test_q.py::test_a"],
        "PASS_TO_PASS": [],
        "eval_script": "#!/bin/bash\nexport SETUPTOOLS_USE_DISTUTILS=stdlib\n"
        "pytest -rA t/test_q.py\n",
    }
    instance = Instance.from_record(record)
    spec = instance_spec(instance, {}, own_python=True)
    assert eval_script(instance, spec) == record["eval_script"]
    harness = eval_script(instance, spec, "harness")
    assert "SETUPTOOLS_USE_DISTUTILS" not in harness
    assert "pytest -rA t/test_q.py" in harness and "git checkout b750a0e6ee76" in harness
