"""The kit's tools: the `labkit` command, doctor, `labkit sweep` and results, exercises, snippets, display."""
