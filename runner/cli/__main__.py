"""`python -m spillage.runner.cli`: the `spillage` command."""

import sys

from spillage.runner.cli import main

sys.exit(main())
