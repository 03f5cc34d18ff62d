"""The kit's tools: the `labkit` command, doctor, sweeps and results, exercises, snippets, display."""
