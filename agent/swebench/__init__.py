"""SWE-bench: records, the environment of an instance, its image, its evaluation and grading.

- :mod:`agent.swebench.records`: loading and selecting records, the repositories behind them;
- :mod:`agent.swebench.specs`: the environment of an instance (the harness's steps);
- :mod:`agent.swebench.images`: instance images, built or pulled;
- :mod:`agent.swebench.grading`: evaluation scripts and swebench's grading.

Layer 2, beside :mod:`agent.github` and :mod:`agent.inspect` (neither imports the other):
imports :mod:`agent.run`, :mod:`agent.pgs`, :mod:`agent.core`, :mod:`agent.models`,
:mod:`agent.record`, :mod:`agent.errors` and :mod:`envs`. Entry points: :func:`load_instances`,
the batch (:mod:`agent.swebench.scheduler`, ``pgs batch``), the evaluation
(:mod:`agent.swebench.evaluate`, ``pgs eval``) and :mod:`agent.swebench.selection` (``pgs
select``).
"""

from agent.errors import InstanceError
from agent.swebench.grading import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    START_TEST_OUTPUT,
    eval_script,
    grade,
    test_files,
)
from agent.swebench.images import (
    TESTBED,
    Environments,
    InstanceImage,
    build_instance_image,
    image_name,
    official_image,
)
from agent.swebench.records import (
    Instance,
    check_commits,
    find_mirror,
    load_hub_dataset,
    load_instances,
    select,
    working_tree,
)
from agent.swebench.specs import (
    InstanceSpec,
    env_steps,
    instance_spec,
    parse_python_map,
)

__all__ = [
    "APPLY_PATCH_FAIL",
    "APPLY_PATCH_PASS",
    "END_TEST_OUTPUT",
    "START_TEST_OUTPUT",
    "TESTBED",
    "Environments",
    "Instance",
    "InstanceError",
    "InstanceImage",
    "InstanceSpec",
    "build_instance_image",
    "check_commits",
    "env_steps",
    "eval_script",
    "find_mirror",
    "grade",
    "image_name",
    "instance_spec",
    "load_hub_dataset",
    "load_instances",
    "official_image",
    "parse_python_map",
    "select",
    "test_files",
    "working_tree",
]
