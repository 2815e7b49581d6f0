"""GitHub: from an issue URL to a patch, a pull request or a comment, and the Actions entry.

Layer 2, beside :mod:`agent.swebench` and :mod:`agent.inspect` (neither imports the other):
imports :mod:`agent.run`, :mod:`agent.pgs`, :mod:`agent.core`, :mod:`agent.models`,
:mod:`agent.record`, :mod:`agent.errors` and :mod:`envs`.

- :class:`agent.github.client.GitHub`: the REST API at the boundary (issue URLs, retries, errors
  translated);
- :mod:`agent.github.git`: clone, commit the patch, push (git over HTTPS);
- :class:`agent.github.pr.OpenPRHook`: the run hook that opens the pull request or comments,
  configured by :class:`~agent.github.pr.GitHubConfig`;
- :mod:`agent.github.action`: the GitHub Actions event (``pgs github``).
"""
