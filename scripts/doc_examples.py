"""Run the Python examples of a docs page in order, each in a fresh interpreter of this Python, in the working
directory, as tests/test_api_docs.py does in the checkout (scripts/check-wheel runs docs/api.md's against the
installed wheel): the page's endpoint is replaced by APIBANK_STUB_URL, a local stand-in.

    python scripts/doc_examples.py docs/api.md
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ENDPOINT = "http://localhost:8000/v1"  #: the endpoint the page's examples name


def main(page: Path) -> int:
    examples = re.findall(r"^```python\n(.*?)^```$", page.read_text(encoding="utf-8"), re.S | re.M)
    if not examples:
        print(f"doc_examples: no python example in {page}", file=sys.stderr)
        return 1
    for number, example in enumerate(examples, 1):
        code = example.replace(ENDPOINT, os.environ.get("APIBANK_STUB_URL", ENDPOINT))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            print(f"doc_examples: example {number} of {page} failed:\n{example}\n{done.stderr[-3000:]}", file=sys.stderr)
            return 1
    print(f"doc_examples: {len(examples)} examples of {page.name} ran")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
