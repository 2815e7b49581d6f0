"""PGS, the method: a submitted patch is challenged by properties a Tester wrote from the issue.

Layer 4: imports :mod:`agent.core`, :mod:`agent.models`, :mod:`agent.record`,
:mod:`agent.errors` and :mod:`envs`; never :mod:`agent.run` or the integrations above it. The
pytest plugin modules (``pgs_pytest_plugin*.py``, ``pgs_inputs.py``) run inside the sandbox and
import nothing of pgs.

- :class:`agent.pgs.reviewer.PGS`: the Reviewer the Generator's loop calls on each submission
  (rounds of check and feedback), configured by :class:`agent.pgs.config.PGSConfig`;
- :func:`agent.pgs.tester.run_tester` and :mod:`agent.pgs.turns`: the Tester sub-agent and its
  turns; :mod:`agent.pgs.validate`, :mod:`agent.pgs.filtering`: properties checked on the
  original code;
- :func:`agent.pgs.check.check_candidate`: properties, issue and related tests run on a
  candidate; :mod:`agent.pgs.verdict`, :mod:`agent.pgs.evidence`;
- :func:`agent.pgs.feedback.select_failure` and :func:`~agent.pgs.feedback.render_feedback`:
  one failure, in few tokens, back to the Generator;
- :mod:`agent.pgs.selection` (one patch among attempts), :mod:`agent.pgs.compare` (``pgs
  report``'s ablation rows).
"""
