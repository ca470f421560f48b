"""ToolSearcher's search: the embedding catalog that the ToolSearcher APIs and scorers query."""
