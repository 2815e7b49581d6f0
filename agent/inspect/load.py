"""Read what ``pgs inspect`` shows: a ``.traj`` file, a run folder or a batch folder.

- :func:`load` decides what PATH is and returns a :class:`~agent.inspect.model.Trajectory` or a
  :class:`~agent.inspect.model.Batch`;
- :func:`load_trajectory` / :func:`trajectory_from_dict`: one ``.traj``, in pgs's layout or
  SWE-agent's (``trajectory``, ``history``, ``info``, ``replay_config``; steps with ``thought``,
  ``action``, ``observation``, ``response``, ``execution_time``, ``state``, ``query``), or an
  older or foreign file with keys missing: every missing part becomes a ``"missing: <what>"``
  note, never an exception;
- :func:`load_batch`: ``<dir>/<id>/<id>.traj`` and ``preds.json`` (read by
  :mod:`agent.pgs.compare`, as ``pgs report`` reads them), with ``resolved`` from a ``pgs eval``
  summary found as ``pgs report`` finds it (or SWE-agent's ``results.json``).

Errors: :class:`InspectError` (a ValueError) for a PATH that cannot be inspected at all (it
does not exist, is not JSON, is JSON but not a trajectory, or a folder without trajectories);
its message is one sentence that says what to pass instead.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.inspect.diff import InterdiffError, interdiff, parse_diff
from agent.inspect.model import (
    Batch,
    BatchRow,
    FailingInput,
    Failure,
    PGSRecord,
    Property,
    Round,
    Selection,
    Step,
    TesterTurn,
    Trajectory,
    Usage,
)
from agent.pgs.compare import ReportError, find_eval_report, prediction_fields
from agent.pgs.compare import _predictions as read_predictions
from agent.pgs.method import property_decorators

#: What the three kinds of PATH look like, for error messages.
KINDS = "a .traj file, a run folder (<id>/<id>.traj) or a batch folder (preds.json, <id>/<id>.traj)"
TRAJ_KEYS = ("trajectory", "history", "info")
STEP_KEYS = ("thought", "action", "observation", "execution_time")
#: ``exit_<name>`` in an exit status, in words.
LIMITS = {
    "cost": "cost limit",
    "step_limit": "step limit",
    "time": "time limit",
    "context": "context window full",
    "total_execution_time": "total execution time limit",
    "command_timeout": "command timeout",
    "api_calls": "API call limit",
}
#: Where the issue sits inside the first user message, by writer.
_ISSUE_MARKS = (
    re.compile(r"<issue>\n?(.*?)\n?</issue>", re.S),  # pgs
    re.compile(r"<pr_description>\n?(.*?)\n?</pr_description>", re.S),  # SWE-agent 1.x
    re.compile(r"ISSUE:\n(.*?)\n+INSTRUCTIONS:", re.S),  # SWE-agent 0.7
)


class InspectError(ValueError):
    """A PATH that cannot be inspected; the message says what to pass instead."""


# -- small readers --------------------------------------------------------------------------------


def _text(value: Any) -> str:
    """A message content or a field as text: strings as they are, lists of parts joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in value]
        return "\n".join(str(p) for p in parts)
    return json.dumps(value, ensure_ascii=False, default=str)


def _float(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int | None:
    number = _float(value)
    return None if number is None else int(number)


def _dict(value: Any) -> dict[str, Any]:
    """A dict, or a JSON object held in a string (SWE-agent writes ``replay_config`` so)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            try:  # older SWE-agent states: a Python dict's repr
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _usage(stats: Any) -> Usage | None:
    """Tokens and cost from a ``model_stats``-like dict (ours, SWE-agent's, OpenAI's usage)."""
    if not isinstance(stats, dict):
        return None
    usage = Usage(
        tokens_sent=_int(stats.get("tokens_sent", stats.get("prompt_tokens"))),
        tokens_received=_int(stats.get("tokens_received", stats.get("completion_tokens"))),
        cost=_float(stats.get("instance_cost", stats.get("cost"))),
        api_calls=_int(stats.get("api_calls")),
    )
    if usage == Usage():
        return None
    return usage


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InspectError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise InspectError(f"{path} is not a text file: pass {KINDS}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InspectError(f"{path} is not JSON ({e}): pass {KINDS}") from None


# -- one trajectory -------------------------------------------------------------------------------


def load_trajectory(path: Path) -> Trajectory:
    """One ``.traj`` file (any writer's); :class:`InspectError` if it is not a trajectory."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or not any(key in data for key in TRAJ_KEYS):
        found = ", ".join(sorted(data)[:6]) if isinstance(data, dict) else type(data).__name__
        raise InspectError(
            f"{path} is JSON but not a trajectory: it has none of the keys "
            f"{', '.join(TRAJ_KEYS)} (found: {found or 'nothing'}); pass {KINDS}"
        )
    return trajectory_from_dict(data, path=path)


def trajectory_from_dict(
    data: dict[str, Any],
    *,
    path: Path | None = None,
    instance_id: str | None = None,
    sub: bool = False,
) -> Trajectory:
    """A trajectory from a ``.traj``'s content; whatever is absent becomes a missing note.

    ``sub``: a conversation stored inside another trajectory (a Tester turn), which has no
    ``replay_config`` and no PGS record of its own.
    """
    missing: list[str] = []
    info = data.get("info")
    if not isinstance(info, dict):
        missing.append("missing: info (exit status, submission, model stats)")
        info = {}
    replay = _dict(data.get("replay_config"))
    if "replay_config" not in data and not sub:
        missing.append("missing: replay_config (the run's configuration)")
    writer = _writer(data, info, replay)
    traj = Trajectory(
        path=path,
        instance_id=instance_id or _instance_id(info, replay, path),
        writer=writer,
    )
    history = data.get("history")
    if not isinstance(history, list):
        missing.append("missing: history (the conversation)")
        history = []
    traj.issue = _issue(replay, history, missing)
    steps = data.get("trajectory")
    if isinstance(steps, list):
        traj.steps = [_step(i + 1, s) for i, s in enumerate(steps)]
    elif history:
        missing.append("missing: trajectory (the steps); shown from the history instead")
        traj.steps = _steps_from_history(history)
    else:
        missing.append("missing: trajectory (the steps)")
    absent: Counter[str] = Counter(m for step in traj.steps for m in step.missing)
    for note, count in sorted(absent.items()):
        missing.append(f"{note} (in {count} of {len(traj.steps)} steps)")
    _read_info(traj, info, replay, missing, path)
    pgs = data.get("pgs")
    if isinstance(pgs, dict) and not sub:
        traj.pgs = _pgs(pgs, replay)
        _link_rounds(traj.steps, traj.pgs.rounds)
    elif not sub:
        mode = (replay.get("pgs") or {}).get("feedback") if isinstance(replay, dict) else None
        if mode == "none":
            traj.pgs_absent = "no PGS: this run used --feedback none (the Generator alone)"
        else:
            missing.append("missing: pgs (the Tester's properties, rounds and verdict)")
    traj.missing = missing
    return traj


def _link_rounds(steps: list[Step], rounds: list[Round]) -> None:
    """Pair the submissions, in order, with the rounds that checked them."""
    submits = [s for s in steps if s.tool == "submit" or s.action.strip().split(" ")[0] == "submit"]
    for step, rnd in zip(submits, rounds, strict=False):
        step.round, rnd.step = rnd.number, step.index


def _writer(data: dict[str, Any], info: dict[str, Any], replay: dict[str, Any]) -> str:
    if "pgs" in data or {"sandbox", "tools"} <= set(replay):
        return "pgs"
    swe_keys = {"swe_agent_version", "swe_agent_hash", "edited_files30"}
    if (
        "environment" in data
        or swe_keys & set(info)
        or {"env", "problem_statement"} & set(replay)
        or isinstance(data.get("replay_config"), str)
    ):
        return "swe-agent"
    return "unknown"


def _instance_id(info: dict[str, Any], replay: dict[str, Any], path: Path | None) -> str:
    problem = _dict(replay.get("problem_statement"))
    task = _dict(replay.get("task"))
    for candidate in (info.get("instance_id"), task.get("instance_id"), problem.get("id")):
        if candidate:
            return str(candidate)
    return path.stem if path is not None else "trajectory"


def _issue(replay: dict[str, Any], history: list[Any], missing: list[str]) -> str | None:
    problem = _dict(replay.get("problem_statement"))
    if problem.get("text"):
        return str(problem["text"])
    task = _dict(replay.get("task"))
    if task.get("problem_statement"):
        return str(task["problem_statement"])
    for message in history:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        if message.get("is_demo") in (True, "True", "true"):
            continue
        content = _text(message.get("content"))
        for mark in _ISSUE_MARKS:
            found = mark.search(content)
            if found:
                return found.group(1).strip("\n")
        missing.append(
            "missing: the issue on its own (shown: the first user message, which holds it)"
        )
        return content
    missing.append("missing: the issue text (no problem statement and no user message)")
    return None


def _step(index: int, raw: Any) -> Step:
    if not isinstance(raw, dict):
        return Step(index=index, missing=["missing: the step itself (not a JSON object)"])
    step = Step(
        index=index,
        thought=_text(raw.get("thought")),
        action=_text(raw.get("action")),
        observation=_text(raw.get("observation")),
        response=_text(raw.get("response")),
        execution_time=_float(raw.get("execution_time")),
        tool=str(raw["tool"]) if raw.get("tool") else None,
        exit_code=_int(raw.get("exit_code")),
    )
    state = raw.get("state")
    parsed = _dict(state)
    if parsed:
        step.state = {str(k): _text(v) for k, v in parsed.items()}
    elif isinstance(state, str) and state.strip():
        step.state = {"state": state.strip()}
    extra = _dict(raw.get("extra_info"))
    step.usage = (
        _usage(raw.get("usage"))
        or _usage(raw.get("model_stats"))
        or _usage({k: raw[k] for k in ("tokens_sent", "tokens_received", "cost") if k in raw})
        or _usage(extra.get("usage"))
        or _usage(extra.get("model_stats"))
    )
    said = len(step.response or step.thought) + len(step.action) + len(step.observation)
    step.estimated_tokens = (said + 3) // 4
    for key in STEP_KEYS:
        if key not in raw:
            step.missing.append(f"missing: {key}")
    return step


def _steps_from_history(history: list[Any]) -> list[Step]:
    """Steps rebuilt from a conversation: each assistant message and the reply that follows."""
    steps: list[Step] = []
    for i, message in enumerate(history):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if message.get("is_demo") in (True, "True", "true"):
            continue
        action = _text(message.get("action"))
        if not action and isinstance(message.get("tool_calls"), list):
            calls = [c.get("function", {}) for c in message["tool_calls"] if isinstance(c, dict)]
            action = "\n".join(f"{c.get('name')} {c.get('arguments')}" for c in calls)
        following = history[i + 1] if i + 1 < len(history) else {}
        observation = (
            _text(following.get("content"))
            if isinstance(following, dict) and following.get("role") in ("user", "tool")
            else ""
        )
        content = _text(message.get("content"))
        step = Step(
            index=len(steps) + 1,
            thought=_text(message.get("thought")) or content,
            action=action,
            observation=observation,
            response=content,
            missing=["missing: execution_time"],
        )
        step.estimated_tokens = (len(content) + len(action) + len(observation) + 3) // 4
        steps.append(step)
    return steps


def _read_info(
    traj: Trajectory,
    info: dict[str, Any],
    replay: dict[str, Any],
    missing: list[str],
    path: Path | None,
) -> None:
    status = info.get("exit_status")
    if status is None:
        missing.append("missing: info.exit_status (how the run ended)")
    else:
        traj.exit_status = str(status)
        for name in re.findall(r"exit_(\w+)", traj.exit_status):
            if name in LIMITS:
                traj.limits_hit.append(LIMITS[name])
        if traj.limits_hit and info.get("limit_message"):
            traj.limits_hit[-1] += f": {info['limit_message']}"
    if info.get("error"):
        traj.error = str(info["error"])
    if "submission" in info:
        traj.submission = parse_diff(_text(info.get("submission")))
    else:
        beside = path.with_suffix(".patch") if path is not None else None
        if beside is not None and beside.is_file():
            traj.submission = parse_diff(beside.read_text(encoding="utf-8", errors="replace"))
            missing.append(f"missing: info.submission (shown: {beside.name} beside the file)")
        else:
            missing.append("missing: info.submission (the final patch)")
    usage = _usage(info.get("model_stats"))
    if usage is None:
        missing.append("missing: info.model_stats (tokens and cost)")
    else:
        traj.usage = usage
    traj.duration = _float(info.get("duration"))
    agent = _dict(replay.get("agent"))
    model = _dict(replay.get("model")) or _dict(agent.get("model"))
    traj.model_name = str(model["name"]) if model.get("name") else None
    limits = _dict(info.get("limits"))
    steps = limits.get("steps", agent.get("step_limit"))
    seconds = limits.get("seconds", agent.get("time_limit"))
    cost = model.get("per_instance_cost_limit")
    calls = model.get("per_instance_call_limit")
    if _float(steps):
        traj.limits.append(f"{_int(steps)} steps")
    if _float(seconds):
        traj.limits.append(f"{_float(seconds):.0f} s")
    if _float(cost):
        traj.limits.append(f"${_float(cost):.2f}")
    if _float(calls):
        traj.limits.append(f"{_int(calls)} model calls")


# -- the PGS record -------------------------------------------------------------------------------


def _markers(files: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """``{function name: (kind, rule)}`` from ``@pytest.mark.pgs_issue("rule")`` markers."""
    found: dict[str, tuple[str, str | None]] = {}
    for function, name, deco in property_decorators(files):
        if name not in ("pgs_issue", "pgs_regression"):
            continue
        rule = None
        if isinstance(deco, ast.Call) and deco.args:
            try:
                rule = str(ast.literal_eval(deco.args[0]))
            except ValueError:
                rule = ast.unparse(deco.args[0])
        found[function] = ("issue" if name == "pgs_issue" else "regression", rule)
    return found


def _function(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1].split("[", 1)[0]


def _results(report: Any) -> list[dict[str, Any]]:
    results = report.get("results") if isinstance(report, dict) else None
    return [r for r in results or [] if isinstance(r, dict) and r.get("nodeid")]


def _inputs(result: dict[str, Any]) -> list[FailingInput]:
    examples = [e for e in result.get("examples") or [] if isinstance(e, dict)]
    if not examples:  # reports from before the field: the result's own fields
        examples = [result]
    return [
        FailingInput(
            example=e.get("example"),
            category=str(e.get("category") or result.get("category") or "?"),
            explicit=bool(e.get("explicit")),
            returned=e.get("returned"),
            exception=e.get("exception"),
            trace=e.get("trace"),
        )
        for e in examples
    ]


def _pgs(raw: dict[str, Any], replay: dict[str, Any]) -> PGSRecord:
    record = PGSRecord(
        mode=raw.get("mode") or _dict(replay.get("pgs")).get("feedback"),
        verdict=raw.get("verdict"),
        verdict_reason=raw.get("verdict_reason"),
        tester_error=raw.get("tester_error"),
    )
    if record.verdict is None:
        record.missing.append("missing: pgs.verdict")
    files = raw.get("properties")
    record.files = {str(k): _text(v) for k, v in files.items()} if isinstance(files, dict) else {}
    validation = raw.get("validation") if isinstance(raw.get("validation"), dict) else None
    if validation is None:
        record.missing.append("missing: pgs.validation (which properties were kept and why)")
        validation = {}
    record.validation_note = validation.get("note")
    rounds = raw.get("rounds")
    if not isinstance(rounds, list):
        record.missing.append("missing: pgs.rounds (the checked candidates)")
        rounds = []
    record.properties = _properties(raw, validation, rounds, record.files)
    previous: str | None = None
    for i, r in enumerate(x for x in rounds if isinstance(x, dict)):
        record.rounds.append(_round(i + 1, r, previous))
        previous = _text(r.get("patch")) if "patch" in r else previous
    turns = _list(raw.get("tester_turns"))
    keys = [t.get("key") for t in turns if isinstance(t, dict)]
    keys += sorted(k for k in raw if k == "tester" or re.fullmatch(r"tester_\d+", k))
    usage = Usage()
    for key in dict.fromkeys(k for k in keys if k):
        turn_raw = next((t for t in turns if isinstance(t, dict) and t.get("key") == key), {})
        turn = TesterTurn(
            key=str(key),
            why=turn_raw.get("why"),
            files=[str(f) for f in turn_raw.get("properties") or []],
            kept=len(turn_raw.get("kept") or []),
            dropped=len(turn_raw.get("dropped") or []),
        )
        conversation = raw.get(key)
        if isinstance(conversation, dict):
            turn.trajectory = trajectory_from_dict(conversation, instance_id=str(key), sub=True)
            stats = turn.trajectory.usage
            for name in ("tokens_sent", "tokens_received", "cost", "api_calls"):
                value = getattr(stats, name)
                if value is not None:
                    setattr(usage, name, (getattr(usage, name) or 0) + value)
        record.tester_turns.append(turn)
    record.tester_usage = usage
    return record


def _properties(
    raw: dict[str, Any],
    validation: dict[str, Any],
    rounds: list[Any],
    files: dict[str, str],
) -> list[Property]:
    markers = _markers(files)
    known: dict[str, dict[str, Any]] = {}
    reports = [validation.get("report"), *(r.get("report") for r in rounds if isinstance(r, dict))]
    for report in reports:
        for result in _results(report):
            if result.get("kind") in ("issue", "regression"):
                known.setdefault(result["nodeid"], result)
    original = {r["nodeid"]: r for r in _results(validation.get("report"))}
    props: dict[str, Property] = {}

    def prop(nodeid: str) -> Property:
        if nodeid not in props:
            kind, rule = markers.get(_function(nodeid), (None, None))
            seen = known.get(nodeid, {})
            props[nodeid] = Property(
                nodeid=nodeid, kind=seen.get("kind") or kind, rule=seen.get("rule") or rule
            )
        return props[nodeid]

    turns = [t for t in raw.get("tester_turns") or [] if isinstance(t, dict)]
    final = {"kept": validation.get("kept") or [], "dropped": validation.get("dropped") or []}
    for turn in [*turns, {**final, "key": turns[-1].get("key") if turns else None}]:
        for nodeid in turn.get("kept") or []:
            p = prop(str(nodeid))
            p.status, p.reason, p.turn = "kept", None, p.turn or turn.get("key")
        for dropped in turn.get("dropped") or []:
            if isinstance(dropped, dict) and dropped.get("nodeid"):
                p = prop(str(dropped["nodeid"]))
                p.status, p.reason = "dropped", str(dropped.get("reason") or "")
                p.turn = p.turn or turn.get("key")
    latest = set(final["kept"]) | {
        str(d.get("nodeid")) for d in final["dropped"] if isinstance(d, dict)
    }
    for nodeid, p in props.items():
        if validation and nodeid not in latest:
            before = f"{p.status} in {p.turn}" if p.turn else p.status
            p.reason = f"{before}{': ' + p.reason if p.reason else ''}; not in the final set"
            p.status = "gone"
        before_fix = original.get(nodeid)
        if before_fix is not None:
            p.on_original = f"{before_fix.get('outcome')} ({before_fix.get('category')})"
            inputs = _inputs(before_fix) if before_fix.get("category") != "pass" else []
            p.original_example = inputs[0].example if inputs else None
    return list(props.values())


def _round(index: int, raw: dict[str, Any], previous: str | None) -> Round:
    number = _int(raw.get("round")) or index
    patch = _text(raw.get("patch"))
    rnd = Round(number=number, patch=parse_diff(patch))
    if "patch" not in raw:
        rnd.missing.append("missing: the candidate's patch")
    if previous is not None and "patch" in raw:
        try:
            rnd.interdiff = parse_diff(interdiff(previous, patch))
        except InterdiffError as e:
            rnd.missing.append(f"missing: the diff against the previous candidate ({e})")
    report = raw.get("report")
    selection = raw.get("selection") if isinstance(raw.get("selection"), dict) else None
    chosen_id = (selection or {}).get("result", {}).get("nodeid") if selection else None
    if isinstance(report, dict):
        for result in _results(report):
            if result.get("category", "pass") == "pass":
                rnd.passed += 1
                continue
            rnd.failures.append(
                Failure(
                    nodeid=str(result["nodeid"]),
                    kind=str(result.get("kind") or "repo"),
                    category=str(result.get("category")),
                    outcome=str(result.get("outcome")),
                    rule=result.get("rule"),
                    note=result.get("note"),
                    inputs=_inputs(result),
                    chosen=result["nodeid"] == chosen_id,
                )
            )
        rnd.errors = [str(e) for e in report.get("errors") or []]
        rnd.cut = report.get("cut")
    elif raw.get("verdict") != "unchecked":
        rnd.missing.append("missing: the check's report (which tests ran and failed)")
    if selection is not None:
        chosen = selection.get("chosen") if isinstance(selection.get("chosen"), dict) else {}
        rnd.selection = Selection(
            nodeid=str(chosen_id or "?"),
            why=str(selection.get("why") or ""),
            input=selection.get("input"),
            tokens=_int(selection.get("tokens")),
            counter=selection.get("counter"),
            candidates=_int(selection.get("candidates")),
            category=selection.get("category"),
            chosen_example=chosen.get("example"),
            issue_example=selection.get("issue_example"),
        )
    rnd.feedback = raw.get("feedback")
    rnd.verdict = raw.get("verdict")
    rnd.note = raw.get("note")
    rnd.probes = [
        [str(n) for n in p.get("new_kept") or []]
        for p in raw.get("probes") or []
        if isinstance(p, dict)
    ]
    return rnd


# -- folders --------------------------------------------------------------------------------------


def resolve(path: Path) -> Path:
    """The ``.traj`` file PATH stands for (a file, or a run folder holding one), or the batch
    folder it is; :class:`InspectError` when it is neither."""
    path = Path(path)
    if not path.exists():
        raise InspectError(f"{path} does not exist: pass {KINDS}")
    if path.is_file():
        return path
    direct = sorted(path.glob("*.traj"))
    nested = sorted(path.glob("*/*.traj"))
    if len(direct) == 1 and not nested and not (path / "preds.json").is_file():
        return direct[0]
    if direct or nested or (path / "preds.json").is_file():
        return path
    raise InspectError(f"{path} holds no .traj file and no preds.json: pass {KINDS}")


def load(path: Path) -> Trajectory | Batch:
    """A ``.traj`` or a run folder (one trajectory) or a batch folder; see :data:`KINDS`."""
    target = resolve(path)
    return load_batch(target) if target.is_dir() else load_trajectory(target)


def _traj_paths(folder: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for p in sorted(folder.glob("*.traj")):
        found.setdefault(p.stem, p)
    for p in sorted(folder.glob("*/*.traj")):  # <id>/<id>.traj first, then any other name
        if p.parent.name == p.stem or p.stem not in found:
            found[p.stem] = p
    return found


def _eval_summary(folder: Path, report: Path | None, batch: Batch) -> dict[str, Any] | None:
    if report is None:
        report, notes = find_eval_report(folder)
        batch.notes += notes
        swe_results = folder / "results.json"  # SWE-agent's place for the harness's report
        if report is None and swe_results.is_file():
            report = swe_results
    elif report.is_dir():
        found, notes = find_eval_report(report)
        batch.notes += notes
        if found is None:
            raise InspectError(f"{report} holds no `pgs eval` summary (<model>.<run_id>.json)")
        report = found
    if report is None:
        return None
    summary = _read_json(report)
    if not isinstance(summary, dict) or "resolved_ids" not in summary:
        raise InspectError(f"{report} is not an evaluation summary (no resolved_ids)")
    batch.eval_report = report
    return summary


def _graded(iid: str, summary: dict[str, Any]) -> tuple[str, str | None]:
    def ids(key: str) -> set[str]:
        return {str(x) for x in summary.get(key) or []}

    errors = _dict(summary.get("errors"))
    for key, word in (
        ("resolved_ids", "resolved"),
        ("unresolved_ids", "unresolved"),
        ("empty_patch_ids", "empty patch"),
        ("error_ids", "error"),
    ):
        if iid in ids(key):
            return word, (str(errors[iid]) if iid in errors else None)
    return "not graded", None


def load_batch(
    folder: Path,
    *,
    eval_report: Path | None = None,
    on_trajectory: Callable[[Trajectory], None] | None = None,
) -> Batch:
    """One row per instance of a batch folder. Each trajectory is read once; ``on_trajectory``
    gets it (to render its page) before it is let go, so a large batch is never all in memory.
    ``eval_report``: a ``pgs eval`` summary or its folder, if it is not inside ``folder``."""
    folder = Path(folder)
    batch = Batch(path=folder)
    try:
        preds = read_predictions(folder)
    except ReportError as e:
        preds = {}
        if (folder / "preds.json").is_file():
            batch.notes.append(f"predictions not read: {e}")
        else:
            batch.missing.append("missing: preds.json (the rows come from the .traj files)")
    trajs = _traj_paths(folder)
    ids = sorted(set(preds) | set(trajs))
    if not ids:
        raise InspectError(f"{folder} holds no trajectories and no predictions: pass {KINDS}")
    summary = _eval_summary(folder, Path(eval_report) if eval_report else None, batch)
    if summary is None:
        batch.missing.append(
            "missing: an evaluation report (pgs eval --report-dir inside this folder, or "
            "--eval PATH): resolved is not known"
        )
    for iid in ids:
        row = BatchRow(instance_id=iid, traj_path=trajs.get(iid))
        pred = preds.get(iid, {})
        if row.traj_path is None:
            row.missing.append(f"missing: the trajectory ({iid}/{iid}.traj)")
            row.verdict = pred.get("pgs_verdict")
            row.mode = pred.get("pgs_mode")
            row.cost = _float(pred.get("cost"))
            row.rounds = _int(pred.get("pgs_rounds"))
        else:
            try:
                data = _read_json(row.traj_path)
                if not isinstance(data, dict) or not any(k in data for k in TRAJ_KEYS):
                    raise InspectError(f"{row.traj_path} is not a trajectory")
            except InspectError as e:
                row.missing.append(f"missing: a readable trajectory ({e})")
            else:
                traj = trajectory_from_dict(data, path=row.traj_path, instance_id=iid)
                _fill_row(row, traj, data)
                if on_trajectory is not None:
                    on_trajectory(traj)
        if summary is not None:
            row.resolved, row.eval_error = _graded(iid, summary)
        batch.rows.append(row)
    return batch


def _fill_row(row: BatchRow, traj: Trajectory, data: dict[str, Any]) -> None:
    row.exit_status = traj.exit_status
    row.steps = len(traj.steps)
    row.duration = traj.duration
    if traj.writer == "pgs":  # the fields `pgs report` counts, computed the same way
        fields = prediction_fields(data)
        row.mode, row.verdict = fields["pgs_mode"], fields["pgs_verdict"]
        row.rounds, row.cost = fields["pgs_rounds"], fields["cost"]
    else:
        row.cost = traj.total_cost
        if traj.pgs is not None:
            row.verdict, row.mode = traj.pgs.verdict, traj.pgs.mode
    if traj.exit_status is None:
        row.missing.append("missing: info.exit_status")
