"""The input generator's hard inputs, shared by every property (PGS's test input generator).

pgs writes this file beside the Tester's properties (``.pgs/properties/pgs_inputs.py``) when
the input generator ran; the generator's own file beside it, ``hard_inputs.py``, holds
``HARD_INPUTS = {"median.data": [[], [1], [1, 2, 3, 4], ...], ...}``: for each entry point's
parameter the issue concerns, the inputs a model chose as hard (edge cases, boundaries, the
issue's own). A property draws them beside its own strategy::

    from pgs_inputs import hard

    @given(data=hard("median.data", st.lists(st.integers())))
    def test_median_is_a_middle_value(data): ...

``hard(name, strategy)`` is ``one_of(the hard inputs, strategy)``, the hard inputs first (so
Hypothesis tries them early and shrinks towards them), each drawn as a fresh copy. pgs's plugin
reads :data:`DRAWN` to count the inputs that drew a hard one and to mark them in the
counterexample pool (source ``hard``). Runs on the repository's Python: the standard library
and Hypothesis only.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from typing import Any

from hypothesis import strategies as st


def _load() -> dict[str, list[Any]]:
    """``HARD_INPUTS`` of the ``hard_inputs.py`` beside this file, loaded by its path (never
    by its name: a module of that name elsewhere on ``sys.path`` is not the generator's)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hard_inputs.py")
    if not os.path.isfile(path):  # no input generator ran, or it wrote nothing
        return {}
    spec = importlib.util.spec_from_file_location("pgs_hard_inputs", path)
    if spec is None or spec.loader is None:
        return {}
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: dict[str, list[Any]] = dict(getattr(module, "HARD_INPUTS", {}))
    return found


HARD_INPUTS = _load()

#: Names of the hard inputs drawn for the input about to run (the plugin reads and empties it).
DRAWN: list[str] = []


def hard(name: str, strategy: Any = None) -> Any:
    """The hard inputs named ``name`` beside ``strategy`` (or alone, without one). A name with
    no hard inputs gives ``strategy`` itself; with no strategy either, an error naming those
    there are."""
    values = list(HARD_INPUTS.get(name, ()))
    if not values:
        if strategy is None:
            raise KeyError(f"no hard inputs named {name!r}; there are: {sorted(HARD_INPUTS)}")
        return strategy

    def drawn(value: Any) -> Any:
        DRAWN.append(name)
        try:
            return copy.deepcopy(value)
        except Exception:  # a value that does not copy is drawn as it is
            return value

    shared = st.sampled_from(values).map(drawn)
    return shared if strategy is None else st.one_of(shared, strategy)
