"""The bottom layer: the settings table, registries, paths, and small helpers every layer may use."""
