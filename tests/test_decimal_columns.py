"""Numbers in the LaTeX tables sit on their decimal point (dcolumn, in LaTeX's tools
bundle): a cell is a number as dcolumn reads it, anything else is centred across."""

from __future__ import annotations

from skilleval.report.latex import centred, decimal_cell, signed


def test_numbers_are_set_as_dcolumn_reads_them() -> None:
    assert decimal_cell("0.4979") == "0.4979"
    assert decimal_cell(signed(-0.0296)) == "-0.0296"
    assert decimal_cell("5{,}749") == "5{,}749"
    assert decimal_cell(r"\textless{}0.001") == "{<}0.001"
    assert decimal_cell(r"0.9318$^\dagger$") == r"0.9318^{\dagger}"


def test_anything_else_is_centred_across_the_column() -> None:
    assert decimal_cell("--") == r"\multicolumn{1}{c}{--}"
    assert decimal_cell("n/a") == r"\multicolumn{1}{c}{n/a}"
    assert centred("Reward") == r"\multicolumn{1}{c}{Reward}"
