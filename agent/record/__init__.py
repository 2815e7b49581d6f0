"""The run record: one typed, versioned schema of a pgs ``.traj`` and everything in it.

Pure data (pydantic), below every other package: the run writes it, every reader reads it.

- :mod:`agent.record.trajectory`: :class:`~agent.record.trajectory.RunRecord`, the whole file,
  and its version (``trajectory_format``);
- :mod:`agent.record.steps`: steps, ``info``, model stats;
- :mod:`agent.record.pgs`: what PGS records (``pgs``);
- :mod:`agent.record.check`: a check's report (the pytest plugin's JSON);
- :mod:`agent.record.attempts`: several attempts and the choice (``attempts``);
- :mod:`agent.record.foreign`: SWE-agent's and mini-swe-agent's files, their one reader: converted
  to a record, and a recording's replies;
- :mod:`agent.record.base`: tolerant reading, byte-for-byte writing.

Layer 7: imports only :mod:`agent.errors` (and through it nothing of :mod:`envs` but its
errors); every other package may import it. Entry points:
:meth:`agent.record.trajectory.RunRecord.load`, :func:`agent.record.foreign.convert` and
:func:`~agent.record.foreign.trajectory_replies`.
"""
