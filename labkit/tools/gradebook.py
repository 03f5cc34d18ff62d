"""What ``labkit grade`` writes: grades.csv, notebooks.csv, feedback.md for each learner, a platform's import file.

grades.csv has one row per learner, notebooks.csv one row per graded notebook; ``--export canvas``
adds the learning platform's import file."""
import copy
import csv
import zipfile

import nbformat

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # Canvas's gradebook import
CANVAS_POINTS = "    Points Possible"  # the Student cell of the row under the header, as Canvas's export spells it
NOT_SUBMITTED = "not submitted"
NOT_RECOGNISED = "not recognised"  # handed in, but keeping too few of the exercise's cell ids (grade.match_exercise)


def write_notebooks(rows, exercise_list, path):
    """One row per graded notebook: its status, score and checks, the seconds it took and why it ended."""
    used = {row["exercise"] for row in rows}
    columns = ["learner", "file", "exercise", "status", "score", "max_score"]
    columns += [column for exercise in exercise_list if exercise.short in used for column in exercise.columns]
    columns += ["seconds", "detail"]
    _write_csv(path, columns, rows)


def points_possible(exercise_list):
    """The most a learner can score: one point per check of every exercise graded against (``--reference``),
    handed in or not. grades.csv's max_total, feedback.md's total, Canvas's Points Possible and the Gradescope
    autograder's tests all count so; written answers score nothing (the instructor reads them)."""
    return sum(len(exercise.checks) for exercise in exercise_list)


def learner_rows(learners, rows, notes, exercise_list):
    """One row per learner: per exercise its score and checks, the total, and notes (anything to look at)."""
    table = []
    for learner in sorted(learners.values(), key=lambda learner: learner.id):
        graded = {row["exercise"]: row for row in rows if row["learner"] == learner.id and row["exercise"]}
        unrecognised = {row["meant"] for row in rows if row["learner"] == learner.id and row["status"] == NOT_RECOGNISED}
        row = {"learner": learner.id, "name": learner.name, "total": 0, "max_total": points_possible(exercise_list)}
        for exercise in exercise_list:
            mine = graded.get(exercise.short)
            row[exercise.short] = mine["score"] if mine else 0
            row["total"] += row[exercise.short]
            missing = NOT_RECOGNISED if exercise.short in unrecognised else NOT_SUBMITTED
            row.update({column: mine.get(column, "") if mine else missing for column in exercise.columns})
        row["notes"] = "; ".join(notes.get(learner.id, []))
        table.append(row)
    return table, ["learner", "name", "total", "max_total"] + [
        column for exercise in exercise_list for column in [exercise.short, *exercise.columns]] + ["notes"]


def write_grades(table, columns, path):
    _write_csv(path, columns, table)


def write_canvas(table, learners, exercise_list, assignment, path):
    """Canvas's gradebook import: its five identifying columns (from the roster when it is Canvas's own
    export, else the ids of Canvas's file names), a column per exercise (named by its heading) and the total
    (named ``assignment``), under the header Canvas's Points Possible row: each column's maximum."""
    columns = CANVAS_COLUMNS + [exercise.title for exercise in exercise_list] + [assignment]
    points = {"Student": CANVAS_POINTS, assignment: points_possible(exercise_list),
              **{exercise.title: len(exercise.checks) for exercise in exercise_list}}
    rows = [points]
    for row in table:
        roster = learners[row["learner"]].roster
        rows.append({**{column: roster.get(column, "") for column in CANVAS_COLUMNS},
                     "Student": roster.get("Student") or row["name"] or row["learner"],
                     "ID": roster.get("ID") or (row["learner"] if row["learner"].isdigit() else ""),
                     **{exercise.title: row[exercise.short] for exercise in exercise_list}, assignment: row["total"]})
    _write_csv(path, columns, rows)


def write_canvas_feedback(handed_back, path):
    """The zip for Canvas's "Re-Upload Submissions": for each (Canvas's file name, the learner's notebook, their
    feedback.md text), the notebook under that same name with the feedback as its first cell. Canvas reads the
    learner and the submitted file from the name, and attaches the file to that submission as a comment."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, notebook, feedback in handed_back:
            returned = copy.deepcopy(notebook)
            returned.cells.insert(0, nbformat.v4.new_markdown_cell(feedback))
            archive.writestr(name, nbformat.writes(returned))


def write_feedback(path, learner, row, exercise_list, sections):
    """The learner's feedback.md: their total and what it adds up, the notes, then one section per graded notebook."""
    lines = [f"# Feedback for {learner.name or learner.id}", "",
             f"Total: **{row['total']}** of {row['max_total']} checks passed (one point per check):", ""]
    for exercise in exercise_list:
        states = {row[column] for column in exercise.columns}
        missing = next((state for state in (NOT_SUBMITTED, NOT_RECOGNISED) if states == {state}), None)
        lines.append(f"- Exercise {exercise.short[2:]}: {row[exercise.short]} of {len(exercise.checks)}"
                     + (f" ({missing}{': see below' if missing == NOT_RECOGNISED else ''})" if missing else ""))
    lines.append("")
    if row["notes"]:
        lines += [f"- {note}" for note in row["notes"].split("; ")] + [""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines + [line for section in sections for line in section]))


def _write_csv(path, columns, rows):
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns, restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
