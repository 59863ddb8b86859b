"""The safe formula evaluator: grammar, explicit bounds, exact arithmetic, tolerance, fuzzing."""

from __future__ import annotations

import ast
import contextlib
import decimal
import time
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.reasoning import evaluator
from engine.reasoning.evaluator import (
    MAX_DEPTH,
    MAX_EXPONENT,
    MAX_EXPRESSION_LENGTH,
    FormulaError,
    evaluate_formula,
    evaluate_tree,
    formula_refusal,
    formulas_equivalent,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3", "7"),
        ("2 ** 3", "8"),
        ("(1 + 2) * 3", "9"),
        ("10 / 4", "2.5"),
        ("-5 + +3", "-2"),
        ("--5", "5"),
        (".5 + 5.", "5.5"),
        ("1e3", "1000"),
        ("1_000 + 1", "1001"),
        ("2 ** -2", "0.25"),
        ("  7  ", "7"),
    ],
)
def test_evaluator_supports_numeric_literals_and_basic_arithmetic(text: str, expected: str) -> None:
    assert evaluate_formula(text) == Decimal(expected)


def test_evaluator_uses_exact_decimal_arithmetic_from_source_literals() -> None:
    assert evaluate_formula("0.1 + 0.2") == Decimal("0.3")
    assert evaluate_formula("1.10 * 3") == Decimal("3.30")


def test_evaluator_ignores_the_ambient_decimal_context() -> None:
    with decimal.localcontext() as ctx:
        ctx.prec = 3
        ctx.traps[decimal.Overflow] = False
        ctx.Emax = decimal.MAX_EMAX
        value = evaluate_formula("1 / 3")
    assert len(value.as_tuple().digits) == evaluator.PRECISION
    with pytest.raises(FormulaError) as info, decimal.localcontext() as ctx:
        ctx.traps[decimal.Overflow] = False
        evaluate_formula("10 ** 64 * 10 ** 64")
    assert info.value.code == "magnitude_out_of_bounds"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("__import__('os').system('true')", "disallowed_node"),
        ("abs(-1)", "disallowed_node"),
        ("x + 1", "disallowed_node"),
        ("(1).real", "disallowed_node"),
        ("[1, 2][0]", "disallowed_node"),
        ("[x for x in (1, 2)]", "disallowed_node"),
        ("{x: 1 for x in (1,)}", "disallowed_node"),
        ("(x for x in (1,))", "disallowed_node"),
        ("lambda: 1", "disallowed_node"),
        ("1 if 1 else 2", "disallowed_node"),
        ("1 < 2", "disallowed_node"),
        ("7 % 2", "disallowed_node"),
        ("7 // 2", "disallowed_node"),
        ("~1", "disallowed_node"),
        ("not 1", "disallowed_node"),
        ("1 and 2", "disallowed_node"),
        ("(1, 2)", "disallowed_node"),
        ("2(3)", "disallowed_node"),
        ("'12'", "disallowed_literal"),
        ("b'12'", "disallowed_literal"),
        ("True", "disallowed_literal"),
        ("False + 1", "disallowed_literal"),
        ("None", "disallowed_literal"),
        ("1j", "disallowed_literal"),
        ("2 + 3j", "disallowed_literal"),
        ("...", "disallowed_literal"),
        ("0x10", "disallowed_literal"),
        ("0b101", "disallowed_literal"),
        ("0o17", "disallowed_literal"),
        ("1; 2", "syntax"),
        ("import os", "syntax"),
        ("", "syntax"),
        ("1 0", "syntax"),
    ],
)
def test_evaluator_rejects_everything_but_arithmetic(text: str, code: str) -> None:
    with pytest.raises(FormulaError) as info:
        evaluate_formula(text)
    assert info.value.code == code


@pytest.mark.parametrize("text", ["10**10**10", "9**9**9", "2**(2**40)", "2**-99999999", "(1+1)**(2**20)"])
def test_huge_exponents_are_refused_instantly(text: str) -> None:
    started = time.perf_counter()
    with pytest.raises(FormulaError) as info:
        evaluate_formula(text)
    assert info.value.code == "exponent_out_of_bounds"
    assert time.perf_counter() - started < 0.5


def test_exponent_bound_is_inclusive() -> None:
    assert evaluate_formula(f"2 ** {MAX_EXPONENT}") == Decimal(2) ** MAX_EXPONENT
    with pytest.raises(FormulaError):
        evaluate_formula(f"2 ** {MAX_EXPONENT + 1}")


@pytest.mark.parametrize("text", ["10 ** 60 * 10 ** 60", "1e200", "(10 ** 50) ** 3", "99 ** 64"])
def test_result_magnitude_is_bounded(text: str) -> None:
    with pytest.raises(FormulaError) as info:
        evaluate_formula(text)
    assert info.value.code == "magnitude_out_of_bounds"


def test_deep_nesting_is_refused() -> None:
    for text in [
        "(" * 100 + "1" + ")" * 100,
        "-" * 200 + "1",
        "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
    ]:
        with pytest.raises(FormulaError) as info:
            evaluate_formula(text)
        assert info.value.code == "too_deep"


def test_very_long_input_is_refused_before_parsing() -> None:
    with pytest.raises(FormulaError) as info:
        evaluate_formula("1+" * 10_000 + "1")
    assert info.value.code == "too_long"
    assert len("1+" * 10_000) > MAX_EXPRESSION_LENGTH


def test_node_count_is_bounded() -> None:
    text = "+".join(["1"] * 150)  # within the length bound, beyond the node bound
    assert len(text) <= MAX_EXPRESSION_LENGTH
    with pytest.raises(FormulaError) as info:
        evaluate_formula(text)
    assert info.value.code in {"too_many_nodes", "too_deep"}


def test_long_literals_are_refused() -> None:
    with pytest.raises(FormulaError) as info:
        evaluate_formula("1" * 80)
    assert info.value.code == "literal_too_long"


@pytest.mark.parametrize("text", ["1/0", "0/0", "5 / (2 - 2)", "0 ** -1"])
def test_division_by_zero_is_an_error_with_a_reason(text: str) -> None:
    with pytest.raises(FormulaError) as info:
        evaluate_formula(text)
    assert info.value.code == "division_by_zero"


def test_negative_base_with_fractional_exponent_is_undefined() -> None:
    with pytest.raises(FormulaError) as info:
        evaluate_formula("(-8) ** (1/3)")
    assert info.value.code == "undefined"


def test_non_text_input_is_refused() -> None:
    with pytest.raises(FormulaError):
        evaluate_formula(12)  # type: ignore[arg-type]


def test_division_by_zero_is_not_equivalent_and_says_why() -> None:
    outcome = formulas_equivalent("1/0", "1")
    assert not outcome.equivalent
    assert "division by zero" in outcome.reason
    assert not formulas_equivalent("1/0", "1/0").equivalent


def test_formulas_equivalent_compares_values_not_text() -> None:
    assert formulas_equivalent("2*3", "3*2").equivalent
    assert formulas_equivalent("10 + 5", "15").equivalent
    assert formulas_equivalent("0.15 * 80", "15 / 100 * 80").equivalent
    assert not formulas_equivalent("10 + 5", "10 * 5").equivalent
    assert formulas_equivalent("10 + 5", "16").reason == "different values: 15 and 16"


def test_tolerance_is_relative_with_an_absolute_floor() -> None:
    assert formulas_equivalent("1/3*3", "1").equivalent  # 50-digit rounding noise
    assert formulas_equivalent("1000000000000", "1000000000000.0001").equivalent  # 1e-16 relative
    assert not formulas_equivalent("1000", "1000.01").equivalent  # 1e-5 relative
    assert not formulas_equivalent("0.00001", "0.00009").equivalent  # no absolute 1e-4 window
    assert formulas_equivalent("0", "0.0000000000001").equivalent  # under the 1e-12 floor


def test_case_and_spacing_do_not_make_different_formulas_equal() -> None:
    assert not formulas_equivalent("X*2", "x*2").equivalent
    assert not formulas_equivalent("1 0", "10").equivalent


REFUSED_FORMULAS = [
    "sqrt(16)",
    "x * 2",
    "__import__('os').getpid() and 10 + 5",
    "(lambda: 10 + 5)()",
    "10 % 3",
    "10 // 3",
    "9**9**9",
    "[10 + 5][0]",
    "'15'",
    "True + 14",
    "10 + 5 if 1 else 0",
    "1 / 0",
    "",
]


@pytest.mark.parametrize("formula", REFUSED_FORMULAS)
def test_a_refused_formula_is_never_equivalent_even_to_itself(formula: str) -> None:
    with pytest.raises(FormulaError):
        evaluate_formula(formula)
    outcome = formulas_equivalent(formula, formula)
    assert not outcome.equivalent and outcome.reason.startswith("first formula was refused: ")
    assert not formulas_equivalent("15", formula).equivalent
    assert formulas_equivalent("15", formula).reason.startswith("second formula was refused: ")
    assert formula_refusal(formula) is not None
    assert formula_refusal("10 + 5") is None


def test_evaluate_tree_accepts_parsed_trees_and_refuses_non_finite_constants() -> None:
    assert evaluate_tree(ast.parse("1 + 2", mode="eval")) == 3
    bad = ast.Expression(body=ast.Constant(value=float("inf")))
    with pytest.raises(FormulaError):
        evaluate_tree(bad)


# --- fuzzing ------------------------------------------------------------------------------

_ALPHABET = st.sampled_from(
    [*list("0123456789.+-*/()eEj_ x%~<>=[]{},:'\"\\\n\t\x00"), "**", "//", "not ", "lambda"]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(_ALPHABET, max_size=120).map("".join)))
def test_fuzz_evaluator_on_random_text_raises_only_formula_error(text: str) -> None:
    try:
        value = evaluate_formula(text)
    except FormulaError:
        return
    assert isinstance(value, Decimal) and value.is_finite()
    formulas_equivalent(text, text)


_LEAVES = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(lambda v: ast.Constant(value=v)),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda v: ast.Constant(value=v)),
    st.sampled_from([True, None, "s", b"b", 1j, ...]).map(lambda v: ast.Constant(value=v)),
    st.sampled_from(["x", "abs"]).map(lambda name: ast.Name(id=name, ctx=ast.Load())),
)
_BINOPS = st.sampled_from([ast.Add(), ast.Sub(), ast.Mult(), ast.Div(), ast.Pow(), ast.Mod(), ast.FloorDiv()])
_UNOPS = st.sampled_from([ast.UAdd(), ast.USub(), ast.Not(), ast.Invert()])


def _extend(children: st.SearchStrategy[ast.expr]) -> st.SearchStrategy[ast.expr]:
    return st.one_of(
        st.builds(
            lambda left, op, right: ast.BinOp(left=left, op=op, right=right), children, _BINOPS, children
        ),
        st.builds(lambda op, operand: ast.UnaryOp(op=op, operand=operand), _UNOPS, children),
        st.builds(lambda func, arg: ast.Call(func=func, args=[arg], keywords=[]), children, children),
        st.builds(lambda value: ast.Attribute(value=value, attr="real", ctx=ast.Load()), children),
        st.builds(
            lambda value, index: ast.Subscript(value=value, slice=index, ctx=ast.Load()), children, children
        ),
    )


_TREES = st.recursive(_LEAVES, _extend, max_leaves=60)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TREES)
def test_fuzz_evaluator_on_random_asts_raises_only_formula_error(node: ast.expr) -> None:
    tree = ast.fix_missing_locations(ast.Expression(body=node))
    with contextlib.suppress(FormulaError):
        evaluate_tree(tree)
    try:
        text = ast.unparse(tree)
    except Exception:  # some random trees have no source form
        return
    with contextlib.suppress(FormulaError):
        evaluate_formula(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join), st.lists(_ALPHABET, max_size=40).map("".join))
def test_fuzz_formulas_equivalent_never_raises(first: str, second: str) -> None:
    outcome = formulas_equivalent(first, second)
    assert isinstance(outcome.equivalent, bool) and outcome.reason
    assert formulas_equivalent(second, first).equivalent == outcome.equivalent


def test_formula_equivalence_never_calls_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec must never be called")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    assert formulas_equivalent("(10 + 5) * 2", "30").equivalent
    assert not formulas_equivalent("__import__('os').system('echo pwned')", "0").equivalent
