"""The validation-loss chart of one schedule, written as SVG by hand (no
plotting library needed): mean over the seeds against training time (left)
and against steps (right), one line per arm, the targets dashed."""
import statistics

COLOURS = ["#222222", "#1f77b4", "#d62728", "#2ca02c", "#98df8a", "#6baed6", "#ff7f0e",
           "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def _panel(x0, y0, w, h, series, xlabel, targets):
    """One panel: lines of (x, y) per arm, axes with ticks, the targets
    dashed."""
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts] + list(targets)
    xmax = max(xs) or 1.0
    ylo, yhi = min(ys), max(ys)
    pad = 0.05 * (yhi - ylo or 1.0)
    ylo, yhi = ylo - pad, yhi + pad

    def px(x):
        return x0 + w * x / xmax

    def py(y):
        return y0 + h - h * (y - ylo) / (yhi - ylo)

    out = ['<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#888"/>'
           % (x0, y0, w, h)]
    for i in range(6):
        xv, yv = xmax * i / 5, ylo + (yhi - ylo) * i / 5
        out.append('<text x="%g" y="%g" font-size="11" text-anchor="middle">%.3g</text>'
                   % (px(xv), y0 + h + 15, xv))
        out.append('<text x="%g" y="%g" font-size="11" text-anchor="end">%.3f</text>'
                   % (x0 - 4, py(yv) + 4, yv))
    out.append('<text x="%g" y="%g" font-size="12" text-anchor="middle">%s</text>'
               % (x0 + w / 2, y0 + h + 32, xlabel))
    for target in targets:
        out.append('<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#999" '
                   'stroke-dasharray="4 3"/>' % (x0, py(target), x0 + w, py(target)))
    for colour, pts in series:
        path = " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"/>'
                   % (path, colour))
    return out


def _mean_curve(evals_by_seed, field):
    """Mean over seeds of (field, validation loss) at each evaluation."""
    n = min(len(e) for e in evals_by_seed)
    return [(statistics.mean(e[i][field] for e in evals_by_seed),
             statistics.mean(e[i]["val_loss"] for e in evals_by_seed)) for i in range(n)]


def write_plot(curves, targets, title, path):
    """curves: [(arm, [the evaluations of each seed])] in legend order."""
    W, H = 1000, 460
    body = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="DejaVu Sans, sans-serif">' % (W, H),
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="%d" y="24" font-size="15" text-anchor="middle">%s</text>' % (W // 2, title),
            '<text x="20" y="%d" font-size="12" transform="rotate(-90 20 %d)" '
            'text-anchor="middle">validation loss (nats/byte)</text>' % (H // 2 - 20, H // 2 - 20)]
    colour = {arm: COLOURS[i % len(COLOURS)] for i, (arm, _) in enumerate(curves)}
    by_time = [(colour[arm], _mean_curve(e, "train_s")) for arm, e in curves]
    by_step = [(colour[arm], _mean_curve(e, "step")) for arm, e in curves]
    body += _panel(70, 45, 330, 330, by_time, "training time (s)", targets)
    body += _panel(470, 45, 330, 330, by_step, "step", targets)
    for i, (arm, _) in enumerate(curves):
        y = 60 + 20 * i
        body.append('<line x1="820" y1="%d" x2="845" y2="%d" stroke="%s" stroke-width="2"/>'
                    % (y, y, colour[arm]))
        body.append('<text x="852" y="%d" font-size="12">%s</text>' % (y + 4, arm))
    y = 60 + 20 * len(curves)
    body.append('<line x1="820" y1="%d" x2="845" y2="%d" stroke="#999" '
                'stroke-dasharray="4 3"/>' % (y, y))
    body.append('<text x="852" y="%d" font-size="12">targets (50%%, 80%%)</text>' % (y + 4))
    body.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(body) + "\n")
