"""What the gate prints: a terminal table (most severe first), Markdown, JSON and JUnit XML.

Every format is built from :func:`record`, one plain dict per variant, so they cannot
disagree.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from convbench.compare import decision, gate
from convbench.compare.gate import Comparison, VariantResult
from convbench.textable import format_table
from convbench.textsafe import markdown, terminal, xml_text

FORMATS = ("text", "md", "json")


def _num(x: float) -> float | None:
    """JSON has no NaN: missing figures are null."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _median(values: Any) -> float | None:
    import numpy as np

    return _num(float(np.median(values))) if values is not None and len(values) else None


def record(r: VariantResult, fail_on: str) -> dict[str, Any]:
    """One variant as a plain dict (the JSON output; the other formats read it)."""
    s = r.sample
    out: dict[str, Any] = {
        "case_id": s.case_id, "layer": s.layer, "variant": s.variant, "threads": s.threads,
        "vector_width": s.vector_width, "state": r.state, "verdict": verdict_text(r),
        "fails": r.fails(fail_on), "kernel_code": _code_text(r),
        "vector_code": None if r.vector_code_changed is None else {
            "changed": r.vector_code_changed, "baseline": r.baseline.vector_code,
            "current": r.current.vector_code},
        "baseline": None if r.baseline is None else {
            "status": r.baseline.status, "reason": r.baseline.reason,
            "median_s": _median(r.baseline.values)},
        "current": None if r.current is None else {
            "status": r.current.status, "reason": r.current.reason,
            "median_s": _median(r.current.values)},
        "time": None, "confirmation": None, "instructions": None}
    if r.time is not None:
        out["time"] = _time_dict(r.time)
    if r.confirmation is not None:
        out["confirmation"] = {"confirmed": r.confirmation.confirmed,
                               **_time_dict(r.confirmation.decision)}
    if r.instructions is not None:
        i = r.instructions
        out["instructions"] = {"verdict": i.verdict, "ratio": i.ratio, "baseline": i.baseline,
                               "current": i.current, "column": i.column,
                               "threshold": i.threshold}
    return out


def _code_text(r: VariantResult) -> str:
    """Whether the kernel's code changed between the runs: changed, same or unknown, and
    whether its compiled vector code did ("same, vector code changed": the source is the
    same, what numba made of it is not; the notes give both profiles)."""
    text = {True: "changed", False: "same", None: "unknown"}[r.code_changed]
    return f"{text}, vector code changed" if r.vector_code_changed else text


def _time_dict(t: decision.TimeDecision) -> dict[str, Any]:
    return {"verdict": t.verdict, "ratio": _num(t.ratio), "ci_low": _num(t.ci_low),
            "ci_high": _num(t.ci_high), "p_value": _num(t.p_value),
            "n_baseline": t.n_baseline, "n_current": t.n_current, "basis": t.basis,
            "threshold": t.threshold, "note": t.note}


def verdict_text(r: VariantResult) -> str:
    """The one-phrase verdict a person reads, confirmation and instructions included."""
    if r.state == gate.BROKEN:
        return f"broken ({r.current.status}: {r.current.reason})".replace(": )", ")")
    if r.state == gate.NOT_MEASURED:
        where, side = (("baseline", r.baseline) if not r.baseline.ok
                       else ("current run", r.current))
        return f"not measured ({side.status} in the {where})"
    if r.time is None:
        return r.state
    text = r.time.verdict
    if r.confirmation is not None:
        text = ("slower (confirmed)" if r.confirmation.confirmed
                else f"no significant change (slower dropped on re-measure, "
                     f"x{r.confirmation.decision.ratio:.3f})")
    if r.instructions is not None and r.instructions.verdict != decision.NO_CHANGE:
        text += f"; instructions {r.instructions.verdict}"
    return text


def _ratio_text(t: decision.TimeDecision | None) -> str:
    if t is None or math.isnan(t.ratio):
        return ""
    ci = "" if math.isnan(t.ci_low) else f" [{t.ci_low:.3f}, {t.ci_high:.3f}]"
    return f"{t.ratio:.3f}{ci}"


def _rows(comparison: Comparison, fail_on: str) -> list[tuple[str, ...]]:
    rows = []
    for r in comparison.sorted(fail_on):
        t = r.time
        rows.append((
            ("FAIL " if r.fails(fail_on) else "") + verdict_text(r),
            r.sample.case_id,
            "" if t is None or math.isnan(t.ratio) else f"{t.change:+.1%}",
            _ratio_text(t),
            "" if t is None or math.isnan(t.p_value) else f"{t.p_value:.2g}",
            "" if t is None else f"{t.n_baseline}/{t.n_current}",
            "" if t is None else t.basis + (f" ({t.note})" if t.note else ""),
            "" if r.instructions is None else f"{r.instructions.ratio - 1:+.2%}",
            _code_text(r)))
    return rows


HEADER = ("verdict", "variant", "change", "ratio [CI]", "p", "n", "basis", "instr", "code")


def summary(comparison: Comparison, fail_on: str) -> str:
    n_fail = len(comparison.regressions(fail_on))
    counts = ", ".join(f"{v} {k}" for k, v in sorted(comparison.counts().items()))
    head = (f"{n_fail} regression(s)" if n_fail else "no regression")
    return f"{head} in {len(comparison.results)} variants ({counts})"


def settings_line(comparison: Comparison, fail_on: str) -> str:
    th = comparison.thresholds
    instr = (f"instructions from {comparison.instruction_column} (threshold "
             f"{th.instructions:.1%})" if comparison.instruction_column else "no instructions")
    return (f"baseline {comparison.baseline} vs current {comparison.current}; alpha "
            f"{comparison.alpha:g}, CI {1 - comparison.alpha:.0%}, time threshold "
            f"{th.time:.1%}; {instr}; fail on {fail_on}")


def format_text(comparison: Comparison, fail_on: str) -> str:
    """The terminal table; paths, warnings and notes quote user strings, so every line
    has its control characters escaped (the table's cells are escaped by format_table)."""
    lines = [terminal(settings_line(comparison, fail_on)),
             format_table([HEADER, *_rows(comparison, fail_on)], right=(2, 4, 5, 7))]
    lines += [terminal(f"warning: {w}") for w in comparison.warnings]
    lines += [terminal(f"note: {n}") for n in comparison.notes]
    lines.append(summary(comparison, fail_on))
    return "\n".join(lines)


def _md_table(rows: list[tuple[str, ...]]) -> list[str]:
    def cells(row: tuple[str, ...]) -> str:
        return "| " + " | ".join(markdown(str(c)) for c in row) + " |"

    return [cells(HEADER), "|" + "---|" * len(HEADER), *(cells(r) for r in rows)]


def format_markdown(comparison: Comparison, fail_on: str) -> str:
    """A pull-request comment: the summary, the changed variants, all variants folded."""
    rows = _rows(comparison, fail_on)
    changed = [r for r in rows if not r[0].startswith(decision.NO_CHANGE)]
    lines = [f"### convbench compare: {summary(comparison, fail_on)}", "",
             markdown(settings_line(comparison, fail_on)), ""]
    if changed:
        lines += [*_md_table(changed), ""]
    lines += [f"> warning: {markdown(w)}" for w in comparison.warnings]
    lines += [f"> note: {markdown(n)}" for n in comparison.notes]
    lines += ["", f"<details><summary>all {len(rows)} variants</summary>", "",
              *_md_table(rows), "", "</details>"]
    return "\n".join(lines)


def format_json(comparison: Comparison, fail_on: str) -> str:
    th = comparison.thresholds
    data = {
        "baseline": str(comparison.baseline), "current": str(comparison.current),
        "kind": comparison.kind, "alpha": comparison.alpha, "fail_on": fail_on,
        "thresholds": {"time": th.time, "instructions": th.instructions,
                       "suites": dict(th.suites), "layers": dict(th.layers),
                       "variants": dict(th.variants)},
        "instruction_column": comparison.instruction_column,
        "confirmed_run": None if comparison.confirmed_run is None
        else str(comparison.confirmed_run),
        "regressions": [r.sample.case_id for r in comparison.regressions(fail_on)],
        "warnings": comparison.warnings, "notes": comparison.notes,
        "variants": [record(r, fail_on) for r in comparison.sorted(fail_on)]}
    return json.dumps(data, indent=2)


def write_junit(comparison: Comparison, fail_on: str, path: str | Path) -> None:
    """JUnit XML: one testcase per variant, a failure for each regression, one-sided and
    unmeasured variants skipped."""
    results = comparison.sorted(fail_on)
    failing = [r.fails(fail_on) for r in results]
    skipping = [r.time is None and not bad for r, bad in zip(results, failing, strict=True)]
    suite = ElementTree.Element("testsuite", name="convbench compare",
                                tests=str(len(results)), failures=str(sum(failing)),
                                errors="0", skipped=str(sum(skipping)))
    for r, bad, skip in zip(results, failing, skipping, strict=True):
        # layer names and reasons may hold characters XML forbids: escaped, so the file
        # stays one a CI server can parse
        case = ElementTree.SubElement(suite, "testcase",
                                      classname=xml_text(f"convbench.{r.sample.layer}"),
                                      name=xml_text(r.sample.case_id))
        verdict = xml_text(verdict_text(r))
        text = f"{verdict}; ratio {_ratio_text(r.time) or 'n/a'}"
        if bad:
            ElementTree.SubElement(case, "failure", message=verdict,
                                   type="regression").text = text
        elif skip:
            ElementTree.SubElement(case, "skipped", message=verdict)
        ElementTree.SubElement(case, "system-out").text = text
    ElementTree.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
