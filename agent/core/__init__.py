"""The Generator: the ReAct loop that turns an issue into a patch, and what it needs.

Layer 5: imports :mod:`agent.models`, :mod:`agent.record`, :mod:`agent.errors` and :mod:`envs`;
nothing of PGS, the run or the integrations (a contract of its own).

- :class:`agent.core.loop.Agent`: the loop (``run`` → ``step`` → ``query`` → ``parse`` →
  ``execute``), its :class:`~agent.core.loop.RunResult` and the
  :class:`~agent.core.loop.Reviewer` seam PGS plugs into; its settings
  :class:`agent.core.loop_config.AgentConfig`;
- :class:`agent.core.tools.Toolset` (tools offered and called), :mod:`agent.core.bundles` (the
  SWE-agent tool bundles on disk), :mod:`agent.core.toolenv` (installing them in a sandbox),
  :mod:`agent.core.tool_output` (cutting long outputs);
- :mod:`agent.core.parsing` (the action in a text reply), :mod:`agent.core.prompts` (the texts
  from ``default.yaml``);
- :class:`agent.core.trajectory_file.Trajectory` (the ``.traj`` written atomically after every
  step), :class:`agent.core.secrets.Redactor` (secrets out of every output),
  :mod:`agent.core.locks` (one writer per output folder).
"""
