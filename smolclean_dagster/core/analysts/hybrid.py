"""HybridAnalyst: the model decides every step; the rules' ready-made functions are its candidates.

The detectors' findings are evidence in the prompt, and every function the rules would write for the
chunk is offered by name, so the model can adopt one (no code to write, a cheap reply) or ignore it
when it goes against what the user asked (a rule lower-casing `F` where the user wants M/F). With rows the user
corrected, each candidate says what it does to them (the corrections it makes, the labelled cells it breaks). A
rule's function lands in the module only when the model adopted it.
"""

from __future__ import annotations

from .base import AnalysisRequest, Analyst, Candidate, Proposal

#: Most candidates offered in one prompt (the first ones in the rules' priority order).
MAX_CANDIDATES = 8


class HybridAnalyst:
    """The model leads, the rules propose: each step asks the model, showing the rules' candidate functions.

    Adopted functions keep the rules' template in their provenance (`rule`), and record the model that
    chose them, so the registry still tells which code a model wrote and which came from a template.

    Example:
        >>> analyst = HybridAnalyst(RulesAnalyst(), LLMAnalyst(client))   # doctest: +SKIP
        >>> for step in run_chunk(work, analyst, store, sandbox):          # doctest: +SKIP
        ...     print(step.kind)
    """

    name = "hybrid"
    trusts_detectors = False
    reads_instructions = True

    def __init__(self, rules: Analyst, llm: Analyst):
        self.rules = rules
        self.llm = llm

    def propose(self, request: AnalysisRequest) -> Proposal:
        """The model's answer, with the rules' functions for this chunk offered as candidates."""
        offered: dict = {}
        for function in self.rules.candidates(_as_the_rules_read_it(request)):
            if function.name in request.rejected or len(offered) >= MAX_CANDIDATES or _covered(function, offered.values()):
                continue
            offered[function.name] = function
        judge = request.on_labels  # set only when there are labelled rows
        said = {}
        if judge is not None:  # a rule that broke a label is offered, and adopted, with those values as written
            for name, function in list(offered.items()):
                offered[name], said[name] = judge(function)
        candidates = tuple(Candidate(name=f.name, docstring=f.summary, columns=f.columns, evidence=_evidence(f),
                                     on_labels=said.get(f.name, "")) for f in offered.values())
        proposal = self.llm.propose(request.model_copy(update={"candidates": candidates}))
        taken = [proposal.adopt] * (proposal.adopt is not None) + [name for name, _ in proposal.adopted]
        if not taken:
            return proposal
        unknown = [name for name in taken if name not in offered]
        if unknown:
            names = ", ".join(offered) or "none"
            error = (f"you adopted {', '.join(f'`{n}`' for n in unknown)}, not among the candidates offered in this "
                     f"step ({names}); adopt them by their exact names, or write the functions yourself in <code>")
            return proposal.model_copy(update={"adopt": None, "adopted": (), "function": None, "more": (),
                                               "error": error, "status": "needs_more_work"})
        # candidates taken besides the step's function are judged after the reply's own functions, in order
        more = proposal.more + tuple((offered[name], serves) for name, serves in proposal.adopted)
        function = offered[proposal.adopt] if proposal.adopt is not None else proposal.function
        return proposal.model_copy(update={"function": function, "more": more, "adopted": ()})


def _as_the_rules_read_it(request: AnalysisRequest) -> AnalysisRequest:
    """The request with the conventions the user's corrections show among the instruction items, as the rules
    read them (`Labels.conventions`): the model reads the corrections themselves, the rules' candidates need
    them said ("Write whole numbers without a decimal point in column 'rate'.")."""
    if request.labels is None:
        return request
    return request.model_copy(update={"instructions": request.labels.with_conventions(request.instructions)})


def _covered(function, offered) -> bool:
    """True when an offered function of the same rule already fixes every column this one fixes (the rules
    propose a function over several columns, then one per column in case that one is rejected)."""
    template = function.rule.template if function.rule else None
    return any(
        o.rule is not None and o.rule.template == template and set(function.columns) <= set(o.columns) for o in offered
    )


def _evidence(function) -> str:
    """What made the rule act (its findings, with their cell counts), and the examples it documents."""
    context = function.rule.context if function.rule else {}
    why = "; ".join(context.get("why", ()))
    examples = context.get("examples")
    return f"{why} (e.g. {examples})" if why and isinstance(examples, str) and examples else why
