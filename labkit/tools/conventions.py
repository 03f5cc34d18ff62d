"""The kit's code conventions as data: its layers and its retired names, which tests hold and `make docs` states.

``LAYERS``: labkit's modules top to bottom; a module imports its own layer and those below it
(tests/test_layers.py checks every import). ``RETIRED``: names the Names table of docs/contributing.md
retired, each with what to write instead and how to find it (tests/test_names.py looks for them).
docs/contributing.md states both in lines that ``python -m labkit.tools.pages`` writes from here.
"""
from dataclasses import dataclass

# Top to bottom: (what the layer is, labkit's top-level modules and subpackages in it).
LAYERS = [
    ("tools", ["tools"]),
    ("widgets", ["widgets", "explorer"]),
    ("checks and benchmarks", ["checks", "bench", "fault_matrix"]),
    ("deployment", ["deploy"]),
    ("labs", ["compression", "staleness", "recovery", "faults", "allreduce", "embeddings"]),
    ("training core", ["train", "meter", "fit", "progress", "sharding", "traffic", "verdict"]),
    ("content", ["data", "pipelines", "models", "ratings"]),
    ("cluster", ["cluster", "registry"]),
    ("runtime", ["runtime"]),
]


@dataclass(frozen=True)
class Retired:
    """A retired ``name`` and where it is caught: ``pattern`` (a regular expression) in any text, or, with
    ``identifier``, a Python variable, argument or definition called ``name`` (attributes such as Keras's
    ``History.history`` do not count); only in files under ``scope`` (path prefixes), if given, and never in
    those under ``outside``."""

    name: str
    meaning: str
    use: str
    pattern: str = ""
    identifier: bool = False
    scope: tuple = ()
    outside: tuple = ()

    def stated(self):
        return f"{self.name} ({self.meaning}: {self.use})"


# "sweep" means `labkit sweep` only: the command, its module (tools.sweep, sweep.run, "sweep", sweep_parser) and its
# block in cli.py; labkit/tools/sweep.py and its test speak of the command's runs.
SWEEP = (r'(?<!labkit )(?<!tools\.)(?<!tools/)(?<!import )(?<!----- )(?<!")\b[Ss]weep(?!_|\.(?:run|parse_parameters|py)\b)'
         r'|"sweep(?!")')

RETIRED = [
    Retired("`history`", "a TrainingLog", "`training_log`", identifier=True),
    Retired("`job`", "a task type", "`task_type`; `job` is recovery's TrainingJob only", identifier=True),
    Retired("straggler", "the worker slowed on purpose", "`slow_worker`, `slow_ms`", r"\bstragglers?\b"),
    Retired("parameter bytes", "the model's size in bytes", "`model_bytes`", r"\bparameter bytes\b"),
    Retired("`VersionedSGD`, `VersionCounter`", "the staleness lab's optimizer", "`StalenessSGD`",
            r"\b(VersionedSGD|VersionCounter)\b"),
    Retired("`TopKCompressor`", "the top-k compressor", "`TopK`", r"\bTopKCompressor\b"),
    Retired("`lockstep_limit`", "a number, not a check", "`lockstep_limit_samples_per_s`", r"\blockstep_limit\b"),
    Retired("checks `tf_configs`, `compression_result`, `stale_sgd_comparison`, `updates_per_batch`",
            "checks named as nouns",
            "`tf_configs_valid`, `compression_paid_off`, `staleness_aware_won_back`, `updates_per_batch_match`",
            r"(?m)(checks\.|^def )(tf_configs|compression_result|stale_sgd_comparison|updates_per_batch)\(",
            scope=("labkit/checks/", "notebooks/", "exercises/", "solutions/", "scripts/", "tests/", "docs/")),
    Retired("plan in the benchmark", "the grid it measures", "its points (`bench.points`)", r"\b[Pp]lan",
            scope=("labkit/bench/", "labkit/explorer", "notebooks/08_", "tests/test_bench.py",
                   "tests/test_cost_model.py", "tests/test_explorer.py")),
    Retired("sweep outside `labkit sweep`", "the benchmark's grid, a notebook over a grid of parameters",
            "its points (`bench.points`); a run of `labkit sweep`", SWEEP, outside=("labkit/tools/sweep.py", "tests/test_sweep.py")),
    Retired("manifest for a notebook", "what a notebook declares about itself",
            "its declaration (`labkit.tools.declaration`); a manifest is Kubernetes's",
            r"\b(tools[./]manifest|MANIFESTS|[Mm]anifest\.read|Manifest\b(?!Error))",
            scope=("labkit/tools/", "notebooks/", "tests/", "docs/contributing.md", "scripts/")),
]
