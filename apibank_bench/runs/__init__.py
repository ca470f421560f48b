"""The runs layer: solving and scoring instances, results files, summaries, statistics, provenance."""
