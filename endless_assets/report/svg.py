"""Inline SVG bar charts (no JavaScript, no network); every label is escaped: task text comes from
language models and must never become markup."""

from __future__ import annotations

from html import escape

PALETTE = ("#2f6fb3", "#e0883a", "#c94c4c", "#5a9e5a", "#8a63b8", "#8c8c8c", "#3aa6a6", "#b8a13a")
FONT = "font-family='system-ui, sans-serif' font-size='12'"


def _fmt(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3g}"


def legend(series: list[str]) -> str:
    items = "".join(
        f"<span class='key'><i style='background:{PALETTE[i % len(PALETTE)]}'></i>"
        f"{escape(name)}</span>"
        for i, name in enumerate(series)
    )
    return f"<div class='legend'>{items}</div>"


def hbar(
    rows: list[tuple[str, list[float]]],
    series: list[str],
    *,
    width: int = 720,
    label_width: int = 230,
    title: str = "",
) -> str:
    """Horizontal stacked bars: one row per label, one segment per series."""
    if not rows:
        return "<p class='empty'>no data</p>"
    bar_h, gap = 20, 8
    height = len(rows) * (bar_h + gap) + 10
    top = max((sum(values) for _, values in rows), default=0) or 1
    span = width - label_width - 70
    parts = [
        f"<svg role='img' aria-label='{escape(title)}' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' xmlns='http://www.w3.org/2000/svg'>"
    ]
    for i, (label, values) in enumerate(rows):
        y = 5 + i * (bar_h + gap)
        text = label if len(label) <= 34 else label[:33] + "…"
        parts.append(
            f"<text x='{label_width - 8}' y='{y + 14}' text-anchor='end' {FONT}>"
            f"<title>{escape(label)}</title>{escape(text)}</text>"
        )
        x = label_width
        for j, value in enumerate(values):
            w = span * value / top
            if w > 0:
                parts.append(
                    f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{bar_h}' "
                    f"fill='{PALETTE[j % len(PALETTE)]}'><title>{escape(series[j])}: "
                    f"{_fmt(value)}</title></rect>"
                )
            x += w
        parts.append(f"<text x='{x + 6:.1f}' y='{y + 14}' {FONT}>{_fmt(sum(values))}</text>")
    parts.append("</svg>")
    return "".join(parts) + (legend(series) if len(series) > 1 else "")


def vbar(
    bins: list[tuple[str, list[float]]],
    series: list[str],
    *,
    width: int = 720,
    height: int = 220,
    x_label: str = "",
    title: str = "",
) -> str:
    """Vertical stacked bars (a histogram): one column per bin."""
    if not bins:
        return "<p class='empty'>no data</p>"
    left, bottom, top_pad = 40, 36, 16
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    top = max((sum(v) for _, v in bins), default=0) or 1
    col = plot_w / len(bins)
    parts = [
        f"<svg role='img' aria-label='{escape(title)}' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' xmlns='http://www.w3.org/2000/svg'>",
        f"<line x1='{left}' y1='{top_pad + plot_h}' x2='{width - 10}' y2='{top_pad + plot_h}' "
        "stroke='#999'/>",
        f"<text x='{left - 6}' y='{top_pad + 4}' text-anchor='end' {FONT}>{_fmt(top)}</text>",
        f"<text x='{left - 6}' y='{top_pad + plot_h}' text-anchor='end' {FONT}>0</text>",
    ]
    for i, (label, values) in enumerate(bins):
        x = left + i * col + col * 0.1
        w = col * 0.8
        y = top_pad + plot_h
        for j, value in enumerate(values):
            h = plot_h * value / top
            if h > 0:
                y -= h
                parts.append(
                    f"<rect x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='{h:.1f}' "
                    f"fill='{PALETTE[j % len(PALETTE)]}'><title>{escape(label)} · "
                    f"{escape(series[j])}: {_fmt(value)}</title></rect>"
                )
        parts.append(
            f"<text x='{x + w / 2:.1f}' y='{top_pad + plot_h + 14}' text-anchor='middle' "
            f"{FONT}>{escape(label)}</text>"
        )
    if x_label:
        parts.append(
            f"<text x='{left + plot_w / 2:.1f}' y='{height - 4}' text-anchor='middle' "
            f"{FONT}>{escape(x_label)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts) + (legend(series) if len(series) > 1 else "")
