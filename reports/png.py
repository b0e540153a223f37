"""PNG copies of the report's SVG plots, for documents that cannot show SVG: Debian's Chromium
takes a headless screenshot of each file at its own size."""

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from spillage.reports.sessions import ReportError

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def svg_to_png(svg: Path) -> Path:
    """Render `svg` to a PNG beside it (same name, .png) with headless Chromium; the PNG's path."""
    browser = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    if browser is None:
        raise ReportError("--png needs Chromium (apt-get install -y chromium)")
    size = re.search(r"width='(\d+)' height='(\d+)'", svg.read_text(encoding="utf-8"))
    if size is None:
        raise ReportError(f"{svg}: no width and height on the <svg> element")
    png = svg.with_suffix(".png")
    with tempfile.TemporaryDirectory(prefix="spillage-png-") as profile:
        done = subprocess.run(
            [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", f"--user-data-dir={profile}",
             f"--window-size={size[1]},{size[2]}", f"--screenshot={png}", svg.resolve().as_uri()],
            capture_output=True, text=True, timeout=120)
    if done.returncode or not png.is_file():
        raise ReportError(f"{svg}: Chromium could not render it ({done.stderr.strip().splitlines()[-1:]})")
    return png
