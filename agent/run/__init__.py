"""One task from start to finish: :func:`agent.run.run_task.run_task`.

Layer 3, above the method (:mod:`agent.pgs`) and the loop (:mod:`agent.core`): imports those,
:mod:`agent.models`, :mod:`agent.record`, :mod:`agent.errors` and :mod:`envs`; the commands and
the integrations import it.

- :mod:`agent.run.task`: the task (the issue and the repository);
- :mod:`agent.run.sandbox`: opening the sandbox (image, tools, repository);
- :mod:`agent.run.reviewer`: choosing the reviewer and checking the models before any work;
- :mod:`agent.run.config`: the run's configuration, composed of every component's;
- :class:`agent.run.hooks.RunHook`: how a caller plugs into a run; :mod:`agent.run.runlog` its
  log;
- :mod:`agent.run.outputs` (the output files and usage), :mod:`agent.run.apply` (``--apply``),
  :mod:`agent.run.run_attempts` (several attempts on one issue), :mod:`agent.run.foreign` (other
  tools' config keys).
"""
