"""Screenshots of the main pages of both shops, taken with headless Chromium (`make screenshots`).

    python -m spillage.runner.screenshots [--out docs/screenshots] [--chromium chromium]

The origins run on a free loopback port; Chromium reaches them as http://shop.test:PORT/ through
a host-resolver rule, so the pages render exactly as the agent sees them. The tracker
(https://metrics.test, reached through the proxy in real runs) is made unresolvable here, so
Chromium does not wait for it.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote_plus

from spillage.origins.catalog import Catalog
from spillage.runner.children import Child
from spillage.runner.children import ChildError
from spillage.runner.stack import ORIGINS_READY
from spillage.runner.stack import origins_command

WIDTH, HEIGHT = 1280, 1400


def pages(catalog: Catalog) -> list[tuple[str, str, str]]:
    """(file name, host, path) of the pages to shoot."""
    kettle = catalog.search("shop.test", "gooseneck kettle variable temperature").products[0]
    camera = catalog.search("bazaar.test", "film camera slr 50mm").products[0]
    return [
        ("shop-home.png", "shop.test", "/"),
        ("shop-search.png", "shop.test", "/s?k=" + quote_plus("gooseneck kettle")),
        ("shop-product.png", "shop.test", f"/p/{kettle.id}"),
        ("shop-section.png", "shop.test", "/b/kosher-kitchen"),
        ("bazaar-home.png", "bazaar.test", "/"),
        ("bazaar-search.png", "bazaar.test", "/sch/?_nkw=" + quote_plus("film camera")),
        ("bazaar-item.png", "bazaar.test", f"/itm/{camera.id}"),
    ]


def shoot(chromium: str, url: str, port: int, out: Path, profile: Path) -> None:
    """One full-window PNG of `url`, or SystemExit naming the page."""
    argv = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions", "--disable-background-networking",
            f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
            f"--host-resolver-rules=MAP metrics.test ~NOTFOUND, MAP *.test 127.0.0.1:{port}", f"--screenshot={out}", url]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if result.returncode != 0 or not out.is_file():
        raise SystemExit(f"screenshots: {chromium} failed on {url}: {result.stderr.strip()[-300:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spillage.runner.screenshots", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"), help="folder for the PNGs")
    parser.add_argument("--chromium", default="chromium", help="the Chromium to run (default: chromium)")
    args = parser.parse_args(argv)
    if shutil.which(args.chromium) is None:
        print(f"screenshots: {args.chromium} not found; install Debian's chromium (make chromium)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spillage-shots-") as tmp:
        tmp = Path(tmp)
        try:
            with Child("origins", origins_command(tmp / "sites.sqlite"), ORIGINS_READY,
                       tmp / "sites.log") as origins:
                port = int(origins.match.group(2))
                for name, host, path in pages(Catalog(tmp / "sites.sqlite")):
                    shoot(args.chromium, f"http://{host}:{port}{path}", port, args.out / name, tmp / "profile")
                    print(f"wrote {args.out / name}", flush=True)
        except ChildError as e:
            print(f"screenshots: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
