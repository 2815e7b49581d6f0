"""``pgs replay``: run a recorded run's replies again through pgs, on its instance, and say reply
by reply where pgs handled them unlike the recording.

The recording is a SWE-agent ``.traj``, a mini-swe-agent trajectory or a pgs ``.traj``
(read by :mod:`agent.record.foreign`, compared by :mod:`agent.inspect.recording`). Its replies
are the replay model's script (:mod:`agent.models.script_format`); the run takes the recording
agent's conventions unless flags say otherwise: mini-swe-agent's (only ```bash blocks,
``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` submits, 10,000 characters kept as head and tail)
or SWE-agent's (the last block, its ``<response clipped>`` cut at 100,000), or the pgs run's own
agent and tools sections. The Tester is off (``--feedback none``): the replies are the Generator's.

Each reply is compared on what the user would notice: whether it ran or was refused, the
command run, whether it submitted (*handled unlike*); the exit code and the output where the
recording has them, with volatile text made equal first (timings, temporary paths, object
addresses, dates); and the final patch against the recorded submission. The run is on
``--instances FILE`` (a SWE-bench record, its image built as ``pgs batch`` builds it) or
``--repo PATH``. Exit code 0 when every reply was handled like the recording and the patches
are equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent.cli.eval import add_environment_flags
from agent.core.parsing import interactive_refusal
from agent.errors import INTERRUPTED, InputError
from agent.inspect.recording import RecordedReply, recorded_replies, submission
from agent.inspect.trajectory_view import trajectory_from_dict
from agent.record.foreign import info_of, trajectory_kind, trajectory_replies
from agent.record.steps import Info
from agent.run.config import add_config_flags, flag_overrides, load_config, merge
from agent.run.outputs import make_output_dir, output_paths
from agent.run.run_task import run_task
from agent.run.task import Task, check_repo
from agent.swebench import Environments, InstanceError, load_instances, parse_python_map
from agent.swebench.executors import make_executor
from agent.swebench.scheduler import Batch

out = Console(highlight=False, width=140)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)

#: mini-swe-agent's submit commands (2.x's marker, and 1.x's older one).
MINI_SUBMIT = ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "echo MINI_SWE_AGENT_FINAL_OUTPUT"]
#: The recording agent's conventions, as config sections (flags and --config win over them).
CONVENTIONS: dict[str, dict[str, Any]] = {
    "mini-swe-agent": {
        "agent": {
            "action_parser": "mini-swe-agent",
            "truncation": "mini-swe-agent",
            "max_observation_chars": 10_000,
        },
        "tools": {"submit_commands": MINI_SUBMIT},
    },
    "swe-agent": {
        "agent": {
            "action_parser": "swe-agent",
            "truncation": "swe-agent",
            "max_observation_chars": 100_000,
        },
    },
    "pgs": {},
}
#: Replay every reply: no step or time limit, malformed replies answered as often as they come.
REPLAY_AGENT = {"step_limit": 0, "time_limit": 0, "max_format_errors": 1_000_000}

#: Text that differs from run to run, and what it is made before outputs are compared.
VOLATILE = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x<address>"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"), "<date>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|sec|secs|seconds)\b"), "<duration>"),
    (re.compile(r"/tmp/[^\s'\":)]+"), "/tmp/<path>"),
    (re.compile(r"\d+ characters (elided|omitted|were elided)"), r"<n> characters \1"),
    (re.compile(r"[ \t]+$", re.M), ""),
]


_GUARD = re.compile(r"(.*?)[ \t]*<< '([A-Za-z_][\w.-]*)'$")


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "replay",
        help="replay a recorded run (SWE-agent, mini-swe-agent or pgs) and compare",
        description="Replay a recorded run's replies through pgs on its instance, and report "
        "reply by reply where pgs's parsing, exit codes and outputs differ from the recording "
        "(timings, temporary paths and object addresses allowed for), and whether the final "
        "patch equals the recorded submission. Reproduce a run, or check that a new image "
        "still behaves like the old one. Exit code 0 when nothing differs but outputs.",
    )
    parser.add_argument("recording", type=Path, help="a .traj or .traj.json file")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--instances", type=Path, help="SWE-bench records (JSON list or JSONL)")
    where.add_argument("--repo", type=Path, help="a git repository at the run's commit")
    parser.add_argument("--instance-id", help="the record to use (default: the recording's)")
    parser.add_argument(
        "--allow-dirty", action="store_true", help="with --repo: replay on uncommitted changes too"
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument(
        "--output-dir", type=Path, help="where the replay's .traj goes (default: a temp folder)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        action="append",
        help="YAML file with the run's sections, over the recording agent's conventions",
    )
    add_environment_flags(parser)
    add_config_flags(parser)
    parser.set_defaults(func=cmd_replay)


@dataclass
class ReplyDiff:
    """One reply: what the recording and pgs did with it, and how they differ."""

    reply: int
    where: str
    recorded: str
    replayed: str
    #: Handled unlike the recording (ran/refused, command, submission, refused by pgs).
    handled_unlike: list[str] = field(default_factory=list)
    exit_code: str | None = None
    output: str | None = None


@dataclass
class Comparison:
    recording: str
    writer: str
    instance_id: str
    replies: int
    handled_unlike: int
    exit_codes_differ: int
    outputs_differ: int
    patch_equal: bool
    replay_exit_status: str
    replay_traj: str
    diffs: list[ReplyDiff]


def cmd_replay(args: argparse.Namespace) -> int:
    data = _read_recording(args.recording)
    kind = trajectory_kind(data)
    recorded = recorded_replies(data)
    iid = args.instance_id or _instance_id(data, args.recording)
    config = load_config(args.config, merge(_conventions(data, kind), flag_overrides(args)))
    with tempfile.TemporaryDirectory(prefix="pgs-replay-") as tmp:
        output_dir = args.output_dir or Path(tmp)
        status = _run(args, config, data, iid, output_dir)
        if status == "interrupted":
            return INTERRUPTED
        traj_path = output_paths(output_dir, iid).traj
        replayed = json.loads(traj_path.read_text(encoding="utf-8"))
        result = compare(data, recorded, replayed, kind, iid, str(args.recording))
        result.replay_traj = str(traj_path) if args.output_dir else "(temporary)"
    if args.json:
        print(json.dumps(asdict(result), indent=1))
    else:
        print_comparison(result)
    return 0 if result.handled_unlike == 0 and result.patch_equal else 1


def _read_recording(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        trajectory_kind(data)
        if not trajectory_replies(data):
            raise ValueError("it holds no model reply")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path} is not JSON: {e}") from None
    except ValueError as e:
        raise InputError(
            f"{path} is not a recorded run (SWE-agent or pgs .traj, mini-swe-agent trajectory): {e}"
        ) from None
    assert isinstance(data, dict)
    return data


def _instance_id(data: dict[str, Any], path: Path) -> str:
    return str(
        data.get("instance_id")
        or (info_of(data) or Info()).instance_id
        or trajectory_from_dict(data, path=path).instance_id
    )


def _conventions(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """The replay's config: the recording agent's conventions, the replay model, no Tester."""
    base = json.loads(json.dumps(CONVENTIONS[kind]))  # a copy: sections are updated below
    if kind == "mini-swe-agent" and data.get("trajectory_format") != "mini-swe-agent-1":
        base["agent"]["action_parser"] = "mini-swe-agent-2"  # 2.x: ```mswea_bash_command
    if kind == "pgs":
        replay = data.get("replay_config")
        if isinstance(replay, dict):
            base = {k: replay[k] for k in ("agent", "tools") if isinstance(replay.get(k), dict)}
            for section in base.values():
                for name in ("bundles",):  # the recording machine's folders
                    section.pop(name, None)
    calls = any(step.get("tool_calls") for _, step in trajectory_replies(data))
    return merge(
        base,
        {
            "model": {"name": "replay", "function_calling": calls},
            "agent": REPLAY_AGENT,
            "pgs": {"feedback": "none"},
        },
    )


def _run(
    args: argparse.Namespace, config: Any, data: dict[str, Any], iid: str, output_dir: Path
) -> str:
    config = config.model_copy(
        update={"model": config.model.model_copy(update={"script": str(args.recording)})}
    )
    if args.repo is not None:
        issue = trajectory_from_dict(data, path=args.recording).issue
        if not issue:
            raise InputError(f"{args.recording} holds no issue text to replay with --repo")
        # The output folder is pgs's own, not a change; one pgs makes is ignored by git (as
        # `pgs run` does), so the next replay or run from inside the repository is not refused.
        folder = Path(output_dir) / iid
        repo = check_repo(args.repo, allow_dirty=args.allow_dirty, own=(folder,))
        make_output_dir(folder)
        result = run_task(
            Task(instance_id=iid, problem_statement=issue, repo=repo), config, output_dir
        )
        return result.exit_status
    chosen = [i for i in load_instances(args.instances) if i.instance_id == iid]
    if not chosen:
        raise InstanceError(f"no record {iid!r} in {args.instances} (see --instance-id)")
    envs = Environments(
        repos_dir=args.repos_dir,
        python_map=parse_python_map(args.python_map),
        image_source=args.image_source,
        registry=args.registry,
    )
    batch = Batch(instances=chosen, config=config, output_dir=output_dir, envs=envs, redo=True)
    statuses, _ = batch.run(console=err, executor=make_executor("local", 1))
    if batch.stop.is_set():
        return "interrupted"
    return next(iter(statuses), "not started")


def normalize(text: str) -> str:
    """``text`` with its volatile parts made equal (:data:`VOLATILE`)."""
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text.strip()


def _command(command: str | None) -> str:
    """A command as typed: pgs records a multi-line tool (``edit 4:4`` ... ``end_of_edit``) with
    the quoted heredoc it runs it through (:meth:`agent.core.tools.Toolset.guard_multiline`)."""
    lines = (command or "").strip().split("\n")
    for i, line in enumerate(lines):
        guard = _GUARD.match(line)
        if guard and guard.group(2) in (x.strip() for x in lines[i + 1 :]):
            lines[i] = guard.group(1)
    return "\n".join(lines)


def _patch_lines(patch: str) -> list[str]:
    """A patch's lines that say what changes (``index`` lines name blobs: abbreviations vary)."""
    return [line.rstrip() for line in patch.strip().splitlines() if not line.startswith("index ")]


def _said(reply: RecordedReply | None) -> str:
    if reply is None:
        return "not reached"
    if not reply.ran:
        return "refused (format)"
    what = "submitted" if reply.submitted else "ran"
    code = "" if reply.exit_code is None else f" (exit {reply.exit_code})"
    return f"{what}{code}"


def compare(
    data: dict[str, Any],
    recorded: list[RecordedReply],
    replayed_traj: dict[str, Any],
    kind: str,
    iid: str,
    recording: str,
) -> Comparison:
    """Reply by reply, what pgs did with the recorded replies, against the recording."""
    replayed = recorded_replies(replayed_traj)
    diffs = []
    unlike = codes = outputs = 0
    for n, rec in enumerate(recorded):
        got = replayed[n] if n < len(replayed) else None
        diff = ReplyDiff(reply=n + 1, where=rec.where, recorded=_said(rec), replayed=_said(got))
        if got is None:
            diff.handled_unlike.append("pgs's run ended before this reply")
        elif rec.ran != got.ran:
            diff.handled_unlike.append("ran in one, refused as malformed in the other")
        elif rec.ran and rec.command is not None and _command(got.command) != _command(rec.command):
            diff.handled_unlike.append("a different command")
        if got is not None and rec.submitted != got.submitted:
            diff.handled_unlike.append("submitted in one only")
        if got is not None and got.ran and got.command and got.output is not None:
            refusal = interactive_refusal(got.command)
            if refusal is not None and got.output.startswith(refusal):
                diff.handled_unlike.append("pgs refused it: it needs a terminal")
        if got is not None and None not in (rec.exit_code, got.exit_code, rec.output, got.output):
            if rec.exit_code != got.exit_code:
                diff.exit_code = f"{rec.exit_code} -> {got.exit_code}"
            if normalize(str(rec.output)) != normalize(str(got.output)):
                diff.output = _first_difference(
                    normalize(str(rec.output)), normalize(str(got.output))
                )
        unlike += bool(diff.handled_unlike)
        codes += diff.exit_code is not None
        outputs += diff.output is not None
        if diff.handled_unlike or diff.exit_code or diff.output:
            diffs.append(diff)
    info = info_of(replayed_traj) or Info()
    mine = info.submission or ""
    theirs = submission(data)
    return Comparison(
        recording=recording,
        writer=kind,
        instance_id=iid,
        replies=len(recorded),
        handled_unlike=unlike,
        exit_codes_differ=codes,
        outputs_differ=outputs,
        patch_equal=theirs is not None and _patch_lines(theirs) == _patch_lines(mine),
        replay_exit_status=info.exit_status or "",
        replay_traj="",
        diffs=diffs,
    )


def _first_difference(a: str, b: str) -> str:
    """The first line where two outputs part, shown side by side."""
    left, right = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(left, right, strict=False)):
        if x != y:
            return f"line {i + 1}: {x[:60]!r} -> {y[:60]!r}"
    return f"{len(left)} lines -> {len(right)} lines"


def print_comparison(result: Comparison) -> None:
    table = Table(title=f"{result.instance_id}: {result.writer} recording replayed by pgs")
    for column in ("reply", "where", "recorded", "pgs", "handled unlike", "exit", "output"):
        table.add_column(column)
    for d in result.diffs:
        table.add_row(
            str(d.reply),
            d.where,
            d.recorded,
            d.replayed,
            "; ".join(d.handled_unlike),
            d.exit_code or "",
            d.output or "",
        )
    if result.diffs:
        out.print(table)
    print(
        f"{result.replies} replies: {result.replies - result.handled_unlike} handled as "
        f"recorded, {result.handled_unlike} unlike; exit codes differ in "
        f"{result.exit_codes_differ}, outputs in {result.outputs_differ} | final patch "
        f"{'equal to' if result.patch_equal else 'DIFFERENT from'} the recorded submission | "
        f"pgs: {result.replay_exit_status}"
    )
