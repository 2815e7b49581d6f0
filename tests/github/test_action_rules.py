"""``pgs github``'s rules (agent/github/action.py ``decide``), on the event payloads GitHub
documents (tests/github/data): which events start a run, who may ask, and why pgs does not act on
the others."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import Skipped
from agent.github.action import ActionRules, decide, mentions
from agent.github.pr import MARKER
from tests.support.github_events import COMMENTED, LABELED, edited
from tests.support.github_fake import NUMBER, REPO

# isort: split
# A fixture: pytest finds it by its name in this module.
from tests.support.github_actions import _env  # noqa: F401


def test_the_documented_payloads_name_the_issue() -> None:
    labeled = decide("issues", LABELED, ActionRules(), environ={})
    assert (labeled.ref.full_name, labeled.ref.number) == (REPO, NUMBER)
    assert labeled.reason == "the label 'fix-me' added by @maintainer"
    commented = decide("issue_comment", COMMENTED, ActionRules(), environ={})
    assert commented.ref == labeled.ref
    assert commented.reason == "@pgs-agent in a comment by @maintainer (COLLABORATOR)"


SKIPPED = {
    "another label": (
        "issues",
        edited(LABELED, label__name="bug"),
        "the label added is 'bug', not 'fix-me' (--label)",
    ),
    "opened": ("issues", edited(LABELED, action="opened"), "the issue was opened, not labeled"),
    "unlabeled": ("issues", edited(LABELED, action="unlabeled"), "was unlabeled, not labeled"),
    "label from the template of an outsider's issue": (
        "issues",
        edited(LABELED, sender__login="reporter"),
        "came with the issue from its author @reporter, who is NONE",
    ),
    "closed issue": ("issues", edited(LABELED, issue__state="closed"), "octo/textutil#7 is closed"),
    "edited comment": (
        "issue_comment",
        edited(COMMENTED, action="edited"),
        "the comment was edited, not created",
    ),
    "comment on a pull request": (
        "issue_comment",
        edited(COMMENTED, issue__pull_request={"url": "https://api.github.com/..."}),
        "octo/textutil#7 is a pull request: pgs github works on issues",
    ),
    "bot": (
        "issue_comment",
        edited(COMMENTED, comment__user={"login": "github-actions[bot]", "type": "Bot"}),
        "the comment is by the bot @github-actions[bot]",
    ),
    "pgs's own comment posted with a personal token": (
        "issue_comment",
        edited(COMMENTED, comment__body=f"{MARKER}\npgs-agent proposes: @pgs-agent"),
        "the comment is pgs-agent's own",
    ),
    "no trigger": (
        "issue_comment",
        edited(COMMENTED, comment__body="Confirmed, thanks."),
        "the comment does not mention @pgs-agent (--trigger)",
    ),
    "trigger only quoted": (
        "issue_comment",
        edited(COMMENTED, comment__body="> @pgs-agent please fix this.\n\nNo, wait."),
        "does not mention @pgs-agent",
    ),
    "outsider": (
        "issue_comment",
        edited(COMMENTED, comment__author_association="NONE"),
        "@maintainer is NONE on octo/textutil, not an owner, member or collaborator",
    ),
    "first-time contributor": (
        "issue_comment",
        edited(COMMENTED, comment__author_association="FIRST_TIME_CONTRIBUTOR"),
        "is FIRST_TIME_CONTRIBUTOR on octo/textutil",
    ),
    "contributor": (
        "issue_comment",
        edited(COMMENTED, comment__author_association="CONTRIBUTOR"),
        "is CONTRIBUTOR on octo/textutil",
    ),
    "push": ("push", {"ref": "refs/heads/main"}, "the event is 'push': pgs github acts on"),
    "a labelled pull request": (
        "pull_request",
        edited(LABELED, action="labeled"),
        "the event is 'pull_request'",
    ),
}


@pytest.mark.parametrize("case", list(SKIPPED))
def test_events_pgs_does_not_act_on_say_why(case: str) -> None:
    name, payload, why = SKIPPED[case]
    with pytest.raises(Skipped) as skipped:
        decide(name, payload, ActionRules(), environ={})
    assert why in str(skipped.value)


def test_allow_anyone_and_other_words_change_who_and_what_starts_a_run() -> None:
    outsider = edited(COMMENTED, comment__author_association="NONE")
    assert decide("issue_comment", outsider, ActionRules(allow_anyone=True), environ={})
    template = edited(LABELED, sender__login="reporter")
    assert decide("issues", template, ActionRules(allow_anyone=True), environ={})
    # An owner who labels their own issue is trusted.
    own = edited(LABELED, sender__login="reporter", issue__author_association="OWNER")
    assert decide("issues", own, ActionRules(), environ={})
    rules = ActionRules(label="AI Fix", trigger="/fix")
    assert decide("issues", edited(LABELED, label__name="ai fix"), rules, environ={})
    assert decide("issue_comment", edited(COMMENTED, comment__body="/fix"), rules, environ={})
    with pytest.raises(Skipped, match="not 'AI Fix'"):
        decide("issues", LABELED, rules, environ={})
    # Bots stay ignored with --allow-anyone.
    bot = edited(COMMENTED, comment__user={"login": "dependabot[bot]", "type": "Bot"})
    with pytest.raises(Skipped, match="by the bot"):
        decide("issue_comment", bot, ActionRules(allow_anyone=True), environ={})


def test_a_run_by_hand_names_the_issue_in_its_input() -> None:
    dispatch = {
        "inputs": {"issue": "7"},
        "ref": "refs/heads/main",
        "repository": LABELED["repository"],
        "sender": LABELED["sender"],
        "workflow": ".github/workflows/pgs-agent.yml",
    }
    trigger = decide("workflow_dispatch", dispatch, ActionRules(), environ={})
    assert (trigger.ref.full_name, trigger.ref.number) == (REPO, 7)
    assert trigger.reason == "run by hand by @maintainer"
    from agent.errors import InputError

    for bad in ("", "seven", "0", None):
        with pytest.raises(InputError, match="give the number of the issue to fix"):
            decide("workflow_dispatch", edited(dispatch, inputs__issue=bad), ActionRules(), {})


def test_an_event_of_another_repository_is_refused() -> None:
    from agent.errors import InputError

    with pytest.raises(InputError, match="about octo/textutil but the workflow runs in me/other"):
        decide("issues", LABELED, ActionRules(), environ={"GITHUB_REPOSITORY": "me/other"})
    with pytest.raises(InputError, match="no 'label' object"):
        decide("issues", {"action": "labeled"}, ActionRules(), environ={})


words = st.text(alphabet="abc xyz.,!?\n", max_size=20)


@given(before=words, after=words)
def test_the_trigger_counts_as_a_word_of_the_text_only(before: str, after: str) -> None:
    trigger = "@pgs-agent"
    sep_before = "" if not before or before[-1] in " \n" else " "
    sep_after = "" if not after or after[0] in " \n.,!?" else " "
    assert mentions(f"{before}{sep_before}{trigger}{sep_after}{after}", trigger)
    assert mentions(f"{before}{sep_before}@PGS-Agent{sep_after}{after}", trigger)
    for hidden in (
        f"{before}`{trigger}`{after}",
        f"{before}\n```\n{trigger}\n```\n{after}",
        f"{before}\n> {trigger}\n",
        f"{before}<!-- {trigger} -->{after}",
        f"{before} {trigger}-dev {after}",
        f"{before} x{trigger} {after}",
    ):
        assert not mentions(hidden, trigger), hidden


def test_the_trigger_in_code_or_a_longer_name_does_not_count() -> None:
    assert mentions("@pgs-agent fix it", "@pgs-agent")
    assert mentions("Please, @pgs-agent.", "@pgs-agent")
    assert not mentions("run `@pgs-agent` to fix", "@pgs-agent")
    assert not mentions("```\n@pgs-agent\n```", "@pgs-agent")
    assert not mentions("cc @pgs-agent-dev", "@pgs-agent")
    assert not mentions("mail me@pgs-agent", "@pgs-agent")
    assert not mentions("> @pgs-agent fix\n\nthanks", "@pgs-agent")
