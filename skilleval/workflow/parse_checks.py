"""Every check the workflow makes of its inputs when it is parsed, before any job: one
call from rules/common.smk, and one a test can make without starting Snakemake.

A ConfigError names the file, key, bad value and fix; a GpuLeaseError names the key that
asks for more cards than the profile gives the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilleval import paths
from skilleval.ablation.matrix import load_matrix
from skilleval.ablation.plan import effective_config
from skilleval.config.checks import validate_config
from skilleval.config.input_files import check_input_files
from skilleval.config.loading import ConfigSources, in_declared_order
from skilleval.config.matrix import Matrix
from skilleval.config.model import Config
from skilleval.errors import ConfigError, ConfigErrors
from skilleval.provenance.code import SourceCache
from skilleval.provenance.digests import FileDigests
from skilleval.provenance.evidence import trainer_run_code
from skilleval.serving.gpu import check_requests, gpu_requests
from skilleval.workflow.frozen import check_frozen_config
from skilleval.workflow.rule_inputs import AblationInputs, SourceFiles
from skilleval.world.design import WorldDesign, world_design


@dataclass(frozen=True)
class CheckedInputs:
    """What the checks read, kept for the workflow so nothing is read twice: the config
    as typed values among it."""

    config: Config
    sources: SourceFiles
    world_design: WorldDesign
    matrix: Matrix
    code_cache: SourceCache
    ablation_inputs: AblationInputs


def check_inputs(
    config: dict[str, Any],
    source: ConfigSources,
    host_cards: int | None = None,
    card_ids: str | None = None,
) -> CheckedInputs:
    """The config, the files it names, the ablation matrix, the cards asked for (against
    the build's ``--resources gpu``, ``host_cards``) and the frozen protocols, checked in
    the working directory, the workflow's root."""
    config = in_declared_order(config, source)
    typed = validate_config(config, source)
    sources = SourceFiles([paths.RESULTS, typed.world.dir], FileDigests(Path(paths.FILE_DIGESTS)))
    design = world_design(config)
    check_input_files(config, source, sources.is_built, design.generated_files())
    matrix = load_matrix(typed.ablation.matrix)
    served = {name: protocol.model_server for name, protocol in typed.protocols.items()}
    check_requests(gpu_requests(typed.backends.model_server, served), host_cards, source, card_ids)
    check_frozen_config(config, source)
    code_cache = SourceCache(Path(paths.CODE_CACHE))
    ablation = AblationInputs(
        matrix, typed.ablation.matrix, trainer_run_code(code_cache), sources.file_digests
    )
    check_trainer_root(ablation)
    return CheckedInputs(typed, sources, design, matrix, code_cache, ablation)


def check_trainer_root(ablation: AblationInputs) -> None:
    """A command trainer's checkout holds its script and, for every planned run, the
    benchmark config and split folder the trainer will read: each one missing is named
    at parse time, with the first run that needs it, rather than when a job's inputs are
    computed."""
    matrix = ablation.matrix
    if matrix.trainer.kind != "command":
        return
    root = Path(matrix.trainer.root)
    needed = {("trainer.script", matrix.trainer.script): ("script", Path.is_file, "")}
    for run in ablation.ablation_runs.values():
        config = effective_config(run, matrix)
        for key, kind, exists in (
            ("env.config", "file", Path.is_file),
            ("env.split_dir", "folder", Path.is_dir),
        ):
            needed.setdefault((key, str(config[key])), (kind, exists, run.run_id))
    errors = [
        ConfigError(
            ablation.matrix_file,
            key,
            value,
            f"the trainer reads this {kind} under trainer.root, and {root / value} does not "
            "exist" + (f" (first needed by run {first})" if first else ""),
            f"create it in the trainer's checkout, or point trainer.root ({root}) at it",
        )
        for (key, value), (kind, exists, first) in needed.items()
        if not exists(root / value)
    ]
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors, most=10)
