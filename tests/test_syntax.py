"""labkit.tools.syntax: source parsed past CPython 3.11's spurious recursion-depth SystemError, and no other error."""
import ast

import pytest

from labkit.tools import syntax


def failing_first(error, calls):
    """An ``ast.parse`` whose first call raises ``error``; later calls parse."""
    real_parse = ast.parse

    def parse(source):
        calls.append(source)
        if len(calls) == 1:
            raise error
        return real_parse(source)
    return parse


def test_source_parses_to_its_tree():
    tree = syntax.parse("def f(x):\n    return x\n")
    assert [node.name for node in tree.body] == ["f"]


def test_the_spurious_recursion_depth_error_is_parsed_past(monkeypatch):
    # CPython's race (python/cpython#106905) cannot be caused on purpose: the first parse raises its exact error.
    calls = []
    error = SystemError("AST constructor recursion depth mismatch (before=3, after=5)")
    monkeypatch.setattr(ast, "parse", failing_first(error, calls))
    assert isinstance(syntax.parse("x = 1").body[0], ast.Assign)
    assert calls == ["x = 1", "x = 1"]


@pytest.mark.parametrize("error", [SystemError("another internal error"), SyntaxError("invalid syntax")], ids=repr)
def test_any_other_error_is_raised_at_once(monkeypatch, error):
    calls = []
    monkeypatch.setattr(ast, "parse", failing_first(error, calls))
    with pytest.raises(type(error), match=str(error)):
        syntax.parse("x = 1")
    assert len(calls) == 1


def test_bad_source_still_raises_its_syntax_error():
    with pytest.raises(SyntaxError):
        syntax.parse("def f(:\n")
