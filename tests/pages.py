"""Our pages in a real browser: Playwright driving Debian's chromium (never a browser of its own),
the layout checks a person's eye makes, and screenshots.

    python tests/pages.py PAGE.html OUT [--click SELECTOR]   # OUT-1300.png and OUT-800.png, checked first
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
WIDTHS = (1300, 800)
HEIGHT = 900

# Elements wider than the window, or reaching past its right edge, except inside a box that scrolls
# on its own (a wide table's) and itself fits.
TOO_WIDE = """() => {
  const fits = r => r.width <= innerWidth + 0.5 && r.right <= innerWidth + 0.5;
  const scrolls = e => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX);
  const inBox = e => { for (let p = e.parentElement; p && p !== document.body; p = p.parentElement)
                         if (scrolls(p) && fits(p.getBoundingClientRect())) return true; return false; };
  return [...document.body.querySelectorAll('*')].filter(e => e.getClientRects().length)
    .filter(e => !fits(e.getBoundingClientRect()) && !inBox(e))
    .map(e => `${e.tagName.toLowerCase()}.${e.getAttribute('class')} ${Math.round(e.getBoundingClientRect().width)}px`);
}"""
# Visible matches (all but those too long for a line) that wrap onto more than one line.
BROKEN_MATCHES = """() => [...document.querySelectorAll('mark:not(.long)')].filter(m => m.getClientRects().length > 1)
  .map(m => m.textContent)"""
VISIBLE_MATCHES = "() => [...document.querySelectorAll('mark:not(.long)')].filter(m => m.getClientRects().length).length"


@contextlib.contextmanager
def browser():
    """Debian's chromium, headless, through Playwright (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: none of its own)."""
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def layout_faults(page) -> list[str]:
    """What a person would see broken: the page scrolling sideways, an element wider than the window,
    a match split over two lines."""
    faults = [f"{e}: wider than the {page.viewport_size['width']} px window" for e in page.evaluate(TOO_WIDE)]
    if page.evaluate("document.documentElement.scrollWidth") > page.viewport_size["width"]:
        faults.append("the page scrolls sideways")
    return faults + [f"match {m!r} broken over lines" for m in page.evaluate(BROKEN_MATCHES)]


def small(png: bytes, path: Path) -> None:
    """The screenshot in 256 colours: a few times smaller, the same to the eye for pages of text."""
    from PIL import Image

    Image.open(io.BytesIO(png)).convert("RGB").quantize(256).save(path, optimize=True)


def shoot(chromium, url: str, out: str, click: str | None = None) -> dict[int, list[str]]:
    """Screenshots at each width (after clicking `click`), as OUT-WIDTH.png; the layout faults per width."""
    faults = {}
    for width in WIDTHS:
        page = chromium.new_page(viewport={"width": width, "height": HEIGHT})
        page.goto(url)
        if click:
            page.locator(click).first.click()
        faults[width] = layout_faults(page)
        small(page.screenshot(), Path(f"{out}-{width}.png"))
        page.close()
    return faults


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("out")
    parser.add_argument("--click", help="a CSS selector to click first")
    args = parser.parse_args()
    with browser() as chromium:
        faults = shoot(chromium, args.page.resolve().as_uri(), args.out, args.click)
    for width, found in faults.items():
        print(f"{args.out}-{width}.png: " + ("; ".join(found) or "fits"))
    return 1 if any(faults.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
