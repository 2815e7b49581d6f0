"""PGS's configuration (the run config's ``pgs`` section) and the ablation setting it makes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agent.core.prompts import CONFIG_ONLY, default_prompt
from agent.models.base import BaseURL
from agent.pgs.feedback import IO_TEMPLATE, PROPERTY_TEMPLATE
from agent.pgs.runner import CheckSettings
from agent.pgs.tester import TesterConfig
from agent.pgs.tokens import TOKENIZER_HELP, TokenizerName
from agent.record.pgs import Ablation, FeedbackMode


class PGSConfig(BaseModel):
    """The Tester and the feedback loop."""

    model_config = ConfigDict(extra="forbid")
    feedback: FeedbackMode = Field(
        default="property-min",
        description="none: the Generator alone; io: Self-Edit, the raw output of the first "
        "failing test (the issue's examples as tests, then the related repository tests), no "
        "properties; io-min: io with the failing test of the fewest input tokens; property: "
        "property feedback, any failing example; property-min: the failing input with the "
        "fewest tokens (full PGS)",
    )
    issue_examples: bool = Field(
        default=True,
        description="io modes: an extraction turn writes the examples the issue states as "
        "tests (each kept only when it fails on the original code), io's example tests (off: "
        "the related repository tests alone)",
    )
    rounds: int = Field(default=5, ge=0, description="most feedback rounds")
    filter: bool = Field(
        default=True,
        description="validate properties on the original code and drop unsound ones (off: "
        "the ablation without filtering: every property that runs is kept, none is dropped as "
        "contradicting the issue, and the Tester gets no retry from the validation report)",
    )
    tester_retries: int = Field(
        default=1,
        ge=0,
        description="more Tester turns, with the validation report, when no issue property "
        "survives validation",
    )
    fresh_probes: int = Field(
        default=1,
        ge=0,
        description="when every kept property passes and feedback rounds remain, ask the "
        "Tester this many more times for new rules before accepting",
    )
    input_generator: bool = Field(
        default=False,
        description="property modes: before the properties, a Tester turn of its own (the "
        "issue and the original code only) writes hard inputs for the issue's entry points, "
        "which every property draws beside its own strategies (PGS's test input generator)",
    )
    examples_filter: bool = Field(
        default=False,
        description="property modes with the filter: an extraction turn writes the examples the "
        "issue states as tests (kept when they fail on the original code), the soundness "
        "filter's public tests: an issue property that fails when the code answers as the "
        "issue states is dropped",
    )
    drop_failing_everywhere: bool = Field(
        default=False,
        description="the filter also drops an issue property that fails on every input its pool "
        "pass ran on the original code while another kept one holds on some (off by default: "
        "a property whose strategy covers only the bug's inputs, 'every negative x raises', "
        "fails everywhere too, and is right)",
    )
    properties_every_round: bool = Field(
        default=False,
        description="property modes: the Tester adds properties before every round's check "
        "after the first, as the paper regenerates them each iteration (none kept before is "
        "dropped)",
    )
    round_steps: int = Field(
        default=30, ge=0, description="steps the Generator gets after each feedback message"
    )
    round_time: float = Field(
        default=900.0, ge=0, description="seconds the Generator gets after each feedback message"
    )
    tester_model: str | None = Field(
        default=None, description="the Tester's model (default: the Generator's)"
    )
    tester_base_url: BaseURL | None = Field(
        default=None, description="the Tester model's base URL (default: the Generator's)"
    )
    tokenizer: TokenizerName = Field(default="auto", description=TOKENIZER_HELP)
    fresh_inputs: bool = Field(
        default=True,
        description="every check draws new inputs: a new Hypothesis seed per check, derived "
        "from --pgs.seed and recorded per round (off: derandomised, the same inputs every check)",
    )
    seed: int | None = Field(
        default=None,
        description="the run's seed, from which every check's Hypothesis seed derives (default: "
        "a random one, recorded in the .traj as pgs.seed; pass it again to replay the inputs)",
    )
    keep_properties: bool = Field(
        default=False, description="also write the kept properties as <id>.properties.patch"
    )
    test_cmd: str | None = Field(
        default=None, description="the repository's test command (default: related test files)"
    )
    property_template: str = Field(
        default=PROPERTY_TEMPLATE, description="the feedback message of the property modes"
    )
    io_template: str = Field(default=IO_TEMPLATE, description="the feedback message of io mode")
    tampered_note_template: str = Field(
        default=default_prompt("pgs", "tampered_note_template"), json_schema_extra=CONFIG_ONLY
    )
    tests_changed_note_template: str = Field(
        default=default_prompt("pgs", "tests_changed_note_template"), json_schema_extra=CONFIG_ONLY
    )
    tester: TesterConfig = Field(default_factory=TesterConfig)
    check: CheckSettings = Field(default_factory=CheckSettings)


def shrinks(config: PGSConfig) -> bool:
    """Whether the checks shrink failing inputs: ``check.shrink`` when set, else only for
    ``property-min`` (no minimisation in the other modes: Table 7's rows before it)."""
    if config.check.shrink is not None:
        return config.check.shrink
    return config.feedback == "property-min"


def ablation(config: PGSConfig) -> Ablation:
    """The run's full ablation setting, as recorded and as ``pgs report`` groups by."""
    return Ablation.of(
        config.feedback,
        rounds=config.rounds,
        filter=config.filter,
        fresh_probes=config.fresh_probes,
        shrink=shrinks(config),
        shrink_order=config.check.shrink_order if config.check.pool else None,
        inputs=config.input_generator,
        examples=config.examples_filter and config.filter,
        every_round=config.properties_every_round,
    )
