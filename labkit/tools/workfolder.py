"""The learner's work folder: ``make lab`` runs ``python -m labkit.tools.workfolder work`` before opening JupyterLab there.

It copies ``notebooks/``, ``exercises/`` and ``docs/`` of the kit into the work folder (git ignores
it), so that the notebooks' links to the docs (``../docs/measurements.md``) open in JupyterLab,
but only the files that are not there yet: a learner's edited copy is never replaced, and
``git pull`` never conflicts with it, because git tracks only the originals. A notebook the
kit gains later appears in the work folder at the next ``make lab``; a fixed notebook reaches a
learner who deletes (or renames) their copy first.
"""
import argparse
import shutil
from pathlib import Path

FOLDERS = ("notebooks", "exercises", "docs")
KIT = Path(__file__).resolve().parents[2]


def copy_missing(work_dir, kit=KIT):
    """Copy every file of the kit's ``FOLDERS`` that ``work_dir`` lacks; return the copied paths.

    Hidden files (the generator's record of what it wrote) stay behind. Existing files, edited
    or not, are left exactly as they are.
    """
    copied = []
    for folder in FOLDERS:
        source = Path(kit) / folder
        if not source.is_dir():
            raise FileNotFoundError(f"{source} is missing: run this from a PS Lab checkout (or pass --kit DIR).")
        for original in sorted(source.iterdir()):
            target = Path(work_dir) / folder / original.name
            if original.is_file() and not original.name.startswith(".") and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(original, target)
                copied.append(target)
    return copied


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m labkit.tools.workfolder", description=__doc__.splitlines()[0])
    parser.add_argument("work_dir", type=Path, help="the learner's folder, e.g. work")
    parser.add_argument("--kit", type=Path, default=KIT, help="the PS Lab checkout (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        copied = copy_missing(args.work_dir, args.kit)
    except FileNotFoundError as error:
        parser.exit(1, f"labkit.tools.workfolder: {error}\n")
    kept = sum(1 for folder in FOLDERS for path in (args.work_dir / folder).glob("*")) - len(copied)
    print(f"{args.work_dir}/: {len(copied)} new file(s) copied from the kit; {kept} already there, left untouched. "
          f"Your work lives in {args.work_dir}/, which git ignores.")


if __name__ == "__main__":
    main()
