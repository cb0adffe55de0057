"""Small inline SVG trend charts for the report: one series' values over its runs, change points as vertical
lines (their commit range and size in a tooltip), runs on a busy machine as hollow dots. Plain text, no script."""
from __future__ import annotations

from html import escape
from typing import Any, Sequence

WIDTH, HEIGHT, PAD = 360, 90, 6


def chart(values: Sequence[float], commits: Sequence[str], loaded: Sequence[bool],
          changes: Sequence[dict[str, Any]], title: str) -> str:
    """An SVG of `values` (oldest first); `changes` carry the run index (`index`), commits and size."""
    n = len(values)
    if n == 0:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or abs(high) or 1.0

    def x(i: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * (v - low) / span

    line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts = [f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
             f"<title>{escape(title)}: {n} runs, {low:.4g} to {high:.4g}</title>",
             f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.2" points="{line}"/>']
    for change in changes:
        cx = x(change["index"])
        parts.append(f'<line class="change" x1="{cx:.1f}" x2="{cx:.1f}" y1="0" y2="{HEIGHT}" stroke="#d62728" stroke-width="2" '
                     f'stroke-dasharray="3,2"><title>{escape(change["from_commit"])}..{escape(change["to_commit"])} '
                     f'{change["size_pct"]:+.1f}% (p {change["p"]:.3f})</title></line>')
    for i, (v, busy) in enumerate(zip(values, loaded)):
        if busy:
            parts.append(f'<circle class="loaded" cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="none" stroke="#ff7f0e">'
                         f"<title>{escape(commits[i])}: busy machine</title></circle>")
    last = n - 1
    parts.append(f'<circle cx="{x(last):.1f}" cy="{y(values[last]):.1f}" r="2.5" fill="#1f77b4">'
                 f"<title>{escape(commits[last])}: {values[last]:.4g}</title></circle>")
    parts.append("</svg>")
    return "".join(parts)
