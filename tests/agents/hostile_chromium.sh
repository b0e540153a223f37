#!/bin/sh
# The Chromium a hostile framework starts (SPILLAGE_CHROMIUM, tests/test_isolation.py): the attacks of
# hostile.py from inside the framework's own process tree, then the real browser.
/usr/bin/python3 "$(dirname "$0")/hostile.py" browser
exec chromium "$@"
