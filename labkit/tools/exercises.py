"""Write exercises/ from solutions/: ``python -m labkit.tools.exercises`` (or ``labkit exercises``).

Each solution notebook marks its answers the way nbgrader does::

    ### BEGIN SOLUTION
    ...the answer...
    ### END SOLUTION

The exercise notebook is the same notebook (same cells, same cell ids) with every
such region replaced by a stub: ``# YOUR CODE HERE`` and a ``raise NotImplementedError``
in code cells, ``YOUR ANSWER HERE`` in markdown cells. Outputs are never copied.

Its cells carry nbgrader's cell metadata (schema version 3), so that an nbgrader course can import
the exercises: a code answer is a solution cell; a written answer a manually graded solution cell (1
point); a check cell (one calling ``checklist.passed``) a locked autograder test worth its checks.

The generator never destroys work it did not write: ``exercises/.generated.json`` records the
SHA-256 of every file it wrote, and it refuses to replace or remove a file that has changed
since (someone edited it), unless ``--force``. Learners work on copies in ``work/``
(``make lab``), never here.
"""
import argparse
import copy
import hashlib
import json
import re
import sys
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CODE_STUB = ["# YOUR CODE HERE", 'raise NotImplementedError("replace this line with your solution")']
MARKDOWN_STUB = ["YOUR ANSWER HERE"]
PASSED_CALL = re.compile(r"""checklist\.passed\(\s*["']([^"']+)["']\s*\)""")  # a check cell's call, naming its check
NBGRADER_SCHEMA_VERSION = 3


def strip_solutions(source, cell_type="code", where="a cell"):
    """``source`` with each solution region replaced by a stub indented like its BEGIN line."""
    stub = CODE_STUB if cell_type == "code" else MARKDOWN_STUB
    lines, region_indent = [], None
    for number, line in enumerate(source.splitlines(), start=1):
        marker = line.strip()
        if marker == BEGIN:
            if region_indent is not None:
                raise ValueError(f"{where}, line {number}: {BEGIN} inside another solution region; "
                                 f"close the first one with {END}.")
            region_indent = line[:len(line) - len(line.lstrip())]
            lines += [region_indent + stub_line for stub_line in stub]
        elif marker == END:
            if region_indent is None:
                raise ValueError(f"{where}, line {number}: {END} without a {BEGIN} before it.")
            region_indent = None
        elif region_indent is None:
            lines.append(line)
    if region_indent is not None:
        raise ValueError(f"{where}: {BEGIN} is never closed; add {END} after the solution.")
    return "\n".join(lines)


def has_solution(cell):
    return any(line.strip() == BEGIN for line in cell.source.splitlines())


def nbgrader_metadata(cell):
    """nbgrader's metadata for a solution notebook's cell: an answer, a check, or None (neither)."""
    checks = PASSED_CALL.findall(cell.source) if cell.cell_type == "code" else []
    if not (has_solution(cell) or checks):
        return None
    written = cell.cell_type == "markdown"
    metadata = {"schema_version": NBGRADER_SCHEMA_VERSION, "solution": not checks, "grade": bool(checks) or written,
                "locked": bool(checks), "task": False,
                "grade_id": "check-" + re.sub(r"[^A-Za-z0-9]+", "_", "-".join(checks)).strip("_") if checks
                else f"answer-{cell.id}"}
    if metadata["grade"]:
        metadata["points"] = len(checks) or 1
    return metadata


def exercise_notebook(solution, name="the notebook"):
    """The exercise version of a solution notebook (a new notebook; ``solution`` is unchanged)."""
    exercise = copy.deepcopy(solution)
    for index, cell in enumerate(exercise.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        nbgrader = nbgrader_metadata(cell)
        if nbgrader:
            cell.metadata["nbgrader"] = nbgrader
        if has_solution(cell) or END in cell.source:
            cell.source = strip_solutions(cell.source, cell.cell_type, f"{name}, cell {index} ({cell.get('id')})")
    if not any(has_solution(cell) for cell in solution.cells):
        raise ValueError(f"{name} has no {BEGIN} ... {END} region: nothing for a learner to do.")
    return exercise


def render(solutions_dir):
    """{file name: exercise notebook text} for every notebook in ``solutions_dir``."""
    import nbformat  # here, not at the top: only the commands that read notebooks need it

    paths = sorted(Path(solutions_dir).glob("*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks in {solutions_dir}: run this from the PS Lab checkout "
                                "or pass --solutions DIR.")
    return {path.name: nbformat.writes(exercise_notebook(nbformat.read(path, as_version=4), path.name)) + "\n"
            for path in paths}


RECORD = ".generated.json"  # {file name: SHA-256 of the text the generator last wrote}


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def out_of_sync(solutions_dir, exercises_dir):
    """Names of exercise notebooks that differ from what ``solutions_dir`` generates, or are extra
    (and the record's name if it does not match the generated files)."""
    expected = render(solutions_dir)
    present = {path.name for path in Path(exercises_dir).glob("*.ipynb")}
    changed = [name for name, text in expected.items()
               if not (Path(exercises_dir) / name).exists() or (Path(exercises_dir) / name).read_text() != text]
    record_wrong = [RECORD] if written_record(exercises_dir) != {name: sha256(text) for name, text in expected.items()} else []
    return sorted(set(changed) | (present - set(expected))) + record_wrong


def written_record(exercises_dir):
    """{name: SHA-256} of what the generator last wrote into ``exercises_dir`` ({} if it never did)."""
    path = Path(exercises_dir) / RECORD
    return json.loads(path.read_text()) if path.exists() else {}


def edited_since_generated(exercises_dir, expected):
    """Files the generator would replace or remove whose text is not what it last wrote there."""
    record = written_record(exercises_dir)
    edited = []
    for path in sorted(Path(exercises_dir).glob("*.ipynb")):
        text = path.read_text()
        if text != expected.get(path.name) and sha256(text) != record.get(path.name):
            edited.append(path.name)
    return edited


def generate(solutions_dir, exercises_dir, force=False):
    """Write every exercise notebook; remove exercise notebooks whose solution is gone. Returns the names written.

    Raises ``FileExistsError`` (writing nothing) if a file to replace or remove was edited since
    the generator wrote it, unless ``force``.
    """
    expected = render(solutions_dir)
    edited = [] if force else edited_since_generated(exercises_dir, expected)
    if edited:
        raise FileExistsError(
            f"{', '.join(edited)} in {exercises_dir}/ changed since the generator wrote them; nothing was written. "
            f"Learners: your work belongs in work/ (`make lab` copies the exercises there): copy your edited "
            f"file there, then `git checkout {exercises_dir}/`. Authors: edit solutions/ instead, and run "
            "`labkit exercises --force` to overwrite these files.")
    Path(exercises_dir).mkdir(exist_ok=True)
    for stale in Path(exercises_dir).glob("*.ipynb"):
        if stale.name not in expected:
            stale.unlink()
    for name, text in expected.items():
        (Path(exercises_dir) / name).write_text(text)
    (Path(exercises_dir) / RECORD).write_text(
        json.dumps({name: sha256(text) for name, text in expected.items()}, indent=1, sort_keys=True) + "\n")
    return sorted(expected)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="labkit exercises", description=__doc__.splitlines()[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


def add_arguments(parser):
    parser.add_argument("--solutions", default="solutions", metavar="DIR", help="default: %(default)s")
    parser.add_argument("--exercises", default="exercises", metavar="DIR", help="default: %(default)s")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit with an error if exercises/ is out of date")
    parser.add_argument("--force", action="store_true",
                        help="overwrite exercise notebooks even if they were edited since they were generated")


def run(args):
    try:
        _run(args)
    except (FileNotFoundError, FileExistsError, ValueError) as error:
        sys.exit(f"labkit exercises: {error}")


def _run(args):
    if args.check:
        stale = out_of_sync(args.solutions, args.exercises)
        if stale:
            sys.exit(f"out of date in {args.exercises}/: {', '.join(stale)}. Authors: edit solutions/, "
                     "then regenerate with `make exercises`.")
        print(f"{args.exercises}/ matches {args.solutions}/")
    else:
        for name in generate(args.solutions, args.exercises, args.force):
            print(f"wrote {Path(args.exercises) / name}")


if __name__ == "__main__":
    main()
