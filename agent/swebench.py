"""SWE-bench instances: loading records, finding their repositories, building their images,
writing their evaluation scripts and grading their test logs.

**Records** are SWE-bench's (``instance_id``, ``repo``, ``base_commit``, ``problem_statement``,
``hints_text``, ``patch``, ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``version``,
``environment_setup_commit``), from a JSON list, a JSONL file, or ``datasets`` where the hub is
reachable.

**The environment of an instance** (:class:`InstanceSpec`) comes from, first to last:

1. the record's own fields, the documented extension for repositories that swebench does not
   know: ``python`` ("3.9"), ``requirements`` (requirement files read at
   ``environment_setup_commit``), ``pip_packages``, ``pre_install`` and ``install`` (shell
   commands, run offline in ``/testbed``), ``test_cmd`` ("pytest -rA") or ``eval_script`` (a
   whole evaluation script, swebench 5.x style), ``log_parser`` (a swebench parser name,
   "parse_log_pytest", or short, "pytest") and ``eval_type``;
2. swebench 4.x's table ``MAP_REPO_VERSION_TO_SPECS[repo][version]`` (python, packages,
   pip_packages, pre_install, install, test_cmd), when that version of swebench is installed.
   swebench 5.x has no such table (its records carry ``eval_script`` and ``log_parser``, and
   its images come from Dockerfiles in task repositories on GitHub).

**Instance images** (``pgs-sweb-<instance>:<hash12>``) are built offline like pgs's repository
images (:mod:`envs.images`): a base image with the instance's Python, the repository at
``base_commit`` in ``/testbed`` (a one-commit clone: no future history), the dependencies
downloaded into a host wheelhouse by the target interpreter and installed with the network off,
then ``pytest`` and ``hypothesis`` (the Tester needs them). The tag is a hash of everything that
goes in, so an unchanged instance is never rebuilt. A ``conda`` no-op and an empty
``/opt/miniconda3/bin/activate`` let swebench's own evaluation scripts, written for conda
images, run unchanged. Python comes from Debian releases only (see
:data:`envs.images.DEBIAN_SUITES`); another version is an error unless the user maps it to a
supported one (``--python-map 3.10=3.11``), which is then recorded as a deviation.

**Grading** reuses swebench: its log parsers and ``get_eval_report`` (5.x) or
``get_eval_tests_report`` / ``get_resolution_status`` (4.x, for repositories it has no parser
table entry for).
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.run import InputError
from envs.errors import EnvError

Status = Callable[[str], None]

#: Where the repository is in an instance image (as in swebench's images).
TESTBED = "/testbed"
#: Bump to rebuild every instance image.
IMAGE_RECIPE_VERSION = "1"
#: Record fields of the extension (see the module docstring).
SPEC_FIELDS = (
    "python",
    "requirements",
    "pip_packages",
    "pre_install",
    "install",
    "test_cmd",
    "eval_script",
    "log_parser",
    "eval_type",
)
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
APPLY_PATCH_PASS = ">>>>> Applied Patch"
HEREDOC = "EOF_114329324912"
FAIL_ONLY_REPOS = {
    "chartjs/Chart.js",
    "processing/p5.js",
    "markedjs/marked",
    "bpmn-io/bpmn-js",
    "openlayers/openlayers",
    "eslint/eslint",
}


class InstanceError(InputError):
    """A record, dataset or selection the user must fix; the message says what."""


def _quiet(_: str) -> None:
    pass


# --------------------------------------------------------------------------------------------
# Records


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


# --------------------------------------------------------------------------------------------
# The environment of an instance


class InstanceSpec(BaseModel):
    """How to build and test one instance; see the module docstring for where it comes from."""

    model_config = ConfigDict(extra="forbid")
    python: str = "3.11"
    requirements: list[str] = Field(default_factory=list)
    pip_packages: list[str] = Field(default_factory=list)
    pre_install: list[str] = Field(default_factory=list)
    install: list[str] = Field(default_factory=list)
    test_cmd: str = "pytest -rA"
    eval_script: str | None = None
    log_parser: str = "parse_log_pytest"
    eval_type: str = "pass_and_fail"
    #: Where it came from: "record" or "swebench <version> table".
    source: str = "record"
    #: What differs from the official environment (recorded in image labels and reports).
    deviations: list[str] = Field(default_factory=list)


def _as_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _swebench_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("swebench")
    except Exception:
        return None


def _table_spec(instance: Instance) -> dict[str, Any] | None:
    """swebench 4.x's spec for (repo, version), or None (5.x, unknown repo, not installed)."""
    try:
        from swebench.harness import constants
    except ImportError:
        return None
    table = getattr(constants, "MAP_REPO_VERSION_TO_SPECS", None)
    if not table or instance.repo not in table:
        return None
    specs = table[instance.repo].get(instance.version)
    if specs is None:
        return None
    out: dict[str, Any] = {"python": specs.get("python", "3.11")}
    packages = str(specs.get("packages") or "")
    if packages == "requirements.txt":
        paths = getattr(constants, "MAP_REPO_TO_REQS_PATHS", {}).get(instance.repo, [])
        out["requirements"] = list(paths)[:1]
    elif packages == "environment.yml":
        raise EnvError(
            f"{instance.instance_id}: swebench's spec for {instance.repo} {instance.version} "
            "is a conda environment.yml, which pgs cannot install offline; give the record "
            "its own `pip_packages` / `install` fields"
        )
    elif packages:
        out["pip_packages"] = packages.split()
    out["pip_packages"] = [*out.get("pip_packages", []), *_as_list(specs.get("pip_packages"))]
    pre = _as_list(specs.get("pre_install"))
    apt = [c for c in pre if "apt" in c.split()[0:3] or "apt-get" in c]
    out["pre_install"] = [c for c in pre if c not in apt]
    out["deviations"] = [f"skipped system package step: {c}" for c in apt]
    out["install"] = _as_list(specs.get("install"))
    if specs.get("test_cmd"):
        out["test_cmd"] = " ".join(_as_list(specs["test_cmd"]))
    return out


def instance_spec(instance: Instance, python_map: Mapping[str, str] | None = None) -> InstanceSpec:
    """The environment of ``instance``: its record's own fields, else swebench 4.x's table."""
    record = instance.record
    data: dict[str, Any]
    if any(k in record for k in ("install", "test_cmd", "python", "requirements")):
        data = {k: record[k] for k in SPEC_FIELDS if record.get(k) is not None}
        for key in ("requirements", "pip_packages", "pre_install", "install"):
            if key in data:
                data[key] = _as_list(data[key])
        data["source"] = "record"
    else:
        table = _table_spec(instance)
        if table is None:
            have = _swebench_version()
            why = (
                "the swebench package is not installed"
                if have is None
                else f"swebench {have} has no spec for {instance.repo} version {instance.version!r}"
                + (" (5.x carries no spec tables)" if have.startswith("5") else "")
            )
            raise EnvError(
                f"{instance.instance_id}: no environment spec: {why}; add `python`, `install` "
                "and `test_cmd` fields to the record (see pgs batch --help), or install "
                "swebench 4.x (pip install 'swebench>=4,<5') for its SWE-bench tables"
            )
        data = {**table, "source": f"swebench {_swebench_version()} table"}
        for key in ("eval_script", "log_parser", "eval_type"):  # a 5.x-style record
            if record.get(key):
                data[key] = record[key]
        if "log_parser" not in data:
            data["log_parser"] = f"repo:{instance.repo}"
    if instance.repo in FAIL_ONLY_REPOS and "eval_type" not in data:
        data["eval_type"] = "fail_only"
    wanted = str(data.get("python", "3.11"))
    data["python"] = _choose_python(instance, wanted, python_map or {})
    if data["python"] != wanted.strip().removeprefix("python").removeprefix("py"):
        data["deviations"] = [*data.get("deviations", []), f"Python {data['python']} for {wanted}"]
    try:
        spec = InstanceSpec.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        raise InstanceError(f"{instance.instance_id}: bad environment fields: {problems}") from None
    return spec


def _choose_python(instance: Instance, wanted: str, python_map: Mapping[str, str]) -> str:
    from envs.images import DEBIAN_SUITES

    version = wanted.strip().removeprefix("python").removeprefix("py")
    if version in DEBIAN_SUITES:
        return version
    if version in python_map:
        return python_map[version]
    supported = ", ".join(f"{v} (Debian {s})" for v, s in DEBIAN_SUITES.items())
    raise EnvError(
        f"{instance.instance_id} needs Python {version}, which pgs cannot provide offline: base "
        f"images exist for {supported} only (no Debian release ships {version}, and no registry "
        f"is reachable for python:{version}-slim); pass --python-map {version}=3.11 (or another "
        "supported version) to substitute one, knowing results may then differ from the "
        "official harness"
    )


# --------------------------------------------------------------------------------------------
# Repositories: a local mirror, else GitHub


def _git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, errors="replace")


def find_mirror(instance: Instance, repos_dir: Path | None, status: Status = _quiet) -> Path:
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
    from envs.images import _file_lock, cache_dir

    dest = cache_dir() / "swebench" / "repos" / f"{instance.mirror_name}.git"
    if dest.is_dir():
        return dest
    with _file_lock(f"clone-{instance.mirror_name}"):
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


def _has_commit(mirror: Path, sha: str) -> bool:
    return _git("-C", str(mirror), "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0


def check_commits(instance: Instance, mirror: Path) -> None:
    for what, sha in (
        ("base_commit", instance.base_commit),
        ("environment_setup_commit", instance.environment_setup_commit),
    ):
        if not _has_commit(mirror, sha):
            raise InstanceError(
                f"{instance.instance_id}: {what} {sha[:12]} is not in {mirror}: update the "
                "mirror (`git fetch` there)"
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


# --------------------------------------------------------------------------------------------
# Instance images


@dataclass(frozen=True)
class InstanceImage:
    tag: str
    python: str
    cache_hit: bool
    seconds: float
    deviations: list[str]


_INSTALL_PROJECT = re.compile(
    r"pip\s+install\s+(?:[^&;|]*\s)?(?:-e\s+|--editable\s+)?['\"]?\.(\[[^\]\s'\"]*\])?"
    r"|setup\.py\s+(?:develop|install)"
)


def _project_extras(install: Sequence[str]) -> tuple[str, ...] | None:
    """The extras the install commands install the project with; None: not installed."""
    for command in install:
        match = _INSTALL_PROJECT.search(command)
        if match:
            extras = (match.group(1) or "").strip("[]")
            return tuple(e.strip() for e in extras.split(",") if e.strip())
    return None


def image_name(instance: Instance) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", instance.instance_id.lower()).strip("-")[:80]
    return f"pgs-sweb-{name}"


CONDA_SHIM = """#!/bin/sh
# pgs instance images have no conda: swebench's scripts' `conda activate testbed` is a no-op.
exit 0
"""


def _dockerfile(base: str, steps: Sequence[str], label_text: str) -> str:
    from envs.images import STEP_MARKER

    lines = [
        f"FROM {base}",
        "ENV PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels PIP_DISABLE_PIP_VERSION_CHECK=1 \\",
        "    PIP_ROOT_USER_ACTION=ignore PYTHONDONTWRITEBYTECODE=1",
        f"WORKDIR {TESTBED}",
        "COPY root/ /",
        "RUN git config --system --add safe.directory '*' \\",
        " && git config --system core.excludesFile /etc/pgs-gitignore \\",
        " && git config --system user.name pgs && git config --system user.email pgs@localhost \\",
        " && chmod 755 /usr/local/bin/conda \\",
        " && python3 -m pip install --ignore-installed pip setuptools wheel \\",
    ]
    for command in steps:
        marker = shlex.quote(STEP_MARKER + command)
        lines.append(f" && printf '%s\\n' {marker} && ({command}) \\")
    lines.append(" && git ls-files --others --exclude-standard | sed 's|^|/|' >> .git/info/exclude")
    lines.append(f"LABEL {label_text}")
    return "\n".join(lines) + "\n"


def build_instance_image(
    instance: Instance,
    spec: InstanceSpec,
    mirror: Path,
    *,
    status: Status = _quiet,
    client: Any = None,
    run_id: str | None = None,
) -> InstanceImage:
    """The instance's image, built only when no image with its content hash exists."""
    from envs import images
    from envs.docker_util import docker_client, labels

    started = time.monotonic()
    check_commits(instance, mirror)
    env_sha = instance.environment_setup_commit
    extras = _project_extras(spec.install)
    files = images._dependency_files(mirror, env_sha)
    detected = images.detect_dependencies(files, images.RepoImageSpec(extras=list(extras or [])))
    build_requires = detected.build_requires if extras is not None else ()
    for path in spec.requirements:
        if _git("-C", str(mirror), "cat-file", "-e", f"{env_sha}:{path}").returncode != 0:
            raise InstanceError(
                f"{instance.instance_id}: requirement file {path} is not in {instance.repo} at "
                f"environment_setup_commit {env_sha[:12]}"
            )
    plan = images.DependencyPlan(
        requirement_files=tuple(spec.requirements),
        project_extras=extras,
        build_requires=build_requires,
        extra_packages=tuple(spec.pip_packages),
    )
    deviations = list(spec.deviations)
    wheel_key = images._digest(
        "swebench",
        images.RECIPE_VERSION,
        images.recipe("wheelhouse.sh"),
        spec.python,
        env_sha,
        plan.download_args("/src"),
        list(plan.build_requires),
    )
    steps = []
    if spec.requirements or spec.pip_packages:
        args = [a for f in spec.requirements for a in ("-r", f"/tmp/pgs-requirements/{f}")]
        args += spec.pip_packages
        steps.append("python3 -m pip install " + " ".join(shlex.quote(a) for a in args))
    steps += [*spec.pre_install, *spec.install]
    steps.append("python3 -m pip install " + " ".join(images.ALWAYS_INSTALL))
    image_key = images._digest(
        wheel_key, IMAGE_RECIPE_VERSION, instance.base_commit, steps, images.recipe("pgs-gitignore")
    )
    tag = f"{image_name(instance)}:{image_key[:12]}"
    client = client or docker_client()
    if images._image_exists(client, tag):
        return InstanceImage(tag, spec.python, True, time.monotonic() - started, deviations)
    base = images.ensure_base_image(spec.python, status=status, client=client)
    with images._file_lock(tag.replace(":", "-")):
        if images._image_exists(client, tag):
            return InstanceImage(tag, spec.python, True, time.monotonic() - started, deviations)
        wheels = images._wheelhouse(client, mirror, env_sha, base, plan, wheel_key, status, run_id)
        status(f"docker build {tag} (network off)")
        builds = images.cache_dir() / "build"
        builds.mkdir(parents=True, exist_ok=True)
        context = Path(tempfile.mkdtemp(prefix="sweb-", dir=builds))
        try:
            root = context / "root"
            images._shallow_clone(mirror, instance.base_commit, root / TESTBED.strip("/"))
            try:
                shutil.copytree(wheels, root / "wheels", copy_function=os.link)
            except OSError:
                shutil.rmtree(root / "wheels", ignore_errors=True)
                shutil.copytree(wheels, root / "wheels")
            for path in spec.requirements:
                target = root / "tmp" / "pgs-requirements" / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(files.get(path) or _show(mirror, env_sha, path))
            (root / "etc").mkdir()
            (root / "etc" / "pgs-gitignore").write_text(images.recipe("pgs-gitignore"))
            (root / "usr" / "local" / "bin").mkdir(parents=True)
            (root / "usr" / "local" / "bin" / "conda").write_text(CONDA_SHIM)
            (root / "opt" / "miniconda3" / "bin").mkdir(parents=True)
            (root / "opt" / "miniconda3" / "bin" / "activate").write_text("# pgs: no conda\n")
            image_labels = labels(
                run_id,
                kind="swebench",
                instance=instance.instance_id,
                commit=instance.base_commit,
                python=spec.python,
                deviations="; ".join(deviations),
            )
            (context / "Dockerfile").write_text(
                _dockerfile(base, steps, images._label_text(image_labels))
            )
            images._docker_build(client, tag=tag, network_mode="none", path=str(context))
        finally:
            shutil.rmtree(context, ignore_errors=True)
    return InstanceImage(tag, spec.python, False, time.monotonic() - started, deviations)


def _show(mirror: Path, sha: str, path: str) -> bytes:
    done = subprocess.run(["git", "-C", str(mirror), "show", f"{sha}:{path}"], capture_output=True)
    return done.stdout


def official_image(instance: Instance, client: Any = None) -> str:
    """Pull swebench's published image of ``instance`` (needs a reachable registry)."""
    from envs.docker_util import docker_client

    name = f"swebench/sweb.eval.x86_64.{instance.instance_id.replace('__', '_1776_')}".lower()
    client = client or docker_client()
    try:
        client.images.pull(name, tag="latest")
    except Exception as e:
        raise EnvError(
            f"cannot pull {name}:latest ({str(e).splitlines()[0][:160]}): no registry is "
            "reachable from here; use --image-source build (pgs builds the image offline)"
        ) from None
    return f"{name}:latest"


@dataclass
class Environments:
    """Instance images for a batch or an evaluation: one build per instance, thread-safe."""

    repos_dir: Path | None
    python_map: Mapping[str, str]
    image_source: str = "build"
    run_id: str | None = None
    _done: dict[str, InstanceImage] = field(default_factory=dict)

    def image(self, instance: Instance, status: Status = _quiet) -> InstanceImage:
        if instance.instance_id in self._done:
            return self._done[instance.instance_id]
        started = time.monotonic()
        if self.image_source == "official":
            tag = official_image(instance)
            result = InstanceImage(tag, "official", True, time.monotonic() - started, [])
        else:
            spec = instance_spec(instance, self.python_map)
            mirror = find_mirror(instance, self.repos_dir, status)
            status("preparing the instance image (cached after the first time)")
            result = build_instance_image(instance, spec, mirror, status=status, run_id=self.run_id)
        self._done[instance.instance_id] = result
        return result


def parse_python_map(items: Iterable[str]) -> dict[str, str]:
    """``["3.10=3.11", "3.8=3.9,3.12=3.13"]`` -> {"3.10": "3.11", ...}; targets checked."""
    from envs.images import check_python

    out: dict[str, str] = {}
    for item in items:
        for pair in filter(None, (p.strip() for p in item.split(","))):
            if "=" not in pair:
                raise InstanceError(f"--python-map {pair!r}: give WANTED=USED, e.g. 3.10=3.11")
            wanted, used = (p.strip() for p in pair.split("=", 1))
            out[wanted] = check_python(used)
    return out


# --------------------------------------------------------------------------------------------
# Evaluation scripts and grading


def test_files(patch: str) -> list[str]:
    """The files a diff touches (its ``+++ b/`` side; deleted files from ``--- a/``)."""
    out: list[str] = []
    for line in patch.splitlines():
        for prefix in ("+++ b/", "--- a/"):
            if line.startswith(prefix):
                path = line[len(prefix) :].split("\t")[0].strip()
                if path not in out:
                    out.append(path)
    return out


def _pytest_ids(ids: Sequence[str]) -> bool:
    """True when every id is a whole pytest node id (``path::name``, brackets balanced)."""
    return bool(ids) and all(
        "::" in i and i.split("::")[0].endswith(".py") and i.count("[") == i.count("]") for i in ids
    )


def eval_script(instance: Instance, spec: InstanceSpec) -> str:
    """The script that applies ``test_patch`` and runs the instance's tests, in swebench's
    shape (``set -uxo pipefail``, output between the start and end markers, the test command's
    exit code after them). A record's own ``eval_script`` is used as it is."""
    if spec.eval_script:
        script = spec.eval_script
        if TEST_EXIT_CODE not in script:
            try:
                from swebench.harness.utils import parse_eval_script, record_test_exit_code

                body = record_test_exit_code(parse_eval_script(script))
                script = "\n".join(["#!/bin/bash", "set -uxo pipefail", *body]) + "\n"
            except ImportError:
                pass
        return script
    if spec.source != "record":
        made = _swebench4_eval_script(instance)
        if made:
            return made
    files = test_files(instance.test_patch)
    tests = [*instance.fail_to_pass, *instance.pass_to_pass]
    if spec.log_parser.endswith("pytest") and _pytest_ids(tests):
        selection = list(dict.fromkeys(tests))
    else:
        selection = [f for f in files if not f.endswith((".json", ".txt", ".md", ".yml"))]
    reset = f"git checkout {instance.base_commit} -- " + " ".join(map(shlex.quote, files))
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        f"cd {TESTBED}",
        "git status",
        "git -c core.fileMode=false diff",
        *([reset] if files else []),
        f"git apply --verbose --reject - <<'{HEREDOC}'",
        instance.test_patch.rstrip("\n"),
        HEREDOC,
        f"echo {shlex.quote(START_TEST_OUTPUT)}",
        f"{spec.test_cmd} " + " ".join(shlex.quote(s) for s in selection),
        "SWEBENCH_TEST_EXIT_CODE=$?",
        f"echo {shlex.quote(END_TEST_OUTPUT)}",
        f'echo "{TEST_EXIT_CODE}: $SWEBENCH_TEST_EXIT_CODE"',
        *([reset] if files else []),
    ]
    return "\n".join(lines) + "\n"


def _swebench4_eval_script(instance: Instance) -> str | None:
    try:
        from swebench.harness.test_spec.test_spec import make_test_spec  # 4.x only
    except ImportError:
        return None
    script: str = make_test_spec(instance.record).eval_script
    return script


def _parser(spec: InstanceSpec, repo: str) -> Callable[[str, Any], dict[str, str]]:
    from swebench.harness import log_parsers

    name = spec.log_parser
    if name.startswith("repo:"):
        table = getattr(log_parsers, "MAP_REPO_TO_PARSER", {})
        if repo in table:
            return table[repo]
        name = "parse_log_pytest"
    if not name.startswith("parse_log_"):
        name = f"parse_log_{name}"
    registry = getattr(log_parsers, "PARSER_REGISTRY", None)
    if registry is not None and name in registry:
        return registry[name]
    for module in ("python", "javascript", "java", "go", "rust", "ruby", "php", "c"):
        try:
            mod = __import__(f"swebench.harness.log_parsers.{module}", fromlist=[name])
        except ImportError:
            continue
        if hasattr(mod, name):
            return getattr(mod, name)
    raise InstanceError(f"swebench has no log parser {spec.log_parser!r}")


def _test_spec(instance: Instance, spec: InstanceSpec, image: str, script: str) -> Any:
    from swebench.types import TestSpec  # 5.x

    parser = spec.log_parser
    if parser.startswith("repo:"):
        parser = "parse_log_pytest"
    elif not parser.startswith("parse_log_"):
        parser = f"parse_log_{parser}"
    return TestSpec(
        instance_id=instance.instance_id,
        image=image,
        eval_script_list=script.splitlines()[2:],
        repo=instance.repo,
        version=instance.version,
        FAIL_TO_PASS=instance.fail_to_pass,
        PASS_TO_PASS=instance.pass_to_pass,
        log_parser=parser,
        eval_type=spec.eval_type,
    )


def grade(
    instance: Instance,
    spec: InstanceSpec,
    prediction: Mapping[str, Any],
    log_path: Path,
    *,
    image: str = "",
    script: str = "",
) -> dict[str, Any]:
    """swebench's per-instance report ``{instance_id: {patch_is_None, patch_exists,
    patch_successfully_applied, resolved, tests_status}}`` for the log at ``log_path``."""
    try:
        from swebench.harness import grading
    except ImportError:
        raise InstanceError(
            "grading needs the swebench package: pip install 'pgs-agent[swebench]'"
        ) from None
    if hasattr(grading, "PARSER_REGISTRY") and not spec.log_parser.startswith("repo:"):
        test_spec = _test_spec(instance, spec, image, script)
        report: dict[str, Any] = grading.get_eval_report(
            test_spec=test_spec,
            prediction=dict(prediction),
            test_log_path=str(log_path),
            include_tests_status=True,
        )
        return report
    return _grade_compat(instance, spec, prediction, log_path)


def _grade_compat(
    instance: Instance, spec: InstanceSpec, prediction: Mapping[str, Any], log_path: Path
) -> dict[str, Any]:
    """swebench 4.x: its parser and rules, for repositories its parser table lacks."""
    from swebench.harness.constants import EvalType, ResolvedStatus
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    iid = instance.instance_id
    out: dict[str, Any] = {
        "patch_is_None": prediction.get("model_patch") is None,
        "patch_exists": prediction.get("model_patch") is not None,
        "patch_successfully_applied": False,
        "resolved": False,
    }
    content = log_path.read_text(errors="replace")
    if out["patch_is_None"] or APPLY_PATCH_FAIL in content or START_TEST_OUTPUT not in content:
        return {iid: out}
    sliced = content.split(START_TEST_OUTPUT, 1)[1].split(END_TEST_OUTPUT, 1)[0]
    status_map = _parser(spec, instance.repo)(sliced, None)
    out["patch_successfully_applied"] = True
    gold = {"FAIL_TO_PASS": instance.fail_to_pass, "PASS_TO_PASS": instance.pass_to_pass}
    report = get_eval_tests_report(status_map, gold, eval_type=EvalType(spec.eval_type))
    out["resolved"] = get_resolution_status(report) == ResolvedStatus.FULL.value
    out["tests_status"] = report
    return {iid: out}
