"""Three agents through the embedded benchmark: report.json and report.html are agent-centric (one
row per agent, one column per task, breakdowns and charts per agent, pairwise comparisons), the
page reads at 600 px and shows its main table without JavaScript."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from itbench.catalog_files import load_catalog
from itbench.cli.run import print_result
from itbench.core.models.agent_submission import BuiltinAgent
from itbench.core.models.report import Report
from itbench.core.scoring.aggregate import build_report
from itbench.core.scoring.profile import DEFAULT_PROFILE
from itbench.execution.embedded import BenchmarkOptions, BenchmarkResult, run_benchmark

ROOT = Path(__file__).parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is missing: `apt-get install -y chromium` (.ci/run installs it)",
)
AGENTS = [BuiltinAgent.HEURISTIC_SRE, BuiltinAgent.RANDOM, BuiltinAgent.NULL]
NAMES = [a.value for a in AGENTS]
SCENARIOS = [
    "cart-flagd-failure",  # diagnosis and mitigation
    "checkout-nonexistent-image",  # diagnosis and mitigation
    "product-catalog-network-delay",  # an injector-side fault: diagnosis only
    "no-fault-control",  # the false-alarm task only
]
TASKS = ["sre.diagnosis", "sre.mitigation", "sre.false-alarm"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> BenchmarkResult:
    catalog, _problems = load_catalog(ROOT / "scenarios")
    options = BenchmarkOptions(
        run="three-agents",
        agents=AGENTS,
        scenarios=[catalog.get(n) for n in SCENARIOS],
        trials=1,
        seed=42,
        workers=2,
    )
    out = tmp_path_factory.mktemp("runs")
    return run_benchmark(options, out, created_at=datetime(2026, 1, 1, tzinfo=UTC))


@pytest.fixture(scope="module")
def report(run: BenchmarkResult) -> Report:
    return Report.model_validate_json((run.root / "report.json").read_text())


def test_report_json_has_one_row_per_agent_and_one_column_per_task(report: Report) -> None:
    assert [a.agent for a in report.agents] == NAMES
    assert [c.key for c in report.columns] == TASKS
    assert report.tasks == [] and not report.pooled, "agents are not pooled"
    for result in report.agents:
        diagnosis = result.task("sre.diagnosis")
        mitigation = result.task("sre.mitigation")
        false_alarm = result.task("sre.false-alarm")
        assert diagnosis is not None and mitigation is not None and false_alarm is not None
        assert (diagnosis.trials, diagnosis.scenarios) == (3, 3), "the control is apart"
        assert (mitigation.trials, mitigation.scenarios) == (2, 2), "no mitigation task: delay"
        assert false_alarm.trials == 1
        assert diagnosis.pass_at_k[0].estimate.stderr is not None, "standard errors"
        assert diagnosis.lower_bound.mean is not None
        assert result.collateral.trials == 4
        assert {s.key for s in result.scores} == {"sre.fl_ntam", "sre.fpc_ntam"}
        assert {t.key for t in result.timings} == {"sre.mttd", "sre.mttr"}


def test_every_breakdown_is_given_per_agent(report: Report) -> None:
    for result in report.agents:
        dimensions = {b.dimension for b in result.breakdowns}
        assert dimensions == {"domain", "class", "complexity", "traces"}, result.agent
        no_fault = result.breakdown("class", "NoFault")
        assert no_fault is not None and [t.key for t in no_fault.tasks] == ["sre.false-alarm"]


def test_agents_are_compared_pairwise_on_the_same_scenarios(report: Report) -> None:
    pairs = {(c.a, c.b) for c in report.comparisons if c.task == "sre.diagnosis"}
    assert pairs == {
        ("heuristic-sre", "random"),
        ("heuristic-sre", "null"),
        ("random", "null"),
    }
    heuristic_null = next(
        c
        for c in report.comparisons
        if (c.a, c.b, c.task) == ("heuristic-sre", "null", "sre.diagnosis")
    )
    assert heuristic_null.scenarios == 3 and heuristic_null.method == "paired-t"
    assert heuristic_null.difference is not None and heuristic_null.difference > 0
    assert heuristic_null.ci_low is not None and heuristic_null.ci_high is not None


def test_trial_records_name_their_tasks(run: BenchmarkResult) -> None:
    lines = (run.root / "trials.jsonl").read_text().splitlines()
    tasks = {json.loads(line)["scenario"]: json.loads(line)["tasks"] for line in lines}
    assert tasks["no-fault-control"] == ["sre.false-alarm"]
    assert tasks["product-catalog-network-delay"] == ["sre.diagnosis"]
    assert tasks["cart-flagd-failure"] == ["sre.diagnosis", "sre.mitigation"]


class Elements(HTMLParser):
    """Every element's tag and attributes, and the text under each id'd element."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def having(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        return [
            a
            for t, a in self.elements
            if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]


def parse(dom: str) -> Elements:
    parser = Elements()
    parser.feed(dom)
    return parser


def chromium(path: Path, *flags: str) -> tuple[str, list[str]]:
    assert CHROMIUM is not None
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            *flags,
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout, [line for line in result.stderr.splitlines() if ":CONSOLE" in line]


def figure(dom: str, figure_id: str) -> str:
    start = dom.index(f'id="{figure_id}"')
    return dom[start : dom.index("</figure>", start)]


@needs_chromium
def test_report_html_shows_agents_side_by_side_in_chromium(run: BenchmarkResult) -> None:
    dom, console = chromium(run.root / "report.html", "--window-size=1280,900")
    assert console == [], console
    assert 'data-rendered="12"' in dom, "the page script ran over every trial"
    page = parse(dom)
    rows = page.having("tr")
    assert [r["data-agent"] for r in rows if "data-agent" in r] == NAMES, "main table rows"
    headers = re.findall(r"<th>([^<]*)</th>", dom.split('id="main-table"')[1].split("</thead>")[0])
    assert headers[2:5] == [
        "SRE diagnosis pass@1 (root cause named)",
        "SRE mitigation pass@1 (alerts cleared, health at baseline)",
        "SRE false alarm pass@1 (no-fault control: no root cause named, nothing changed)",
    ]
    tasks_chart = figure(dom, "chart-tasks")
    bars = re.findall(r'<rect class="bar" data-agent="([^"]+)"', tasks_chart)
    assert sorted(bars) == sorted(NAMES * 3), "one bar per agent and task"
    for dimension in ("class", "complexity", "traces"):
        chart = figure(dom, f"chart-{dimension}-sre-diagnosis")
        assert set(re.findall(r'data-agent="([^"]+)"', chart)) == set(NAMES), dimension
    for dimension in ("domain", "class", "complexity", "traces"):
        table = dom.split(f'id="breakdown-{dimension}"')[1].split("</table>")[0]
        for name in NAMES:
            assert f'<td data-label="Agent">{name}</td>' in table, (dimension, name)
    comparisons = dom.split('id="comparisons"')[1].split("<tbody>")[1].split("</tbody>")[0]
    assert comparisons.count("<tr>") == len(run.report.comparisons) == 9, "3 pairs x 3 tasks"


MEASURE = """<script{nonce}>
document.querySelectorAll("details").forEach(function (d) {{ d.open = true; }});
setTimeout(function () {{
  var over = [];
  document.querySelectorAll("body *").forEach(function (e) {{
    var r = e.getBoundingClientRect();
    if (r.right > innerWidth + 0.5) {{ over.push(e.tagName + "#" + e.id); }}
    if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) {{
      over.push("scroll:" + e.tagName + "#" + e.id);
    }}
  }});
  document.body.setAttribute("data-measure", JSON.stringify({{
    width: innerWidth,
    page: document.documentElement.scrollWidth,
    over: over,
    rows: document.querySelectorAll("#main-table tbody tr").length,
    breakdowns: document.querySelectorAll("table[id^=breakdown-]").length,
    filled: document.querySelectorAll("[data-filled]").length
  }}));
}}, 200);
</script></body>"""


def measured(dom: str) -> dict[str, object]:
    match = re.search(r'data-measure="([^"]*)"', dom)
    assert match is not None, "the measuring script ran"
    return dict(json.loads(match.group(1).replace("&quot;", '"')))


@needs_chromium
def test_report_html_does_not_overflow_a_600_px_window(
    run: BenchmarkResult, tmp_path: Path
) -> None:
    html = (run.root / "report.html").read_text()
    path = tmp_path / "narrow.html"
    path.write_text(html.replace("</body>", MEASURE.format(nonce="")))
    dom, console = chromium(path, "--window-size=600,900")
    assert console == [], console
    m = measured(dom)
    assert m["width"] == 600
    assert m["over"] == [], "nothing is wider than the window, trials opened included"
    assert isinstance(m["page"], int) and m["page"] <= 600
    assert (m["rows"], m["breakdowns"], m["filled"]) == (3, 4, 12)


@needs_chromium
def test_without_javascript_the_page_still_shows_the_main_table(
    run: BenchmarkResult, tmp_path: Path
) -> None:
    """The page's own scripts are blocked by a Content-Security-Policy; only the measuring
    script (its nonce) runs, as Chromium's --dump-dom needs a script-enabled page."""
    html = (run.root / "report.html").read_text()
    assert "<noscript>" in html
    policy = '<head><meta http-equiv="Content-Security-Policy" content="script-src \'nonce-m\'">'
    path = tmp_path / "nojs.html"
    path.write_text(
        html.replace("<head>", policy, 1).replace("</body>", MEASURE.format(nonce=' nonce="m"'))
    )
    dom, _console = chromium(path, "--window-size=600,900")
    assert 'data-rendered="' not in dom, "the page's script did not run"
    m = measured(dom)
    assert m["rows"] == 3 and m["breakdowns"] == 4
    assert m["over"] == []
    page = parse(dom)
    assert [r["data-agent"] for r in page.having("tr") if "data-agent" in r] == NAMES
    assert 'id="chart-tasks"' in dom


def printed(result: BenchmarkResult) -> str:
    out = io.StringIO()
    print_result(result, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_the_cli_table_has_one_row_per_agent_and_one_column_per_task(
    run: BenchmarkResult,
) -> None:
    text = printed(run)
    table = text.split("Agents by task (pass@1)")[1].split("pass@1 ± standard error")[0]
    header = next(line for line in table.splitlines() if "Agent" in line)
    assert "SRE diagnosis pass@1" in header and "SRE false alarm pass@1" in header
    rows = [
        line.split()[0] for line in table.splitlines() if line.split()[:1] in ([n] for n in NAMES)
    ]
    assert rows == NAMES
    assert "SRE diagnosis pass@1 (root cause named)" in text, "the legend names what passes"
    assert "Pairwise comparisons (same scenarios)" in text
    assert "By scenario class" in text and "Traces on / off" in text
    assert "Flagged:" not in text, "no Errored trial changes a number here"


def test_the_cli_flags_a_run_whose_errored_trials_change_pass_at_1(
    run: BenchmarkResult,
) -> None:
    victim = next(r for r in run.records if r.agent == "heuristic-sre" and r.scores is not None)
    records = [
        r.model_copy(update={"phase": "Errored", "reason": "FaultDidNotManifest", "scores": None})
        if r.trial == victim.trial
        else r
        for r in run.records
    ]
    report = build_report(records, DEFAULT_PROFILE, agent="three", created_at=run.report.created_at)
    text = printed(replace(run, records=records, report=report))
    assert "Flagged:" in text and "⚑" in text
