"""`python -m apibank_bench.core.settings`: print the settings table; `--write FILE` puts it between the
markers of a markdown file (`--write-readme`: the project's README.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from apibank_bench.core.settings.generate import markdown_table, write_readme_table


def main(argv: list[str]) -> None:
    if "--write" in argv:
        write_readme_table(Path(argv[argv.index("--write") + 1]))
    elif "--write-readme" in argv:
        write_readme_table(Path(__file__).resolve().parents[3] / "README.md")
    else:
        print(markdown_table())


if __name__ == "__main__":
    main(sys.argv[1:])
