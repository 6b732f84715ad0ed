"""Grouped bar charts as SVG for the benchmarks (tools/bench/*.py): one group of bars per step or
configuration, each bar labelled with its name and value, a y grid of six lines."""


def grouped_bars(path, title, groups, subtitle=None, bar=26, gap=40, min_width=720):
    """Writes |groups| ([(group label, [(bar label, value, colour), ...]), ...]) to |path|."""
    left, top, height = 60, 40 if subtitle is None else 50, 260
    ymax = max(v for _, g in groups for _, v, _ in g) * 1.1
    width = max(min_width, left + sum(len(g) * bar + gap for _, g in groups) + 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 150}" '
           f'font-family="sans-serif" font-size="10">',
           f'<text x="{left}" y="20" font-size="13">{title}</text>']
    if subtitle:
        out.append(f'<text x="{left}" y="36" font-size="11">{subtitle}</text>')
    for i in range(6):
        t = ymax * i / 5
        y = top + height - t / ymax * height
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{y + 3:.1f}" text-anchor="end">{t:.{0 if ymax >= 10 else 2}f}</text>')
    x = left + gap / 2
    for label, g in groups:
        out.append(f'<text x="{x}" y="{top + height + 14}">{label}</text>')
        for name, v, color in g:
            h = v / ymax * height
            out.append(f'<rect x="{x}" y="{top + height - h:.1f}" width="{bar - 2}" height="{h:.1f}" fill="{color}"/>')
            cx, cy = x + bar / 2, top + height + 24
            out.append(f'<text x="{cx}" y="{cy}" transform="rotate(60 {cx} {cy})">{name} {v:.1f}</text>')
            x += bar
        x += gap
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
