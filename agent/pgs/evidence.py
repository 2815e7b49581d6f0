"""``passed`` rests on fixed evidence: what a check must have shown, beyond passing, before a
candidate may be called ``passed``.

Every check draws fresh inputs (a new Hypothesis seed). With a narrow bug, the fresh inputs of
one check may miss it where the validation's hit it: a patch that special-cases the issue's
own example then passes by luck. So:

- :func:`replay_inputs`: the inputs on which each kept issue property failed on the ORIGINAL
  code (the validation's report, in the plugin's replay form), which every later check feeds
  the property again beside the fresh ones (``CheckSettings.replay``, the plugin's
  ``PGS_REPLAY``): a replayed input that fails is a failure like any other, feedback too;
- :func:`held_to_evidence` takes :func:`~agent.pgs.verdict.judge`'s verdict and keeps
  ``passed`` (or ``partial``) only when the report says the check replayed every such input of
  every kept issue property, and when the patch changes a module the properties import (the
  validation run's ``imported``): issue properties that pass while the patch changes no code
  they exercise show nothing about the patch (a patch that only adds ``NOTES.md``).
"""

from __future__ import annotations

from agent.pgs.related import module_names
from agent.record.check import CheckReport
from agent.record.pgs import Verdict

#: The verdicts that claim the issue is fixed, and so need the fixed evidence.
CLAIMS_FIX = ("passed", "partial")


def replay_inputs(original: CheckReport, shows_bug: set[str]) -> dict[str, list[str]]:
    """``{node id: [replay form, ...]}``: every failing input of each kept issue property on
    the original code that the plugin could keep in a form it feeds again (an input whose
    arguments do not pickle is not there), without repeats. Not the property's own explicit
    ``@example`` inputs: every check runs those anyway."""
    found: dict[str, list[str]] = {}
    for result in original.results:
        if result.nodeid not in shows_bug:
            continue
        forms = [f.replay for f in result.failing_inputs() if f.replay and not f.explicit]
        if forms:
            found[result.nodeid] = list(dict.fromkeys(forms))
    return found


def merge_replay(kept: dict[str, list[str]], added: dict[str, list[str]]) -> dict[str, list[str]]:
    """``kept`` with the inputs of properties it does not hold yet (a probe only adds)."""
    return {**added, **kept}


def _not_replayed(report: CheckReport, replay: dict[str, list[str]]) -> list[str]:
    """Node ids of the properties whose inputs to replay the report did not all feed."""
    by_id = report.by_id()
    missing = []
    for nodeid, forms in sorted(replay.items()):
        result = by_id.get(nodeid)
        if result is None or (result.replayed or 0) < len(forms):
            missing.append(nodeid)
    return missing


def exercised(changed: list[str], imported: list[str] | None) -> bool | None:
    """Whether a patch changing the files ``changed`` changes a module among ``imported``
    (None: the validation did not record what the properties import)."""
    if not imported:
        return None
    names = set(imported)
    return any(module_names(path) & names for path in changed if path.endswith(".py"))


def held_to_evidence(
    verdict: Verdict,
    why: str,
    report: CheckReport,
    *,
    replay: dict[str, list[str]],
    changed: list[str],
    imported: list[str] | None,
) -> tuple[Verdict, str]:
    """:func:`~agent.pgs.verdict.judge`'s verdict held to the fixed evidence: a ``passed`` or
    ``partial`` check that did not replay the original code's failing inputs of every kept
    issue property (``replay``), or whose patch (the paths ``changed``) changes no module the
    properties import (``imported``), is ``unchecked``, and the reason says which and why."""
    if verdict not in CLAIMS_FIX:
        return verdict, why
    missing = _not_replayed(report, replay)
    if missing:
        count = sum(len(replay[n]) for n in missing)
        return "unchecked", (
            f"the check did not replay the {count} input(s) on which {', '.join(missing)} "
            f"failed on the original code, so a pass may be luck of the fresh inputs; {why}"
        )
    if exercised(changed, imported) is False:
        shown = ", ".join(sorted(imported or ())[:5])
        return "unchecked", (
            "the patch changes no code the issue properties exercise (they import "
            f"{shown}; the patch changes {', '.join(changed) or 'nothing'}); {why}"
        )
    replayed = sum(len(forms) for forms in replay.values())
    if replayed:
        why += f"; {replayed} input(s) that failed on the original code were replayed and pass"
    return verdict, why
