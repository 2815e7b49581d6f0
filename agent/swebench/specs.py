"""The environment of a SWE-bench instance, as the official harness builds it.

:func:`instance_spec` takes, first to last:

1. the record's own fields, the documented extension for repositories that swebench does not
   know: ``python`` ("3.9"), ``requirements`` (requirement files read at
   ``environment_setup_commit``), ``pip_packages``, ``pre_install`` and ``install`` (shell
   commands run in ``/testbed``), ``test_cmd`` ("pytest -rA") or ``eval_script``, ``log_parser``
   (a swebench parser name, "parse_log_pytest", or short, "pytest"), ``eval_type`` and
   ``index_date`` (resolve against the package index as it was then; default: now);
2. swebench 4.x's table ``MAP_REPO_VERSION_TO_SPECS[repo][version]`` (python, packages,
   pip_packages, pre_install, install, eval_commands, test_cmd): every SWE-bench repository.

A record's ``eval_script``, ``log_parser`` and ``eval_type`` win over the table's. The
environment steps are the harness's (``make_env_script_list_py``), translated from its conda
layout to a venv: ``packages: requirements.txt`` is the repository's requirement file at
``environment_setup_commit`` prepared exactly as the harness prepares it; a list of conda
packages and a conda ``environment.yml`` are installed from PyPI, package by package where one
has no PyPI release (recorded as a deviation); ``pip_packages`` follow in their own pip call.
Builds resolve against the package index as it was on :data:`INDEX_MOMENT`, when the official
images were built, so what the specs leave unpinned is what it was then.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import InstanceError
from agent.swebench.records import Instance
from envs.errors import EnvError
from envs.images import DEBIAN_SUITES, check_python, quote_requirement, show

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
FAIL_ONLY_REPOS = {
    "chartjs/Chart.js",
    "processing/p5.js",
    "markedjs/marked",
    "bpmn-io/bpmn-js",
    "openlayers/openlayers",
    "eslint/eslint",
}
HEREDOC = "EOF_59812759871"
#: The package index as the official Verified images were resolved: builds see no file uploaded
#: later (envs.images.snapshot), so what the specs leave unpinned resolves as it did then.
INDEX_MOMENT = "2025-01-01T00:00:00Z"
#: conda package names whose PyPI name differs.
CONDA_TO_PYPI = {
    "pytorch": "torch",
    "pyqt": "PyQt5",
    "matplotlib-base": "matplotlib",
    "py-opencv": "opencv-python",
    "pytables": "tables",
    "gdal": "GDAL",
}
#: conda packages that are not Python packages (the base image or nothing provides them).
CONDA_SKIP = {"python", "pip", "compilers", "c-compiler", "cxx-compiler", "make", "cmake"}


class InstanceSpec(BaseModel):
    """How to build and test one instance; see the module docstring for where it comes from."""

    model_config = ConfigDict(extra="forbid")
    python: str = "3.11"
    #: How the environment gets its packages: "files" (the extension's requirement files),
    #: "swebench-requirements" (the harness's requirements.txt), "conda" or "environment.yml".
    packages_kind: str = "files"
    #: Requirement file paths, or conda package specs, or the environment.yml path.
    packages: list[str] = Field(default_factory=list)
    pip_packages: list[str] = Field(default_factory=list)
    pre_install: list[str] = Field(default_factory=list)
    install: list[str] = Field(default_factory=list)
    test_cmd: str = "pytest -rA"
    eval_commands: list[str] = Field(default_factory=list)
    eval_script: str | None = None
    log_parser: str = "parse_log_pytest"
    eval_type: str = "pass_and_fail"
    #: Where it came from: "record" or "swebench <version> table".
    source: str = "record"
    #: Builds resolve against the package index as it was then (None: as it is now).
    index_moment: str | None = INDEX_MOMENT
    #: What differs from the official environment (recorded in image labels and reports).
    deviations: list[str] = Field(default_factory=list)


def _as_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def swebench_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("swebench")
    except Exception:
        return None


def table_specs(instance: Instance) -> dict[str, Any] | None:
    """swebench 4.x's specs for (repo, version), or None (unknown repo or version)."""
    try:
        from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
    except ImportError:
        return None
    specs: dict[str, Any] | None = MAP_REPO_VERSION_TO_SPECS.get(instance.repo, {}).get(
        instance.version
    )
    return specs


def _from_table(instance: Instance, specs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"python": specs.get("python", "3.11")}
    packages = str(specs.get("packages") or "")
    if packages == "requirements.txt":
        out["packages_kind"] = "swebench-requirements"
    elif packages == "environment.yml":
        out["packages_kind"] = "environment.yml"
        out["deviations"] = ["conda environment.yml installed from PyPI"]
    elif packages:
        out["packages_kind"], out["packages"] = "conda", shlex.split(packages)
    out["pip_packages"] = _as_list(specs.get("pip_packages"))
    out["pre_install"] = _as_list(specs.get("pre_install"))
    out["install"] = _as_list(specs.get("install"))
    out["test_cmd"] = " ".join(_as_list(specs.get("test_cmd"))) or "pytest -rA"
    out["eval_commands"] = _as_list(specs.get("eval_commands"))
    out["log_parser"] = f"repo:{instance.repo}"
    return out


def instance_spec(
    instance: Instance, python_map: Mapping[str, str] | None = None, *, own_python: bool = False
) -> InstanceSpec:
    """The environment of ``instance``: its record's own fields, else swebench 4.x's table.

    ``own_python``: the image brings its Python (an official image); none is chosen here."""
    record = instance.record
    data: dict[str, Any]
    if any(k in record for k in ("install", "test_cmd", "python", "requirements")):
        data = {k: record[k] for k in SPEC_FIELDS if record.get(k) is not None}
        for key in ("pip_packages", "pre_install", "install"):
            if key in data:
                data[key] = _as_list(data[key])
        data["packages"] = _as_list(data.pop("requirements", None))
        data["source"] = "record"
        data["index_moment"] = record.get("index_date")  # default: the index as it is now
    else:
        specs = table_specs(instance)
        if specs is None:
            have = swebench_version()
            why = (
                "the swebench package is not installed"
                if have is None
                else f"swebench {have} has no spec for {instance.repo} version {instance.version!r}"
            )
            raise EnvError(
                f"{instance.instance_id}: no environment spec: {why}; add `python`, `install` "
                "and `test_cmd` fields to the record (see pgs batch --help), or install "
                "pgs-agent[swebench] (swebench 4.x holds SWE-bench's tables)"
            )
        data = {**_from_table(instance, specs), "source": f"swebench {swebench_version()} table"}
        for key in ("eval_script", "log_parser", "eval_type"):  # the record's own win
            if record.get(key):
                data[key] = record[key]
    if instance.repo in FAIL_ONLY_REPOS and "eval_type" not in data:
        data["eval_type"] = "fail_only"
    wanted = str(data.get("python", "3.11"))
    data["python"] = wanted if own_python else choose_python(instance, wanted, python_map or {})
    if data["python"] != wanted.strip().removeprefix("python").removeprefix("py"):
        data["deviations"] = [*data.get("deviations", []), f"Python {data['python']} for {wanted}"]
    try:
        spec = InstanceSpec.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        raise InstanceError(f"{instance.instance_id}: bad environment fields: {problems}") from None
    return spec


def choose_python(instance: Instance, wanted: str, python_map: Mapping[str, str]) -> str:
    version = wanted.strip().removeprefix("python").removeprefix("py")
    if version in DEBIAN_SUITES:
        return version
    if version in python_map:
        return python_map[version]
    supported = ", ".join(f"{v} (Debian {s})" for v, s in DEBIAN_SUITES.items())
    raise EnvError(
        f"{instance.instance_id} needs Python {version}, which pgs cannot provide here: base "
        f"images exist for {supported} only (no Debian release ships {version}); pass "
        f"--python-map {version}=3.11 (or another "
        "supported version) to substitute one, knowing results may then differ from the "
        "official harness"
    )


def parse_python_map(items: Iterable[str]) -> dict[str, str]:
    """``["3.10=3.11", "3.8=3.9,3.12=3.13"]`` -> {"3.10": "3.11", ...}; targets checked."""
    out: dict[str, str] = {}
    for item in items:
        for pair in filter(None, (p.strip() for p in item.split(","))):
            if "=" not in pair:
                raise InstanceError(f"--python-map {pair!r}: give WANTED=USED, e.g. 3.10=3.11")
            wanted, used = (p.strip() for p in pair.split("=", 1))
            out[wanted] = check_python(used)
    return out


# -- the environment steps ------------------------------------------------------------------------


def env_steps(instance: Instance, spec: InstanceSpec, mirror: Path) -> list[str]:
    """The environment layer's shell steps (after the venv): the harness's env script, each
    step its own pip call, a later one overriding an earlier one."""
    sha = instance.environment_setup_commit
    steps: list[str] = []
    if spec.packages_kind == "files":
        for path in spec.packages:
            steps += _heredoc_install(_read(instance, mirror, sha, path), "requirements")
    elif spec.packages_kind == "swebench-requirements":
        steps += _heredoc_install(swebench_requirements(instance, mirror), "requirements")
    elif spec.packages_kind == "conda":
        steps.append(_each_or_all([conda_to_pip(p) for p in spec.packages]))
    elif spec.packages_kind == "environment.yml":
        conda, pip = environment_yml(instance, mirror)
        if conda:
            steps.append(_each_or_all(conda))
        steps += _heredoc_install("\n".join(pip), "environment-pip")
    if spec.pip_packages:
        steps.append(
            "python -m pip install " + " ".join(quote_requirement(p) for p in spec.pip_packages)
        )
    return [s for s in steps if s]


def _read(instance: Instance, mirror: Path, sha: str, path: str) -> str:
    data = show(mirror, sha, path)
    if data is None:
        raise InstanceError(
            f"{instance.instance_id}: {path} is not in {instance.repo} at "
            f"environment_setup_commit {sha[:12]}"
        )
    return data.decode(errors="replace")


def _heredoc_install(text: str, name: str) -> list[str]:
    if not text.strip():
        return []
    path = f"/root/pgs-{name}.txt"
    return [
        f"cat <<'{HEREDOC}' > {path}\n{text.rstrip()}\n{HEREDOC}\n"
        f"python -m pip install -r {path} && rm {path}"
    ]


def _each_or_all(requirements: list[str]) -> str:
    """One pip call for all; if the resolver refuses, one per package, skipping (and saying)
    those that have no PyPI release (conda-only packages)."""
    wanted = [r for r in requirements if r]
    if not wanted:
        return ""
    words = " ".join(quote_requirement(r) for r in wanted)
    each = "; ".join(
        f"python -m pip install {quote_requirement(r)} || echo 'pgs: skipped conda package {r}'"
        for r in wanted
    )
    return f"python -m pip install {words} || {{ {each}; }}"


def conda_to_pip(spec: str) -> str:
    """A conda match spec as a pip requirement (``numpy=1.19`` -> ``numpy==1.19.*``)."""
    spec = spec.strip().strip("'\"")
    match = re.match(r"^([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
    if not match:
        return spec
    name, rest = match.groups()
    if name.lower() in CONDA_SKIP:
        return ""
    name = CONDA_TO_PYPI.get(name.lower(), name)
    rest = rest.strip()
    if re.fullmatch(r"=[^=<>!].*", rest):  # conda's single '=' is a prefix match
        version = rest[1:].split("=")[0]  # drop a build string
        rest = f"=={version}" if version.endswith("*") else f"=={version}.*"
        rest = rest.replace(".*.*", ".*")
    return name + rest


def _first_file(
    instance: Instance, mirror: Path, table: Mapping[str, list[str]], what: str
) -> tuple[str, bytes]:
    """The first of swebench's paths for the repository that exists at environment_setup_commit,
    and its contents."""
    sha = instance.environment_setup_commit
    for path in table.get(instance.repo, []):
        data = show(mirror, sha, path)
        if data is not None:
            return path, data
    raise InstanceError(
        f"{instance.instance_id}: no {what} of {instance.repo} at environment_setup_commit "
        f"{sha[:12]} (swebench looks at {', '.join(table.get(instance.repo, [])) or 'nothing'})"
    )


def swebench_requirements(instance: Instance, mirror: Path) -> str:
    """The requirements text the harness installs (``get_requirements``): the first of the
    repository's requirement paths that exists at environment_setup_commit, ``-r`` includes
    inlined, the project's own lines dropped, yanked packages replaced."""
    from swebench.harness.constants import MAP_REPO_TO_REQS_PATHS
    from swebench.harness.test_spec.python import clean_requirements

    sha = instance.environment_setup_commit
    path, data = _first_file(instance, mirror, MAP_REPO_TO_REQS_PATHS, "requirement file")

    def excluded(line: str) -> bool:
        return any(line.strip().startswith(x) for x in ("-e .", "#", ".[test"))

    folder = "/".join(path.split("/")[:-1])
    original, additional = [], []
    for line in data.decode(errors="replace").split("\n"):
        if line.strip().startswith("-r"):
            name = line[len("-r") :].strip()
            included = show(mirror, sha, f"{folder}/{name}" if folder else name)
            for extra in (included or b"").decode(errors="replace").split("\n"):
                if not excluded(extra):
                    additional.append(extra)
        elif not excluded(line):
            original.append(line)
    additional.append("\n".join(original))
    text: str = clean_requirements("\n".join(additional))
    return text


def environment_yml(instance: Instance, mirror: Path) -> tuple[list[str], list[str]]:
    """The conda dependencies (as pip requirements) and the pip section of the instance's
    environment.yml at environment_setup_commit."""
    from swebench.harness.constants import MAP_REPO_TO_ENV_YML_PATHS
    from swebench.harness.test_spec.python import clean_environment_yml

    path, data = _first_file(instance, mirror, MAP_REPO_TO_ENV_YML_PATHS, "environment.yml")
    try:
        parsed = yaml.safe_load(clean_environment_yml(data.decode(errors="replace"))) or {}
    except yaml.YAMLError as e:
        raise InstanceError(f"{instance.instance_id}: {path} is not valid YAML: {e}") from None
    conda, pip = [], []
    for item in parsed.get("dependencies") or []:
        if isinstance(item, dict):
            pip += [str(p) for p in item.get("pip") or []]
        elif conda_to_pip(str(item)):
            conda.append(conda_to_pip(str(item)))
    return conda, pip
