"""The mitmdump script with the leak guard: `mitmdump -s addons/guarded.py` (addons/bundle.py says
the order; docs/GUARD.md what the guard does)."""

from spillage.addons.bundle import chain

addons = chain(guarded=True)
