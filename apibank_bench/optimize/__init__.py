"""`apibank-bench optimize`: prompt optimizers (GEPA, MIPROv2, MASPO) over the real topologies.

`context` is the seam the methods plug into; `methods` registers them; `grid`
holds the experiment grid; `job` runs one job (its command line: commands/optimize.py).
"""
