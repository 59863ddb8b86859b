"""Safe arithmetic evaluation and formula equivalence. Never ``eval``.

Grammar: numeric literals (decimal integers and decimals, optional ``e`` exponent), the binary
operators ``+ - * / **``, unary ``+``/``-`` and parentheses. Any other node (names, calls,
attributes, subscripts, comprehensions, strings, booleans, complex numbers, ``%``, ``//``, ...) is
rejected with :class:`FormulaError`.

Bounds (all explicit, independent of the ambient :mod:`decimal` context):

* text length ≤ :data:`MAX_EXPRESSION_LENGTH` characters, bracket nesting ≤ :data:`MAX_DEPTH`;
* AST nodes ≤ :data:`MAX_NODES`, AST depth ≤ :data:`MAX_DEPTH`;
* each literal ≤ :data:`MAX_LITERAL_LENGTH` characters;
* every literal, intermediate and final value has magnitude < ``10 ** (MAX_MAGNITUDE_EXPONENT + 1)``;
* in ``a ** b``, ``|b| ≤ MAX_EXPONENT`` (so ``10**10**10`` is refused before any work).

Arithmetic is exact :class:`~decimal.Decimal` in a private context (:data:`PRECISION` significant
digits, half-even rounding); literals are read from their source text, so ``0.1 + 0.2 == 0.3``.
Two values are equivalent when ``|a - b| <= max(ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE * max(|a|, |b|))``.
A formula the evaluator refuses or cannot evaluate (a name, a call, ``%``, ``9**9**9``, division
by zero, ...) is never equivalent to anything, itself included: equivalence is only ever decided
on two evaluated values, never on the text.
"""

from __future__ import annotations

import ast
import decimal
import re
import threading
import warnings
from dataclasses import dataclass
from decimal import Decimal

__all__ = [
    "ABSOLUTE_TOLERANCE",
    "MAX_DEPTH",
    "MAX_EXPONENT",
    "MAX_EXPRESSION_LENGTH",
    "MAX_LITERAL_LENGTH",
    "MAX_MAGNITUDE_EXPONENT",
    "MAX_NODES",
    "PRECISION",
    "RELATIVE_TOLERANCE",
    "Equivalence",
    "FormulaError",
    "evaluate_formula",
    "evaluate_tree",
    "format_decimal",
    "formula_operators",
    "formula_refusal",
    "formulas_equivalent",
]

MAX_EXPRESSION_LENGTH = 512
MAX_NODES = 200
MAX_DEPTH = 32
MAX_LITERAL_LENGTH = 64
MAX_EXPONENT = 64
MAX_MAGNITUDE_EXPONENT = 100
MIN_DECIMAL_EXPONENT = -999_999
PRECISION = 50
RELATIVE_TOLERANCE = Decimal("1e-9")
ABSOLUTE_TOLERANCE = Decimal("1e-12")

_LITERAL = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_UNARY = {ast.UAdd: "+", ast.USub: "-"}


class FormulaError(ValueError):
    """A formula was refused or could not be evaluated; ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _context() -> decimal.Context:
    return decimal.Context(
        prec=PRECISION,
        rounding=decimal.ROUND_HALF_EVEN,
        Emin=MIN_DECIMAL_EXPONENT,
        Emax=999_999,
        traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow],
    )


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise FormulaError("not_text", f"formula must be a str, not {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise FormulaError("syntax", "formula is empty")
    if len(stripped) > MAX_EXPRESSION_LENGTH:
        raise FormulaError("too_long", f"formula is longer than {MAX_EXPRESSION_LENGTH} characters")
    depth = 0
    for char in stripped:
        if char in "([{":
            depth += 1
            if depth > MAX_DEPTH:
                raise FormulaError("too_deep", f"brackets nest deeper than {MAX_DEPTH} levels")
        elif char in ")]}":
            depth -= 1
    return stripped


# One parse at a time. CPython 3.11's AST constructor keeps its recursion-depth counter in state
# shared by every thread, so concurrent ``ast.parse`` calls (concurrent verifications) can fail
# with "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905), and
# ``warnings.catch_warnings`` swaps process-wide filters. Formulas are short; the lock costs
# microseconds.
_PARSE_LOCK = threading.Lock()


def _parse(text: object) -> tuple[ast.Expression, str]:
    source = _check_text(text)
    try:
        with _PARSE_LOCK, warnings.catch_warnings():  # untrusted text must not spam SyntaxWarnings
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)  # e.g. invalid escapes in strings
            tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError, SystemError) as exc:
        # SystemError: the interpreter bug above, should another thread parse outside this lock.
        # The formula is then refused (fail closed), never evaluated as something else.
        raise FormulaError("syntax", f"not a valid expression ({type(exc).__name__})") from None
    return tree, source


def _check_shape(tree: ast.AST) -> None:
    """Bound node count and depth iteratively, before any recursive walk."""
    count = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise FormulaError("too_many_nodes", f"formula has more than {MAX_NODES} syntax nodes")
        if depth > MAX_DEPTH:
            raise FormulaError("too_deep", f"formula nests deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _check_magnitude(value: Decimal) -> Decimal:
    if not value.is_finite():
        raise FormulaError("magnitude_out_of_bounds", "value is not finite")
    if not value.is_zero() and value.adjusted() > MAX_MAGNITUDE_EXPONENT:
        raise FormulaError("magnitude_out_of_bounds", f"value reaches 10**{MAX_MAGNITUDE_EXPONENT + 1}")
    return value


def _literal(node: ast.Constant, source: str | None) -> Decimal:
    value = node.value
    if type(value) not in (int, float):  # exact check: bool, complex, str, bytes, None are refused
        raise FormulaError("disallowed_literal", f"{type(value).__name__} literals are not allowed")
    segment = ast.get_source_segment(source, node) if source is not None else None
    if segment is not None:
        text = segment.replace("_", "")
        if len(text) > MAX_LITERAL_LENGTH:
            raise FormulaError(
                "literal_too_long", f"a literal is longer than {MAX_LITERAL_LENGTH} characters"
            )
        if not _LITERAL.fullmatch(text):
            raise FormulaError("disallowed_literal", "only decimal numeric literals are allowed")
        return _check_magnitude(Decimal(text))
    if isinstance(value, int):
        if value.bit_length() > 4 * MAX_MAGNITUDE_EXPONENT:
            raise FormulaError("magnitude_out_of_bounds", "integer literal is too large")
        return _check_magnitude(Decimal(value))
    return _check_magnitude(Decimal(repr(value)))


def _power(base: Decimal, exponent: Decimal) -> Decimal:
    if abs(exponent) > MAX_EXPONENT:
        raise FormulaError("exponent_out_of_bounds", f"exponents are limited to ±{MAX_EXPONENT}")
    if base.is_zero():
        if exponent < 0:
            raise FormulaError("division_by_zero", "zero raised to a negative power")
        return Decimal(1) if exponent.is_zero() else Decimal(0)
    if base < 0 and exponent != exponent.to_integral_value():
        raise FormulaError("undefined", "negative base with a fractional exponent")
    adjusted = base.adjusted()
    # Decimal exponent of the result, roughly: positive when it grows, negative when it shrinks.
    growth = (adjusted + 1) * exponent if adjusted >= 0 else adjusted * exponent
    if growth > 4 * MAX_MAGNITUDE_EXPONENT:
        raise FormulaError("magnitude_out_of_bounds", "power would exceed the magnitude bound")
    if growth < MIN_DECIMAL_EXPONENT + PRECISION:
        raise FormulaError("magnitude_out_of_bounds", "power is too small to represent exactly")
    return base**exponent


def _divide(left: Decimal, right: Decimal) -> Decimal:
    if right.is_zero():
        raise FormulaError("division_by_zero", "division by zero")
    return left / right


def _walk(node: ast.AST, source: str | None) -> Decimal:
    if isinstance(node, ast.Expression):
        return _walk(node.body, source)
    if isinstance(node, ast.Constant):
        return _literal(node, source)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        operand = _walk(node.operand, source)
        return operand.copy_negate() if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _walk(node.left, source)
        right = _walk(node.right, source)
        if isinstance(node.op, ast.Add):
            result = left + right
        elif isinstance(node.op, ast.Sub):
            result = left - right
        elif isinstance(node.op, ast.Mult):
            result = left * right
        elif isinstance(node.op, ast.Div):
            result = _divide(left, right)
        else:
            result = _power(left, right)
        return _check_magnitude(result)
    label = type(node.op).__name__ if isinstance(node, (ast.BinOp, ast.UnaryOp)) else type(node).__name__
    raise FormulaError("disallowed_node", f"{label} is not allowed")


def _run(tree: ast.AST, source: str | None) -> Decimal:
    try:
        _check_shape(tree)
        with decimal.localcontext(_context()):
            return _walk(tree, source)
    except FormulaError:
        raise
    except decimal.DivisionByZero:
        raise FormulaError("division_by_zero", "division by zero") from None
    except decimal.Overflow:
        raise FormulaError("magnitude_out_of_bounds", "value overflows") from None
    except (decimal.DecimalException, ArithmeticError):
        raise FormulaError("undefined", "the value is undefined") from None
    except (TypeError, ValueError, AttributeError, RecursionError, MemoryError) as exc:
        raise FormulaError("malformed", f"malformed expression ({type(exc).__name__})") from None


def evaluate_formula(text: str) -> Decimal:
    """Evaluate an arithmetic formula exactly, or raise :class:`FormulaError`."""
    tree, source = _parse(text)
    return _run(tree, source)


def evaluate_tree(tree: ast.AST) -> Decimal:
    """Evaluate an already-parsed expression tree (literals are taken from their values)."""
    return _run(tree, None)


def format_decimal(value: Decimal) -> str:
    """Plain decimal text (``1200``, ``0.05``); scientific only for extreme exponents."""
    normal = value.normalize(_context())
    if normal.is_zero():
        return "0"
    if -30 <= normal.adjusted() <= 60:
        return format(normal, "f")
    return str(normal)


def formula_operators(text: str) -> list[str]:
    """The operators a formula uses, in a fixed breadth-first order (``[]`` if it cannot be parsed)."""
    try:
        tree, _ = _parse(text)
        _check_shape(tree)
    except FormulaError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        symbol = None
        if isinstance(node, ast.BinOp):
            symbol = _BINARY.get(type(node.op))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            symbol = "neg"
        if symbol and symbol not in found:
            found.append(symbol)
    return found


@dataclass(frozen=True)
class Equivalence:
    """Outcome of :func:`formulas_equivalent`, with a deterministic human-readable reason."""

    equivalent: bool
    reason: str
    first_value: str | None = None
    second_value: str | None = None

    def __bool__(self) -> bool:
        return self.equivalent


def formula_refusal(text: str) -> str | None:
    """Why the evaluator refuses ``text`` (its :class:`FormulaError` message), or None if it evaluates."""
    try:
        evaluate_formula(text)
    except FormulaError as exc:
        return exc.message
    return None


def formulas_equivalent(first: str, second: str) -> Equivalence:
    """Decide whether two formulas denote the same number; a refused formula never does."""
    try:
        value_a = evaluate_formula(first)
    except FormulaError as exc:
        return Equivalence(False, f"first formula was refused: {exc.message}")
    try:
        value_b = evaluate_formula(second)
    except FormulaError as exc:
        return Equivalence(False, f"second formula was refused: {exc.message}")
    text_a, text_b = format_decimal(value_a), format_decimal(value_b)
    with decimal.localcontext(_context()):
        difference = abs(value_a - value_b)
        allowed = max(ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE * max(abs(value_a), abs(value_b)))
    if difference <= allowed:
        return Equivalence(True, f"equal values: {text_a} and {text_b}", text_a, text_b)
    return Equivalence(False, f"different values: {text_a} and {text_b}", text_a, text_b)
