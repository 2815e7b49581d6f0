"""The inspector's records as static HTML: one self-contained file per page.

Every page inlines its stylesheet and script (``templates/inspect.css``, ``inspect.js``) and
loads nothing: no CDN, no web font, no image; a Content-Security-Policy meta tag makes the
browser refuse any request the page would make. Pages are rendered with jinja2 from
``templates/*.html.j2`` (autoescaped).

Size: a text longer than its limit (:data:`OBSERVATION_LIMIT` for a command's output) shows
its head and tail; the whole text goes to a sidecar file ``<page>.files/<name>.txt`` beside the
page, linked from the cut (relative links, so they work from ``file://`` and through
``--serve``). Diffs longer than :data:`DIFF_LINES` lines are cut the same way. So a page stays a
few MB however long the run was.

A batch is a folder: ``index.html`` (the table) and one ``<instance>.html`` per instance. A
``pgs select`` output is one page (``selection.html.j2``): each instance's candidates side by
side, as a run's ``--attempts`` are.
"""

from __future__ import annotations

import functools
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import markupsafe

from agent.core.trajectory_file import write_atomic
from agent.inspect.batch_view import load_batch
from agent.inspect.model import BatchView, Diff, FileDiff, SelectionView, TrajectoryView

TEMPLATES = Path(__file__).with_name("templates")
#: Characters of a command's output shown on the page (head and tail); the rest in a sidecar.
OBSERVATION_LIMIT = 4_000
#: Characters of a thought or an action shown.
TEXT_LIMIT = 2_000
ISSUE_LIMIT = 20_000
FEEDBACK_LIMIT = 8_000
SOURCE_LIMIT = 12_000
#: Lines of one diff shown.
DIFF_LINES = 1_500
#: Outputs longer than this many lines start folded.
FOLD_LINES = 25
#: The part of a cut text shown from its end.
TAIL_SHARE = 4


@dataclass
class Clip:
    """A text as a page shows it: its head, and its tail when the middle is cut."""

    head: str
    tail: str = ""
    omitted: int = 0
    total: int = 0
    lines: int = 1
    #: The whole text, relative to the page (None: not written).
    link: str | None = None
    fold: bool = False


@dataclass
class DiffView:
    files: list[FileDiff] = field(default_factory=list)
    empty: bool = False
    #: Diff lines not shown.
    cut: int = 0
    link: str | None = None
    #: The diff as text, when it could not be parsed.
    raw: Clip | None = None
    error: str | None = None


@dataclass
class Bar:
    x: float
    y: float
    w: float
    h: float
    title: str


@dataclass
class Tick:
    x: float
    label: str


@dataclass
class Chart:
    label: str
    caption: str
    cls: str
    bars: list[Bar]
    ticks: list[Tick]
    top: str
    width: int = 800
    height: int = 110


@dataclass
class Written:
    """A page on disk: its size, and the full texts written beside it."""

    path: Path
    size: int
    sidecars: int = 0
    sidecar_bytes: int = 0
    pages: list[Written] = field(default_factory=list)


def _cut_at_line(text: str, end: int) -> int:
    """``end``, moved back to just after a newline when one is near (a cut between lines)."""
    newline = text.rfind("\n", max(0, end - 200), end)
    return newline + 1 if newline > 0 else end


class Page:
    """One page being rendered, and the full texts its cuts link to."""

    # The limits (characters; lines for diffs), per page: a caller may change them.
    observation_limit = OBSERVATION_LIMIT
    text_limit = TEXT_LIMIT
    issue_limit = ISSUE_LIMIT
    feedback_limit = FEEDBACK_LIMIT
    source_limit = SOURCE_LIMIT
    diff_lines = DIFF_LINES

    def __init__(self, html_path: Path, *, full_texts: bool = True) -> None:
        self.html_path = html_path
        self.files_dir = html_path.with_name(f"{html_path.stem}.files")
        self.full_texts = full_texts
        self.sidecars: dict[str, str] = {}

    def _sidecar(self, name: str, text: str) -> str | None:
        if not self.full_texts:
            return None
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".txt"
        self.sidecars[safe] = text
        return f"{quote(self.files_dir.name)}/{quote(safe)}"

    def clip(self, text: str | None, name: str, limit: int | None = None) -> Clip:
        text = text or ""
        limit = limit or self.text_limit
        lines = text.count("\n") + 1
        if len(text) <= limit:
            return Clip(head=text, total=len(text), lines=lines, fold=lines > FOLD_LINES)
        tail_len = limit // TAIL_SHARE
        head = text[: _cut_at_line(text, limit - tail_len)]
        tail_start = len(text) - tail_len
        newline = text.find("\n", tail_start, tail_start + 200)
        tail = text[newline + 1 if newline >= 0 else tail_start :]
        return Clip(
            head=head,
            tail=tail,
            omitted=len(text) - len(head) - len(tail),
            total=len(text),
            lines=lines,
            link=self._sidecar(name, text),
            fold=True,
        )

    def diff(self, diff: Diff | None, name: str) -> DiffView:
        if diff is None or diff.empty:
            return DiffView(empty=True)
        if diff.error or not diff.files:
            return DiffView(
                raw=self.clip(diff.text, f"{name}.patch", self.source_limit), error=diff.error
            )
        view = DiffView()
        budget = self.diff_lines
        total = 0
        for file in diff.files:
            hunks = []
            for hunk in file.hunks:
                total += len(hunk.lines)
                if budget <= 0:
                    continue
                hunks.append(replace(hunk, lines=hunk.lines[:budget]))
                budget -= len(hunk.lines)
            if hunks or budget > 0:
                view.files.append(replace(file, hunks=hunks))
        view.cut = max(0, total - self.diff_lines)
        if view.cut:
            view.link = self._sidecar(f"{name}.patch", diff.text)
        return view

    def write(self, html: str) -> Written:
        """The page and its full texts; full texts of an earlier rendering are replaced."""
        write_atomic(self.html_path, html)
        if self.files_dir.is_dir():  # ours: named after the page
            shutil.rmtree(self.files_dir)
        size = 0
        if self.sidecars:
            self.files_dir.mkdir(parents=True)
            for name, text in self.sidecars.items():
                # With a BOM (utf-8-sig): browsers open a .txt from file:// in their legacy
                # encoding otherwise.
                path = self.files_dir / name
                with path.open("w", encoding="utf-8-sig", errors="replace", newline="") as f:
                    f.write(text)
                size += path.stat().st_size
        return Written(
            path=self.html_path,
            size=self.html_path.stat().st_size,
            sidecars=len(self.sidecars),
            sidecar_bytes=size,
        )


# -- numbers and charts ---------------------------------------------------------------------------


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def _chars(n: int) -> str:
    if n < 10_000:
        return f"{n:,} characters"
    if n < 1_000_000:
        return f"{n / 1000:.0f} K characters"
    return f"{n / 1_000_000:.1f} M characters"


def status_class(status: str | None) -> str:
    """The badge colour of an exit status."""
    if not status:
        return "unknown"
    if status == "submitted":
        return "submitted"
    if status.startswith("submitted"):
        return "limit"
    return "unknown" if status == "interrupted" else "exit"


def _ticks(n: int, width: float, label: Callable[[int], str]) -> list[Tick]:
    if n <= 0:
        return []
    picks = sorted({0, n // 2, n - 1})
    step = width / n
    return [Tick(x=round(min(i * step, width - 30), 1), label=label(i)) for i in picks]


def bar_chart(
    values: list[float],
    titles: list[str],
    *,
    label: str,
    caption: str,
    cls: str,
    top: str,
    tick: Callable[[int], str],
) -> Chart:
    width, height = 800, 110
    area = height - 12 - 14  # room for the axis labels and the maximum
    peak = max(values, default=0) or 1
    w = width / max(1, len(values))
    gap = 1 if w > 3 else 0
    bars = [
        Bar(
            x=round(i * w, 1),
            y=round(height - 12 - area * v / peak, 1),
            w=round(max(0.5, w - gap), 1),
            h=round(area * v / peak, 1),
            title=title,
        )
        for i, (v, title) in enumerate(zip(values, titles, strict=True))
    ]
    return Chart(label, caption, cls, bars, _ticks(len(values), width, tick), top, width, height)


def step_charts(traj: TrajectoryView) -> list[Chart]:
    """Tokens per step (recorded, or estimated from the text) and cost per step if recorded."""
    steps = traj.steps
    if not steps:
        return []
    recorded = all(s.usage is not None for s in steps)
    if recorded:
        tokens = [float((s.usage.tokens_sent or 0) + (s.usage.tokens_received or 0)) for s in steps]  # type: ignore[union-attr]
        caption = "tokens per step (sent + received, as recorded)"
    else:
        tokens = [float(s.estimated_tokens) for s in steps]
        caption = (
            "tokens each step added to the conversation, estimated (its reply and output, about "
            "4 characters a token): this file records tokens for the whole run only"
        )
    charts = [
        bar_chart(
            tokens,
            [f"step {s.index}: {v:,.0f} tokens" for s, v in zip(steps, tokens, strict=True)],
            label="tokens per step",
            caption=caption,
            cls="tok" if recorded else "tok est",
            top=f"{max(tokens):,.0f} tokens",
            tick=lambda i: f"step {i + 1}",
        )
    ]
    costs = [s.usage.cost if s.usage else None for s in steps]
    if all(c is not None for c in costs):
        values = [float(c or 0) for c in costs]
        charts.append(
            bar_chart(
                values,
                [f"step {s.index}: {_money(c)}" for s, c in zip(steps, values, strict=True)],
                label="cost per step",
                caption="cost per step (as recorded)",
                cls="cost",
                top=_money(max(values)),
                tick=lambda i: f"step {i + 1}",
            )
        )
    else:
        total = traj.total_cost
        charts[0].caption += (
            f"; cost is recorded for the whole run only ({_money(total)})"
            if total is not None
            else "; no cost recorded"
        )
    return charts


def histogram(values: list[float], *, label: str, unit: Callable[[float], str]) -> Chart | None:
    if not values:
        return None
    lo, hi = min(values), max(values)
    bins = min(10, len(set(values))) or 1
    span = (hi - lo) / bins if hi > lo else 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / span)) if hi > lo else 0] += 1
    edges = [lo + i * span for i in range(bins + 1)]
    titles = [
        f"{unit(edges[i])} to {unit(edges[i + 1])}: {n} instance{'' if n == 1 else 's'}"
        for i, n in enumerate(counts)
    ]
    return bar_chart(
        [float(c) for c in counts],
        titles,
        label=f"histogram of {label}",
        caption=f"{label}: instances per bin, {unit(lo)} to {unit(hi)}",
        cls="hist",
        top=f"{max(counts)} instance{'' if max(counts) == 1 else 's'}",
        tick=lambda i: unit(edges[i]),
    )


# -- pages ----------------------------------------------------------------------------------------


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(num=_num, money=_money, secs=_secs, chars=_chars)
    env.globals.update(
        status_class=status_class,
        # Our own files, inlined as they are (they hold no "</style" or "</script").
        css=markupsafe.Markup((TEMPLATES / "inspect.css").read_text(encoding="utf-8")),
        js=markupsafe.Markup((TEMPLATES / "inspect.js").read_text(encoding="utf-8")),
    )
    return env


def render_trajectory(traj: TrajectoryView, page: Page, *, back: str | None = None) -> str:
    template = _env().get_template("trajectory.html.j2")
    return template.render(t=traj, page=page, back=back, charts=step_charts(traj))


def write_trajectory(
    traj: TrajectoryView, out: Path, *, back: str | None = None, full_texts: bool = True
) -> Written:
    page = Page(Path(out), full_texts=full_texts)
    return page.write(render_trajectory(traj, page, back=back))


def page_name(instance_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", instance_id) + ".html"


def batch_totals(batch: BatchView) -> dict[str, Any]:
    rows = batch.rows
    costs = [r.cost for r in rows if r.cost is not None]
    steps = [r.steps for r in rows if r.steps is not None]
    return {
        "cost": sum(costs),
        "mean_cost": sum(costs) / len(costs) if costs else 0.0,
        "steps": sum(steps),
        "mean_steps": sum(steps) / len(steps) if steps else 0.0,
        "time": sum(r.duration for r in rows if r.duration is not None),
        "statuses": Counter(r.exit_status or "unknown" for r in rows).most_common(),
        "verdicts": Counter(r.verdict for r in rows if r.verdict).most_common(),
    }


def render_batch(batch: BatchView, links: dict[str, str]) -> str:
    charts = [
        histogram([r.cost for r in batch.rows if r.cost is not None], label="cost", unit=_money),
        histogram(
            [float(r.steps) for r in batch.rows if r.steps is not None],
            label="steps",
            unit=lambda v: f"{v:.0f}",
        ),
    ]
    return (
        _env()
        .get_template("batch.html.j2")
        .render(
            b=batch,
            links=links,
            totals=batch_totals(batch),
            charts=[c for c in charts if c is not None],
        )
    )


def write_batch(
    folder: Path,
    out_dir: Path,
    *,
    eval_report: Path | None = None,
    full_texts: bool = True,
    on_page: Callable[[Written], None] | None = None,
) -> tuple[Written, BatchView]:
    """``out_dir/index.html`` and one page per instance beside it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    links: dict[str, str] = {}
    pages: list[Written] = []

    def one(traj: TrajectoryView) -> None:
        name = page_name(traj.instance_id)
        written = write_trajectory(traj, out_dir / name, back="index.html", full_texts=full_texts)
        links[traj.instance_id] = quote(name)
        pages.append(written)
        if on_page is not None:
            on_page(written)

    batch = load_batch(folder, eval_report=eval_report, on_trajectory=one)
    index = Page(out_dir / "index.html", full_texts=full_texts)
    written = index.write(render_batch(batch, links))
    written.pages = pages
    return written, batch


def render_selection(view: SelectionView, page: Page) -> str:
    return _env().get_template("selection.html.j2").render(v=view, page=page)


def write_selection(view: SelectionView, out: Path, *, full_texts: bool = True) -> Written:
    """One page of a ``pgs select`` output (the instances of ``view``)."""
    page = Page(Path(out), full_texts=full_texts)
    return page.write(render_selection(view, page))
