"""The tool registry: registration rules, and ``Toolbox.run`` turning every way a call can go
(a result, a refused argument, a per-call failure, an outage of all or some calls) into outcomes
that say so; the calculator as the worked example."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treegrpo.retrieval.base import Passage, SearchFailed, ToolFailed
from treegrpo.tools.calculator import calculate, evaluate_arithmetic
from treegrpo.tools.registry import (
    BadArgument,
    Call,
    Failure,
    PastCall,
    Toolbox,
)


@dataclass
class Echo:
    """Echoes its argument; refuses "bad"; fails "missing" call by call; records batches."""

    name: str = "echo"
    usage: str = "text"
    description: str = "says it back"
    batches: list[list[Call]] = field(default_factory=list)

    def parse(self, text: str) -> str:
        if text == "bad":
            raise BadArgument("write something else")
        return text.upper()

    def call(self, calls: Sequence[Call]) -> list[Any]:
        self.batches.append(list(calls))
        return [Failure("no such thing") if c.argument == "MISSING" else c.argument for c in calls]

    def format(self, result: Any) -> str:
        return f"<<{result}>>"


@dataclass
class Down:
    name: str = "down"
    usage: str = "x"
    description: str = "never answers some calls"
    partial: bool = False

    def parse(self, text: str) -> str:
        return text

    def call(self, calls: Sequence[Call]) -> list[Any]:
        results = [c.argument if i % 2 == 0 else None for i, c in enumerate(calls)]
        raise ToolFailed("connection refused", results if self.partial else None)

    def format(self, result: Any) -> str:
        return str(result)


def test_registration_refuses_names_that_cannot_be_tags_or_clash() -> None:
    box = Toolbox([Echo()])
    assert box.names == ("echo",) and "echo" in box and len(box) == 1
    for bad in ("", "two words", "1st", "a<b", "x" * 65):
        with pytest.raises(ValueError, match="cannot be a tag"):
            box.register(Echo(name=bad))
    for reserved in ("answer", "think", "information", "invalid"):
        with pytest.raises(ValueError, match="protocol's own names"):
            box.register(Echo(name=reserved))
    with pytest.raises(ValueError, match="already registered"):
        box.register(Echo())
    box.register(Echo(name="web.visit-2"))
    assert box.names == ("echo", "web.visit-2")  # the order the prompt lists them in


def test_run_gives_each_call_its_outcome_and_sends_only_parsed_arguments() -> None:
    echo = Echo()
    box = Toolbox([echo])
    history = (PastCall("echo", "A", "A"),)
    out = box.run("echo", [("a", ()), ("bad", ()), ("missing", history), ("b", history)])
    assert [o.status for o in out] == ["ok", "error", "error", "ok"]
    assert out[0].text == "<<A>>" and out[0].result == "A" and out[0].argument == "A"
    assert out[1].text == "echo: write something else" and out[1].argument is None
    assert out[2].text == "echo: no such thing" and out[2].result is None
    assert len(echo.batches) == 1  # one batch for the step's calls
    assert [c.argument for c in echo.batches[0]] == ["A", "MISSING", "B"]
    assert echo.batches[0][2].history == history


def test_an_outage_fails_the_calls_it_did_not_answer() -> None:
    out = Toolbox([Down()]).run("down", [("x", ()), ("y", ())])
    assert [o.status for o in out] == ["failed", "failed"]
    assert out[0].text == "The down tool did not answer."
    out = Toolbox([Down(partial=True)]).run("down", [("x", ()), ("y", ()), ("z", ())])
    assert [o.status for o in out] == ["ok", "failed", "ok"]
    assert [o.result for o in out] == ["x", None, "z"]


@dataclass
class Buggy:
    """A third-party tool with bugs: its parser raises on "crash", its call on any "boom"."""

    name: str = "buggy"
    usage: str = "x"
    description: str = "raises what it should not"

    def parse(self, text: str) -> str:
        if text == "crash":
            raise KeyError(text)
        return text

    def call(self, calls: Sequence[Call]) -> list[Any]:
        if any(c.argument == "boom" for c in calls):
            raise ZeroDivisionError("division by zero")
        return [c.argument for c in calls]

    def format(self, result: Any) -> str:
        return str(result)


def test_a_tool_that_raises_fails_its_calls_and_the_episodes_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    box = Toolbox([Buggy()])
    out = box.run("buggy", [("a", ()), ("crash", ()), ("boom", ())])
    assert [o.status for o in out] == ["failed", "error", "failed"]
    assert out[0].text == "The buggy tool did not answer."
    assert out[1].text.startswith("buggy: the argument could not be read")
    assert "ZeroDivisionError" in caplog.text and "KeyError" in caplog.text  # tracebacks
    assert [o.status for o in box.run("buggy", [("a", ()), ("b", ())])] == ["ok", "ok"]


def test_the_retriever_tool_is_search_r1_search() -> None:
    class Retriever:
        def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
            if "down" in queries:
                raise SearchFailed("timed out", [None if q == "down" else [] for q in queries])
            return [[Passage(str(i), f'"T{i}"\n{q} {i}') for i in range(topk)] for q in queries]

    box = Toolbox.search_r1(Retriever(), topk=2)
    assert box.names == ("search",)
    (ok,) = box.run("search", [("paris", ())])
    assert ok.text == 'Doc 1(Title: "T0") paris 0\nDoc 2(Title: "T1") paris 1'
    assert [p.id for p in ok.result] == ["0", "1"]
    out = box.run("search", [("down", ()), ("up", ())])
    assert [o.status for o in out] == ["failed", "ok"]  # SearchFailed is a ToolFailed


def test_call_last_reads_the_latest_answered_call_of_a_tool() -> None:
    history = (
        PastCall("search", "q1", ["r1"]),
        PastCall("visit", "1", "page"),
        PastCall("search", "q2", None),  # failed: not the last result
    )
    call = Call("2", history)
    last = call.last("search")
    assert last is not None and last.argument == "q1"
    assert call.last("find") is None


def test_a_function_is_one_registration_and_its_errors_become_observations() -> None:
    box = Toolbox()

    @box.function("calculate", "expression", "evaluates arithmetic; the value comes back")
    def calc(expression: str) -> str:
        return calculate(expression)

    assert calc("1+1") == "2"  # the decorator leaves the function as it was
    tool = box["calculate"]
    assert (tool.usage, tool.description) == (
        "expression",
        "evaluates arithmetic; the value comes back",
    )
    out = box.run("calculate", [("2 * (3 + 4)", ()), ("1/0", ()), ("open('x')", ())])
    assert [(o.status, o.text) for o in out[:2]] == [
        ("ok", "14"),
        ("error", "calculate: division by zero"),
    ]
    assert out[2].status == "error" and "only numbers" in out[2].text

    @box.function("boom", "x", "raises")
    def boom(x: str) -> str:
        raise KeyError(x)

    (o,) = box.run("boom", [("k", ())])
    assert (o.status, o.text) == ("error", "boom: KeyError: 'k'")


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2+3*4", 14),
        ("(1+2)**3", 27),
        ("7/2", 3.5),
        ("1,000 + 2", 1002),
        ("2^10", 1024),
        ("-3 % 5", 2),
    ],
)
def test_the_calculator_computes_arithmetic(expression: str, value: float) -> None:
    assert evaluate_arithmetic(expression) == value


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("9**9**9", "exponents above"),
        ("(10**100)**5", "too large"),
        ("1e308*10", "too large"),
        ("(-8)**0.5", "not a real number"),
        ("__import__('os').system('x')", "only numbers"),
        ("x + 1", "only numbers"),
        ("2 +", "not an arithmetic expression"),
        ("1" * 201, "longer than"),
        ("1\x00", "not an arithmetic expression"),
    ],
)
def test_the_calculator_refuses_what_it_must_not_compute(expression: str, says: str) -> None:
    with pytest.raises(BadArgument, match=says):
        evaluate_arithmetic(expression)


@given(st.text(max_size=40))
def test_the_calculator_answers_any_text_with_a_value_or_bad_argument(text: str) -> None:
    with contextlib.suppress(BadArgument):  # anything else raised fails the test
        calculate(text)
