"""The tool registry: ``Toolbox.run`` parses, calls and turns failures into outcomes for every tool
alike; a call sees the earlier calls on its own path (``Call.history``). Search-R1's agent is
``Toolbox.search_r1``. The parts of a tool, the outcomes and an example: docs/tools.md, "What a
tool is".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from treegrpo.retrieval.base import Closes, Passage, SearchTool, ToolFailed, format_passages

log = logging.getLogger(__name__)

FAILED_SEARCH = "The search failed: the retriever did not answer, so no passages came back."
"""What a search that got no answer observes (``RetrieverTool.unavailable``)."""

RESERVED = ("think", "answer", "information", "invalid")
"""Tags of the protocol itself, and the action kind of a step without a valid action: no tool
may take these names."""

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
"""A tool name: it becomes an XML-like tag, so letters, digits, ``_``, ``.`` and ``-``."""


class BadArgument(ValueError):
    """The text between a tool's tags is not an argument it takes; the message, which the
    model reads, says why (``visit: "foo" is neither a URL nor a result number``)."""


@dataclass(frozen=True)
class Failure:
    """A call's result where it did not work (a missing page); ``reason``: what it observes."""

    reason: str


@dataclass(frozen=True)
class PastCall:
    """An earlier call of the episode: tool, parsed argument, result (None where it failed)."""

    tool: str
    argument: Any
    result: Any


@dataclass(frozen=True)
class Call:
    """One call to run: the parsed argument and the episode's earlier calls, oldest first."""

    argument: Any
    history: tuple[PastCall, ...] = ()

    def last(self, tool: str) -> PastCall | None:
        """The latest earlier call of ``tool`` that gave a result, if any."""
        found = (p for p in reversed(self.history) if p.tool == tool and p.result is not None)
        return next(found, None)


Status = Literal["ok", "error", "failed"]
"""ok: a result; error: the call or its argument did not work (the model's doing, or the
world's: a missing page); failed: the tool did not answer (an outage, counted by the trainer's
health check)."""


@dataclass(frozen=True)
class Outcome:
    """What one call gave, as the rollout records it."""

    status: Status
    text: str  # the observation's text: the formatted result, or what went wrong
    argument: Any = None  # the parsed argument (None when it could not be parsed)
    result: Any = None  # the result (None unless ok)


class Described(Protocol):
    """A tool as the prompt lists it: its tag, ``<name> usage </name>: description``."""

    @property
    def name(self) -> str: ...
    @property
    def usage(self) -> str: ...
    @property
    def description(self) -> str: ...


class Tool(Described, Protocol):
    """What ``Toolbox`` needs of a tool (docs/tools.md, "What a tool is"); optional:
    ``unavailable``, what a call observes when the tool did not answer."""

    def parse(self, text: str) -> Any:
        """The argument in ``text`` (stripped, never empty); raise ``BadArgument`` otherwise."""
        ...

    def call(self, calls: Sequence[Call]) -> Sequence[Any]:
        """One result (or ``Failure``) per call, in order; raise ``ToolFailed`` when the tool
        cannot answer (its ``results``: those it could, None for the others)."""
        ...

    def format(self, result: Any) -> str:
        """The observation's text for ``result``."""
        ...


T = TypeVar("T", bound=Tool)


class Toolbox(Closes):
    """The tools an agent may call, by name, in the order the prompt lists them."""

    def __init__(self, tools: Sequence[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._owned: list[Any] = []  # what close() closes: connections, clients, fetchers
        for tool in tools:
            self.register(tool)

    def owns(self, *resources: Any) -> None:
        """Close ``resources`` (anything with ``close()``) when the toolbox closes."""
        self._owned.extend(resources)

    def close(self) -> None:
        """Close what the toolbox owns (``owns``), last first; a stdio MCP server exits."""
        while self._owned:
            self._owned.pop().close()

    @classmethod
    def search_r1(cls, retriever: SearchTool, topk: int = 3) -> Toolbox:
        """Search-R1's agent: ``search`` over ``retriever``, ``topk`` passages per query."""
        return cls([RetrieverTool(retriever, topk)])

    def register(self, tool: T) -> T:
        """Add ``tool`` (returned, so this works as a decorator on a tool class instance)."""
        if not NAME.fullmatch(tool.name or ""):
            raise ValueError(
                f"tool name {tool.name!r} cannot be a tag: use letters, digits, '_', '.' or '-' "
                "(64 characters at most), starting with a letter or '_'"
            )
        if tool.name in RESERVED:
            raise ValueError(f"tool name {tool.name!r} is one of the protocol's own names")
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def function(
        self, name: str, usage: str, description: str
    ) -> Callable[[Callable[[str], Any]], Callable[[str], Any]]:
        """Register a function of the argument text as a tool (decorator; ``FunctionTool``)."""

        def register(fn: Callable[[str], Any]) -> Callable[[str], Any]:
            self.register(FunctionTool(name, fn, usage, description))
            return fn

        return register

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def run(self, name: str, calls: Sequence[tuple[str, tuple[PastCall, ...]]]) -> list[Outcome]:
        """Run one step's calls to tool ``name`` (``calls[i] = (argument text, history)``): refused
        arguments get an error outcome, the others go in one batch. Never raises for a tool's
        failure; a tool raising other than ``ToolFailed`` (a bug) fails its batch, logged with a
        traceback."""
        tool = self._tools[name]
        out: list[Outcome | None] = [None] * len(calls)
        todo: list[int] = []
        parsed: list[Call] = []
        for i, (text, history) in enumerate(calls):
            try:
                argument = tool.parse(text)
            except BadArgument as exc:
                out[i] = Outcome("error", f"{name}: {exc}")
                continue
            except Exception as exc:  # a parser's own bug: this call is refused, logged
                log.exception("tool %r could not parse %r", name, text)
                out[i] = Outcome("error", f"{name}: the argument could not be read ({exc})")
                continue
            todo.append(i)
            parsed.append(Call(argument, history))
        results: Sequence[Any] = []
        down: set[int] = set()
        try:
            if parsed:
                results = tool.call(parsed)
                if len(results) != len(parsed):
                    raise RuntimeError(
                        f"tool {name!r} returned {len(results)} results for {len(parsed)} calls"
                    )
        except ToolFailed as exc:  # an outage: these calls fail, the episodes go on
            results = exc.results or [None] * len(parsed)
            down = {j for j, r in enumerate(results) if r is None}
            log.warning("%d of %d %s calls failed: %s", len(down), len(parsed), name, exc)
        except Exception:  # a tool's own bug (a third-party or MCP tool): an outage as well,
            # with the traceback in the log, rather than a crashed rollout hours into a run
            log.exception("tool %r raised on a batch of %d calls; they fail", name, len(parsed))
            results, down = [None] * len(parsed), set(range(len(parsed)))
        for j, (i, call) in enumerate(zip(todo, parsed, strict=True)):
            r = results[j]
            if j in down:
                said = getattr(tool, "unavailable", f"The {name} tool did not answer.")
                out[i] = Outcome("failed", said, call.argument)
            elif isinstance(r, Failure):
                out[i] = Outcome("error", f"{name}: {r.reason}", call.argument)
            else:
                out[i] = Outcome("ok", tool.format(r), call.argument, r)
        return [o for o in out if o is not None]


@dataclass(frozen=True)
class RetrieverTool:
    """Search-R1's ``search``: a retriever's top-k passages, as ``Doc i(Title: T) text``."""

    retriever: SearchTool
    topk: int = 3
    name: str = "search"
    usage: str = "query"
    description: str = "searches the corpus; the top passages come back"
    unavailable: str = FAILED_SEARCH

    def parse(self, text: str) -> str:
        return text

    def call(self, calls: Sequence[Call]) -> list[list[Passage]]:
        return self.retriever.search([c.argument for c in calls], self.topk)

    def format(self, result: list[Passage]) -> str:
        return format_passages([p.contents for p in result]).strip()


@dataclass(frozen=True)
class FunctionTool:
    """A tool from a plain function of the argument text (``Toolbox.function``): its return value,
    as ``str``, is the observation; an exception it raises is a ``Failure`` that says why."""

    name: str
    fn: Callable[[str], Any]
    usage: str
    description: str

    def parse(self, text: str) -> str:
        return text

    def call(self, calls: Sequence[Call]) -> list[Any]:
        out: list[Any] = []
        for c in calls:
            try:
                out.append(self.fn(c.argument))
            except BadArgument as exc:
                out.append(Failure(str(exc)))
            except Exception as exc:  # the model's input broke the function: say so, go on
                log.debug("tool %s raised on %r", self.name, c.argument, exc_info=True)
                out.append(Failure(f"{type(exc).__name__}: {exc}"))
        return out

    def format(self, result: Any) -> str:
        return str(result)
