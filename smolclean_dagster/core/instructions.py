"""The user's instructions as numbered items, and how far each one is carried out.

Instructions are the user's words: a list ("- dates as ISO", "1. phone as (XXX) XXX-XXXX") or prose. Each
item is either open, served by one or more accepted functions, or declined by the analyst with a reason
(not a row-level fix, not applicable to this data). Learning is not done while an item is open, and every
result reports the coverage ("12 instructions: 11 served, 1 declined").

An item is recorded by its text, not its number, so editing the instructions re-opens exactly the items
whose words changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict

#: A list line: "-", "*", "•", "1.", "1)", "(1)", "a)" and the like.
_BULLET = re.compile(r"^\s*(?:[-*\u2022\u2013]|\(?\d{1,3}[.):]|\(?[a-zA-Z][.)])\s+")
#: End of a sentence: . ! or ? followed by space and a capital, a digit or a quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(`])")
#: Abbreviations whose full stop does not end a sentence ("Dr. Smith", "e.g. 5").
_ABBREVIATIONS = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|Dr|Mr|Mrs|Ms|Jr|Sr|St|No|approx)\.)$", re.IGNORECASE)
#: Longest item text kept (a runaway paragraph is cut, with its start kept).
MAX_ITEM_CHARS = 400


class InstructionItem(BaseModel):
    """One numbered item of the user's instructions."""

    model_config = ConfigDict(frozen=True)

    number: int
    text: str


class ItemState(BaseModel):
    """Where one item stands: open, served by functions, or declined with the analyst's reason."""

    model_config = ConfigDict(frozen=True)

    number: int
    text: str
    state: Literal["open", "served", "declined"] = "open"
    functions: tuple[str, ...] = ()
    reason: str = ""


class Declined(BaseModel):
    """An item the analyst declined, with its reason and where it said so."""

    model_config = ConfigDict(frozen=True)

    item: str
    reason: str
    chunk: str = ""


def split_instructions(text: str) -> tuple[InstructionItem, ...]:
    """The user's instructions as numbered items: list lines when there are any, else sentences.

    Headings (a line ending with ":" followed by list lines) are context, not items; a list line's
    continuation lines (indented, no bullet) belong to it.

    Example:
        >>> [i.text for i in split_instructions("Please:\\n- dates as ISO\\n- phone as (XXX) XXX-XXXX")]
        ['dates as ISO', 'phone as (XXX) XXX-XXXX']
        >>> [i.text for i in split_instructions("Dates as ISO. Trim every name.")]
        ['Dates as ISO.', 'Trim every name.']
    """
    lines = [line.rstrip() for line in (text or "").splitlines()]
    listed = [i for i, line in enumerate(lines) if _BULLET.match(line)]
    if listed:
        items: list[str] = []
        current: list[str] | None = None
        for line in lines:
            if _BULLET.match(line):
                if current:
                    items.append(" ".join(current))
                current = [_BULLET.sub("", line).strip()]
            elif line.strip() and current is not None and (line[:1].isspace() or not line.rstrip().endswith(":")):
                current.append(line.strip())
            elif line.strip() and current is None and not line.rstrip().endswith(":"):
                items.extend(_sentences(line))  # prose before the list
            else:
                if current:
                    items.append(" ".join(current))
                current = None
        if current:
            items.append(" ".join(current))
    else:
        items = _sentences(" ".join(line.strip() for line in lines if line.strip()))
    texts = [_shorten(t) for t in items if t.strip() and re.search(r"\w", t)]
    return tuple(InstructionItem(number=n, text=t) for n, t in enumerate(dict.fromkeys(texts), start=1))


def with_items(instructions: str, texts: Iterable[str]) -> str:
    """The instructions with `texts` added as items of their own (those it holds already are not added twice),
    whatever form the instructions take: as list lines after a list (or when there are no instructions yet), as
    sentences after prose, so that every earlier item keeps its words.

    Example:
        >>> with_items("- Trim names", ["Write 'N/A' as empty in column 'email'."])
        "- Trim names\n- Write 'N/A' as empty in column 'email'."
        >>> with_items("Trim names.", ["Write numbers without units."])
        'Trim names. Write numbers without units.'
    """
    held = {" ".join(i.text.casefold().split()) for i in split_instructions(instructions)}
    new = [t.strip() for t in dict.fromkeys(texts) if t.strip() and " ".join(t.casefold().split()) not in held]
    if not new:
        return instructions
    text = (instructions or "").rstrip()
    listed = any(_BULLET.match(line) for line in text.splitlines())
    if text and not listed and text.endswith((".", "!", "?")) and all(re.match(r"[A-Z0-9\"'(`]", t) for t in new):
        return " ".join([text, *new])
    return "\n".join([*([text] if text else []), *(f"- {t}" for t in new)])


def item_key(text: str) -> str:
    """An item's words as compared for sameness: case, punctuation, quotes and spacing aside.

    Example:
        >>> item_key("`City`: unify the spellings.") == item_key("city - unify the spellings")
        True
    """
    return " ".join(re.findall(r"\w+", text.casefold()))


def new_items(held: Iterable[str], texts: Iterable[str]) -> tuple[str, ...]:
    """The `texts` that say no item of `held` says, nor an earlier one of `texts` (`item_key`): what two chunks of
    a wave add to one plan is added once, however each wrote it.

    Example:
        >>> new_items(["zip: pad to 5 digits"], ["Zip: pad to 5 digits.", "city: unify spellings", "City: unify spellings"])
        ('city: unify spellings',)
    """
    seen = {item_key(t) for t in held}
    out = []
    for text in texts:
        key = item_key(text)
        if key and key not in seen:
            seen.add(key)
            out.append(text)
    return tuple(out)


def _sentences(text: str) -> list[str]:
    parts: list[str] = []
    for piece in _SENTENCE_END.split(text.strip()):
        if parts and _ABBREVIATIONS.search(parts[-1]):
            parts[-1] = f"{parts[-1]} {piece}"
        else:
            parts.append(piece)
    return [p.strip() for p in parts if p.strip()]


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1] + "\u2026"


def item_states(
    items: Iterable[InstructionItem], served: dict[str, tuple[str, ...]], declined: Iterable[Declined]
) -> tuple[ItemState, ...]:
    """Each item's state from the functions serving it (`served`: item text -> function names) and the
    declines on record. A function serving an item wins over an earlier decline of it."""
    reasons = {d.item: d.reason for d in declined}
    states = []
    for item in items:
        functions = served.get(item.text, ())
        if functions:
            states.append(ItemState(number=item.number, text=item.text, state="served", functions=functions))
        elif item.text in reasons:
            states.append(ItemState(number=item.number, text=item.text, state="declined", reason=reasons[item.text]))
        else:
            states.append(ItemState(number=item.number, text=item.text))
    return tuple(states)


def open_items(states: Iterable[ItemState]) -> tuple[ItemState, ...]:
    return tuple(s for s in states if s.state == "open")


def coverage_line(states: Iterable[ItemState], *, reasons: bool = True) -> str:
    """One line for summaries: "12 instructions: 10 served, 1 declined (#7: ...), 1 open (#9)".

    Example:
        >>> coverage_line([ItemState(number=1, text="a", state="served", functions=("f",)),
        ...                ItemState(number=2, text="b", state="declined", reason="needs other rows")])
        '2 instructions: 1 served, 1 declined (#2: needs other rows)'
    """
    states = list(states)
    if not states:
        return "no instructions"
    served = [s for s in states if s.state == "served"]
    declined = [s for s in states if s.state == "declined"]
    still = [s for s in states if s.state == "open"]
    parts = [f"{len(served)} served"]
    if declined:
        why = "; ".join(f"#{s.number}: {s.reason}" for s in declined)
        parts.append(f"{len(declined)} declined" + (f" ({why})" if reasons else ""))
    if still:
        parts.append(f"{len(still)} open ({', '.join(f'#{s.number}' for s in still)})")
    noun = "instruction" if len(states) == 1 else "instructions"
    return f"{len(states)} {noun}: " + ", ".join(parts)


def stop_reason(states: Iterable[ItemState], *, selection: str, said_clean: bool, reads: bool) -> str:
    """Why learning stopped, for the summary: items all served, the model said clean, or a budget spent
    with items still open.

    Example:
        >>> stop_reason([ItemState(number=2, text="b")], selection="step budget spent", said_clean=False, reads=True)
        'step budget spent with instruction item #2 open'
    """
    states = list(states)
    still = open_items(states)
    if still and not reads:
        which = ", ".join(f"#{s.number}" for s in still)
        return (f"the rules analyst does not read instructions beyond the few requests its rules know "
                f"(docs/analysts.md): item(s) {which} not carried out; to have them served, learn again with a model "
                f"(--model, or SMOLCLEAN_MODEL)")
    if still:
        which = ", ".join(f"#{s.number}" for s in still)
        noun = "item" if len(still) == 1 else "items"
        return f"{selection or 'selection ended'} with instruction {noun} {which} open"
    parts = []
    if states:
        parts.append("every instruction item served or declined")
    if said_clean:
        parts.append("the analyst said clean")
    if selection and selection not in ("done", "no new dirt"):
        parts.append(selection)
    elif not parts or selection == "no new dirt":
        # not "no dirt left": what the analysed chunks showed and the module could not fix is listed above
        parts.append("no chunk left showing dirt the analysed chunks had not shown")
    return ", ".join(parts)
