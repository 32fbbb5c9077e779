"""Reading a model's reply: issues, its functions, and a status, from text real models write.

The format (documented in docs/reply-format.md) is a few tagged sections:

    <issues>
    - city: three spellings of one city ("new york", "NEW YORK")
    - name: surrounding whitespace (solved)
    </issues>
    <code>
    ```python
    def unify_city(df): ...
    ```
    </code>
    <serves>1, 3</serves>
    <declined>
    - 7: not a row-level fix: removing duplicates needs the other rows
    </declined>
    <status>needs_more_work</status>

`<adopt>NAME</adopt>` takes a ready-made candidate function the prompt offered, each followed by its own
`<serves>`: several in one reply, alone or beside `<code>` sections (judged after them, in the order sent).
`<serves>` names the instruction items the function carries out; `<declined>` declines items with a reason,
beside a function or alone (a reply that only declines needs no `<status>`).

The tags are markers, not XML: nothing is parsed as XML, so code may hold `<`, `>` and `&` as they are
(the competitor lost replies to `<=` in code). What the parser forgives, because real models do it:
a `<think>...</think>` preamble (or only its closing tag), prose around and between the sections, code
with or without a ``` fence inside `<code>`, no `<code>` tag at all but a fenced block with a `def`,
HTML-escaped code (`&lt;`, when every `<`, `>`, `&` is escaped or the code only parses unescaped), a missing `</code>` when another section follows, a missing `<status>`
when a function is given, and the competitor's `<chunk_status>` / `<issues_detected>` tag names.

What it does not forgive raises ReplyError (the model's fault): its message is written to be shown
back to the model as feedback.
"""

from __future__ import annotations

import ast
import hashlib
import html
import re
import textwrap
from dataclasses import dataclass
from typing import Literal

from ..errors import SmolcleanError
from ..functions import CleaningFunction, columns_in_code
from .base import Issue, ItemDecline


class ReplyError(SmolcleanError):
    """The model's reply cannot be used; the message says why, addressed to the model."""


@dataclass(frozen=True)
class AnalysisReply:
    """A parsed analysis reply: the issues seen, its functions (the first in `function`, any further ones in
    `more`, each with the items it serves), and whether the chunk is clean."""

    issues: tuple[Issue, ...]
    function: CleaningFunction | None
    status: Literal["clean", "needs_more_work"]
    serves: tuple[int, ...] = ()
    declines: tuple[ItemDecline, ...] = ()
    adopt: str | None = None
    query: str | None = None
    plan: tuple[str, ...] = ()
    more: tuple[tuple[CleaningFunction, tuple[int, ...]], ...] = ()
    #: ready-made candidates taken besides `adopt` (or beside the reply's own code), each with the items it serves
    adopted: tuple[tuple[str, tuple[int, ...]], ...] = ()


_FLAGS = re.IGNORECASE | re.DOTALL
_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", _FLAGS)
_REASONING_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_REASONING_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
_CODE_OPEN = re.compile(r"<(code|function)>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[ \t]*\n", re.MULTILINE)
#: A fence written on the same line as its tag ("<code>```python", "```</code>"): put on its own line.
_FENCE_BESIDE_TAG = re.compile(r"(<(?:code|function)>)[ \t]*(`{3,}|~{3,})", re.IGNORECASE)
_TAG_BESIDE_FENCE = re.compile(r"(`{3,}|~{3,})[ \t]*(</(?:code|function)>)", re.IGNORECASE)
#: Tags that start another section: where an unclosed <code> section ends at the latest.
_NEXT_SECTION = re.compile(
    r"^[ \t]*<(issues|issues_detected|columns|status|chunk_status|serves|declined|adopt)>", re.IGNORECASE | re.MULTILINE
)
#: The most functions one reply may send (the prompt says so): more than this is likely cut off at the reply's
#: token limit, and is sent back whole.
MAX_FUNCTIONS = 8
#: A `<code>` (or `<function>`) tag opening a line: where each function of a reply starts.
_CODE_LINE = re.compile(r"^[ \t]*<(?:code|function)>", re.IGNORECASE | re.MULTILINE)
_STATUS = re.compile(r"<(?:chunk_)?status>\s*([A-Za-z][A-Za-z _-]*)", re.IGNORECASE)
_ISSUES = re.compile(
    r"<(issues|issues_detected)>(.*?)(?:</\1>|(?=<(?:code|function|columns|status|chunk_status|serves|declined|adopt)>)|\Z)",
    _FLAGS,
)
_SERVES = re.compile(r"<serves>(.*?)(?:</serves>|(?=<)|\Z)", _FLAGS)
_DECLINED = re.compile(r"<declined?>(.*?)(?:</declined?>|(?=<(?:code|status|serves|adopt|issues)>)|\Z)", _FLAGS)
_DECLINE_LINE = re.compile(r"^\s*(?:[-*\u2022]\s*)?#?(\d{1,3})\s*[:.)\-\u2013]\s*(.+?)\s*$")
_PLAN = re.compile(r"<plan>(.*?)(?:</plan>|(?=<(?:code|status|serves|adopt|issues|query|declined?)>)|\Z)", _FLAGS)
_QUERY = re.compile(r"<query>\s*(.*?)\s*</query>", re.IGNORECASE | re.DOTALL)
_ADOPT = re.compile(r"<adopt>\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s*(?:</adopt>)?", re.IGNORECASE)
_COLUMNS = re.compile(r"<columns>(.*?)(?:</columns>|(?=<)|\Z)", _FLAGS)
_SOLVED = re.compile(r"[\(\[]\s*solved\s*[\)\]]\s*$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d+);")


def reply_hash(text: str) -> str:
    """A short, stable hash of a model's raw reply: beside the prompt's hash, it tells two learning runs whose
    model answered the same prompt differently from runs that asked something else (registry provenance)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def parse_analysis_reply(text: str, *, columns: list[str] | tuple[str, ...] = ()) -> AnalysisReply:
    """Read an analysis reply; `columns` are the chunk's columns (to tell which columns an issue or code names).

    Example:
        >>> reply = parse_analysis_reply('''<think>hmm</think> Here you go:
        ... <issues>
        ... - ibu: "N/A" for missing (solved)
        ... </issues>
        ... <status>clean</status>''', columns=["ibu"])
        >>> reply.status, reply.issues[0].column, reply.issues[0].solved
        ('clean', 'ibu', True)
    """
    body = strip_reasoning(text)
    adopts, body = _adopts(body)
    functions, rest = _functions(body, columns)
    function, serves = functions[0] if functions else (None, _serves(rest))
    adopt = None
    if adopts and function is None:  # the first candidate taken is the step's function; one alone may be served
        (adopt, own), adopts = adopts[0], adopts[1:]  # by a <serves> anywhere in the reply
        serves = own if own is not None or adopts else serves
    query = _QUERY.search(rest)
    if query and (function is not None or adopt):
        raise ReplyError(
            "the reply sends a <query> and a function; ask the query alone, read its answer in the next step, "
            "then send the function"
        )
    if query:
        rest = rest[: query.start()] + rest[query.end() :]
    declines = _declines(rest)
    # a reply that only declines items says what it has to say: the chunk goes on with the next step
    status = _status(rest, has_function=function is not None or adopt is not None or query is not None or bool(declines))
    return AnalysisReply(
        issues=_issues(rest, columns), function=function, status=status, serves=serves,
        declines=declines, adopt=adopt,
        query=query.group(1).strip() if query else None, plan=_plan(rest), more=tuple(functions[1:]),
        adopted=tuple((name, own or ()) for name, own in adopts),
    )


def _adopts(body: str) -> tuple[list[tuple[str, tuple[int, ...] | None]], str]:
    """The candidates a reply adopts, in order, each with the items of the `<serves>` right after it (None when none
    follows), and the reply without them: an adopt's `<serves>` is no code section's.

    Example:
        >>> _adopts("<adopt>unify_case_state</adopt>\n<serves>2</serves>\n<adopt>strip_whitespace</adopt>")[0]
        [('unify_case_state', (2,)), ('strip_whitespace', None)]
    """
    found, kept, at = [], [], 0
    for m in _ADOPT.finditer(body):
        if m.start() < at:
            continue
        end, own = m.end(), None
        served = _SERVES.match(body, end + len(body[end:]) - len(body[end:].lstrip()))
        if served:
            own, end = _serves(served.group(0)), served.end()
        names = [name for name, _ in found]
        if m.group(1) in names:
            raise ReplyError(f"the reply adopts `{m.group(1)}` twice; adopt each candidate once")
        found.append((m.group(1), own))
        kept.append(body[at:m.start()])
        at = end
    if len(found) > MAX_FUNCTIONS:
        raise ReplyError(f"the reply adopts {len(found)} candidates; adopt at most {MAX_FUNCTIONS} per reply, the "
                         "others in the next step")
    return found, "".join(kept) + body[at:]


def _functions(body: str, columns: list[str] | tuple[str, ...]) -> tuple[list[tuple[CleaningFunction, tuple[int, ...]]], str]:
    """The reply's functions in order, each with the items its own <serves> names, and the reply without them.

    A reply holds one function per `<code>` section; a `<serves>` belongs to the code section before it. With
    one section (or code without a tag), the one <serves> anywhere in the reply is that function's.
    """
    starts = [m.start() for m in _CODE_LINE.finditer(body)]
    if len(starts) < 2:
        code, rest = extract_code(body)
        return ([(_function(code, rest, columns), _serves(rest))] if code is not None else []), rest
    if len(starts) > MAX_FUNCTIONS:
        raise ReplyError(f"the reply sends {len(starts)} functions; send at most {MAX_FUNCTIONS} per reply, the "
                         "others in the next step")
    found, rests = [], [body[: starts[0]]]
    for start, end in zip(starts, starts[1:] + [len(body)]):
        code, rest = extract_code(body[start:end])
        if code is None:
            raise ReplyError("a <code> section holds no code; send each function in its own <code> ... </code>")
        found.append((_function(code, rest, columns), _serves(rest)))
        rests.append(_SERVES.sub("", rest))
    names = [f.name for f, _ in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ReplyError(f"the reply sends two functions named {', '.join(twice)}; give each function its own name")
    return found, "".join(rests)


def parse_merge_reply(text: str) -> CleaningFunction | None:
    """Read a consolidation reply: the merged function, or None when the model says to keep them apart.

    Example:
        >>> parse_merge_reply("<status>keep</status>") is None
        True
    """
    body = strip_reasoning(text)
    code, rest = extract_code(body)
    if code is not None:
        return _function(code, rest, ())
    match = _STATUS.search(rest)
    if match and _word(match.group(1)) == "keep":
        return None
    raise ReplyError(
        "the reply has neither a merged function in <code> ... </code> nor <status>keep</status>; send one of them"
    )


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning: `<think>` blocks, or everything before a lone `</think>`."""
    body = _REASONING.sub("", text or "")
    closing = list(_REASONING_CLOSE.finditer(body))
    if closing:  # the opening tag was in the chat template, not in the reply
        body = body[closing[-1].end() :]
    if _REASONING_OPEN.search(body):
        raise ReplyError(
            "the reply ended inside <think> ... with no answer after it; think briefly, close </think>, "
            "then answer in the reply format"
        )
    if not body.strip():
        raise ReplyError("the reply is empty; answer in the reply format: <issues>, <code>, <status>")
    return body


def extract_code(body: str) -> tuple[str | None, str]:
    """The code of the reply (or None) and the reply with the code taken out (where the other sections are).

    Inside `<code>`, a fenced block wins; without a fence the section ends at the first `</code>` after
    which the code parses (code may contain the text "</code>"), else at the next section tag.
    """
    body = _FENCE_BESIDE_TAG.sub(r"\1\n\2", _TAG_BESIDE_FENCE.sub(r"\1\n\2", body))
    opening = _CODE_OPEN.search(body)
    if opening is None:
        return _bare_code(body)
    tag = opening.group(1).lower()
    start = opening.end()
    section_end = _section_end(body, start, tag)
    fence = _FENCE_OPEN.search(body, start)
    if fence and (section_end is None or fence.start() < section_end[0]):
        code, fence_end = _fenced(body, fence)
        after = re.compile(rf"\s*</{tag}>", re.IGNORECASE).match(body, fence_end)
        return code, body[: opening.start()] + body[after.end() if after else fence_end :]
    if section_end is None:
        raise ReplyError(
            f"the <{tag}> section is not closed: the reply looks cut off; send the whole function and end it "
            f"with </{tag}>"
        )
    code_end, rest_start = section_end
    return body[start:code_end], body[: opening.start()] + body[rest_start:]


def _section_end(body: str, start: int, tag: str) -> tuple[int, int] | None:
    """Where the unfenced code of a `<code>` section ends, and where the text after the section resumes."""
    closings = [(m.start(), m.end()) for m in re.finditer(rf"</{tag}>", body[start:], re.IGNORECASE)]
    closings = [(a + start, b + start) for a, b in closings]
    for end, resume in closings:
        if _parses(_unescaped(body[start:end])):
            return end, resume
    if closings:
        return closings[0]
    following = _NEXT_SECTION.search(body, start)
    if following:
        return following.start(), following.start()
    return None


def _fenced(body: str, fence: re.Match[str]) -> tuple[str, int]:
    """The content of the fenced block opened by `fence`, and where the block ends."""
    marker = fence.group(1)
    closing = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$", re.MULTILINE).search(body, fence.end())
    if closing is None:
        raise ReplyError(
            f"the code block opened with {marker} is never closed: the reply looks cut off; send the whole "
            f"function and close the block with {marker}"
        )
    return body[fence.end() : closing.start()], closing.end()


def _bare_code(body: str) -> tuple[str | None, str]:
    """Code without a `<code>` tag: the last fenced block defining a function, or a reply that is only code."""
    found = None
    for fence in _FENCE_OPEN.finditer(body):
        try:
            code, end = _fenced(body, fence)
        except ReplyError:
            break
        if re.search(r"^\s*def \w+\s*\(", code, re.MULTILINE):
            found = (code, fence.start(), end)
    if found:
        code, a, b = found
        return code, body[:a] + body[b:]
    if re.search(r"^def \w+\s*\(", body, re.MULTILINE) and _parses(body):
        return body, ""
    return None, body


def _function(code: str, rest: str, columns: list[str] | tuple[str, ...]) -> CleaningFunction:
    stripped = code.strip()
    if stripped.startswith("<![CDATA[") and stripped.endswith("]]>"):
        code = stripped[len("<![CDATA[") : -len("]]>")]
    code = _unescaped(textwrap.dedent(code).strip("\n"))
    if not code.strip():
        raise ReplyError("the <code> section is empty; send one complete function, or no <code> section at all")
    try:
        function = CleaningFunction.from_code(code, columns=())
    except SyntaxError as exc:
        line = (exc.text or "").strip()
        raise ReplyError(
            f"the code does not parse: {exc.msg} at line {exc.lineno}" + (f" ({line!r})" if line else "")
            + "; send the complete, valid Python function"
        ) from exc
    except ValueError as exc:
        raise ReplyError(f"the code has no top-level `def`: {exc}; send one function `def name(df): ...`") from exc
    named = _declared_columns(rest) or columns_in_code(function.code, columns)
    return function.model_copy(update={"columns": tuple(named)})


def _unescaped(code: str) -> str:
    """`code`, HTML-unescaped when a model escaped it as if it were XML (and only then).

    Escaped means: the code does not parse as written but does unescaped (`if n &lt; 3:`), or every
    `<`, `>` and `&` in it is written as an entity (then even strings were escaped: `"&lt;b&gt;"`).
    """
    if not _ENTITY.search(code):
        return code
    everywhere = not re.search(r"[<>]", code) and not re.search(r"&(?!(lt|gt|amp|quot|#\d+);)", code)
    if everywhere or not _parses(code):
        candidate = html.unescape(code)
        if _parses(candidate):
            return candidate
    return code


def _parses(code: str) -> bool:
    try:
        ast.parse(textwrap.dedent(code).strip("\n"))
    except SyntaxError:
        return False
    return True


def _status(rest: str, *, has_function: bool) -> Literal["clean", "needs_more_work"]:
    match = _STATUS.search(rest)
    if match is None:
        if has_function:
            return "needs_more_work"
        raise ReplyError(
            "the reply has no <code> section and no <status>; send one function in <code> ... </code>, "
            "or <status>clean</status> when nothing is left to fix"
        )
    word = _word(match.group(1))
    if word == "clean":
        return "clean"
    if word in {"needs_more_work", "needs_work", "not_clean"}:
        return "needs_more_work"
    raise ReplyError(f"the status {match.group(1).strip()!r} is unknown; use <status>clean</status> or "
                     "<status>needs_more_work</status>")


def _word(text: str) -> str:
    return re.sub(r"[\s-]+", "_", text.strip().lower())


def _issues(rest: str, columns: list[str] | tuple[str, ...]) -> tuple[Issue, ...]:
    match = _ISSUES.search(rest)
    if match is None:
        return ()
    known = {str(c) for c in columns}
    issues = []
    for line in match.group(2).splitlines():
        text = _BULLET.sub("", line).strip()
        if not text:
            continue
        solved = bool(_SOLVED.search(text))
        text = _SOLVED.sub("", text).strip()
        column = None
        head, sep, tail = text.partition(":")
        if sep and head.strip().strip("`'\"") in known:
            column, text = head.strip().strip("`'\""), tail.strip()
        issues.append(Issue(description=text, column=column, solved=solved))
    return tuple(issues)


def _plan(rest: str) -> tuple[str, ...]:
    """The items of `<plan>`, one per line (bullets and numbers dropped): the model's own instructions."""
    match = _PLAN.search(rest)
    if match is None:
        return ()
    lines = (_BULLET.sub("", line).strip() for line in match.group(1).splitlines())
    return tuple(dict.fromkeys(line for line in lines if line))


def _serves(rest: str) -> tuple[int, ...]:
    """The instruction item numbers of `<serves>`: "1, 3", "#2 #5", "items 4 and 6"."""
    match = _SERVES.search(rest)
    if match is None:
        return ()
    return tuple(dict.fromkeys(int(n) for n in re.findall(r"\d{1,3}", match.group(1))))


def _declines(rest: str) -> tuple[ItemDecline, ...]:
    """The items of `<declined>`, one per line as "N: reason"; a line without a reason is the model's fault."""
    match = _DECLINED.search(rest)
    if match is None:
        return ()
    out = []
    for line in match.group(1).splitlines():
        if not line.strip():
            continue
        found = _DECLINE_LINE.match(line)
        if found is None:
            raise ReplyError(
                f"the <declined> line {line.strip()!r} is not 'N: reason'; write one line per declined item, "
                "its number, a colon and why it cannot be done by a row-level function"
            )
        out.append(ItemDecline(number=int(found.group(1)), reason=found.group(2).strip()))
    return tuple(out)


def _declared_columns(rest: str) -> list[str]:
    match = _COLUMNS.search(rest)
    if match is None:
        return []
    return [c.strip().strip("`'\"") for c in re.split(r"[,\n]", match.group(1)) if c.strip().strip("`'\"")]

