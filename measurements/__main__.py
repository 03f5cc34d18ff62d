"""`make measurements`: measure, then render docs/measurements.md and publish the figures other files quote."""
import argparse

from measurements import page, publish, records, runner


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m measurements", description=__doc__)
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME",
                        help="measure only these runs, again if recorded (name prefixes: tests, startup, 06, ex2, "
                             "small-laptop-, day-, class, grading, bench-report, stress)")
    parser.add_argument("--render", action="store_true", help="measure nothing: render and publish from the records")
    options = parser.parse_args(argv)
    if not options.render:
        runner.measure(options.only)
    recorded = records.read_all()
    page.PAGE.write_text(page.render(recorded))
    changed = publish.publish(recorded)
    print(f"wrote {page.PAGE.relative_to(records.ROOT)}; changed {', '.join(changed) or 'nothing else'}")


if __name__ == "__main__":
    main()
