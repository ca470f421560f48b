"""The curated lists, the pool and the optimizer splits."""

import json
from collections import Counter

import pytest

from apibank_bench.data import manifests
from apibank_bench.core.paths import MANIFEST_DIR, PROJECT_ROOT
from apibank_bench.scoring import curation
from apibank_bench.scoring.scorer import Scorer
from apibank_bench.data.tasks import split_combined_id

REFERENCE = PROJECT_ROOT.parent / "shared" / "reference"


@pytest.fixture(scope="module")
def built(tmp_path_factory, apibank_root):
    out = tmp_path_factory.mktemp("manifests")
    return out, curation.build(Scorer(apibank_root), out)


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="../shared/reference (the seed harness's manifests) is not here")
def test_build_reproduces_the_reference_curated_lists(built):
    reference = json.loads((REFERENCE / "level_curated_ids.json").read_text())
    out, lists = built
    for level in "123":
        assert lists[level]["ids"] == reference[level]["ids"]
        assert lists[level]["excluded_summary"] == reference[level]["excluded_summary"]
        assert lists[level]["excluded_examples"] == reference[level]["excluded_examples"]
    assert [len(lists[level]["ids"]) for level in "123"] == [100, 100, 245]


def test_committed_manifests_are_what_build_writes(built):
    out, _ = built
    for name in [manifests.curated_name(level) for level in "123"] + [manifests.POOL_MANIFEST]:
        assert json.loads((out / name).read_text()) == json.loads((MANIFEST_DIR / name).read_text()), name


def test_pool_is_the_union_and_holds_the_eval_set(built):
    out, _ = built
    pool = json.loads((out / manifests.POOL_MANIFEST).read_text())["ids"]
    assert len(pool) == len(set(pool)) == 445
    assert set(manifests.manifest_ids("all")) <= set(pool)


def test_single_level_selection_reads_its_curated_list():
    ids = manifests.select("2", limit=5)
    assert len(ids) == 5 and all(i.startswith("level-2::") for i in ids)
    assert len(manifests.select("3")) == 245


def test_splits_are_seeded_balanced_and_exclude_the_eval_set():
    first = manifests.splits(60, 30, seed=7)
    assert first == manifests.splits(60, 30, seed=7)
    assert first != manifests.splits(60, 30, seed=8)
    chosen = first["train"] + first["validation"]
    assert len(set(chosen)) == 90
    assert not set(chosen) & set(manifests.manifest_ids("all"))
    assert Counter(split_combined_id(i)[0] for i in first["train"]) == {"1": 20, "2": 20, "3": 20}
    with pytest.raises(ValueError):
        manifests.splits(400, 0)
