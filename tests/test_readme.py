"""The README says what the code does: its settings table lists every setting with the code's default."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic_core import PydanticUndefined

from smolclean_dagster.settings import DatasetSettings

README = Path(__file__).resolve().parents[1] / "README.md"


def _shown(default: object) -> str:
    """A default as the README's table writes it."""
    if default is PydanticUndefined:
        return "required"
    if default is None:
        return "none"
    if isinstance(default, bool):
        return str(default).lower()
    if default == "":
        return '`""`'
    return f"`{default}`"


def test_the_settings_table_lists_every_setting_with_its_default_in_the_code():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Settings\n") :]
    section = section[: section.index("\n## ", 5)]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, flags=re.M)
    table = dict(rows)
    assert len(table) == len(rows), "a setting is listed twice"
    fields = DatasetSettings.model_fields
    assert list(table) == list(fields), "the table's settings differ from DatasetSettings' (names or order)"
    wrong = {name: (table[name], _shown(field.default)) for name, field in fields.items()
             if table[name] != _shown(field.default)}
    assert not wrong, f"README default vs code default: {wrong}"
