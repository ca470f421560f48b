"""ToolSearcher of Levels 1-2: finds the API of upstream's `apis/` that best matches keywords."""

from __future__ import annotations

from apibank_bench.apis.search.model import ModelUnavailable
from apibank_bench.core.frozen import thaw
from apibank_bench.data.specs import LEVEL12
from apibank_bench.apis.search.catalog import public_entry, spec_catalog
from apibank_bench.apis.base import LEVEL12 as REGISTRY
from apibank_bench.apis.base import Api, enveloped, same_result


@REGISTRY.register_api
class ToolSearcher(Api):
    raised = (ModelUnavailable,)  # our installation's failure, not an outcome of the API

    def __init__(self):  # upstream takes no arguments
        super().__init__()
        # The catalog and its embeddings are built once per process and shared.
        self.catalog = spec_catalog(LEVEL12)
        # Quirk: upstream keeps its own GetUserToken entry *with* `desc_for_search`
        # and returns it that way in front of every token-taking match.
        self.get_user_token_api = self.catalog.entries[self.catalog.index("GetUserToken")]

    @enveloped
    def call(self, keywords):
        index = self.catalog.best(keywords)
        if index is None:
            # Quirk: with no similarity above 0 upstream calls `.pop` on None.
            raise AttributeError("'NoneType' object has no attribute 'pop'")
        best_match = public_entry(self.catalog.entries[index])
        if "token" in best_match["input_parameters"]:
            return [thaw(self.get_user_token_api), best_match]
        return best_match

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return same_result(response, groundtruth)
