"""ToolSearcher of Level 3: finds the API of upstream's `lv3_apis/` that best matches keywords."""

from __future__ import annotations

import os

from ... import specs
from ...embedding import ModelUnavailable
from ...toolsearch.search import public_entry, spec_catalog
from ..base import LEVEL3, Api, same_result


@LEVEL3.register
class ToolSearcher(Api):
    def __init__(self, apis_dir="./lv3_apis"):
        super().__init__()
        # Upstream imports the modules of the folder `apis_dir`; we take the spec
        # catalog of the API set with that folder's name ("lv3_apis" or "apis").
        api_set = os.path.basename(apis_dir)
        if api_set not in specs.API_SETS:
            raise ValueError(f"unknown API folder {apis_dir!r}; expected one of {', '.join(specs.API_SETS)}")
        self.catalog = spec_catalog(api_set)
        # Quirk: unlike Levels 1-2, no `get_user_token_api` is set here, so a match
        # that takes a token fails with AttributeError (no Level-3 API takes one).

    def call(self, keywords):
        inputs = {"keywords": keywords}
        try:
            output = self.best_match_api(keywords)
        except ModelUnavailable:
            raise  # our installation's failure, not an outcome of the API
        except Exception as exc:
            return self.envelope(inputs, None, str(exc))
        return self.envelope(inputs, output, None)

    def best_match_api(self, keywords):
        index = self.catalog.best(keywords)
        if index is None:
            # Quirk: with no similarity above 0 upstream calls `.pop` on None.
            raise AttributeError("'NoneType' object has no attribute 'pop'")
        best_match = public_entry(self.catalog.entries[index])
        if "token" in best_match["input_parameters"]:
            return [self.get_user_token_api, best_match]
        return best_match

    def check_api_call_correctness(self, response, groundtruth) -> bool:
        return same_result(response, groundtruth)
