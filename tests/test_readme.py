"""The README and the docs site are true: each `apibank-bench` line of their code blocks parses with
the real command line, each `pytest bench_tests` option exists, and the lines that need no endpoint
and no model (the gold self-check, the data check) run, succeed and print what the README shows.
The README stays short (at most 300 lines) and starts with the two set-up commands CI runs; every
docs page is in the site's nav, and the site builds with warnings as errors."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from apibank_bench.cli import build_parser
from apibank_bench.core import settings
from apibank_bench.core.paths import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
DOCS = PROJECT_ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
#: The README and every docs page: where the commands a user types are written.
TEXTS = [README, *(page.read_text(encoding="utf-8") for page in PAGES)]
BLOCKS = [block for text in TEXTS for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]

SETUP_COMMANDS = [  # CI (.ci/run) runs the second; both must stay exactly as they are
    "bash scripts/setup && .venv/bin/apibank-bench run --limit 2       "
    "# main job: the embedded local model on 2 eval instances",
    "bash scripts/setup && .venv/bin/python -m pytest                  # the project's own tests",
]


def commands() -> list[list[str]]:
    """Every command of the bash blocks: continuations joined, `NAME="..."` variables expanded,
    comments, `[optional]` placeholders and `...` dropped, `a && b` split."""
    found = []
    for block in BLOCKS:
        variables: dict[str, str] = {}
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            assignment = re.fullmatch(r"(\w+)=(.*)", words[0]) if len(words) == 1 else None
            if assignment:
                variables[assignment[1]] = assignment[2]
                continue
            words = [part for word in words for part in (shlex.split(variables[word[1:]])
                                                         if word[1:] in variables else [word])]
            words = [word for word in _without_brackets(words) if word != "..."]
            command: list[str] = []
            for word in [*words, "&&"]:
                if word == "&&":
                    if command:
                        found.append(command)
                    command = []
                else:
                    command.append(word)
    return found


def _without_brackets(words: list[str]) -> list[str]:
    """The words outside `[optional parts]` (a quoted argument stays one word)."""
    kept, depth = [], 0
    for word in words:
        depth += word.startswith("[")
        if not depth:
            kept.append(word)
        depth -= word.endswith("]") and depth > 0
    return kept


def cli_lines() -> list[list[str]]:
    return [command[1:] for command in commands()
            if command and command[0].removeprefix(".venv/bin/") == "apibank-bench"]


def pytest_lines() -> list[list[str]]:
    return [command[1:] for command in commands() if command[:2] == ["pytest", "bench_tests"]]


def test_the_readme_and_the_docs_have_commands_to_check():
    assert len(cli_lines()) >= 12 and len(pytest_lines()) >= 4


@pytest.mark.parametrize("argv", cli_lines(), ids=" ".join)
def test_each_apibank_bench_line_parses(argv):
    args = build_parser().parse_args(argv)  # an unknown subcommand or flag exits (usage error)
    assert callable(args.func)


@pytest.mark.parametrize("argv", pytest_lines(), ids=" ".join)
def test_each_pytest_line_uses_existing_options(argv):
    known = {s.option for s in settings.SETTINGS} | {"--apibank-no-" + s.name.replace("_", "-")
                                                      for s in settings.SETTINGS if s.flag}
    used = [word for word in argv if word.startswith("--apibank-")]
    assert set(used) <= known


def runnable() -> list[list[str]]:
    """The lines that need neither an endpoint nor the embedded model, each once."""
    lines = [argv for argv in cli_lines() if argv[0] == "run" and ("gold" in argv or "--summary" in argv)]
    return [argv for index, argv in enumerate(lines) if argv not in lines[:index]]


def gold_table_in_readme() -> list[str]:
    """The lines of the closing table the README shows for the gold self-check (the header, a row
    per level and overall, the failures by stage)."""
    fenced = re.findall(r"^```(\w*)\n(.*?)^```$", README, flags=re.S | re.M)
    block = next(text for language, text in fenced if not language and "gold calls" in text)
    return [line for line in block.splitlines()
            if re.match(r"(level |[123] |overall |failures by stage|tokens per instance)", line)]


@pytest.mark.parametrize("argv", runnable(), ids=" ".join)
def test_lines_that_need_no_endpoint_run(argv, tmp_path, apibank_root):
    assert runnable()
    run = subprocess.run([sys.executable, "-m", "apibank_bench", argv[0], "--out-dir", str(tmp_path), *argv[1:]],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "APIBANK_ROOT": str(apibank_root)})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    if "--summary" in argv:
        assert '"gold_replay_correct": 100' in run.stdout
    else:
        assert "overall      100  100" in run.stdout  # all 100 gold calls correct
        if "--limit" in argv and argv[argv.index("--limit") + 1] == "0" and "-q" not in argv:
            shown = gold_table_in_readme()  # the README's closing table is this run's, line for line
            assert len(shown) == 7 and all(line in run.stdout.splitlines() for line in shown), shown


def test_the_readme_is_short_and_starts_with_the_setup_commands():
    lines = README.splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail into docs/"
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.S)
    assert first_block and first_block.start() < 40
    assert first_block.group(1).splitlines() == SETUP_COMMANDS


def test_the_readmes_links_into_the_docs_exist():
    links = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]+))?\)", README)
    assert len(links) >= 10
    for path, anchor in links:
        assert (PROJECT_ROOT / path).is_file(), path
        if anchor:  # an anchor is a heading of that page, as mkdocs' toc names it
            headings = re.findall(r"^#+ (.+)$", (PROJECT_ROOT / path).read_text(encoding="utf-8"), flags=re.M)
            assert anchor in {_slug(heading) for heading in headings}, (path, anchor)


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (the default slugify)."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [page for value in node.values() for page in nav_pages(value)]
    if isinstance(node, list):
        return [page for item in node for page in nav_pages(item)]
    return []


def test_every_docs_page_is_in_the_site_nav_once():
    nav = nav_pages(yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    assert sorted(nav) == sorted(page.name for page in PAGES)


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path):
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                           cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert build.returncode == 0, build.stderr[-3000:]
    settings_page = (tmp_path / "site" / "settings" / "index.html").read_text(encoding="utf-8")
    assert "<table>" in settings_page and "<code>--apibank-root</code>" in settings_page  # the generated table
    folded = {page.relative_to(tmp_path).as_posix(): items for page in (tmp_path / "site").rglob("*.html")
              if (items := folded_list_items(page.read_text(encoding="utf-8")))}
    assert folded == {}  # a list item the markdown folded into the paragraph before it, dash and all


def folded_list_items(html: str) -> list[str]:
    """The lines of a page's paragraphs that start with a list marker: markdown took a list item for
    the paragraph's continuation (no blank line after an indented block), and the page shows the dash."""
    return [line.strip()[:60] for paragraph in re.findall(r"<p>(.*?)</p>", html, flags=re.S)
            for line in paragraph.splitlines()[1:] if re.match(r"\s*[-*+] \S", line)]


def test_a_folded_list_item_is_found():
    html = "<ul><li><p><strong>A.</strong> one\n- <strong>B.</strong> two</p></li></ul><p>a - b</p>"
    assert folded_list_items(html) == ["- <strong>B.</strong> two"]


#: Words that say which exit a sentence claims; each names the one `ExitCode` such a claim must give.
EXIT_CLAIMS = [(r"model name", "USAGE"), (r"nobody answers|unreachable", "UNREACHABLE"),
               (r"Ctrl-C|SIGTERM|interrupted", "INTERRUPTED"), (r"significantly worse|regression", "WORSE")]


def exit_claims(text: str) -> list[tuple[str, int]]:
    """(sentence, code) for each `exit N` / `exit code N` / `exits N` a text claims of `apibank-bench`
    (not pytest's, nor `compare`'s, which have their own)."""
    sentences = re.split(r"(?<=[.;])\s+", re.sub(r"\s+", " ", text))
    return [(sentence, int(code)) for sentence in sentences if "compare" not in sentence
            for code in re.findall(r"(?<!pytest )\bexit(?:s| code| status)? (\d+)\b(?! s\b)", sentence)]  # not "exits 22 s"


def wrong_exit_claims(text: str) -> list[str]:
    from apibank_bench.core.exit_codes import ExitCode

    wrong = []
    for sentence, code in exit_claims(text):
        if code not in {int(member) for member in ExitCode}:
            wrong.append(f"{code} is no ExitCode: {sentence}")
        for words, name in EXIT_CLAIMS:
            if re.search(words, sentence) and len(exit_claims(sentence)) == 1 and code != ExitCode[name]:
                wrong.append(f"exit {code} where {name} is {int(ExitCode[name])}: {sentence}")
    return wrong


def test_claimed_exit_codes_are_the_exit_codes():
    assert sum(len(exit_claims(text)) for text in TEXTS) >= 10
    assert [claim for text in TEXTS for claim in wrong_exit_claims(text)] == []
    stale = ("The benchmark's model fixture stops the run with one message and exit code 3 on either that or a "
             "missing model name.")
    assert wrong_exit_claims(stale) == [f"exit 3 where USAGE is 2: {stale}"]


def test_the_architecture_names_each_subcommand_in_its_module():
    """docs/architecture.md's `commands` row says which module holds which subcommands, as the CLI has them."""
    import argparse

    from apibank_bench.cli import COMMANDS

    actual = {}
    for module in COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers()
        module.register(sub)
        actual[module.__name__.rsplit(".", 1)[-1]] = sorted(sub.choices)
    row = next(line for line in (DOCS / "architecture.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| commands |"))
    claimed = {module: sorted(re.findall(r"`([\w-]+)`", names))
               for module, names in re.findall(r"`(\w+)\.py` \(([^)]*)\)", row)}
    each = row.split("a module each for", 1)[1] if "a module each for" in row else ""
    claimed.update({name: [name] for name in re.findall(r"`([\w-]+)`", each)})
    assert claimed == actual


def test_the_docs_home_shows_how_to_install():
    """The site is read without the README: its home page has the install command, for this package."""
    import tomllib

    name = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```bash\n(.*?)```", home, flags=re.S) for line in block.splitlines()]
    assert any(re.match(rf"pip install (\S+ )*\"?{re.escape(name)}\b", line) for line in lines), lines


#: Words that date a figure ("the morning's code", "before these changes"): a page other than the
#: measurement log says how things are now, and the log keeps what they were.
DIARY = re.compile(r"\b(morning|an hour earlier|before these changes|the code before|earlier, load|"
                   r"before: \+|now: wall)\b", re.I)


def test_the_measurement_pages_say_how_things_are_and_the_log_keeps_the_history():
    for page in ("model.md", "performance.md"):
        dated = DIARY.findall((DOCS / page).read_text(encoding="utf-8"))
        assert dated == [], f"docs/{page} dates its figures ({dated}): move the history to docs/log.md"
    assert DIARY.search((DOCS / "log.md").read_text(encoding="utf-8"))  # the history is kept there
