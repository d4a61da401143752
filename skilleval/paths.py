"""Every path the build graph writes, as one template each.

Rules use the templates as they are (their ``{fields}`` are Snakemake wildcards); Python
fills them with :func:`fill`. Nothing else spells a ``results/`` or ``paper/`` path, so
the graph and the code that reads its outputs cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

RESULTS = "results"
# The workflow's own config file, which every build reads first (Snakefile: configfile).
CONFIG_FILE = "config/config.yaml"
FROZEN_PROTOCOLS = "config/frozen-protocols.yaml"
JOURNAL_ROOT = f"{RESULTS}/journal"
ARCHIVE_ROOT = f"{RESULTS}/archive"
LOGS = f"{RESULTS}/logs"
DEFAULT_WORLD_DIR = f"{RESULTS}/world"
# What the workflow caches between parses, under its root: file and code digests.
CACHE_DIR = ".snakemake/skilleval"
FILE_DIGESTS = f"{CACHE_DIR}/file-digests.json"
CODE_CACHE = f"{CACHE_DIR}/code-cache.json"

# The embedded default world, under config's world.dir.
WORLD_CATALOGUE = "{world_dir}/catalogue.json"
WORLD_SPLITS = "{world_dir}/persona_splits.v1.json"
WORLD_CHECKPOINT = "{world_dir}/checkpoints/{checkpoint}/model.safetensors"
WORLD_BANK = "{world_dir}/banks/{bank}.md"
WORLD_GROUND_TRUTH = "{world_dir}/ground_truth.json"

# The two files of a finished evaluation or masked run, in its directory (a trainer run's
# directory has the summary too).
SUMMARY_FILE = "summary.json"
RESULTS_FILE = "results.jsonl"

RUN_DIR = f"{RESULTS}/runs/{{run}}"
RUN_RESULTS = f"{RUN_DIR}/{RESULTS_FILE}"
RUN_SUMMARY = f"{RUN_DIR}/{SUMMARY_FILE}"
RUN_TRANSCRIPTS = f"{RUN_DIR}/transcripts.jsonl.gz"
RUN_LOG = f"{LOGS}/runs/{{run}}.log"

GATE_DIR = f"{RESULTS}/gate/{{gate}}"
GATE_DESIGN = f"{GATE_DIR}/{{design}}.json"
GATE_RUN_DIR = f"{GATE_DIR}/runs/{{masked}}"
GATE_RUN_RESULTS = f"{GATE_RUN_DIR}/{RESULTS_FILE}"
GATE_RUN_SUMMARY = f"{GATE_RUN_DIR}/{SUMMARY_FILE}"
GATE_RUN_TRANSCRIPTS = f"{GATE_RUN_DIR}/transcripts.jsonl.gz"
GATE_BETA = f"{GATE_DIR}/beta.json"
GATE_TRUTH_CHECK = f"{GATE_DIR}/truth_check.json"
GATE_EXPERIMENT_B = f"{GATE_DIR}/experiment-b.json"
# Every gate result by content hash, so a rebuilt gate never loses the old one: the gate's
# own bookkeeping, kept out of results/archive/, which holds only what was superseded.
GATE_HISTORY = f"{RESULTS}/history/gate/{{gate}}"

FROZEN_BANK = f"{RESULTS}/banks/{{gate}}/{{arm}}.json"

CONTRAST = f"{RESULTS}/contrasts/{{contrast}}.json"
VERDICT = f"{RESULTS}/verdicts/{{contrast}}.json"
# The causal verdicts of one paper table (main, ranking) as one family (Holm); outside
# verdicts/, whose every file is one contrast's.
VERDICT_FAMILY = f"{RESULTS}/paper/verdict_family_{{table}}.json"

CHECKPOINT_AUDIT = f"{RESULTS}/audit/checkpoints/{{ckid}}.json"
WEIGHT_DIFF = f"{RESULTS}/audit/weights/base-vs-final.json"

ABLATION_SPLIT = f"{RESULTS}/ablation/splits/{{bench}}/{{ratio}}_seed42.json"
ABLATION_RUN_DIR = f"{RESULTS}/ablation/{{bench}}/{{run_id}}"
# Kept copies of complete ablation runs, by evidence identity (storage.kept).
ABLATION_KEPT = f"{JOURNAL_ROOT}/ablation"
ABLATION_SUMMARY = f"{ABLATION_RUN_DIR}/{SUMMARY_FILE}"
ABLATION_LOCK = f"{RESULTS}/ablation/{{bench}}/.{{run_id}}.writer.lock"
ABLATION_AUDIT = f"{RESULTS}/audit/ablation/{{bench}}/{{run_id}}.json"

PAPER_PDF = "paper/main.pdf"
# The HTML that report/workflow.rst includes: the report's first view.
REPORT_FRONT = f"{RESULTS}/report/front.html"
# Written when --report parses the workflow (workflow.report_status), never by a rule.
REPORT_STATUS = f"{RESULTS}/report/status.html"
# LaTeX's aux, log and page-kind record: kept for the layout check, out of the sources.
PAPER_BUILD = f"{RESULTS}/paper/latex"
PAPER_LAYOUT = f"{RESULTS}/paper/layout.json"
# The title page's notice as plain text, for the report's first view.
PAPER_NOTICE_TEXT = f"{RESULTS}/paper/notice.txt"
TABLE = "paper/tables/{table}.{ext}"
FIGURE = "paper/figures/{figure}.{ext}"
TABLE_FORMATS = ("tex", "csv", "md", "html")


def fill(template: str, **fields: object) -> str:
    """A concrete path from a template; a missing field is a KeyError naming it."""
    return template.format(**fields)


def table(name: str, ext: str) -> str:
    """One file of a paper table; ``name`` may hold wildcards (``ablation_{bench}``)."""
    return fill(TABLE, table=name, ext=ext)


def figure(name: str, ext: str) -> str:
    return fill(FIGURE, figure=name, ext=ext)


def in_world(template: str, world_dir: str) -> str:
    """A world template with its folder filled and its other wildcards kept for Snakemake."""
    return template.replace("{world_dir}", world_dir)


class RunFiles(NamedTuple):
    """The files of one finished run that an analysis reads. A rule's input lists them in
    this order (list(files)), so a script rebuilds them with RunFiles(*input)."""

    summary: str
    results: str

    @classmethod
    def in_directory(cls, directory: str) -> RunFiles:
        """A run's files in its directory (a path the user names, as skilleval compare)."""
        return cls(f"{directory}/{SUMMARY_FILE}", f"{directory}/{RESULTS_FILE}")

    @classmethod
    def by_run(cls, names: Sequence[str], files: Sequence[str]) -> dict[str, RunFiles]:
        """Run name -> its files, from the flat list of several runs' files that a rule
        received (each run's in RunFiles order, the runs in the order of ``names``)."""
        width = len(cls._fields)
        if len(files) != width * len(names):
            raise ValueError(f"{len(files)} files for {len(names)} runs of {width} files each")
        return {name: cls(*files[i * width : (i + 1) * width]) for i, name in enumerate(names)}
