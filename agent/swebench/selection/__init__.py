"""``pgs select``: choosing one patch per instance among other agents' patches, by evidence.

- :mod:`agent.swebench.selection.candidates`: prediction files read, identical patches merged;
- :mod:`agent.swebench.selection.probes`: the issue's own code, run as a console runs it;
- :mod:`agent.swebench.selection.evidence`: the sealed checks of one instance's candidates;
- :mod:`agent.swebench.selection.properties`: with ``--model``, the Tester's properties, written
  once per instance and run against every candidate;
- :mod:`agent.swebench.selection.rank`: the order and the reason;
- :mod:`agent.swebench.selection.run`: every instance, resumably, and the output files.

Part of :mod:`agent.swebench` (layer 2), under the same imports. Entry point:
:mod:`agent.swebench.selection.run`.
"""
