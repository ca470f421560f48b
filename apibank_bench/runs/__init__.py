"""The runs layer: solving and scoring instances, results files, summaries, statistics, provenance.

The choices and rules of core's settings that this layer owns are handed down by one explicit call,
`setting_rules.hand_down()`, made by each composition root (the CLI's `main`, the pytest plugin's
configure, a sweep cell's job on its node, a script); importing the layer does nothing.
"""
