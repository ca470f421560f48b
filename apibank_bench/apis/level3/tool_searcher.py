"""ToolSearcher of Level 3: finds the API of upstream's `lv3_apis/` that best matches keywords."""

from __future__ import annotations

import os

from apibank_bench.data import specs
from apibank_bench.apis.search.catalog import spec_catalog
from apibank_bench.apis.base import LEVEL3, Api
from apibank_bench.apis.level12.tool_searcher import ToolSearcher as _SearcherOfLevels12


@LEVEL3.register_api
class ToolSearcher(_SearcherOfLevels12):
    """The Levels 1-2 searcher over another catalog (upstream's two classes differ only so)."""

    def __init__(self, apis_dir="./lv3_apis"):
        Api.__init__(self)
        # Upstream imports the modules of the folder `apis_dir`; we take the spec
        # catalog of the API set with that folder's name ("lv3_apis" or "apis").
        api_set = os.path.basename(apis_dir)
        if api_set not in specs.API_SETS:
            raise ValueError(f"unknown API folder {apis_dir!r}; expected one of {', '.join(specs.API_SETS)}")
        self.catalog = spec_catalog(api_set)
        # Quirk: unlike Levels 1-2, no `get_user_token_api` is set here, so a match
        # that takes a token fails with AttributeError (no Level-3 API takes one).
