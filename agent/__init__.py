"""pgs: the agent that fixes issues, checked by properties.

The packages are layers (docs/architecture.md; ``lint-imports`` checks them): each imports only
the ones below it. From the top: :mod:`agent.cli` (the commands); :mod:`agent.github`,
:mod:`agent.swebench`, :mod:`agent.inspect` (the integrations, side by side); :mod:`agent.run`
(one task from start to finish); :mod:`agent.pgs` (the method: the Tester and its checks);
:mod:`agent.core` (the Generator loop and its tools); :mod:`agent.models`; :mod:`agent.record`
(the run record, pure data); :mod:`agent.errors`. :mod:`envs` (sandboxes and images) is beside
them and imports nothing of ``agent``.

Entry point: the ``pgs`` command, :func:`agent.cli.main`.
"""
