"""The reviewer of a run: the PGS Tester and checks (:class:`agent.pgs.reviewer.PGS`), unless
``--feedback none``; and what every model of the run needs, checked before it starts
(:func:`check_models`: a price while a cost limit is on, a server that answers and takes the
key)."""

from __future__ import annotations

from agent.core.tools import Toolset
from agent.core.trajectory_file import Trajectory
from agent.models import (
    GlobalStats,
    ModelConfig,
    check_endpoint,
    check_priced,
    get_model,
    model_kind,
)
from agent.pgs.config import PGSConfig
from agent.pgs.feedback import get_counter
from agent.pgs.reviewer import PGS
from agent.pgs.runner import pinned
from agent.pgs.shared import SharedProperties
from agent.record.base import load
from agent.record.pgs import PGSRecord
from agent.run.config import RunConfig
from agent.run.hooks import RunHook
from agent.run.task import Task
from envs.sandbox import Sandbox


def tester_model_config(config: RunConfig) -> ModelConfig:
    """The Tester's model: the Generator's, with ``pgs.tester_model`` / ``tester_base_url``.
    A Tester of another provider than the Generator's (``--tester-model claude-...`` beside
    a ``gpt-...``) does not inherit the Generator's base URL."""
    name = config.pgs.tester_model or config.model.name
    base_url = config.pgs.tester_base_url or config.model.base_url
    if not config.pgs.tester_base_url and name != config.model.name:
        alone = config.model.model_copy(update={"name": name, "base_url": None})
        if model_kind(alone) != "openai":  # another provider's API, not the Generator's server
            base_url = None
    return config.model.model_copy(update={"name": name, "base_url": base_url})


def check_models(config: RunConfig) -> None:
    """Before a run starts (no image or sandbox yet): :func:`check_prices`, then every model
    the run calls answers at its URL and takes its key (:func:`check_endpoints`)."""
    check_prices(config)
    check_endpoints(config)


def check_endpoints(config: RunConfig) -> None:
    """The Generator's model and, when it is another one, the Tester's answer at their URL
    and take their key (:func:`agent.models.check_endpoint`): one line naming the URL, the
    key's variable and the fix, before any image or sandbox work."""
    check_endpoint(config.model)
    tester = tester_model_config(config)
    differs = (tester.name, tester.base_url) != (config.model.name, config.model.base_url)
    if config.pgs.feedback != "none" and differs:
        check_endpoint(tester, who="Tester's model")


def check_prices(config: RunConfig) -> None:
    """Before a run starts (no clone, image or sandbox yet): every model it calls has a price
    while a cost limit is on (:func:`agent.models.check_priced`), else one line saying how to
    give one or turn the limits off; and its model class can be imported."""
    check_priced(config.model)
    if config.pgs.tester_model not in (None, config.model.name):
        check_priced(tester_model_config(config), who="Tester's model")


def make_reviewer(
    config: RunConfig,
    task: Task,
    sandbox: Sandbox,
    toolset: Toolset,
    traj: Trajectory,
    global_stats: GlobalStats | None,
    hooks: RunHook,
    base: str = "HEAD",
    shared: SharedProperties | None = None,
) -> PGS | None:
    """The PGS Tester and checks, unless ``--feedback none`` (the Generator alone);
    ``shared``: another attempt's property set, adopted instead of a Tester turn."""
    pgs = config.pgs
    if pgs.feedback == "none":
        traj.record.pgs = load(PGSRecord, {"mode": "none"})
        return None

    def on_review(text: str) -> None:
        hooks.on_status(f"PGS: {text}")

    return PGS(
        with_pinned_plugins(pgs, sandbox),
        sandbox=sandbox,
        toolset=toolset,
        tester_model=get_model(tester_model_config(config), global_stats),
        counter=get_counter(config.model, pgs.tokenizer),
        trajectory=traj,
        problem_statement=task.problem_statement,
        function_calling=config.model.function_calling,
        status=on_review,
        base=base,
        on_round=hooks.on_round,
        shared=shared,
        generator_config=config.agent,
    )


def with_pinned_plugins(config: PGSConfig, sandbox: Sandbox) -> PGSConfig:
    """``config`` with the pytest plugins every check may load pinned in the sandbox now, on
    the original environment, before the Generator has run a command there
    (:func:`agent.pgs.runner.pinned`)."""
    return config.model_copy(update={"check": pinned(sandbox, config.check)})
