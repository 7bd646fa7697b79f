"""A calculator tool: the worked example of adding a tool to the registry (docs/tools.md,
"Adding a tool"). ``evaluate_arithmetic`` parses with Python's ``ast`` and computes over a
whitelist of nodes, so a model's text never runs code; bounded exponents and results refuse
``9**9**9`` instead of hanging a rollout.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from treegrpo.tools.registry import BadArgument

MAX_CHARS = 200
"""Longest expression read."""
MAX_EXPONENT = 1000
"""Largest exponent taken (a bigger one could take minutes and gigabytes)."""
MAX_MAGNITUDE = 1e300
"""Largest result kept (beyond it the value is refused, not printed with 300 digits)."""

_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def evaluate_arithmetic(expression: str) -> int | float:
    """The value of ``expression``; ``BadArgument`` saying what is wrong otherwise (a name, a
    call, a syntax error, a division by zero, a result too large)."""
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    text = text.replace(",", "")  # thousands separators: 1,000 + 2
    if len(text) > MAX_CHARS:
        raise BadArgument(f"the expression is longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):  # ValueError: a null byte
        raise BadArgument(f"{expression.strip()!r} is not an arithmetic expression") from None
    return _value(tree.body)


def _value(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):  # True and False are ints to Python, not to us
            raise BadArgument(f"only numbers and + - * / // % ** ( ) are allowed, not {node.value}")
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise BadArgument(f"exponents above {MAX_EXPONENT} are not computed")
            if abs(left) > 1 and right * math.log10(abs(left)) > math.log10(MAX_MAGNITUDE):
                raise BadArgument("the result is too large")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise BadArgument("division by zero") from None
        except OverflowError:
            raise BadArgument("the result is too large") from None
        if isinstance(value, complex):  # (-8) ** 0.5
            raise BadArgument("the result is not a real number")
        if not abs(value) <= MAX_MAGNITUDE:  # NaN too
            raise BadArgument("the result is too large")
        return value
    raise BadArgument(
        f"only numbers and + - * / // % ** ( ) are allowed, not {ast.unparse(node)!r}"
    )


def calculate(expression: str) -> str:
    """The calculator tool's function: the value of ``expression`` as text (whole numbers
    without a decimal point, others to 12 significant digits)."""
    value = evaluate_arithmetic(expression)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return str(value) if isinstance(value, int) else f"{value:.12g}"
