"""SWE-bench records: loading, selecting, and the repositories that hold their commits.

**Records** are SWE-bench's (``instance_id``, ``repo``, ``base_commit``, ``problem_statement``,
``hints_text``, ``patch``, ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``version``,
``environment_setup_commit``; current Verified records also carry ``eval_script``,
``log_parser`` and ``image``), from a JSON list, a JSONL file, or ``datasets`` where the hub is
reachable.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import InstanceError, MissingData
from envs.errors import EnvError
from envs.images import cache_dir, file_lock, has_commit

Status = Callable[[str], None]


def quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Instance:
    """One SWE-bench record; ``record`` keeps every field, extension fields included."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    hints_text: str
    patch: str
    test_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    version: str
    environment_setup_commit: str
    record: dict[str, Any] = field(repr=False)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], *, where: str = "record") -> Instance:
        missing = [k for k in ("instance_id", "repo", "base_commit") if not record.get(k)]
        if missing:
            raise InstanceError(f"{where}: missing field(s) {', '.join(missing)}")
        iid = str(record["instance_id"])
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", iid):
            raise InstanceError(f"{where}: instance_id {iid!r} may hold only letters, digits, _.-")
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", str(record["repo"])):
            raise InstanceError(f"{where}: repo {record['repo']!r} is not OWNER/NAME")

        def tests(key: str) -> list[str]:
            value = record.get(key) or []
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError:
                    raise InstanceError(f"{where}: {key} is not a JSON list") from None
            if not isinstance(value, list):
                raise InstanceError(f"{where}: {key} must be a list of test ids")
            return [str(v) for v in value]

        return cls(
            instance_id=iid,
            repo=str(record["repo"]),
            base_commit=str(record["base_commit"]),
            problem_statement=str(record.get("problem_statement") or ""),
            hints_text=str(record.get("hints_text") or ""),
            patch=str(record.get("patch") or ""),
            test_patch=str(record.get("test_patch") or ""),
            fail_to_pass=tests("FAIL_TO_PASS"),
            pass_to_pass=tests("PASS_TO_PASS"),
            version=str(record.get("version") or ""),
            environment_setup_commit=str(
                record.get("environment_setup_commit") or record["base_commit"]
            ),
            record=dict(record),
        )

    @property
    def mirror_name(self) -> str:
        return self.repo.replace("/", "__")


def load_instances(path: Path) -> list[Instance]:
    """Records from a JSON list or a JSONL file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InstanceError(f"cannot read the instances file {path}: {e.strerror}") from None
    records: list[Any]
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            records = json.loads(text)
        else:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise InstanceError(
            f"{path} is neither a JSON list nor JSONL of SWE-bench records: {e}"
        ) from None
    out, seen = [], set()
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise InstanceError(f"{path}: record {i + 1} is not a JSON object")
        instance = Instance.from_record(record, where=f"{path}, record {i + 1}")
        if instance.instance_id in seen:
            raise InstanceError(f"{path}: instance_id {instance.instance_id} appears twice")
        seen.add(instance.instance_id)
        out.append(instance)
    return out


def load_hub_dataset(name: str, split: str = "test") -> list[Instance]:
    """Records of a dataset on the Hugging Face hub, through ``datasets`` (needs the network)."""
    try:
        import datasets
    except ImportError:
        raise InstanceError(
            "--dataset needs the `datasets` package: pip install 'pgs-agent[swebench]', or "
            "save the records as JSON and pass --instances FILE"
        ) from None
    try:
        rows = datasets.load_dataset(name, split=split)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InstanceError(
            f"cannot load the dataset {name!r} (split {split}) from the Hugging Face hub: "
            f"{first[:200]}; where the hub is unreachable, save the records as JSON or JSONL "
            "elsewhere and pass --instances FILE"
        ) from None
    return [Instance.from_record(dict(r), where=f"{name}[{i}]") for i, r in enumerate(rows)]


def select(
    instances: Sequence[Instance],
    *,
    pattern: str | None = None,
    slice_: str | None = None,
    shuffle: bool = False,
    seed: int = 42,
) -> list[Instance]:
    """Filter by regex on the instance id, shuffle (seeded), then slice ``A:B``."""
    out = list(instances)
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error as e:
            raise InstanceError(f"--filter {pattern!r} is not a regular expression: {e}") from None
        out = [i for i in out if regex.search(i.instance_id)]
    if shuffle:
        random.Random(seed).shuffle(out)
    if slice_:
        match = re.fullmatch(r"\s*(-?\d*)\s*:\s*(-?\d*)\s*", slice_)
        if not match:
            raise InstanceError(f"--slice {slice_!r}: give A:B (either may be empty), e.g. 0:10")
        start, stop = (int(g) if g else None for g in match.groups())
        out = out[start:stop]
    return out


def _git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, errors="replace")


def find_mirror(instance: Instance, repos_dir: Path | None, status: Status = quiet) -> Path:
    """The git repository (bare or not) holding ``instance``'s commits.

    ``repos_dir/OWNER__NAME`` (or ``OWNER__NAME.git``) when ``repos_dir`` is given; else a bare
    clone from GitHub cached under ``~/.cache/pgs/swebench/repos``.
    """
    if repos_dir is not None:
        for name in (instance.mirror_name, instance.mirror_name + ".git"):
            path = Path(repos_dir).expanduser().resolve() / name
            if path.is_dir():
                return path
        raise InstanceError(
            f"no repository {instance.mirror_name} (or {instance.mirror_name}.git) in "
            f"--repos-dir {repos_dir}: clone {instance.repo} there (`git clone --bare "
            f"https://github.com/{instance.repo} {repos_dir}/{instance.mirror_name}`)"
        )
    dest = cache_dir() / "swebench" / "repos" / f"{instance.mirror_name}.git"
    if dest.is_dir():
        return dest
    with file_lock(f"clone-{instance.mirror_name}"):
        if dest.is_dir():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        url = f"https://github.com/{instance.repo}.git"
        status(f"git clone --bare {url}")
        tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
        done = _git("clone", "-q", "--bare", url, str(tmp))
        if done.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise EnvError(
                f"cannot clone {url}: {done.stderr.strip()[-300:]}; where GitHub is "
                "unreachable, pass --repos-dir DIR holding clones or bare repositories named "
                "OWNER__NAME"
            )
        tmp.rename(dest)
    return dest


def check_commits(instance: Instance, mirror: Path) -> None:
    for what, sha in (
        ("base_commit", instance.base_commit),
        ("environment_setup_commit", instance.environment_setup_commit),
    ):
        if not has_commit(mirror, sha):
            raise MissingData(
                f"{instance.instance_id}: {what} {sha[:12]} is not in {mirror}: update the "
                "mirror (`git fetch` there)",
                f"the commit is not in the repository snapshot ({what} {sha[:12]} is not in "
                f"{mirror})",
            )


def working_tree(instance: Instance, mirror: Path, dest: Path) -> Path:
    """A clean working tree of ``mirror`` at ``base_commit`` in ``dest`` (shares its objects)."""
    check_commits(instance, mirror)
    steps = [
        ["clone", "-q", "--shared", "--no-checkout", str(mirror), str(dest)],
        ["-C", str(dest), "checkout", "-q", "--detach", instance.base_commit],
    ]
    for args in steps:
        done = _git(*args)
        if done.returncode != 0:
            raise EnvError(f"git {' '.join(args[:3])} failed: {done.stderr.strip()[-500:]}")
    return dest
