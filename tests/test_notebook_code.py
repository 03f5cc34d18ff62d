"""Where a notebook defines a function or class that labkit keeps for reuse, the two are the same
code (compared as syntax trees, so comments and blank lines may differ): the learner reads and
edits the notebook's copy, and labkit's serves the rest of the kit."""
import ast
import inspect
import sys
import textwrap

import nbformat
import pytest

from labkit import allreduce, compression, meter, models, recovery, staleness, train, verdict
from labkit.bench import costmodel, measure
from smoke_notebooks import NOTEBOOKS

# (notebook, the name it defines, labkit's object); "Class.method" names a method the notebook's class defines
COPIES = [
    ("02_strategy_and_mnist.ipynb", "mnist_mlp", models.mnist_mlp),
    ("03_custom_training_loop.ipynb", "make_train_steps", train.make_train_steps),
    ("03_custom_training_loop.ipynb", "pack_steps", train.pack_steps),
    ("04_mini_transformer_lm.ipynb", "PositionEmbedding", models.PositionEmbedding),
    ("04_mini_transformer_lm.ipynb", "mini_transformer_lm", models.mini_transformer_lm),
    ("05_gradient_compression.ipynb", "compress_with_feedback", compression.compress_with_feedback),
    ("05_gradient_compression.ipynb", "CompressedSGD", compression.CompressedSGD),
    ("05_gradient_compression.ipynb", "CompressedPulls", compression.CompressedPulls),
    ("05_gradient_compression.ipynb", "TopK.apply", compression.TopK.apply),
    ("06_stale_gradients.ipynb", "make_versioned_train_steps", staleness.make_versioned_train_steps),
    ("06_stale_gradients.ipynb", "StalenessSGD.begin_step", staleness.StalenessSGD.begin_step),
    ("06_stale_gradients.ipynb", "StalenessSGD.apply", staleness.StalenessSGD.apply),
    ("06_stale_gradients.ipynb", "WaitingSGD._wait_for_slowest", staleness.StalenessSGD._wait_for_slowest),
    ("06_stale_gradients.ipynb", "swap", staleness.swap),
    ("06_stale_gradients.ipynb", "DelayedSGD._through_delay_buffer", staleness.StalenessSGD._through_delay_buffer),
    *[("06_stale_gradients.ipynb", rule.__name__, rule) for rule in (
        staleness.Constant, staleness.InverseTau, staleness.InverseOnePlusTau, staleness.DelayCompensated,
        staleness.AdaptiveDelayCompensated)],
    ("07_fault_tolerance.ipynb", "train_with_recovery", recovery.train_with_recovery),
    ("08_performance_analysis.ipynb", "Meter", meter.Meter),
    ("08_performance_analysis.ipynb", "five_number_summary", verdict.five_number_summary),
    ("08_performance_analysis.ipynb", "run_custom", measure.run_custom),
    ("08_performance_analysis.ipynb", "predict", costmodel.predict),
    ("08_performance_analysis.ipynb", "cores_busy", costmodel.cores_busy),
    ("10_ps_vs_allreduce.ipynb", "all_reduce_worker", allreduce.all_reduce_worker),
]


def definitions(source):
    """{name: syntax tree} of the top-level functions and classes in ``source``."""
    return {node.name: node for node in ast.parse(source).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def notebook_definition(name, notebook):
    owner, _, method = name.rpartition(".")
    cells = nbformat.read(NOTEBOOKS / notebook, as_version=4).cells
    found = [tree for cell in cells if cell.cell_type == "code"
             for defined, tree in definitions(cell.source).items() if defined == (owner or method)]
    assert len(found) == 1, f"{notebook} defines {owner or method} {len(found)} times; expected once"
    if owner:
        found = [node for node in found[0].body if isinstance(node, ast.FunctionDef) and node.name == method]
        assert len(found) == 1, f"{notebook}'s {owner} defines {method} {len(found)} times; expected once"
    return found[0]


def same_code(one, other):
    return ast.dump(one) == ast.dump(other)


@pytest.mark.parametrize("notebook, name, kept", COPIES, ids=[f"{n[:2]}-{name}" for n, name, _ in COPIES])
def test_the_notebook_defines_what_labkit_keeps(notebook, name, kept):
    [labkit_tree] = definitions(textwrap.dedent(inspect.getsource(kept))).values()
    assert same_code(notebook_definition(name, notebook), labkit_tree), (
        f"{notebook}'s {name} differs from {kept.__module__}.{kept.__qualname__}: change both the same way")


def test_a_method_is_compared_with_the_method(tmp_path, monkeypatch):
    claim_first = inspect.getsource(staleness.StalenessSGD.apply).replace(
        "        with tf.control_dependencies(updates):  # the claim: only after the update has landed\n", "        if True:\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "class StalenessSGD(staleness.StalenessSGD):\n" + claim_first)])
    nbformat.write(notebook, tmp_path / "claims_early.ipynb")
    monkeypatch.setattr(sys.modules[__name__], "NOTEBOOKS", tmp_path)
    [labkit_tree] = definitions(textwrap.dedent(inspect.getsource(staleness.StalenessSGD.apply))).values()
    assert not same_code(notebook_definition("StalenessSGD.apply", "claims_early.ipynb"), labkit_tree)

