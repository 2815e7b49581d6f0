"""``pgs inspect``: see a run. A ``.traj``, a run folder or a batch folder becomes one
self-contained static HTML page per trajectory (and an index for a batch).

- :mod:`agent.inspect.model`: what is shown, as plain typed data (no HTML: a terminal view
  reads the same records);
- :mod:`agent.inspect.load`: reading pgs's and SWE-agent's files (one trajectory:
  :mod:`~agent.inspect.trajectory_view`, its PGS record: :mod:`~agent.inspect.pgs_record`, a
  batch folder: :mod:`~agent.inspect.batch_view`, shared readers: :mod:`~agent.inspect.lenient`);
  whatever a file lacks is a ``"missing: <what>"`` note, never a crash;
- :mod:`agent.inspect.selection_view`: a ``pgs select`` output (``selection.json``): every
  instance's candidates, their evidence and the choice;
- :mod:`agent.inspect.diff`: diffs parsed with ``unidiff``; the change between two candidates;
- :mod:`agent.inspect.html`: the pages (jinja2 templates in ``templates/``, CSS and JS inlined,
  nothing loaded from anywhere);
- :mod:`agent.inspect.tui`: the same records in a terminal (Textual; the panels' texts in
  :mod:`agent.inspect.tui_text`);
- the command ``pgs inspect`` is :mod:`agent.cli.inspect`.

Layer 2, beside :mod:`agent.github` and :mod:`agent.swebench` (neither imports the other):
imports :mod:`agent.run`, :mod:`agent.pgs`, :mod:`agent.core`, :mod:`agent.models`,
:mod:`agent.record`, :mod:`agent.errors` and :mod:`envs`. Entry points: :func:`load`,
:func:`load_trajectory`, :func:`load_batch`; other agents' files are read by
:mod:`agent.record.foreign`.
"""

from agent.inspect.load import InspectError, load, load_batch, load_trajectory, resolve

__all__ = ["InspectError", "load", "load_batch", "load_trajectory", "resolve"]
