"""What the plugin keeps on `config.stash` and `item.stash`."""

import pytest

CONFIG = pytest.StashKey["object"]()  #: the resolved RunConfig
IDS = pytest.StashKey[list]()  #: the selected case IDs (runs.epochs), in run order
POOL = pytest.StashKey["object"]()  #: this process's InstancePool
MODEL = pytest.StashKey["object"]()  #: this process's ChatClient (None for the gold self-check)
COMMAND_OUTPUT = pytest.StashKey[bool]()  #: `apibank-bench run` owns the screen: no per-test output, its own table
NOT_STARTED = pytest.StashKey[str]()  #: why the run cannot start (its tests are not run)
LAST_FAILED = pytest.StashKey[bool]()  #: `--lf`, decided from the folder's rows (plugin.last_failed), not pytest's cache
RESULT = pytest.StashKey[dict]()  #: an item's results.jsonl line
USER_PROPERTY = "apibank"  #: the key of an instance's lines in a report's user_properties
