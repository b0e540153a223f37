"""Keep the garbage collector off what the proxy holds for its whole life.

By the time the proxy runs, its heap holds mitmproxy's and our modules, classes and options: some
90,000 objects that are never garbage, which every full collection walked again (a tenth of a second
each, several a minute under load). `gc.freeze()` sets them aside. The thresholds stay CPython's: a
flow leaves cyclic garbage (some 130 objects a request), and collecting it in larger batches measured
slower, not faster (young collections of 20,000 objects: 11 ms each).
"""

import gc


class FrozenStartupHeap:
    """At `running`: collect once, then freeze what is left."""

    def running(self):
        gc.collect()
        gc.freeze()
