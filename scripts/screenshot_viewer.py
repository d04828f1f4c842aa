"""Screenshot of the web viewer for the README (docs/img/viewer.png), taken with Debian's headless chromium.

    python scripts/screenshot_viewer.py [INPUT] [--out docs/img/viewer.png] [--joint NAME=VALUE ...]
        [--q I=VALUE ...]

INPUT defaults to the bundled example cabinet (a PartNet-Mobility-style folder). The kinematic model is loaded
(default checkpoint) so the reduced-coordinate sliders show; joints and q can be set before the shot.
Needs /usr/bin/chromium (``make browser``) and the python ``playwright`` package (never
``playwright install``).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", nargs="?", default=str(ROOT / "kinemesh/assets/examples/cabinet"))
    ap.add_argument("--out", default=str(ROOT / "docs/img/viewer.png"))
    ap.add_argument("--size", default="1280x760", help="browser viewport WIDTHxHEIGHT")
    ap.add_argument("--joint", action="append", default=[], help="NAME=VALUE joint value before the shot")
    ap.add_argument("--q", action="append", default=[],
                    help="I=VALUE reduced coordinate (0-based) before the shot")
    ap.add_argument("--no-model", action="store_true", help="do not load the kinematic model")
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--wait", type=float, default=4.0, help="seconds to let the scene render")
    args = ap.parse_args(argv)

    import numpy as np
    from PIL import Image
    from playwright.sync_api import sync_playwright

    from kinemesh.atomic import atomic_path
    from kinemesh.viz.inputs import load_drawable
    from kinemesh.viz.viewer import ViewerApp, ViewerConfig, ViewerGUI

    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        print("needs /usr/bin/chromium: run `make browser` (apt-get install chromium)", file=sys.stderr)
        return 1
    w, h = (int(x) for x in args.size.split("x"))
    app = ViewerApp(load_drawable(args.input), ViewerConfig(checkpoint=args.checkpoint))
    if not args.no_model:
        app.load_model()
        print(app.model_status)
    for item in args.joint:
        name, value = item.split("=")
        app.set_joint(name, float(value))
    gui = ViewerGUI(app, port=0, load_model_async=False)
    try:
        for item in args.q:
            i, value = item.split("=")
            app.set_q(int(i), float(value))
            gui._sync_q_sliders()
        for name, s in gui._joint_sliders.items():
            s.value = float(app.joint_values.get(name, 0.0))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": w, "height": h})
                page.goto(gui.url, timeout=60_000)
                page.wait_for_selector("canvas", timeout=60_000)
                # The "software WebGL" notice is about this headless browser, not the viewer.
                hide = "[class*='Notifications-root'],[class*='Notification-root']{display:none!important}"
                page.add_style_tag(content=hide)
                time.sleep(args.wait)
                png = page.screenshot()
            finally:
                browser.close()
    finally:
        gui.stop()
    img = Image.open(io.BytesIO(png)).convert("RGB")
    out = Path(args.out)
    with atomic_path(out) as tmp:
        img.save(tmp, format="PNG", optimize=True)
    arr = np.asarray(img).astype(float)
    print(f"wrote {out} ({img.size[0]}x{img.size[1]}, pixel std {arr.std():.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
