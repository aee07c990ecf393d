"""One report from one or several results directories, in HTML, Markdown or CSV."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from convbench.errors import ConvbenchError
from convbench.identity import WARM
from convbench.report import aggregate
from convbench.report.network import NetworkRun
from convbench.report.tables import PER_RUN, environment_items

FORMATS = ("html", "md", "csv")


@dataclass
class Loaded:
    names: list[str]                     # the sweeps' tables, one per run and cache mode
    tables: dict[str, pd.DataFrame]
    environments: dict[str, dict]
    networks: dict[str, NetworkRun] = field(default_factory=dict)   # by directory label
    directory: dict[str, str] = field(default_factory=dict)   # table name -> its label


def _unique(label: str, taken: Container[str]) -> str:
    name, k = label, 2
    while name in taken:
        name, k = f"{label} ({k})", k + 1
    return name


def load_runs(paths: list[Path]) -> Loaded:
    """Load every directory (ResultsError says what is wrong); names are the directory
    names, made unique with a counter where two coincide.  A directory written by ``run
    --network`` alone holds network.parquet and no sweep: it gives a network run only.
    A farm directory (``run --scheduler``) gives one run per host, ``<farm>/<host>``."""
    from convbench.farm.layout import expand
    from convbench.report.network import read_network
    from convbench.results import documents
    from convbench.results.load import load_results, read_json
    from convbench.results.schema import ENVIRONMENT_JSON, MANIFEST

    loaded = Loaded([], {}, {})
    labels: set[str] = set()
    for name, path in expand(paths):   # a farm directory: its hosts, side by side
        label = _unique(name, labels)
        labels.add(label)
        network = read_network(path, label)
        if network is not None:
            loaded.networks[label] = network
            if not (path / MANIFEST).is_file():
                loaded.environments[label] = read_json(path / ENVIRONMENT_JSON,
                                                       documents.check_environment)
                continue
        results = load_results(path)
        for mode_label, table in aggregate.by_cache_mode(label, results.table).items():
            name = _unique(mode_label, loaded.tables)
            loaded.names.append(name)
            loaded.environments[name] = results.environment
            loaded.tables[name] = table
            loaded.directory[name] = label
    return loaded


def _network_only(runs: Loaded) -> list[str]:
    """Labels of the directories that hold a network pass and no sweep."""
    return [label for label in runs.networks if label not in runs.directory.values()]


def default_output(paths: list[Path]) -> Path:
    return Path("reports") / "_vs_".join(Path(p).resolve().name for p in paths)


def build_report(paths: list[Path], output: Path | None = None, fmt: str = "html",
                 history: Path | None = None) -> Path:
    """Write the report into ``output`` (default reports/<run names>/) and return the main
    file: index.html, report.md, or the directory of CSV files.  With ``history``, a trend
    section over the runs under that root (:mod:`convbench.report.trends`)."""
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
    trends = None
    if history is not None:
        from convbench.report import trends as trend_section

        trends = trend_section.build(history, out)
    if fmt == "csv":
        if trends is not None:
            from convbench.report.text import write_csv

            write_csv(trends.table(), out / "trend_steps.csv")
        return _write_csv(runs, sections, joined, out)
    from convbench.report.figures import all_figures, network_passes

    figures = all_figures(runs.tables, runs.environments, out) if runs.names else []
    figures += network_passes(runs.networks, out)
    if fmt == "md":
        return _write_markdown(runs, sections, joined, figures, out, trends)
    return _write_html(runs, sections, joined, figures, out, trends)


def _title(runs: Loaded) -> str:
    return "convbench report: " + " vs ".join([*runs.names, *_network_only(runs)])


def _network_tables(runs: Loaded) -> dict[str, dict[str, pd.DataFrame]]:
    """Per directory with a network pass: its passes and the plan's transforms."""
    from convbench.report import network

    return {label: {"passes": network.passes_table(run.frame),
                    "transforms": network.transforms_table(run.plan),
                    "in_pass": network.in_pass_table(run.ops)}
            for label, run in runs.networks.items()}


def _write_csv(runs: Loaded, sections, joined, out: Path) -> Path:
    from convbench.report.text import write_csv

    for i, name in enumerate(runs.names):
        for key, frame in sections[name].items():
            write_csv(frame, out / f"run{i + 1}_{key}.csv")
    for i, tables in enumerate(_network_tables(runs).values()):
        for key, frame in tables.items():
            write_csv(frame, out / f"network{i + 1}_{key}.csv")
    if joined is not None:
        write_csv(joined, out / "runs_joined.csv")
    return out


def _headline(runs: Loaded) -> pd.DataFrame:
    from convbench.report import headline

    items = []
    for name in runs.names:
        network = runs.networks.get(runs.directory[name])
        table = runs.tables[name]
        # by_cache_mode gave each table one mode
        cache = str(table["cache"].dropna().iloc[0]) if table["cache"].notna().any() \
            else WARM
        items += [headline.with_network_pass(h, network.frame, cache) if network else h
                  for h in headline.headlines(name, table)]
    for label in _network_only(runs):
        items += headline.network_headlines(runs.networks[label])
    return headline.headline_frame(items)


def _environments(runs: Loaded) -> dict[str, dict[str, str]]:
    return {name: dict(environment_items(runs.environments[name]))
            for name in [*runs.names, *_network_only(runs)]}


# The reading order: the answer, then how each layer gets there, then the evidence, then
# the details; the environment comes last (it matters when numbers disagree, not before).
LEAD, DETAIL = ("versus", "plan", "network", "best"), ("sensitivity", "scaling",
                                                       "share_flags", "not_vectorised",
                                                       "disturbed", "failures", "counters",
                                                       "counters_missing")


NETWORK_TITLE = "Network pass"
TRENDS_TITLE = "Trends"


def _section(key: str):
    return next(s for s in PER_RUN if s.key == key)


def _write_markdown(runs: Loaded, sections, joined, figures, out: Path, trends=None) -> Path:
    from convbench.report.headline import ABOUT
    from convbench.report.network import IN_PASS_ABOUT, PASSES_ABOUT, TRANSFORMS_ABOUT
    from convbench.report.text import markdown_table
    from convbench.textsafe import markdown

    lines = [f"# {markdown(_title(runs))}", "", "## The answer", "", ABOUT, "",
             markdown_table(_headline(runs))]
    if runs.networks:
        lines += [f"## {NETWORK_TITLE}", "", PASSES_ABOUT, ""]
        for label, tables in _network_tables(runs).items():
            lines += [f"### {markdown(label)}", "", markdown_table(tables["passes"]),
                      TRANSFORMS_ABOUT, "", markdown_table(tables["transforms"])]
            if len(tables["in_pass"]):
                lines += [IN_PASS_ABOUT, "", markdown_table(tables["in_pass"])]
    for key in LEAD if runs.names else ():
        section = _section(key)
        lines += [f"## {section.title}", "", section.about, ""]
        for name in runs.names:
            lines += [f"### {markdown(name)}", "", markdown_table(sections[name][key])]
    if joined is not None:
        lines += ["## Runs side by side", "", markdown_table(joined)]
    lines += ["## Figures", ""]
    lines += [f"![{markdown(f.title)}]({f.path.name})\n\n{markdown(f.caption)}\n"
              for f in figures]
    for key in DETAIL if runs.names else ():
        section = _section(key)
        lines += [f"## {section.title}", "", section.about, ""]
        for name in runs.names:
            lines += [f"### {markdown(name)}", "", markdown_table(sections[name][key])]
    if trends is not None:
        lines += [f"## {TRENDS_TITLE}", "", trends.about, "", markdown_table(trends.table())]
        if trends.figure is not None:
            lines += [f"![{trends.figure.title}]({trends.figure.path.name})", ""]
    envs = _environments(runs)
    keys = list(dict.fromkeys(k for env in envs.values() for k in env))
    lines += ["## Environment", "", markdown_table(pd.DataFrame(
        {"key": keys, **{name: [env.get(k, "") for k in keys] for name, env in envs.items()}}))]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _write_html(runs: Loaded, sections, joined, figures, out: Path, trends=None) -> Path:
    from convbench.report import html as h
    from convbench.report.figures import NETWORK_FIGURE, network_figure_stem
    from convbench.report.headline import ABOUT
    from convbench.report.network import IN_PASS_ABOUT, PASSES_ABOUT, TRANSFORMS_ABOUT

    def per_run(key: str) -> str:
        section = _section(key)
        return h.paragraph(section.about) + h.side_by_side(
            [h.heading(name) + h.table_html(sections[name][key], f"{key}-{i}")
             for i, name in enumerate(runs.names)])

    def network_html() -> str:
        blocks = []
        for i, (label, tables) in enumerate(_network_tables(runs).items()):
            shown = [f for f in figures if f.path.stem == network_figure_stem(i)]
            blocks.append(h.heading(label) + h.table_html(tables["passes"], f"network-pass-{i}",
                                                          css="sortable wrap")
                          + "".join(map(h.figure_html, shown)) + h.paragraph(TRANSFORMS_ABOUT)
                          + h.table_html(tables["transforms"], f"network-transforms-{i}",
                                         css="sortable wrap")
                          + (h.paragraph(IN_PASS_ABOUT)
                             + h.table_html(tables["in_pass"], f"network-in-pass-{i}")
                             if len(tables["in_pass"]) else ""))
        return h.paragraph(PASSES_ABOUT) + "".join(blocks)

    parts = [("headline", "The answer", h.paragraph(ABOUT)
              + h.table_html(_headline(runs), "headline", css="wrap headline"))]
    if runs.networks:
        parts.append(("network-pass", NETWORK_TITLE, network_html()))
        figures = [f for f in figures if not f.path.stem.startswith(NETWORK_FIGURE)]
    sweep = runs.names
    parts += [(key, _section(key).title, per_run(key)) for key in LEAD if sweep]
    if joined is not None:
        parts.append(("side-by-side", "Runs side by side", h.paragraph(
            "Every ok case of every run joined on layer, variant, threads and vector width "
            "(a run with several cache modes shows each mode as a run of its own).")
            + h.table_html(joined, "joined")))
    if figures:
        parts.append(("figures", "Figures", "".join(h.figure_html(f) for f in figures)))
    parts += [(key, _section(key).title, per_run(key)) for key in DETAIL if sweep]
    if trends is not None:
        parts.append(("trends", TRENDS_TITLE, h.paragraph(trends.about)
                      + h.table_html(trends.table(), "trend-steps")
                      + (h.figure_html(trends.figure) if trends.figure else "")))
    parts.append(("environment", "Environment", h.folded(
        f"Host, libraries and machine limits of {len(runs.names)} run(s): click to show "
        "(keys whose values differ between runs are highlighted)",
        h.environment_html(_environments(runs)))))
    path = out / "index.html"
    path.write_text(h.page(_title(runs), parts))
    return path
