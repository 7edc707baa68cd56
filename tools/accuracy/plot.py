"""The validation-loss chart of one schedule, written as SVG by hand (no
plotting library needed): mean over the seeds against the predicted batch
time (the profile's DAG under the arm's ratios), against the measured
training time, and against steps, one line per arm, the targets dashed."""
import statistics

# One colour per arm in every chart; an arm not listed gets grey.
COLOURS = {"no-freeze": "#222222", "plan-lf-random": "#1f77b4", "plan-lf-rotate": "#9ecae1",
           "plan-lf-stable": "#d62728", "plan-spread-random": "#8c564b",
           "plan-spread-rotate": "#c49c94", "plan-lf-rescaled": "#7f7f7f",
           "plan-actcap-random": "#2ca02c", "uniform": "#ff7f0e", "cap": "#9467bd"}
PANELS = (("predicted_s", "predicted batch time (s)"), ("train_s", "measured training time (s)"),
          ("step", "step"))


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
    W, H, side, gap = 1400, 420, 330, 70
    body = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="DejaVu Sans, sans-serif">' % (W, H),
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="%d" y="24" font-size="15" text-anchor="middle">%s</text>' % (W // 2, title),
            '<text x="20" y="%d" font-size="12" transform="rotate(-90 20 %d)" '
            'text-anchor="middle">validation loss (nats/byte)</text>' % (H // 2 - 20, H // 2 - 20)]
    colour = {arm: COLOURS.get(arm, "#bbbbbb") for arm, _ in curves}
    for i, (field, label) in enumerate(PANELS):
        series = [(colour[arm], _mean_curve(e, field)) for arm, e in curves]
        body += _panel(70 + i * (side + gap), 45, side, side, series, label, targets)
    x = 70 + len(PANELS) * (side + gap) - gap + 20
    for i, (arm, _) in enumerate(curves):
        y = 60 + 20 * i
        body.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>'
                    % (x, y, x + 25, y, colour[arm]))
        body.append('<text x="%d" y="%d" font-size="12">%s</text>' % (x + 32, y + 4, arm))
    y = 60 + 20 * len(curves)
    body.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999" '
                'stroke-dasharray="4 3"/>' % (x, y, x + 25, y))
    body.append('<text x="%d" y="%d" font-size="12">targets (50%%, 80%%)</text>' % (x + 32, y + 4))
    body.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(body) + "\n")
