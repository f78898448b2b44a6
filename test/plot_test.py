#!/usr/bin/python3
"""test/plot_test.py — the training-curve pictures (samples/svg_plot.h through tools/dgplot):

1. two metrics logs with known values (a falling loss, a rising accuracy; one run with a test
   loss only) drawn by dgplot; the SVG parsed: two panels with their data ranges and boxes,
   ticks whose labels sit where their values say, axis labels, a legend naming both runs, and
   every polyline point and epoch mark exactly where its (step, value) maps in its panel;
2. the SVG rendered by Debian's headless Chromium to PNG: at points of each curve the pixel
   (within 2 px) has that run's colour, and far from every curve the plot area is white;
3. the usage errors: an unknown flag, --every x, a file that is not a metrics log.

usage: plot_test.py BIN_DIR"""
import math, os, shutil, subprocess, sys, tempfile
import xml.etree.ElementTree as ET

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
SVGNS = "{http://www.w3.org/2000/svg}"
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def write_log(path, steps, loss, evals, with_acc=True):
    with open(path, "w") as f:
        f.write("step,epoch,loss,accuracy,img_per_s,test_loss,test_accuracy\n")
        for s in range(1, steps + 1):
            f.write(f"{s},{1 + (s - 1) * len(evals) // steps},{loss(s):.6g},0.5,100.0,,\n")
        for step, tl, ta in evals:
            f.write(f"{step},0,,,,{tl},{ta if with_acc else ''}\n")


def panel_map(g):
    x0, x1, y0, y1 = (float(g.get(k)) for k in ("data-x0", "data-x1", "data-y0", "data-y1"))
    bx, by, bw, bh = (float(v) for v in g.get("data-box").split())
    return lambda x, y: (bx + (x - x0) / (x1 - x0) * bw, by + bh - (y - y0) / (y1 - y0) * bh), (x0, x1, y0, y1), (bx, by, bw, bh)


tmp = tempfile.mkdtemp()
try:
    a, b = os.path.join(tmp, "f32.csv"), os.path.join(tmp, "bf16.csv")
    write_log(a, 200, lambda s: 2.3 * math.exp(-s / 60) + 0.1, [(100, 0.5, 0.80), (200, 0.3, 0.90)])
    write_log(b, 150, lambda s: 2.0 * math.exp(-s / 40) + 0.2, [(75, 0.6, 0.70), (150, 0.4, 0.85)])
    out = os.path.join(tmp, "cmp.svg")
    r = subprocess.run([f"{BIN}/dgplot", a, b, "-o", out, "--label", "f32", "--label", "bf16", "--every", "5"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"dgplot exited {r.returncode}: {r.stderr}")
    root = ET.parse(out).getroot()
    W, H = float(root.get("width")), float(root.get("height"))
    panels = {g.get("id"): g for g in root.iter(SVGNS + "g") if g.get("class") == "panel"}
    check(set(panels) == {"loss", "test"}, f"panels {sorted(panels)}")
    expect = {"loss": {0: [(s, 2.3 * math.exp(-s / 60) + 0.1) for s in range(1, 201)],
                       1: [(s, 2.0 * math.exp(-s / 40) + 0.2) for s in range(1, 151)]},
              "test": {0: [(100, 0.80), (200, 0.90)], 1: [(75, 0.70), (150, 0.85)]}}
    colors = {}
    for pid, g in panels.items():
        to_px, (x0, x1, y0, y1), (bx, by, bw, bh) = panel_map(g)
        # the data ranges hold the data
        for run, pts in expect[pid].items():
            for x, y in pts:
                check(x0 <= x <= x1 and y0 <= y <= y1, f"{pid}: point ({x}, {y}) of run {run} outside [{x0},{x1}]x[{y0},{y1}]")
        # ticks: labels are numbers at their positions
        xt = [t for t in g.iter(SVGNS + "text") if t.get("class") == "xtick"]
        yt = [t for t in g.iter(SVGNS + "text") if t.get("class") == "ytick"]
        check(len(xt) >= 3 and len(yt) >= 3, f"{pid}: {len(xt)} x ticks, {len(yt)} y ticks")
        for t in xt:
            check(abs(float(t.get("x")) - to_px(float(t.text), y0)[0]) < 0.2, f"{pid}: x tick {t.text} at x={t.get('x')}")
        for t in yt:
            check(abs(float(t.get("y")) - 4 - to_px(x0, float(t.text))[1]) < 0.2, f"{pid}: y tick {t.text} at y={t.get('y')}")
        labels = [t.text for t in g.iter(SVGNS + "text") if t.get("class") in ("xlabel", "ylabel")]
        check("optimizer step" in labels and len(labels) == 2, f"{pid}: axis labels {labels}")
        # curves: every point where its value maps (the loss averaged over --every 5 steps)
        lines = [p for p in g.iter(SVGNS + "polyline") if p.get("class") == "curve"]
        check(len(lines) == 2, f"{pid}: {len(lines)} curves")
        for p in lines:
            run = int(p.get("data-run"))
            colors[run] = p.get("stroke")
            pts = [tuple(map(float, xy.split(","))) for xy in p.get("points").split()]
            data = expect[pid][run]
            if pid == "loss":
                data = [(data[min(i + 4, len(data) - 1)][0], sum(v for _, v in data[i:i + 5]) / len(data[i:i + 5]))
                        for i in range(0, len(data), 5)]
            check(len(pts) == len(data), f"{pid} run {run}: {len(pts)} points for {len(data)} values")
            for (px, py), (x, y) in zip(pts, data):
                ex, ey = to_px(x, y)
                if abs(px - ex) > 0.02 or abs(py - ey) > 0.02:
                    check(False, f"{pid} run {run}: ({x}, {y:.4f}) drawn at ({px}, {py}), belongs at ({ex:.2f}, {ey:.2f})")
                    break
        marks = [c for c in g.iter(SVGNS + "circle") if c.get("class") == "mark"]
        check(len(marks) == (4 if pid == "test" else 0), f"{pid}: {len(marks)} epoch marks")
    legend = [t.text for t in root.iter(SVGNS + "text") if t.get("class") == "label"]
    check(legend == ["f32", "bf16"], f"legend {legend}")
    check(colors.get(0) != colors.get(1), f"both runs drawn in {colors.get(0)}")

    # 2. rendered by a browser: the curves' pixels are where the data says
    chromium = shutil.which("chromium")
    if not chromium:
        check(False, "chromium is not installed (scripts/deps.sh installs it)")
    else:
        png = os.path.join(tmp, "cmp.png")
        r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--force-device-scale-factor=1", f"--window-size={int(W)},{int(H)}", f"--screenshot={png}",
                            "file://" + out], capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and os.path.exists(png), f"chromium could not render: {r.stderr[-300:]}")
        if os.path.exists(png):
            from PIL import Image
            img = Image.open(png).convert("RGB")
            check(img.size == (int(W), int(H)), f"rendered {img.size}, the SVG is {W}x{H}")

            def rgb(c):
                return tuple(int(c[i:i + 2], 16) for i in (1, 3, 5))

            def near(x, y, want, r=2, tol=60):
                for dx in range(-r, r + 1):
                    for dy in range(-r, r + 1):
                        p = img.getpixel((min(max(int(round(x)) + dx, 0), img.size[0] - 1),
                                          min(max(int(round(y)) + dy, 0), img.size[1] - 1)))
                        if sum(abs(p[i] - want[i]) for i in range(3)) < tol:
                            return True
                return False
            drawn = 0
            for pid, g in panels.items():
                to_px = panel_map(g)[0]
                for run, pts in expect[pid].items():
                    for x, y in pts[9::10] if pid == "loss" else pts:
                        if pid == "loss":   # the averaged curve passes near the raw value where it changes slowly
                            y = sum(v for s, v in expect[pid][run] if x - 2 <= s <= x + 2) / 5 if 3 <= x <= len(pts) - 2 else y
                        ok = near(*to_px(x, y), rgb(colors[run]), r=3)
                        drawn += ok
                        check(ok, f"rendered {pid} panel: no pixel of run {run}'s colour {colors[run]} near ({x}, {y:.3f})")
            # far from the curves the plot area is white: the loss panel's top right corner region
            g = panels["loss"]
            bx, by, bw, bh = panel_map(g)[2]
            white = sum(img.getpixel((int(bx + bw - 8 - i), int(by + 12 + j))) == (255, 255, 255) for i in range(6) for j in range(6))
            check(white >= 30, f"the loss panel's empty corner is not white ({white}/36 white pixels)")
            print(f"plot_test: rendered {int(W)}x{int(H)} by {os.path.basename(chromium)}: {drawn} curve points found in their colours")

    # 3. usage errors
    for args, want in (([a, "-o", out, "--no-such-flag", "1"], 2), ([a, "-o", out, "--every", "x"], 2), ([a], 2),
                       (["/etc/hostname", "-o", out], 1), (["--help"], 0)):
        r = subprocess.run([f"{BIN}/dgplot"] + args, capture_output=True, text=True)
        check(r.returncode == want, f"dgplot {' '.join(args)} exited {r.returncode}, want {want}: {r.stderr.strip()}")
finally:
    shutil.rmtree(tmp)
if failures:
    sys.exit(1)
print("plot_test: the SVG's panels, ticks, labels, legend and every point check out; usage errors exit 2")
