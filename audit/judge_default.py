"""The judge an audit uses unless told otherwise (docs/JUDGES.md says why), kept apart from the judges so
that the command line can name it without importing them (numpy, the lexicons: a quarter of a second)."""

DEFAULT_JUDGE = "embedding"   # reads meaning offline; docs/JUDGES.md says why, on the outsiders' corpus
