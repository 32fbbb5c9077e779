"""Reading model replies: what real models write, and what is rejected with feedback the model can act on."""

from __future__ import annotations

import pytest

from smolclean_dagster.core.analysts.replies import MAX_FUNCTIONS, ReplyError, parse_analysis_reply, parse_merge_reply

CODE = '''import re


def strip_tags(df):
    """Remove HTML tags like <b> from `notes`, and decode &amp;."""
    df = df.copy()
    df["notes"] = df["notes"].str.replace(r"<[^>]+>", "", regex=True).str.replace("&amp;", "&", regex=False)
    return df
'''

COLUMNS = ["notes", "city"]


def test_the_documented_format_gives_issues_function_and_status():
    text = (
        "<issues>\n- notes: HTML tags such as <b>\n- `city`: trailing spaces (solved)\n* a problem with no column\n</issues>\n"
        f"<code>\n```python\n{CODE}```\n</code>\n<status>needs_more_work</status>"
    )
    reply = parse_analysis_reply(text, columns=COLUMNS)
    assert reply.function.code == CODE and reply.function.name == "strip_tags"
    assert reply.function.columns == ("notes",)  # read off the code's string literals
    assert [(i.column, i.description, i.solved) for i in reply.issues] == [
        ("notes", "HTML tags such as <b>", False), ("city", "trailing spaces", True), (None, "a problem with no column", False),
    ]
    assert reply.status == "needs_more_work"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"<code>\n{CODE}</code>", id="code-holding-tags-and-entities-unfenced"),
        pytest.param(f"<code>```python\n{CODE}```</code>", id="fence-on-the-tag-line"),
        pytest.param(f"thinking about it...</think>\n<code>\n{CODE}</code>", id="only-the-closing-think-tag"),
        pytest.param(f"<code>\n{CODE}\n<status>needs_more_work</status>", id="missing-closing-tag"),
        pytest.param("<code>\n" + CODE.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "</code>",
                     id="html-escaped-code"),
        pytest.param(f"<code><![CDATA[\n{CODE}]]></code>", id="cdata"),
        pytest.param(CODE, id="nothing-but-code"),
        pytest.param(f"<function>\n```\n{CODE}```\n</function><chunk_status>needs more work</chunk_status>",
                     id="competitor-tag-names"),
    ],
)
def test_replies_real_models_write_give_the_exact_code(text):
    reply = parse_analysis_reply(text, columns=COLUMNS)
    assert reply.function.code == CODE
    assert reply.status == "needs_more_work"  # given, or implied by a function


def test_code_mentioning_the_closing_tag_is_not_cut_there():
    code = 'def drop_code_tags(df):\n    """Remove </code> tags from `notes`."""\n    df = df.copy()\n' \
           '    df["notes"] = df["notes"].str.replace("</code>", "", regex=False)\n    return df\n'
    reply = parse_analysis_reply(f"<code>\n{code}</code>\n<status>needs_more_work</status>", columns=COLUMNS)
    assert reply.function.code == code


def test_clean_needs_no_function_and_no_issues():
    reply = parse_analysis_reply("<think>All good.</think>\nNothing left.\n<status> Clean </status>")
    assert (reply.status, reply.function, reply.issues) == ("clean", None, ())


def test_a_reply_may_decline_an_item_alone():
    # a plan item that needs no fix is declined on its own, with no function and no status to invent
    reply = parse_analysis_reply("<issues>\n- zip: every code has five digits\n</issues>\n<declined>\n- 2: every zip "
                                 "code already has five digits\n</declined>", columns=["zip"])
    assert (reply.function, reply.query, reply.status) == (None, None, "needs_more_work")
    assert [(d.number, d.reason) for d in reply.declines] == [(2, "every zip code already has five digits")]


def test_declared_columns_win_over_the_guess():
    reply = parse_analysis_reply(f"<columns>notes, notes_clean</columns>\n<code>\n{CODE}</code>", columns=COLUMNS)
    assert reply.function.columns == ("notes", "notes_clean")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("<code>\n```python\ndef f(df):\n    df = df.co", "never closed: the reply looks cut off", id="truncated-fence"),
        pytest.param("<code>\ndef f(df):\n    df = df.co", "not closed: the reply looks cut off", id="truncated"),
        pytest.param("<think>Let me look at the city column, it has", "ended inside <think>", id="only-thinking"),
        pytest.param("   ", "empty", id="empty"),
        pytest.param("The data looks fine to me.", "no <code> section and no <status>", id="prose-only"),
        pytest.param("<code>\ndef f(df):\n    return df[\n</code>", "does not parse", id="syntax-error"),
        pytest.param("<code>\nx = 1\n</code>", "no top-level `def`", id="no-function"),
        pytest.param("<code>\n</code>", "empty", id="empty-code"),
        pytest.param("<status>done</status>", "status 'done' is unknown", id="unknown-status"),
    ],
)
def test_unusable_replies_raise_a_message_for_the_model(text, message):
    with pytest.raises(ReplyError, match=message):
        parse_analysis_reply(text, columns=COLUMNS)


def test_merge_replies():
    assert parse_merge_reply(f"<code>\n```python\n{CODE}```\n</code>").name == "strip_tags"
    assert parse_merge_reply("They do different jobs.\n<status>keep</status>") is None
    with pytest.raises(ReplyError, match="neither a merged function"):
        parse_merge_reply("I would rather not.")


def test_the_documented_example_is_a_valid_reply():
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "reply-format.md").read_text(encoding="utf-8")
    example = page.split("````text\n", 1)[1].split("\n````", 1)[0]
    reply = parse_analysis_reply(example, columns=["city", "spend", "name"])
    assert reply.function.name == "unify_city_spelling" and reply.function.columns == ("city",)
    assert reply.status == "needs_more_work" and [i.solved for i in reply.issues] == [False, False, True]
    assert reply.serves == (3,) and [(d.number, d.reason[:8]) for d in reply.declines] == [(7, "removing")]


def test_a_table_of_values_does_not_name_the_columns_its_entries_spell():
    code = '''import pandas as pd

LANGUAGES = {"English": "eng", "Indonesian": "id", "id": "ind"}


def unify_languages(df: pd.DataFrame) -> pd.DataFrame:
    """Write each language of `language` as its code."""
    df = df.copy()
    df["language"] = df["language"].replace(LANGUAGES)
    return df
'''
    reply = parse_analysis_reply(f"<code>\n```python\n{code}```\n</code>\n<status>needs_more_work</status>",
                                 columns=["id", "language"])
    assert reply.function.columns == ("language",), "the function never touches `id`"


def test_a_reply_sends_several_functions_each_with_the_items_it_serves():
    second = CODE.replace("def ", "def other_", 1)
    text = (f"<issues>\n- notes: two problems\n</issues>\n<code>\n{CODE}</code>\n<serves>1</serves>\n"
            f"<code>\n{second}</code>\n<serves>2, 3</serves>\n<declined>\n- 4: needs other rows\n</declined>\n"
            "<status>clean</status>")
    reply = parse_analysis_reply(text, columns=COLUMNS)
    assert reply.function.code.strip() == CODE.strip() and reply.serves == (1,)
    assert [(f.name, served) for f, served in reply.more] == [(reply.more[0][0].name, (2, 3))]
    assert reply.more[0][0].name.startswith("other_") and reply.status == "clean"
    assert [d.number for d in reply.declines] == [4]


def test_two_functions_of_one_name_or_too_many_functions_are_sent_back():
    with pytest.raises(ReplyError, match="two functions named"):
        parse_analysis_reply(f"<code>\n{CODE}</code>\n<code>\n{CODE}</code>", columns=COLUMNS)
    many = "\n".join(f"<code>\n{CODE.replace('def ', f'def f{i}_', 1)}</code>" for i in range(MAX_FUNCTIONS + 1))
    with pytest.raises(ReplyError, match=f"at most {MAX_FUNCTIONS}"):
        parse_analysis_reply(many, columns=COLUMNS)


def test_a_reply_adopts_several_candidates_each_with_the_items_it_serves_beside_its_own_code():
    alone = parse_analysis_reply("<adopt>unify_case_state</adopt>\n<serves>2</serves>\n<adopt>`strip_whitespace`</adopt>"
                                 "\n<serves>1, 3</serves>\n<status>clean</status>", columns=COLUMNS)
    assert (alone.adopt, alone.serves, alone.adopted) == ("unify_case_state", (2,), (("strip_whitespace", (1, 3)),))
    assert alone.function is None and alone.status == "clean"
    beside = parse_analysis_reply(f"<code>\n{CODE}</code>\n<serves>4</serves>\n<adopt>unify_case_state</adopt>\n"
                                  "<serves>2</serves>", columns=COLUMNS)
    assert beside.function.name == "strip_tags" and beside.serves == (4,) and beside.adopt is None
    assert beside.adopted == (("unify_case_state", (2,)),)
    # one candidate alone is served by the <serves> anywhere in the reply, as before
    one = parse_analysis_reply("<serves>5</serves>\n<adopt>unify_case_state</adopt>", columns=COLUMNS)
    assert (one.adopt, one.serves, one.adopted) == ("unify_case_state", (5,), ())
    with pytest.raises(ReplyError, match="twice"):
        parse_analysis_reply("<adopt>a</adopt>\n<adopt>a</adopt>", columns=COLUMNS)
