"""Grammar-based fuzz of the formula evaluator against an exact reference (engine/reasoning/evaluator.py).

``tests/unit/test_reasoning_evaluator.py`` already throws random text and random ASTs at the
evaluator and checks that only ``FormulaError`` comes out. This module checks the *answers*:
well-formed arithmetic is generated from a grammar (huge literals, scientific notation, deep
unary chains, right-associative exponent towers, redundant parentheses, random spacing), rendered
with Python's precedence rules, and evaluated independently with exact :class:`Fraction`
arithmetic that applies the documented bounds in the documented order. Wherever no rounding to
the evaluator's 50 significant digits has happened yet, the evaluator must agree exactly: the same
value, or the same error code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from engine.reasoning.evaluator import (
    MAX_DEPTH,
    MAX_EXPONENT,
    MAX_EXPRESSION_LENGTH,
    MAX_LITERAL_LENGTH,
    MAX_MAGNITUDE_EXPONENT,
    MAX_NODES,
    PRECISION,
    FormulaError,
    evaluate_formula,
    formulas_equivalent,
)

pytestmark = pytest.mark.integration

FUZZ = settings(
    max_examples=400,
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
BOUND = 10 ** (MAX_MAGNITUDE_EXPONENT + 1)  # every literal and intermediate value stays below this
EVALUATION_CODES = {
    "literal_too_long",
    "magnitude_out_of_bounds",
    "exponent_out_of_bounds",
    "division_by_zero",
    "undefined",
}

# --- the grammar's trees ---------------------------------------------------------------


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Unary:
    op: str  # "+" or "-"
    operand: Node


@dataclass(frozen=True)
class Bin:
    op: str  # + - * / **
    left: Node
    right: Node


@dataclass(frozen=True)
class Paren:
    """Redundant parentheses (no node in Python's AST, but they count towards bracket depth)."""

    inner: Node


Node = Lit | Unary | Bin | Paren

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "unary": 3, "**": 4, "atom": 5}


def precedence(node: Node) -> int:
    if isinstance(node, Bin):
        return PRECEDENCE[node.op]
    if isinstance(node, Unary):
        return PRECEDENCE["unary"]
    return PRECEDENCE["atom"]


def render(node: Node, space: str = " ") -> str:
    """Source text with the parentheses Python's grammar needs (and no others except Paren)."""
    if isinstance(node, Lit):
        return node.text
    if isinstance(node, Paren):
        return f"({render(node.inner, space)})"
    if isinstance(node, Unary):
        inner = render(node.operand, space)
        if precedence(node.operand) < PRECEDENCE["unary"]:
            inner = f"({inner})"
        return f"{node.op}{space}{inner}" if inner[0] in "+-" or space else f"{node.op}{inner}"
    left, right = render(node.left, space), render(node.right, space)
    if node.op == "**":  # right-associative; its right operand may be a unary expression
        if precedence(node.left) <= PRECEDENCE["**"]:
            left = f"({left})"
        if precedence(node.right) < PRECEDENCE["unary"]:
            right = f"({right})"
    else:
        if precedence(node.left) < PRECEDENCE[node.op]:
            left = f"({left})"
        if precedence(node.right) <= PRECEDENCE[node.op]:
            right = f"({right})"
    return f"{left}{space}{node.op}{space}{right}"


def ast_nodes(node: Node) -> int:
    """Python AST nodes the evaluator counts (operators are nodes too), without the Expression."""
    if isinstance(node, Lit):
        return 1
    if isinstance(node, Paren):
        return ast_nodes(node.inner)
    if isinstance(node, Unary):
        return 2 + ast_nodes(node.operand)
    return 2 + ast_nodes(node.left) + ast_nodes(node.right)


def ast_depth(node: Node) -> int:
    """Depth below the Expression node (a bare literal is 1)."""
    if isinstance(node, Lit):
        return 1
    if isinstance(node, Paren):
        return ast_depth(node.inner)
    if isinstance(node, Unary):
        return 1 + ast_depth(node.operand)
    return 1 + max(ast_depth(node.left), ast_depth(node.right))


def expected_ast(node: Node) -> ast.Expression:
    """The tree Python's parser must build from the rendered text."""

    def build(node: Node) -> ast.expr:
        if isinstance(node, Lit):
            return ast.Constant(value=ast.literal_eval(node.text))
        if isinstance(node, Paren):
            return build(node.inner)
        if isinstance(node, Unary):
            return ast.UnaryOp(op=ast.USub() if node.op == "-" else ast.UAdd(), operand=build(node.operand))
        operator = {"+": ast.Add, "-": ast.Sub, "*": ast.Mult, "/": ast.Div, "**": ast.Pow}[node.op]()
        return ast.BinOp(left=build(node.left), op=operator, right=build(node.right))

    return ast.Expression(body=build(node))


def bracket_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        deepest = max(deepest, depth)
    return deepest


# --- the exact reference --------------------------------------------------------------


class Refused(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class NoClaim(Exception):
    """An intermediate value is rounded to PRECISION digits (or irrational): no exact claim from here."""


def exact_in_precision(value: Fraction) -> bool:
    """True if ``value`` is a decimal with at most PRECISION significant digits."""
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        return False
    digits = abs(value.numerator) * 2 ** (max(twos, fives) - twos) * 5 ** (max(twos, fives) - fives)
    while digits and digits % 10 == 0:
        digits //= 10
    return len(str(digits)) <= PRECISION


def adjusted(value: Fraction) -> int:
    """``Decimal.adjusted()``: the exponent of the most significant digit (value != 0)."""
    magnitude = abs(value)
    exponent = len(str(magnitude.numerator)) - len(str(magnitude.denominator))
    while Fraction(10) ** exponent > magnitude:
        exponent -= 1
    while Fraction(10) ** (exponent + 1) <= magnitude:
        exponent += 1
    return exponent


def bounded(value: Fraction) -> Fraction:
    if abs(value) >= BOUND:
        raise Refused("magnitude_out_of_bounds")
    if not exact_in_precision(value):
        raise NoClaim
    return value


def literal(text: str) -> Fraction:
    digits = text.replace("_", "")
    if len(digits) > MAX_LITERAL_LENGTH:
        raise Refused("literal_too_long")
    value = Fraction(Decimal(digits))
    if value and abs(value) >= BOUND:
        raise Refused("magnitude_out_of_bounds")
    return value  # literals are read exactly, whatever their length


def power(base: Fraction, exponent: Fraction) -> Fraction:
    if abs(exponent) > MAX_EXPONENT:
        raise Refused("exponent_out_of_bounds")
    if base == 0:
        if exponent < 0:
            raise Refused("division_by_zero")
        return Fraction(1 if exponent == 0 else 0)
    if exponent.denominator != 1:
        if base < 0:
            raise Refused("undefined")
        raise NoClaim  # an irrational root
    shrinks = abs(base) != 1 and (abs(base) > 1) != (exponent > 0)
    if shrinks and (abs(adjusted(base)) + 1) * abs(exponent) > 4 * MAX_MAGNITUDE_EXPONENT:
        # a tiny result, refused today: see test_tiny_powers_within_every_documented_bound_are_evaluated
        raise NoClaim
    return bounded(base ** int(exponent))


def reference(node: Node) -> Fraction:
    """Exact value with the evaluator's checks, left operand first; raises Refused or Rounded."""
    if isinstance(node, Lit):
        return literal(node.text)
    if isinstance(node, Paren):
        return reference(node.inner)
    if isinstance(node, Unary):
        value = reference(node.operand)
        return -value if node.op == "-" else value
    left = reference(node.left)
    right = reference(node.right)
    if node.op == "+":
        return bounded(left + right)
    if node.op == "-":
        return bounded(left - right)
    if node.op == "*":
        return bounded(left * right)
    if node.op == "/":
        if right == 0:
            raise Refused("division_by_zero")
        return bounded(left / right)
    return power(left, right)


# --- generation -----------------------------------------------------------------------

INTEGERS = st.one_of(
    st.integers(min_value=0, max_value=1000),
    st.integers(min_value=0, max_value=10**70),  # past both the literal length and magnitude bounds
    st.sampled_from([0, 1, 2, 10, 10**50, 10**100, 10**101 - 1, 10**101, 2**64]),
).map(str)
DECIMALS = st.builds(
    lambda whole, fraction: f"{whole}.{fraction}",
    st.integers(min_value=0, max_value=10**20),
    st.integers(min_value=0, max_value=10**30),
)
SHORT_FORMS = st.sampled_from([".5", "5.", "0.0", "1_000", "1_0.2_5", "00.5", "1e0", "2E+3", ".25e-1"])
SCIENTIFIC = st.builds(
    lambda mantissa, exponent, marker: f"{mantissa}{marker}{exponent}",
    st.one_of(st.integers(min_value=1, max_value=99999).map(str), DECIMALS),
    st.integers(min_value=-120, max_value=120),
    st.sampled_from(["e", "E", "e+"]),
).map(lambda text: text.replace("e+-", "e-"))
LITERALS = st.one_of(INTEGERS, DECIMALS, SHORT_FORMS, SCIENTIFIC).map(Lit)
SMALL = st.integers(min_value=0, max_value=12).map(lambda value: Lit(str(value)))


def unary_chain(operand: st.SearchStrategy[Node], max_length: int = 40) -> st.SearchStrategy[Node]:
    def build(signs: list[str], inner: Node) -> Node:
        for sign in reversed(signs):
            inner = Unary(sign, inner)
        return inner

    return st.builds(build, st.lists(st.sampled_from("+-"), min_size=1, max_size=max_length), operand)


def tower(base: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    """``a ** b ** c ...`` (right-associative), with small, sometimes negated exponents."""

    def build(first: Node, rest: list[Node]) -> Node:
        if not rest:
            return first
        node = rest[-1]
        for exponent in reversed(rest[:-1]):
            node = Bin("**", exponent, node)
        return Bin("**", first, node)

    exponents = st.one_of(SMALL, unary_chain(SMALL, 3))
    return st.builds(build, base, st.lists(exponents, min_size=1, max_size=5))


def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    return st.one_of(
        st.builds(Bin, st.sampled_from(["+", "-", "*", "/", "**"]), children, children),
        st.builds(Bin, st.just("**"), children, st.one_of(SMALL, unary_chain(SMALL, 2))),
        unary_chain(children, 6),
        st.builds(Paren, children),
    )


def parenthesised(depth: int, inner: Node) -> Node:
    for _ in range(depth):
        inner = Paren(inner)
    return inner


TREES = st.one_of(
    st.recursive(st.one_of(LITERALS, SMALL), extend, max_leaves=24),
    st.builds(
        parenthesised,
        st.integers(min_value=MAX_DEPTH - 2, max_value=MAX_DEPTH + 2),
        st.one_of(LITERALS, SMALL),
    ),
    unary_chain(st.one_of(LITERALS, SMALL)),
    tower(st.one_of(SMALL, LITERALS)),
    st.builds(Bin, st.sampled_from(["+", "-", "*", "/"]), tower(SMALL), unary_chain(LITERALS)),
)
SPACES = st.sampled_from(["", " ", "  "])


def static_refusals(node: Node, text: str) -> set[str]:
    """Codes the evaluator must give before evaluating anything (several may apply)."""
    if len(text.strip()) > MAX_EXPRESSION_LENGTH:
        return {"too_long"}
    if bracket_depth(text) > MAX_DEPTH:
        return {"too_deep"}
    codes = set()
    if 1 + ast_nodes(node) > MAX_NODES:
        codes.add("too_many_nodes")
    if 1 + ast_depth(node) > MAX_DEPTH:
        codes.add("too_deep")
    return codes


def evaluate(text: str) -> Decimal | FormulaError:
    try:
        return evaluate_formula(text)
    except FormulaError as refused:
        return refused
    except Exception as exc:  # the evaluator's contract: FormulaError or a value, nothing else
        raise AssertionError(f"evaluate_formula({text!r}) raised {type(exc).__name__}: {exc}") from exc


@FUZZ
@given(TREES, SPACES)
@example(Unary("-", Bin("**", Lit("2"), Lit("2"))), " ")  # -(2**2), not (-2)**2
@example(Bin("**", Lit("2"), Unary("-", Lit("1"))), "")  # 2**-1
@example(Bin("**", Lit("2"), Bin("**", Lit("3"), Lit("2"))), " ")  # 2**(3**2) = 512
@example(Bin("**", Bin("**", Lit("2"), Lit("3")), Lit("2")), " ")  # (2**3)**2 = 64
@example(Bin("*", Lit("9" * 50), Lit("9" * 50)), "")  # rounds: no exact claim, still no crash
@example(Bin("**", Lit("10"), Lit(str(MAX_EXPONENT + 1))), " ")
def test_generated_arithmetic_matches_the_exact_reference(tree: Node, space: str) -> None:
    text = render(tree, space)
    assert ast.dump(ast.parse(text, mode="eval")) == ast.dump(expected_ast(tree)), text  # renderer check
    outcome = evaluate(text)
    static = static_refusals(tree, text)
    if static:
        event("refused before evaluation")
        assert isinstance(outcome, FormulaError) and outcome.code in static, (text, outcome, static)
        return
    try:
        expected = reference(tree)
    except Refused as refused:
        event(f"exact claim: {refused.code}")
        assert isinstance(outcome, FormulaError), f"{text!r}: expected {refused.code}, got {outcome}"
        assert outcome.code == refused.code, f"{text!r}: expected {refused.code}, got {outcome.code}"
        return
    except NoClaim:
        event("rounded: no exact claim")
        if isinstance(outcome, Decimal):
            assert outcome.is_finite() and (outcome == 0 or outcome.adjusted() <= MAX_MAGNITUDE_EXPONENT)
        else:
            assert outcome.code in EVALUATION_CODES, (text, outcome)
        return  # rounding happened: the exact claims stop here
    event("exact claim: value")
    assert isinstance(outcome, Decimal), f"{text!r}: expected {expected}, got {outcome}"
    assert Fraction(outcome) == expected, f"{text!r}: expected {expected}, got {outcome}"
    # a formula is equivalent to its own value written out, and to itself re-spaced
    assert formulas_equivalent(text, render(tree, "")).equivalent, text
    if outcome == outcome.to_integral_value() and abs(outcome) < 10**40:
        assert formulas_equivalent(text, str(int(outcome))).equivalent, text


@FUZZ
@given(st.integers(min_value=1, max_value=60), st.sampled_from("+-"), LITERALS)
def test_unary_chains_up_to_the_depth_bound_evaluate_and_beyond_it_are_refused(
    length: int, sign: str, operand: Lit
) -> None:
    tree: Node = operand
    for index in range(length):
        tree = Unary("-" if (index % 3 == 0) == (sign == "-") else "+", tree)
    text = render(tree, "")
    outcome = evaluate(text)
    if 1 + ast_depth(tree) > MAX_DEPTH:  # Expression + one level per sign + the literal
        assert isinstance(outcome, FormulaError) and outcome.code in {"too_deep", "too_many_nodes"}
        return
    try:
        expected = reference(tree)
    except Refused as refused:
        assert isinstance(outcome, FormulaError) and outcome.code == refused.code, (text, outcome)
        return
    assert isinstance(outcome, Decimal) and Fraction(outcome) == expected, (text, outcome)


@FUZZ
@given(
    st.integers(min_value=2, max_value=99),
    st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=8),
)
def test_exponent_towers_are_refused_before_any_big_work_or_agree_exactly(
    base: int, exponents: list[int]
) -> None:
    """``b ** e1 ** e2 ...``: right-associative; the exponent bound is checked before the power."""
    assume(len(exponents) > 1 or exponents[0] > 0)
    tree: Node = Lit(str(exponents[-1]))
    for exponent in reversed(exponents[:-1]):
        tree = Bin("**", Lit(str(exponent)), tree)
    tree = Bin("**", Lit(str(base)), tree)
    text = render(tree, "")
    outcome = evaluate(text)
    try:
        expected = reference(tree)
    except Refused as refused:
        assert isinstance(outcome, FormulaError) and outcome.code == refused.code, (text, outcome)
        return
    except NoClaim:
        return
    assert isinstance(outcome, Decimal) and Fraction(outcome) == expected, (text, outcome)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("(1e-10) ** 40", Fraction(1, 10**400)),
        ("(1e50) ** -8", Fraction(1, 10**400)),
        ("0.0000001 ** 64", Fraction(1, 10**448)),
    ],
)
def test_tiny_powers_within_every_documented_bound_are_evaluated(text: str, value: Fraction) -> None:
    """The docstring bounds magnitudes from above only; ``1e-400`` as a literal is accepted.

    The pre-check in ``_power`` (``(|base.adjusted()| + 1) * |exponent| > 400``) also refuses
    powers whose result is *tiny*, with the false message "power would exceed the magnitude bound".
    """
    assert evaluate_formula("1e-400") == Decimal("1e-400")
    outcome = evaluate(text)
    assert isinstance(outcome, Decimal), f"{text!r} was refused: {outcome}"
    assert Fraction(outcome) == value
