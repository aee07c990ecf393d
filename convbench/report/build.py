"""One report from one or several results directories, in HTML, Markdown or CSV."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from convbench.errors import ConvbenchError
from convbench.report import aggregate
from convbench.report.tables import PER_RUN, environment_items

FORMATS = ("html", "md", "csv")


@dataclass
class Loaded:
    names: list[str]
    tables: dict[str, pd.DataFrame]
    environments: dict[str, dict]


def load_runs(paths: list[Path]) -> Loaded:
    """Load every directory (ResultsError says what is wrong); names are the directory
    names, made unique with a counter where two coincide."""
    from convbench.results.load import load_results

    names, tables, envs = [], {}, {}
    for path in paths:
        results = load_results(path)
        for label, table in aggregate.by_cache_mode(results.name, results.table).items():
            name, k = label, 2
            while name in tables:
                name, k = f"{label} ({k})", k + 1
            names.append(name)
            envs[name] = results.environment
            tables[name] = table
    return Loaded(names, tables, envs)


def default_output(paths: list[Path]) -> Path:
    return Path("reports") / "_vs_".join(Path(p).resolve().name for p in paths)


def build_report(paths: list[Path], output: Path | None = None, fmt: str = "html") -> Path:
    """Write the report into ``output`` (default reports/<run names>/) and return the main
    file: index.html, report.md, or the directory of CSV files."""
    if fmt not in FORMATS:
        raise ConvbenchError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if not paths:
        raise ConvbenchError("no results directory given")
    runs = load_runs([Path(p) for p in paths])
    out = Path(output) if output else default_output(paths)
    out.mkdir(parents=True, exist_ok=True)
    sections = {name: {s.key: s.build(runs.tables[name]) for s in PER_RUN}
                for name in runs.names}
    joined = aggregate.join_runs(runs.tables) if len(runs.names) > 1 else None
    if fmt == "csv":
        return _write_csv(runs, sections, joined, out)
    from convbench.report.figures import all_figures

    figures = all_figures(runs.tables, runs.environments, out)
    if fmt == "md":
        return _write_markdown(runs, sections, joined, figures, out)
    return _write_html(runs, sections, joined, figures, out)


def _title(runs: Loaded) -> str:
    return "convbench report: " + " vs ".join(runs.names)


def _write_csv(runs: Loaded, sections, joined, out: Path) -> Path:
    from convbench.report.text import write_csv

    for i, name in enumerate(runs.names):
        for key, frame in sections[name].items():
            write_csv(frame, out / f"run{i + 1}_{key}.csv")
    if joined is not None:
        write_csv(joined, out / "runs_joined.csv")
    return out


def _headline(runs: Loaded) -> pd.DataFrame:
    from convbench.report.headline import headline_frame, headlines

    return headline_frame([h for name in runs.names
                           for h in headlines(name, runs.tables[name])])


def _environments(runs: Loaded) -> dict[str, dict[str, str]]:
    return {name: dict(environment_items(runs.environments[name])) for name in runs.names}


# The reading order: the answer, then how each layer gets there, then the evidence, then
# the details; the environment comes last (it matters when numbers disagree, not before).
LEAD, DETAIL = ("versus", "plan", "network", "best"), ("sensitivity", "scaling",
                                                       "share_flags", "failures",
                                                       "counters", "counters_missing")


def _section(key: str):
    return next(s for s in PER_RUN if s.key == key)


def _write_markdown(runs: Loaded, sections, joined, figures, out: Path) -> Path:
    from convbench.report.headline import ABOUT
    from convbench.report.text import markdown_table
    from convbench.textsafe import markdown

    lines = [f"# {markdown(_title(runs))}", "", "## The answer", "", ABOUT, "",
             markdown_table(_headline(runs))]
    for key in LEAD:
        section = _section(key)
        lines += [f"## {section.title}", "", section.about, ""]
        for name in runs.names:
            lines += [f"### {markdown(name)}", "", markdown_table(sections[name][key])]
    if joined is not None:
        lines += ["## Runs side by side", "", markdown_table(joined)]
    lines += ["## Figures", ""]
    lines += [f"![{markdown(f.title)}]({f.path.name})\n\n{markdown(f.caption)}\n"
              for f in figures]
    for key in DETAIL:
        section = _section(key)
        lines += [f"## {section.title}", "", section.about, ""]
        for name in runs.names:
            lines += [f"### {markdown(name)}", "", markdown_table(sections[name][key])]
    envs = _environments(runs)
    keys = list(dict.fromkeys(k for env in envs.values() for k in env))
    lines += ["## Environment", "", markdown_table(pd.DataFrame(
        {"key": keys, **{name: [env.get(k, "") for k in keys] for name, env in envs.items()}}))]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _write_html(runs: Loaded, sections, joined, figures, out: Path) -> Path:
    from convbench.report import html as h
    from convbench.report.headline import ABOUT

    def per_run(key: str) -> str:
        section = _section(key)
        return h.paragraph(section.about) + h.side_by_side(
            [h.heading(name) + h.table_html(sections[name][key], f"{key}-{i}")
             for i, name in enumerate(runs.names)])

    parts = [("headline", "The answer", h.paragraph(ABOUT)
              + h.table_html(_headline(runs), "headline", css="wrap headline"))]
    parts += [(key, _section(key).title, per_run(key)) for key in LEAD]
    if joined is not None:
        parts.append(("side-by-side", "Runs side by side", h.paragraph(
            "Every ok case of every run joined on layer, variant, threads and vector width "
            "(a run with several cache modes shows each mode as a run of its own).")
            + h.table_html(joined, "joined")))
    parts.append(("figures", "Figures", "".join(h.figure_html(f) for f in figures)))
    parts += [(key, _section(key).title, per_run(key)) for key in DETAIL]
    parts.append(("environment", "Environment", h.folded(
        f"Host, libraries and machine limits of {len(runs.names)} run(s): click to show "
        "(keys whose values differ between runs are highlighted)",
        h.environment_html(_environments(runs)))))
    path = out / "index.html"
    path.write_text(h.page(_title(runs), parts))
    return path
