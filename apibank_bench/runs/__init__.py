"""The runs layer: solving and scoring instances, results files, summaries, statistics, provenance.

Importing the layer hands core's settings the choices and rules it owns (`setting_rules.hand_down`):
every process that runs a benchmark (the CLI, the pytest plugin, a script, a sweep's cell on a Slurm
node) imports it, so none has to remember to.
"""

from apibank_bench.runs.setting_rules import hand_down

hand_down()
