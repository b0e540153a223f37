"""What `spillage report`'s command line offers, apart from the modules that compute it (pandas,
scipy and pyarrow load only when a report is made, not with every command)."""

KEYS = ("framework", "model", "site", "style", "scenario", "prompt", "note", "guard")   # what sessions are grouped by
AUTO = "auto"   # --by's default: the conditions that vary among the sessions (runner/cli/reports.py)
CONDITIONS = ("framework", "model", "prompt", "note", "guard")   # what `auto` looks for; rates pool over the rest
DEFAULT_KEYS = ("framework", "model", "site", "style")   # ReportOptions' default, for callers that give none
RESAMPLES = 10_000     # bootstrap resamples per interval
DEFAULT_SEED = 0       # the bootstrap's seed
