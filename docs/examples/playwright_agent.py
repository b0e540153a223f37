"""A scripted Playwright agent, for

    spillage run --scenario shop-kettle-chat -- .venv-pw/bin/python docs/examples/playwright_agent.py

It drives Debian's Chromium through the capturing proxy like a person would: types a search
made of shopping words from the prompt into the search box, clicks a facet and a result,
and adds it to the cart. The sites' scripts and the metrics.test tracker run as they would for
anyone. Needs `pip install playwright` in the Python that runs it, and never `playwright install`.
"""

import os
import re
import shutil
import sys

from playwright.sync_api import sync_playwright

SHOPPING_WORDS = ("gooseneck", "electric", "kettle")
FACET = "variable-temperature"
MUST_SAY = "Cordless"  # picked from the results by its title


def search_words(prompt: str) -> str:
    """The shopping words the prompt mentions, in our order; nothing else of the user's context."""
    said = set(re.findall(r"[a-z]+", prompt.lower()))
    return " ".join(w for w in SHOPPING_WORDS if w in said)


def launch(playwright):
    """Debian's Chromium behind the proxy, trusting the proxy's CA by its SPKI pin."""
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("playwright_agent: no chromium on PATH (apt-get install -y chromium)")
    return playwright.chromium.launch(
        executable_path=chromium, headless=True,
        proxy={"server": os.environ["SPILLAGE_PROXY"]},
        args=[f"--ignore-certificate-errors-spki-list={os.environ['SPILLAGE_CA_SPKI']}"])


def shop(page, start_url: str, query: str) -> str:
    """Search, filter, open the first result whose title has MUST_SAY, add it to the cart; returns its title."""
    page.goto(start_url)
    box = page.get_by_role("searchbox")
    box.click()
    box.press_sequentially(query, delay=60)
    box.press("Enter")
    page.wait_for_url("**/s?*")
    page.locator(f'a[data-facet="{FACET}"]').first.click()
    page.wait_for_url(f"**f={FACET}*")
    page.locator('[data-section="results"] a[data-product]', has_text=MUST_SAY).first.click()
    page.wait_for_url("**/p/*")
    title = page.locator("h1").first.inner_text()
    page.get_by_role("button", name="Add to cart").click()
    page.wait_for_url("**/cart")
    return title


def main() -> int:
    with open(os.environ["SPILLAGE_PROMPT_FILE"], encoding="utf-8") as f:
        query = search_words(f.read())
    if not query:
        print("playwright_agent: nothing to search for in the prompt", file=sys.stderr)
        return 1
    with sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_page()
        title = shop(page, os.environ["SPILLAGE_START_URL"], query)
        print(f"searched {query!r}, filtered by {FACET}, added to cart: {title}")
        page.close(run_before_unload=True)  # the tracker sends its last batch on pagehide
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
