"""The pinned data: fetch from a local copy, verify, and the missing-root message."""

import subprocess
import sys

import pytest

from apibank_bench.data import lock as data
from apibank_bench.core.paths import DataMissing, require_root


@pytest.fixture(scope="module")
def fetched(tmp_path_factory, apibank_root):
    dest = tmp_path_factory.mktemp("api-bank")
    count = data.fetch_from_directory(apibank_root, dest)
    return dest, count


def test_lock_pins_every_file_the_suite_reads(fetched):
    lock = data.Lock.load()
    paths = {item.path for item in lock.files}
    assert "test_data/level-3.json" in paths
    assert sum(path.startswith("init_database/") for path in paths) == 19
    assert {item.source for item in lock.files} == set(lock.sources)
    assert all(len(item.sha256) == 64 for item in lock.files)
    assert fetched[1] == len(lock.files)


def test_verify_passes_on_fetched_data(fetched):
    assert data.verify(fetched[0]) == []


def test_one_changed_byte_is_named(fetched, tmp_path):
    dest = tmp_path / "copy"
    data.fetch_from_directory(fetched[0], dest)
    target = dest / "init_database" / "Alarm.json"
    raw = bytearray(target.read_bytes())
    raw[10] ^= 1
    target.write_bytes(bytes(raw))
    (dest / "test_data" / "level-3.json").unlink()
    assert sorted(data.verify(dest)) == ["altered: init_database/Alarm.json (sha256 differs from the lock)",
                                         "missing: test_data/level-3.json"]
    result = subprocess.run([sys.executable, "-m", "apibank_bench", "data", "verify", "--root", str(dest)],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "init_database/Alarm.json" in result.stderr


def test_fetch_refuses_altered_source(fetched, tmp_path):
    source = tmp_path / "src"
    data.fetch_from_directory(fetched[0], source)
    (source / "init_database" / "Bank.json").write_text("{}")
    with pytest.raises(ValueError, match="Bank.json"):
        data.fetch_from_directory(source, tmp_path / "dest")


def test_missing_root_gives_one_clear_message(tmp_path):
    with pytest.raises(DataMissing, match="apibank-bench data fetch"):
        require_root(tmp_path / "nowhere")
    result = subprocess.run([sys.executable, "-m", "apibank_bench", "tasks", "--root", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "apibank-bench data fetch" in result.stderr
