"""The README and the docs/ pages it links say what the code does: the settings table lists every setting
with the code's default, wherever the table lives, every page and link can be reached, and every install command
takes the versions of constraints.txt."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic_core import PydanticUndefined

from smolclean_dagster.settings import DatasetSettings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
SETTINGS_HEADER = "| setting | default | what it sets |"


def _shown(default: object) -> str:
    """A default as the table writes it."""
    if default is PydanticUndefined:
        return "required"
    if default is None:
        return "none"
    if isinstance(default, bool):
        return str(default).lower()
    if default == "":
        return '`""`'
    return f"`{default}`"


def _settings_table() -> str:
    """The one settings table among the README and the docs pages: its header and its rows."""
    found = [(page, page.read_text(encoding="utf-8")) for page in PAGES if SETTINGS_HEADER in page.read_text(encoding="utf-8")]
    assert len(found) == 1, f"the settings table should be on exactly one page, found on {[str(p) for p, _ in found]}"
    text = found[0][1]
    table = text[text.index(SETTINGS_HEADER):]
    return table.split("\n\n")[0]


def test_the_settings_table_lists_every_setting_with_its_default_in_the_code():
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", _settings_table(), flags=re.M)
    table = dict(rows)
    assert len(table) == len(rows), "a setting is listed twice"
    fields = DatasetSettings.model_fields
    assert list(table) == list(fields), "the table's settings differ from DatasetSettings' (names or order)"
    wrong = {name: (table[name], _shown(field.default)) for name, field in fields.items()
             if table[name] != _shown(field.default)}
    assert not wrong, f"table default vs code default: {wrong}"


def test_every_docs_page_is_linked_from_the_readme_and_every_link_leads_to_a_file():
    readme = README.read_text(encoding="utf-8")
    unlinked = [p.name for p in PAGES[1:] if f"](docs/{p.name})" not in readme]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://")):
                assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}, which is not there"


def test_every_code_block_is_closed():
    for page in PAGES:
        fences = re.findall(r"^\s*(`{3,})", page.read_text(encoding="utf-8"), flags=re.M)
        assert len(fences) % 2 == 0, f"{page.relative_to(ROOT)}: a code block is never closed"


def test_the_readme_stays_a_front_page():
    """What a newcomer needs, readable in minutes: the reference lives in docs/."""
    readme = README.read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for heading in ("## The two commands", "## A first dataset", "## In your Dagster project", "## Where to go next"):
        assert heading in readme


def test_every_install_command_takes_the_versions_of_constraints_txt():
    """The README, the docs pages and CI install smolclean through constraints.txt, with the extras they name."""
    # Neither installs smolclean: the user's own dg project (docs/deployment.md), and pip itself in CI.
    others = {"pip install -e .", "pip install -q --upgrade pip"}
    commands = [
        (path.relative_to(ROOT), command.strip())
        for path in [*PAGES, ROOT / ".ci" / "run"]
        for command in re.findall(r"pip install[^`&#\n]*", path.read_text(encoding="utf-8"))
    ]
    assert len(commands) > len(others)
    for path, command in commands:
        if command not in others:
            # requirements.txt is `-c constraints.txt` and the test extra (tests/test_packaging.py).
            assert re.search(r"-c \S*constraints\.txt |-r requirements\.txt$", command), \
                f"{path}: `{command}` does not use constraints.txt"
