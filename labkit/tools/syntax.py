"""Python source as a syntax tree: `ast.parse`, retried once past CPython 3.11's spurious SystemError.

CPython 3.11 keeps the depth counter of its syntax-tree builder in state that every thread shares,
so a parse in another thread (pytest rewriting an import, a kernel client's thread) can make this
one fail with ``SystemError: AST constructor recursion depth mismatch`` although the source is fine
(python/cpython#106905, fixed in 3.12). Every tool and test that reads source parses it here.
"""
import ast

SPURIOUS_ERROR = "AST constructor recursion depth mismatch"


def parse(source):
    """``ast.parse(source)``; parsed once more if CPython raised its spurious recursion-depth error."""
    try:
        return ast.parse(source)
    except SystemError as error:
        if SPURIOUS_ERROR not in str(error):
            raise
        return ast.parse(source)
