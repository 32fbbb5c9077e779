"""A scripted model that acts on what the prompt shows: it reads the instruction items and their states,
serves open items it has code for, adopts ready-made candidates it agrees with, declines what it cannot
do, and says clean when nothing is left. So a test exercises the model's path (items, candidates, the
budget) through real prompts over real HTTP, not a fixed list of replies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llm_server import Action, Recorded, reply

_ITEM = re.compile(r"^(\d+)\. \[(OPEN|served by [^\]]*|declined: [^\]]*)\] (.+)$", re.MULTILINE)


def items_in(prompt: str) -> dict[int, tuple[str, str]]:
    """The instruction items of a prompt: number -> (state, text)."""
    return {int(n): (state, text) for n, state, text in _ITEM.findall(prompt)}


def offered(prompt: str) -> list[str]:
    """The names of the ready-made candidates a prompt offers."""
    if "## Ready-made functions" not in prompt:
        return []
    section = prompt.split("## Ready-made functions")[1].split("\n## ")[0]
    return [line.split("`")[1] for line in section.splitlines() if line.startswith("- `")]


@dataclass
class InstructedModel:
    """Serves each open item whose text contains a key of `code` with that function, adopts offered
    candidates whose name starts with one of `adopt`, declines items whose text contains a key of
    `decline`, then says clean. With `adopt_together` (candidate name prefix -> words of the item it serves), it
    takes every offered candidate serving an open item in one reply, each with its <serves>, and says clean.
    `calls` counts analysis requests."""

    code: dict[str, str]
    adopt: tuple[str, ...] = ()
    adopt_together: dict[str, str] = field(default_factory=dict)
    decline: dict[str, str] = field(default_factory=dict)
    clean_first: bool = False
    calls: int = 0
    prompts: list[str] = field(default_factory=list)

    def __call__(self, request: Recorded) -> Action:
        prompt = request.prompt
        if "Merge them into ONE function" in prompt:
            return reply("<status>keep</status>")
        self.calls += 1
        self.prompts.append(prompt)
        items = items_in(prompt)
        open_items = {n: text for n, (state, text) in items.items() if state == "OPEN"}
        if self.clean_first and self.calls == 1:
            return reply("<issues>\n</issues>\n<status>clean</status>")
        together = [(name, n) for name in offered(prompt) for prefix, words in self.adopt_together.items()
                    if name.startswith(prefix) for n, text in sorted(open_items.items()) if words in text]
        if together:
            adopts = "".join(f"<adopt>{name}</adopt>\n<serves>{n}</serves>\n" for name, n in together)
            return reply(f"<issues>\n- detectors: {len(together)} candidates\n</issues>\n{adopts}<status>clean</status>")
        for n, text in sorted(open_items.items()):
            for key, reason in self.decline.items():
                if key in text:
                    return reply(f"<issues>\n</issues>\n<declined>\n- {n}: {reason}\n</declined>\n<status>clean</status>")
            for key, source in self.code.items():
                if key in text:
                    name = re.search(r"^def (\w+)", source, re.MULTILINE).group(1)
                    if f"`{name}`" in prompt.split("## Functions already in the module")[1].split("## ")[0]:
                        continue  # already in the module yet the item is open: nothing more this model can do
                    return reply(f"<issues>\n- {key}\n</issues>\n<code>\n```python\n{source}```\n</code>\n"
                                 f"<serves>{n}</serves>\n<status>needs_more_work</status>")
        for name in offered(prompt):
            if name.startswith(self.adopt):
                return reply(f"<issues>\n- detectors: {name}\n</issues>\n<adopt>{name}</adopt>\n"
                             "<status>needs_more_work</status>")
        return reply("<issues>\n</issues>\n<status>clean</status>")
