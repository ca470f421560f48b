"""The data layer: the pinned data lock, tasks, API metadata and manifests (the JSON files beside them are package data)."""
