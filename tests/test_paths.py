"""A rule hands a script several runs' files as one flat list; the script pairs them with
their run names again (paths.RunFiles), or stops on a list that does not fit."""

from __future__ import annotations

import pytest

from skilleval import paths
from skilleval.paths import RunFiles


def test_several_runs_files_are_paired_with_their_names_in_order() -> None:
    files = {
        masked: RunFiles(
            paths.fill(paths.GATE_RUN_SUMMARY, gate="g", masked=masked),
            paths.fill(paths.GATE_RUN_RESULTS, gate="g", masked=masked),
        )
        for masked in ("masked-01", "masked-02")
    }
    flat = [path for run in files.values() for path in run]
    assert RunFiles.by_run(list(files), flat) == files
    assert RunFiles.in_directory("results/gate/g/runs/masked-02") == files["masked-02"]


def test_a_list_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match="3 files for 2 runs of 2 files each"):
        RunFiles.by_run(["a", "b"], ["a/summary.json", "a/results.jsonl", "b/summary.json"])
