"""Inline SVG charts that compare agents: grouped horizontal bars (one group per category, one
bar per agent) with standard-error whiskers. Rendered on the server, so they need no script, and
drawn in a viewBox, so they shrink with a narrow window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from itbench.reports.tables import Cell, pct

PALETTE = ("#1565c0", "#e65100", "#2e7d32", "#6a1b9a", "#00838f", "#ad1457", "#5d4037", "#455a64")
"""One colour per agent, in the order agents appear (then repeated)."""

WIDTH = 640
LABEL_W = 170
VALUE_W = 64
BAR_H = 12
GAP = 10
TOP = 28


def colour(index: int) -> str:
    """The colour of the agent at `index`."""
    return PALETTE[index % len(PALETTE)]


def _short(text: str, limit: int = 26) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bar_chart(
    title: str,
    categories: Sequence[str],
    agents: Sequence[str],
    cells: Mapping[tuple[str, str], Cell],
) -> str:
    """A grouped bar chart of pass@1 (fractions in [0, 1]).

    Args:
        title: The chart's title (names the task and the dimension).
        categories: Group labels, top to bottom (tasks, classes, complexities, ...).
        agents: The agents, one bar each per category.
        cells: The cell of (category, agent); a missing or empty cell draws no bar.

    Returns:
        An `<svg>` element with a `<title>` per bar and a legend.
    """
    plot_w = WIDTH - LABEL_W - VALUE_W
    group_h = len(agents) * BAR_H + GAP
    legend_h = 18 * ((len(agents) + 3) // 4)
    height = TOP + group_h * len(categories) + 20 + legend_h
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{escape(title)}" preserveAspectRatio="xMinYMin meet">',
        f'<text x="0" y="14" font-weight="600">{escape(title)}</text>',
    ]
    axis_y = TOP + group_h * len(categories)
    for tick in (0.0, 0.5, 1.0):
        x = LABEL_W + plot_w * tick
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP - 4}" y2="{axis_y}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{axis_y + 14}" text-anchor="middle">{tick:.0%}</text>'
        )
    for ci, category in enumerate(categories):
        y0 = TOP + ci * group_h
        parts.append(
            f'<text x="{LABEL_W - 6}" y="{y0 + len(agents) * BAR_H / 2 + 4:.1f}" '
            f'text-anchor="end"><title>{escape(category)}</title>{escape(_short(category))}</text>'
        )
        for ai, agent in enumerate(agents):
            cell = cells.get((category, agent))
            if cell is None or cell.mean is None:
                continue
            y = y0 + ai * BAR_H
            w = max(plot_w * cell.mean, 1.0)
            tip = f"{agent}, {category}: {cell.text}"
            parts.append(
                f'<rect class="bar" data-agent="{escape(agent)}" x="{LABEL_W}" y="{y}" '
                f'width="{w:.1f}" height="{BAR_H - 2}" fill="{colour(ai)}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            if cell.stderr:
                lo = LABEL_W + plot_w * max(cell.mean - cell.stderr, 0.0)
                hi = LABEL_W + plot_w * min(cell.mean + cell.stderr, 1.0)
                mid = y + (BAR_H - 2) / 2
                parts.append(
                    f'<line x1="{lo:.1f}" x2="{hi:.1f}" y1="{mid:.1f}" y2="{mid:.1f}" '
                    'stroke="#222" stroke-width="1"/>'
                )
            parts.append(
                f'<text x="{LABEL_W + plot_w + 4}" y="{y + BAR_H - 3}">'
                f"{escape(pct(cell.mean))}</text>"
            )
    ly = axis_y + 24
    for ai, agent in enumerate(agents):
        x = (ai % 4) * (WIDTH / 4)
        y = ly + (ai // 4) * 18
        parts.append(
            f'<rect x="{x:.1f}" y="{y}" width="10" height="10" fill="{colour(ai)}"/>'
            f'<text x="{x + 14:.1f}" y="{y + 9}">{escape(_short(agent, 22))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
