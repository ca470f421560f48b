"""Load time of ToolSearcher's embedding model: the numpy engine against sentence-transformers.

Each measurement runs in a fresh process (imports included, the model folder already built): the
seconds to load and check the model, to embed a first keyword, and a later one; then the seconds
to embed the four catalogs a run may search (both API sets' and the two frozen ones).

    python benchmarks/bench_embedding.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Run in a fresh interpreter; prints one JSON line of seconds. argv[1]: "numpy" or "sentence-transformers".
PROBE = r"""
import json, sys, time
started = time.perf_counter()
from apibank_bench.apis.search import model as embedding
if sys.argv[1] == "numpy":
    model = embedding.get_model()
else:
    model = embedding.sentence_transformer()
loaded = time.perf_counter()
model.encode("a benchmark search never recorded")
first = time.perf_counter()
model.encode("please set an alarm for 7 am")
later = time.perf_counter()
from apibank_bench.apis.search.catalog import spec_catalog
from apibank_bench.core.paths import require_root
from apibank_bench.scoring.toolsearcher_scorers import frozen_search
root = require_root(None)
catalogs = [spec_catalog("apis"), spec_catalog("lv3_apis"), frozen_search(root, "2").catalog, frozen_search(root, "3").catalog]
texts = [text for catalog in catalogs for text in catalog.texts]
built = time.perf_counter()
for text in texts:
    model.encode(text)
done = time.perf_counter()
print(json.dumps({"load": loaded - started, "first": first - loaded, "later": later - first,
                  "catalogs": done - built, "texts": len(texts), "torch": "torch" in sys.modules}))
"""


def probe(kind: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, kind], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per engine (default 3)")
    args = parser.parse_args()
    print(f"median of {args.repeats} fresh processes, seconds; load average {os.getloadavg()[0]:.1f} at the start")
    print(f"{'engine':<24}{'load':>8}{'first':>8}{'later':>8}{'catalogs':>10}  texts  torch")
    for kind in ("numpy", "sentence-transformers"):
        runs = [probe(kind) for _ in range(args.repeats)]
        med = {key: statistics.median(run[key] for run in runs) for key in ("load", "first", "later", "catalogs")}
        print(f"{kind:<24}{med['load']:>8.2f}{med['first']:>8.3f}{med['later']:>8.3f}{med['catalogs']:>10.2f}"
              f"  {runs[0]['texts']:>5}  {runs[0]['torch']}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
