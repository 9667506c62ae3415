"""The PR comment: the service's PR report and the consistency findings, as one Markdown body.

A headline with the verdict and the counts (configs vs runs) and shard progress, then one section
per verdict in the order a reader acts on them. Long sections collapse. Untrusted text goes
through `cpci.github.markdown`. The body stays under GitHub's 65,536 characters by listing fewer
items per section, pointing at the full report for the rest. The first line is the hidden marker
the bot finds its comment by; it also records whether the PR was red, for `new-on-regression`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from cpci import urls
from cpci.github import markdown as md
from cpci.github.client import COMMENT_LIMIT
from cpci.github.consistency import ConsistencyResult, Finding
from cpci.github.drift import FunctionDrift, FunctionRef
from cpci.github.gate import FailOn, Gate, gate, gating_text
from cpci.schema import VERDICTS, ConfigVerdict, PullRequestReport, ShiftFinding
from cpci.schema.verdicts import info

MARKER = "<!-- cpci:pr-report"
_STATE = re.compile(r"^<!-- cpci:pr-report state=(\w+) -->")
#: Items per section, tried in turn until the body fits.
ITEM_CAPS = (50, 20, 8, 3, 0)
T = TypeVar("T")


@dataclass(frozen=True)
class CommentOptions:
    """`service_url` makes the report's relative links absolute; sections longer than
    `collapse_over` items are folded into <details>."""

    service_url: str | None = None
    fail_on: FailOn = "new-failures"
    collapse_over: int = 5
    limit: int = COMMENT_LIMIT


def marker_line(state: Gate) -> str:
    return f"{MARKER} state={state} -->"


def gate_recorded_in(body: str) -> str | None:
    """The gate recorded in one of our comments, None for a body without our marker."""
    match = _STATE.match(body)
    return match.group(1) if match else None


def render(
    report: PullRequestReport | None,
    consistency: ConsistencyResult | None,
    options: CommentOptions = CommentOptions(),
    *,
    repository: str = "",
    pull_request: int = 0,
) -> str:
    """The comment body, at most `options.limit` characters."""
    verdict = gate(report, consistency, options.fail_on)
    full = _full_report_url(report, options, repository, pull_request)
    for cap in ITEM_CAPS:
        body = _render(report, consistency, options, verdict, cap, full)
        if len(body) <= options.limit:
            return body
    tail = "\n\n… truncated" + (f": {md.link('full report', full)}" if full else "")
    return body[: options.limit - len(tail)] + tail


def _render(
    report: PullRequestReport | None,
    consistency: ConsistencyResult | None,
    options: CommentOptions,
    verdict: Gate,
    cap: int,
    full: str | None,
) -> str:
    parts = [marker_line(verdict), _headline(report, consistency, verdict)]
    if report is not None:
        parts += [storm_line(report), plan_mismatch_line(report), _scope(report)]
        parts += [
            _section(
                v.heading,
                getattr(report, v.field),
                options,
                cap,
                full,
                _LINES[v.name],
                open_=v.gates,
                total=report.total(v.field),
            )
            for v in VERDICTS
            if v.attention and v.name != "pending"
        ]
        parts += [
            _section(
                "🐢 Slower than base",
                report.duration_regressions,
                options,
                cap,
                full,
                _shift,
                total=report.total("duration_regressions"),
            ),
            _section(
                "📈 Numeric drift",
                report.metric_drift,
                options,
                cap,
                full,
                _shift,
                total=report.total("metric_drift"),
            ),
        ]
    if consistency is not None and consistency.error:
        parts.append(f"⚠️ File-consistency rules not checked: {md.code(consistency.error, 500)}")
    if consistency is not None:
        parts.append(
            _section(
                "🔗 File consistency",
                consistency.findings,
                options,
                cap,
                full,
                _finding,
                open_=True,
            )
        )
        parts.append(_drifts(consistency, cap, full))
    if full:
        parts.append(f"<sub>{md.link('Full report', full)}</sub>")
    return "\n\n".join(p for p in parts if p) + "\n"


def _headline(
    report: PullRequestReport | None, consistency: ConsistencyResult | None, verdict: Gate
) -> str:
    broken = sum(f.level != "note" for f in consistency.findings) if consistency else 0
    rules = f", {broken} file-consistency warning(s)" if broken else ""
    if report is None:
        return f"## ⏳ cpci: no results uploaded yet{rules}"
    if report.status == "pending":
        return f"## ⏳ cpci: waiting for shards ({report.shards.text}){rules}"
    icon = {"failure": "❌", "neutral": "⚠️", "success": "✅"}.get(verdict, "⏳")
    gating = gating_text(report)
    if gating:
        what = gating
    elif verdict == "failure" and not consistency_failed(consistency):
        what = "failures (none new)"
    elif verdict == "failure":
        what = "file-consistency rule broken"
    elif verdict == "success":
        what = "all passed"
    else:
        what = "no new failures"
    return f"## {icon} cpci: {what}{rules}"


def storm_line(report: PullRequestReport) -> str:
    """One line up front when shards failed en masse one way: the cause, named once, and what
    it means for the verdicts (an infra storm's configs are INFRA, not this PR's)."""
    if not report.storms:
        return ""
    first = report.storms[0]
    others = len(report.storms) - 1
    more = f" (+{others} more shard(s))" if others else ""
    if first.infra_rule:
        what = f"infra rule {md.code(first.infra_rule)}; counted as infra, not this PR's"
    else:
        what = "no infra rule matches, so the verdicts stand"
    return (
        f"🌩️ **Storm**: {md.text(first.text)} failed with one signature{more} — "
        f"{md.code(first.signature, 200)} ({what})"
    )


def plan_mismatch_line(report: PullRequestReport) -> str:
    """A warning up front when shards of a head run were planned from different inputs: the
    verdicts may miss configs that no shard ran (or count one twice)."""
    texts = [m.text for m in report.shards.plan_mismatches]
    if not texts:
        return ""
    return "⚠️ **Shard plans differ**: " + "; ".join(md.text(t, 300) for t in texts[:5])


def consistency_failed(consistency: ConsistencyResult | None) -> bool:
    return consistency is not None and consistency.failed


def _scope(report: PullRequestReport) -> str:
    counts = report.counts
    head = md.code(report.head_commit[:12])
    base = report.baseline.used_commit
    against = f" vs base {md.code(base[:12])}" if base else ""
    lines = [
        f"**{counts.configs:,} configs, {counts.results:,} runs** · "
        f"{report.shards.reported}/{report.shards.expected} shards reported · "
        f"head {head}{against}",
    ]
    if report.status == "pending":
        missing = ", ".join(str(i) for i in report.shards.missing[:20])
        lines.append(f"No verdict until every shard is in (missing: {missing or 'unknown'}).")
    elif not base:
        lines.append(f"Baseline: {md.text(report.baseline.note)}")
    return "  \n".join(lines)


def _section(
    title: str,
    items: Sequence[T],
    options: CommentOptions,
    cap: int,
    full: str | None,
    line: Callable[[T, str], str],
    *,
    open_: bool = False,
    total: int | None = None,
) -> str:
    """A section listing at most `cap` items; `total` counts those the report left out too
    (the service caps its sections, see `PullRequestReport.section_totals`)."""
    count = len(items) if total is None else max(total, len(items))
    if not count:
        return ""
    base = (options.service_url or "").rstrip("/")
    listed = items[:cap]
    shown = [f"- {line(item, base)}" for item in listed]
    if count > len(listed):
        more = f"- … and {count - len(listed):,} more"
        shown.append(more + (f" in the {md.link('full report', full)}" if full else ""))
    body = "\n".join(shown)
    heading = f"{title} ({count:,})"
    if count > options.collapse_over or not open_:
        return md.details(f"<b>{heading}</b>", body, open_=open_ and count <= 20)
    return f"### {heading}\n\n{body}"


def _history(item: ConfigVerdict | ShiftFinding, base: str) -> str:
    return md.link("history", _absolute(item.history_url, base))


def _absolute(url: str, base: str) -> str:
    """One of the service's own links as a comment on GitHub can use it: a path on the service
    made absolute with its URL; without one, nothing (`md.link` then shows the label alone: a
    bare path would lead to a page of GitHub's own)."""
    if not url.startswith("/"):
        return url
    return base + url if base else ""


def _name(item: ConfigVerdict) -> str:
    """The config, and its CI matrix leg where the PR ran on several."""
    return md.code(item.config) + (f" on {md.code(item.leg)}" if item.leg else "")


#: Reasons that only restate the section's title: not repeated on each line.
_PLAIN_REASONS = frozenset({"passes at base, fails at head", "fails at base too"})


def _failure(item: ConfigVerdict, base: str) -> str:
    message = f" — {md.code(item.message, 200)}" if item.message else ""
    ranks = f" (rank{'s' if len(item.ranks) > 1 else ''} {', '.join(map(str, item.ranks))})"
    where = ranks if item.ranks else ""
    why = (
        f" — {md.text(item.reason, 300)}"
        if item.evidence or item.reason.startswith("order")
        else ""
    )
    head = f"{_name(item)} {md.text(item.head_outcome)}{where}{why}{_decided(item)}"
    return f"{head}{message} · {_history(item, base)}"


def _decided(item: ConfigVerdict) -> str:
    """ " — decided after 2 attempts": the runner's chance test stopped its reruns there."""
    k = item.decided_after
    return f" — decided after {k} attempt{'s' if k != 1 else ''}" if k else ""


def _arrival(item: ConfigVerdict, base: str) -> str:
    """A config flaky on its arrival runs: the reason (k of n failed, why it gates), its error."""
    message = f" — {md.code(item.message, 200)}" if item.message else ""
    return f"{_name(item)} — {md.text(item.reason, 300)}{message} · {_history(item, base)}"


def _quarantined(item: ConfigVerdict, base: str) -> str:
    """A quarantined config: what it did at head, who quarantined it, why and since when."""
    held = item.quarantine
    would = info(item.would_be).label if item.would_be else md.text(item.head_outcome)
    who = (
        f" — quarantined by {md.text(held.by, 100)} since {held.since:%Y-%m-%d}: "
        f"{md.text(held.reason, 200)}"
        if held
        else ""
    )
    return f"{_name(item)} {would}{who} · {_history(item, base)}"


def _flaky(item: ConfigVerdict, base: str) -> str:
    evidence = md.text(item.reason, 200)
    known = item.flakiness
    if known is not None and known.flaky and known.runs:  # history-based evidence, not a rerun's
        evidence += f"; {known.failures} failure(s), {known.passes} pass(es) in {known.runs} run(s)"
    runs = known.failing_runs[:3] if known else []
    links = ", ".join(md.link(f"run {r.ci_run_id}", _absolute(r.url, base)) for r in runs)
    return (
        f"{_name(item)} — {evidence}"
        + (f" (failed in {links})" if links else "")
        + (f" · {_history(item, base)}")
    )


def _infra(item: ConfigVerdict, base: str) -> str:
    rule = f"{md.code(item.infra_rule)}: " if item.infra_rule else ""
    return f"{_name(item)} — {rule}{md.text(item.reason, 200)} · {_history(item, base)}"


def _plain(item: ConfigVerdict, base: str) -> str:
    return f"{_name(item)} · {_history(item, base)}"


def _reason(item: ConfigVerdict, base: str) -> str:
    return f"{_name(item)} — {md.text(item.reason, 200)} · {_history(item, base)}"


#: How each verdict's section lists a config.
_LINES: dict[str, Callable[[ConfigVerdict, str], str]] = {
    "new_failure": _failure,
    "flaky_on_arrival": _arrival,
    "broken_at_base": _failure,
    "flaky": _flaky,
    "infra": _infra,
    "fixed": _plain,
    "no_baseline": _reason,
    "quarantined": _quarantined,
}


def _shift(item: ShiftFinding, base: str) -> str:
    s = item.shift
    change = f"{s.relative:+.0%}" if s.relative is not None else f"{s.change:+.3g}"
    return (
        f"{md.code(item.config)} {md.code(s.name)} {s.value:.4g} vs median "
        f"{s.baseline_median:.4g} over {s.samples} base run(s) ({change}) · {_history(item, base)}"
    )


_LEVEL = {"fail": "**fail**", "warn": "warn", "note": "note (acknowledged)"}
#: The most characters of a drift's hunk shown, and of a patch (a longer one is not shown: a
#: cut patch would not apply).
HUNK_LIMIT = 3_000
PATCH_LIMIT = 12_000


def _finding(item: Finding, base: str) -> str:
    files = ", ".join(md.code(f) for f in item.files[:10])
    missing = ", ".join(md.code(p) for p in item.unchanged)
    what = f"changed {files} but not {missing}" if missing else f"changed {files}"
    if item.granularity == "function":
        what = "; ".join([what, *map(md.text, item.tally())])
    elif item.file_level_because:
        what += f" (checked file by file: {md.text(item.file_level_because)})"
    level = _LEVEL[item.level] if item.acknowledged or item.level != "note" else "note"
    return f"{level} {md.code(item.rule)}: {what} — {md.text(item.message, 500)}"


def _drifts(consistency: ConsistencyResult, cap: int, full: str | None) -> str:
    """A block per function to port, at most `cap`: the two functions, the PR's hunk, and the
    patch for the twin (collapsed) or why there is none."""
    pending = [(f, d) for f in consistency.findings for d in f.drifts if not d.acknowledged]
    blocks = [_drift(finding, drift) for finding, drift in pending[:cap]]
    if len(pending) > cap:
        more = f"… and {len(pending) - cap:,} more function(s) to port"
        blocks.append(more + (f" in the {md.link('full report', full)}" if full else ""))
    return "\n\n".join(blocks)


def _drift(finding: Finding, drift: FunctionDrift) -> str:
    done = "was removed" if drift.change == "removed" else "changed"
    twin = "changed otherwise" if drift.twin_changed else "did not"
    ack = md.code(f"cpci-ack: {finding.rule}:{drift.function.qualname}")
    lines = [
        f"{_LEVEL[drift.level]} {md.code(finding.rule)}: {_function(drift.function)} {done}; its "
        f"twin {_function(drift.twin)} {twin} ({drift.similarity:.0%} alike before this PR). "
        f"To acknowledge only this one: {ack}."
        + (f" {md.text(drift.note, 500)}" if drift.note else ""),
        md.fenced(drift.hunk.rstrip("\n"), "diff", limit=HUNK_LIMIT),
    ]
    path = f"<code>{html.escape(drift.twin.path)}</code>"
    if drift.patch is not None and len(drift.patch) <= PATCH_LIMIT:
        summary = f"Patch for {path}: the same change, applies at the head (<code>git apply</code>)"
        patch = md.fenced(drift.patch.rstrip("\n"), "diff", limit=PATCH_LIMIT)
        lines.append(md.details(summary, patch))
    elif drift.patch is not None:
        lines.append(
            f"The patch for {md.code(drift.twin.path)} is {drift.patch.count(chr(10)):,} lines, "
            "too long for this comment: `cpci consistency --patch-dir DIR` writes it."
        )
    else:
        lines.append(f"⚠️ {md.text(drift.patch_problem, 500)}")
    return "\n\n".join(lines)


def _function(ref: FunctionRef) -> str:
    where = f"{ref.path}#L{ref.start}-L{ref.end}"
    return f"{md.code(ref.qualname)} ({md.link(where, ref.url) if ref.url else md.code(where)})"


def _full_report_url(
    report: PullRequestReport | None, options: CommentOptions, repository: str, number: int
) -> str | None:
    if options.service_url is None:
        return None
    repo = report.repository if report else repository
    pr = report.pull_request if report else number
    if not repo or not pr:
        return None
    return options.service_url.rstrip("/") + urls.pull(repo, pr)
