"""Images the sandbox runs in: one base image per Python, then per repository an environment
layer and the repository at one commit. The public API of the package; see the modules:

- :mod:`envs.images.base`: base images (Debian's Python, a compiler, git);
- :mod:`envs.images.detect`: what a repository needs, read from its files (with
  :mod:`~envs.images.metadata`, :mod:`~envs.images.testsetup`; the user's overrides:
  :mod:`~envs.images.spec`);
- :mod:`envs.images.repo`: repository images;
- :mod:`envs.images.build`: building layers, the cache, locks;
- :mod:`envs.images.buildnet`: what a build reaches: the package indexes, nothing else;
- :mod:`envs.images.buildproxy`: the proxy that is a build's only way out;
- :mod:`envs.images.git`: the repository as it goes into an image;
- :mod:`envs.images.housekeeping`: listing and removing what pgs made;
- :mod:`envs.images.tools`: the tools layer (folders and a step, the package indexes in reach).

Part of :mod:`envs`: imports nothing of ``agent``; what it exports here is what callers use.
"""

from envs.images.base import (
    BASE_PACKAGES,
    DEBIAN_SUITES,
    DEFAULT_MIRROR,
    DEFAULT_PYTHON,
    SUPPORTED_PYTHONS,
    BuildMethod,
    base_tag,
    check_python,
    ensure_base_image,
)
from envs.images.build import (
    IMAGE_ENV,
    OFFLINE_WHEELS,
    STEP_MARKER,
    TESTER_STEP,
    VENV,
    Layer,
    Status,
    cache_dir,
    digest,
    file_lock,
    finish_repo_steps,
    git_setup_steps,
    image_exists,
    offline_wheels_step,
    quote_requirement,
    recipe,
    venv_steps,
)
from envs.images.detect import DependencyPlan, choose_python, detect_dependencies
from envs.images.git import (
    dependency_files,
    has_commit,
    history_clone,
    is_dependency_file,
    resolve_commit,
    show,
)
from envs.images.housekeeping import PgsObjects, clear_cache, list_pgs, prune
from envs.images.metadata import TEST_EXTRAS, clean_requirements, included_files
from envs.images.repo import (
    REPO_PATH,
    RepoImage,
    build_layered,
    build_repo_image,
    load_repo_spec,
    repo_image_name,
)
from envs.images.spec import RepoImageSpec
from envs.images.testsetup import extras_of_test_setup
from envs.images.tools import tools_layer

__all__ = [
    "BASE_PACKAGES",
    "DEBIAN_SUITES",
    "DEFAULT_MIRROR",
    "DEFAULT_PYTHON",
    "IMAGE_ENV",
    "OFFLINE_WHEELS",
    "REPO_PATH",
    "STEP_MARKER",
    "SUPPORTED_PYTHONS",
    "TESTER_STEP",
    "TEST_EXTRAS",
    "VENV",
    "BuildMethod",
    "DependencyPlan",
    "Layer",
    "PgsObjects",
    "RepoImage",
    "RepoImageSpec",
    "Status",
    "base_tag",
    "build_layered",
    "build_repo_image",
    "cache_dir",
    "check_python",
    "choose_python",
    "clean_requirements",
    "clear_cache",
    "dependency_files",
    "detect_dependencies",
    "digest",
    "ensure_base_image",
    "extras_of_test_setup",
    "file_lock",
    "finish_repo_steps",
    "git_setup_steps",
    "has_commit",
    "history_clone",
    "image_exists",
    "included_files",
    "is_dependency_file",
    "list_pgs",
    "load_repo_spec",
    "offline_wheels_step",
    "prune",
    "quote_requirement",
    "recipe",
    "repo_image_name",
    "resolve_commit",
    "show",
    "tools_layer",
    "venv_steps",
]
