"""The reports layer: paired comparisons, the HTML report, its plots and sweep tables."""
