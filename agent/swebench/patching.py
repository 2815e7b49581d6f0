"""The model patch applied the way the SWE-bench harness applies it, in a sandbox whose
repository is at ``/testbed``.

The commands are the installed swebench's own, read at run time (:func:`apply_commands`):
``run_evaluation.GIT_APPLY_CMDS`` (the harness run on Docker: tried in order in the same tree,
the first that exits 0 wins), or with ``cloud`` the two commands of its Modal harness (``git
apply -v``, then ``patch --batch --fuzz=5 -p1 -i``), the one sb-cli reports come from. Before
them the tree is made the official evaluation's (:func:`prepare_tree`): files a patch creates
that the install left untracked are removed (:func:`_without_leftovers`), and a patch that
carries the image's setup changes goes onto the tree before the setup commit
(:func:`_before_setup`)."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from typing import Any

from agent.swebench import APPLY_PATCH_PASS, InstanceError
from agent.swebench.reports import InstanceLog

#: Where the cloud harness (swebench's Modal one, behind sb-cli) runs its patch commands.
CLOUD_COMMAND = re.compile(r"cd /testbed && ((?:git apply|patch) [^\"']*?) /tmp/patch\.diff")


#: Subjects of the commit that holds an image's setup changes: pgs's
#: (:func:`envs.images.build.finish_repo_steps`) and the current harness's.
SETUP_COMMITS = ("pgs: changes made by the environment setup", "SWE-bench")


def apply_commands(chain: str = "harness") -> tuple[str, ...]:
    """The installed swebench's patch commands, each taking the patch file as its last word:
    ``harness`` is ``swebench.harness.run_evaluation.GIT_APPLY_CMDS``; ``cloud`` the commands
    its Modal harness runs (read from that module's source, which imports ``modal``)."""
    try:
        if chain == "harness":
            from swebench.harness.run_evaluation import GIT_APPLY_CMDS

            return tuple(GIT_APPLY_CMDS)
        spec = importlib.util.find_spec("swebench.harness.modal_eval.run_evaluation_modal")
    except ImportError:
        raise InstanceError(
            "grading needs the swebench package: pip install 'pgs-agent[swebench]'"
        ) from None
    if chain != "cloud":
        raise InstanceError(f"unknown patch commands {chain!r}: harness or cloud")
    source = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
    found = tuple(dict.fromkeys(CLOUD_COMMAND.findall(source)))
    if not found:
        raise InstanceError(
            "the installed swebench has no Modal harness whose patch commands pgs can read; "
            "use the harness's commands (--apply-commands harness)"
        )
    return found


def prepare_tree(box: Any) -> str:
    """Make the tree the official evaluation's for the patch at ``/tmp/patch.diff``: the
    install's leftovers it creates removed, the setup changes it carries taken into account. A
    note for the log of what was changed, or ""."""
    return _without_leftovers(box) + _before_setup(box)


def _without_leftovers(box: Any) -> str:
    """Files the patch creates that the image's install left in the work tree are removed
    first, so the patch creates them as it does on the official evaluation's tree, which has no
    such leftovers: requests' ``pip install .`` leaves ``build/lib`` (a copy of the package,
    CRLF files included), a model's ``git add -A`` took it into its patch, and its CRs were
    lost on the way (mini-swe-agent reads the diff as text), so on a tree with the leftovers no
    harness command applies it, while the official report says it applied (docs/environments.md).
    Leftovers are what :func:`envs.images.build.finish_repo_steps` listed in
    ``.git/info/exclude``: untracked files the setup made, never tracked files. A note for the
    log, or ""."""
    summary = box.run("git apply --summary /tmp/patch.diff")
    created = [
        line.split(maxsplit=3)[3]
        for line in summary.output.splitlines()
        if summary.ok and line.startswith(" create mode ") and len(line.split(maxsplit=3)) == 4
    ]
    if not created:
        return ""
    excluded = box.run("cat .git/info/exclude").output.splitlines()
    left = {line[1:] for line in excluded if line.startswith("/")}
    found = [path for path in created if path in left]
    if not found:
        return ""
    box.run("rm -f -- " + " ".join(shlex.quote(path) for path in found))
    shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return (
        f"The patch creates {len(found)} files the install left in the tree ({shown}): "
        "removed first, as on the official evaluation's tree.\n"
    )


def _before_setup(box: Any) -> str:
    """A patch that carries the setup changes (made in a published image that left them in the
    work tree) goes onto the tree before the setup commit, as the official evaluation applied
    such patches (measured: bench/agreement.py, docs/environments.md); the setup commit's files
    are checked out as they were before it. Only when the patch applies there and not on HEAD;
    a note for the log, or ""."""
    head = box.run("git log -1 --format=%s HEAD")
    if not head.ok or head.output.strip() not in SETUP_COMMITS:
        return ""
    if box.run("git apply --check /tmp/patch.diff").ok:
        return ""
    files = box.run("git diff --name-only HEAD~1 HEAD").output.split()
    if not files:
        return ""
    quoted = " ".join(shlex.quote(f) for f in files)
    box.run(f"git checkout HEAD~1 -- {quoted}")
    if box.run("git apply --check /tmp/patch.diff").ok:
        return f"The patch carries the setup changes: {', '.join(files)} as before the setup.\n"
    box.run(f"git checkout HEAD -- {quoted}")
    return ""


def apply_patch(
    box: Any, commands: tuple[str, ...], log: InstanceLog | None = None
) -> tuple[bool, str]:
    """The harness's patch commands in ``/testbed``, as its ``run_instance`` runs them: in
    order, in the same tree (no reset between two: a partial ``--reject`` stays), the first
    that exits 0 applied the patch; (applied, the commands' outputs). Each command, its exit
    code and output go to ``log`` too."""
    output = ""
    for command in commands:
        result = box.run(f"{command} /tmp/patch.diff")
        output += f"$ {command} /tmp/patch.diff\n{result.output}"
        if log is not None:
            log.info(f"$ {command} /tmp/patch.diff (exit code {result.exit_code})\n{result.output}")
        if result.ok:
            if log is not None:
                log.info(f"{APPLY_PATCH_PASS}: by {command}")
            return True, output
        output += f"Failed to apply patch to container: {command}\n"
        if log is not None:
            log.info(f"Failed to apply patch to container: {command}")
    return False, output


def apply_prediction(box: Any, patch: str, commands: tuple[str, ...]) -> tuple[bool, str]:
    """Write ``patch`` as the harness writes it and apply it as
    :func:`agent.swebench.run_instance.evaluate_one` does (:func:`prepare_tree`, then the
    harness's commands in order): (applied, what the commands said)."""
    box.write_file("/tmp/patch.diff", patch)
    reverted = prepare_tree(box)
    applied, output = apply_patch(box, commands)
    return applied, reverted + output
