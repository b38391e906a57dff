"""Whose input may make Squadron act — pure. One rule for every human input.

A *human input* is what a person does on GitHub that could make an agent work, put text
in front of a model, or count toward a gate: a comment (created or edited), a pull
request review comment, a review (its text, its approval or change request) and its
dismissal, an edit of an issue, a label, and assigning the App. Such an input carries
authority only when its actor has write access to the repository (admin, maintain or
write, as GitHub's collaborator permission endpoint says) and is not a bot. The App
itself acts only through its agents' echoes (a review agent's review, the PM's
assignment: GitHub's copies of the App's actions are dropped at the ingress, and one that
got through never acts, so nothing loops); what an agent's task echoes must be the App's
own action. The framework's own envelopes are trusted.

Everything else needs no authority, on purpose (the routing table tests pin each row):

- facts about GitHub's state that only stop work, or that the reconciler would replay
  from GitHub anyway: an issue closed, deleted or transferred, the App unassigned, a
  pull request merged or closed;
- code events: a pull request opened, reopened, edited, pushed or made ready, checks and
  statuses — review agents exist to read strangers' code, and the merge gate re-reads
  GitHub (where reviews count only under this rule too: :mod:`squadron.domain.approval`);
- an issue opened or reopened: triaging outside issues is the PM's job; their text is
  data for the PM, which can label, assign and file issues only.

Permission ``None`` means unknown (never loaded, or not asked): no authority. GitHub's
``author_association`` is never taken for a permission (OWNER, MEMBER and COLLABORATOR
do not imply write access, and an agent's echo could name any), so the shell asks the
permission endpoint for every human actor, and for no bot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from squadron.domain.app_acts import AgentReported, FrameworkCommand, app_act, is_app
from squadron.domain.event_fields import Actor
from squadron.domain.events import EventEnvelope

#: The repository permissions that carry authority.
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})

InputKind = Literal[
    "comment", "review_comment", "review", "review_dismissal", "issue_edit", "label", "assignment"
]


class Rule(StrEnum):
    """Why an input has authority or not (short: also a metric dimension)."""

    WRITE_ACCESS = "write-access"
    THE_APP = "the-app"
    FRAMEWORK = "framework"
    OTHER_BOT = "other-bot"
    NO_WRITE_ACCESS = "no-write-access"
    UNKNOWN_PERMISSION = "unknown-permission"
    OWN_WEBHOOK = "own-webhook"
    ECHO_NOT_THE_APP = "echo-not-the-app"


_AUTHORISING = frozenset({Rule.WRITE_ACCESS, Rule.THE_APP, Rule.FRAMEWORK})

_WHY = {
    Rule.WRITE_ACCESS: "has write access",
    Rule.THE_APP: "is the App itself",
    Rule.FRAMEWORK: "is the framework",
    Rule.OTHER_BOT: "is a bot other than the App",
    Rule.NO_WRITE_ACCESS: "has no write access",
    Rule.UNKNOWN_PERMISSION: "has a permission nobody checked",
    Rule.OWN_WEBHOOK: "is the App, whose own webhooks never act (its agents report what they did)",
    Rule.ECHO_NOT_THE_APP: "is not the App, yet an agent's task reported it",
}


@dataclass(frozen=True)
class Authority:
    """Whether ``login``'s input carries authority, and the rule that says so."""

    login: str
    rule: Rule
    #: The repository permission GitHub gave (None: unknown or not asked).
    permission: str | None = None

    @property
    def authorised(self) -> bool:
        return self.rule in _AUTHORISING

    @property
    def why(self) -> str:
        permission = f" ({self.permission})" if self.permission else ""
        return f"{self.login} {_WHY[self.rule]}{permission}"


def decide(login: str, *, is_bot: bool, bot_login: str, permission: str | None) -> Authority:
    """The rule: the App itself, or a human (not a bot) with write access; nobody else."""
    if is_app(login, bot_login):
        return Authority(login, Rule.THE_APP)
    if is_bot:
        return Authority(login, Rule.OTHER_BOT)
    if permission is None:
        return Authority(login, Rule.UNKNOWN_PERMISSION)
    rule = Rule.WRITE_ACCESS if permission in WRITE_PERMISSIONS else Rule.NO_WRITE_ACCESS
    return Authority(login, rule, permission)


@dataclass(frozen=True)
class HumanInput:
    kind: InputKind
    #: Whose authority the input needs: every one of them (an edit of someone's comment: both).
    actors: tuple[Actor, ...]


def human_input(event: EventEnvelope, bot_login: str) -> HumanInput | None:
    """The human input ``event`` is, or None when it needs no authority (see the module)."""
    pair = (event.event, event.action)
    if pair in {("issue_comment", "created"), ("issue_comment", "edited")}:
        author = event.comment.author if event.comment is not None else event.sender
        # Another's edit of a comment: the words are still the author's, the change the editor's.
        editor = (event.sender,) if event.sender.login.casefold() != author.login.casefold() else ()
        return HumanInput("comment", (author, *editor))
    if pair == ("pull_request_review_comment", "created"):
        return HumanInput("review_comment", (event.comment.author if event.comment else event.sender,))
    if pair == ("pull_request_review", "submitted"):
        return HumanInput("review", (event.review.author if event.review else event.sender,))
    if pair == ("pull_request_review", "dismissed"):
        return HumanInput("review_dismissal", (event.sender,))
    if pair == ("issues", "edited"):
        return HumanInput("issue_edit", (event.sender,))
    if pair in {("issues", "labeled"), ("pull_request", "labeled")}:
        return HumanInput("label", (event.sender,))
    if (
        pair == ("issues", "assigned")
        and event.assignee is not None
        and is_app(event.assignee.login, bot_login)
    ):
        return HumanInput("assignment", (event.sender,))
    return None


def permissions_needed(event: EventEnvelope, bot_login: str) -> frozenset[str]:
    """The logins whose repository permission :func:`judge` needs: human actors only.

    Nothing for the framework's and agents' envelopes, for bots or for the App: their
    answer does not depend on a permission, so GitHub is not asked.
    """
    found = human_input(event, bot_login)
    if found is None or isinstance(app_act(event, bot_login), FrameworkCommand | AgentReported):
        return frozenset()
    return frozenset(
        actor.login for actor in found.actors if not actor.is_bot and not is_app(actor.login, bot_login)
    )


def judge(
    event: EventEnvelope, *, bot_login: str, permissions: Mapping[str, str]
) -> tuple[HumanInput, Authority] | None:
    """The authority of ``event``'s human input: the first actor refused, else the last one.

    None when ``event`` is no human input. ``permissions`` maps logins to what GitHub
    said (:func:`permissions_needed` lists the ones to load); a login missing is unknown.
    """
    found = human_input(event, bot_login)
    if found is None:
        return None
    act = app_act(event, bot_login)
    if isinstance(act, FrameworkCommand):
        return found, Authority(found.actors[0].login, Rule.FRAMEWORK)
    verdict = Authority(found.actors[0].login, Rule.UNKNOWN_PERMISSION)
    for actor in found.actors:
        if isinstance(act, AgentReported):
            # The gateway stamps the sender; the rest of an echo is the task's word.
            rule = Rule.THE_APP if is_app(actor.login, bot_login) else Rule.ECHO_NOT_THE_APP
            verdict = Authority(actor.login, rule)
        else:
            verdict = decide(
                actor.login, is_bot=actor.is_bot, bot_login=bot_login, permission=permissions.get(actor.login)
            )
            if verdict.rule is Rule.THE_APP:
                verdict = Authority(actor.login, Rule.OWN_WEBHOOK)
        if not verdict.authorised:
            return found, verdict
    return found, verdict


def refusal(found: HumanInput, verdict: Authority) -> str:
    """The discard reason of a refused input: the rule and whose input it was, never its text."""
    what = found.kind.replace("_", " ")
    return f"refused by the authority rule ({verdict.rule}): {verdict.why}; the {what} is ignored"
