"""`apibank-bench optimize`: prompt optimizers (GEPA, MIPROv2, MASPO) over the real topologies.

`context` is the seam the methods plug into; `methods` registers them; `grid`
holds the experiment grid; `command` is the command line.
"""
