"""The part of ``pgs_pytest_plugin`` that watches the input generator's shared hard inputs:
which inputs drew them (:func:`drawn`), and whether the module they were drawn through is the
one pgs wrote beside the properties (:func:`foreign`).

Runs in the sandbox on the repository's Python: the standard library only, Python 3.8, no
import of our package.
"""

from __future__ import annotations

import os
import sys

#: The module the input generator's hard inputs are drawn through (written beside the
#: properties by pgs): it lists the names drawn for the input about to run.
HARD_INPUTS_MODULE = "pgs_inputs"


def foreign(repository: str) -> list[str]:
    """Errors of the run when the module the properties drew the shared hard inputs through
    was not the one pgs put in the Tester's folder (``PGS_PROPERTIES_DIR``): code the patch
    changed can put its own in ``sys.modules``, and the hard inputs would not be the input
    generator's."""
    folder = os.environ.get("PGS_PROPERTIES_DIR", "").strip()
    module = sys.modules.get(HARD_INPUTS_MODULE)
    if not folder or module is None:
        return []
    path = getattr(module, "__file__", None)
    expected = os.path.realpath(os.path.join(repository, folder, HARD_INPUTS_MODULE + ".py"))
    if isinstance(path, str) and os.path.realpath(path) == expected:
        return []
    return [
        f"<session>: the shared hard inputs were drawn through {HARD_INPUTS_MODULE} from "
        f"{path or 'no file'}, not the Tester's {os.path.join(folder, HARD_INPUTS_MODULE)}.py: "
        "the check cannot say its properties saw the input generator's inputs"
    ]


def drawn() -> int:
    """1 when the input about to run drew a shared hard input (the list is then emptied)."""
    module = sys.modules.get(HARD_INPUTS_MODULE)
    names = getattr(module, "DRAWN", None)
    if not isinstance(names, list) or not names:
        return 0
    del names[:]
    return 1
