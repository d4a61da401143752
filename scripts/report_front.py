from pathlib import Path

from skilleval.logs import logged
from skilleval.report.front import FrontRows, write_front_page

with logged(snakemake.log[0], snakemake):
    write_front_page(
        {
            "main": (snakemake.input.table, snakemake.input.table_caption),
            "ranking": (snakemake.input.ranking, snakemake.input.ranking_caption),
        },
        (snakemake.input.figure, snakemake.input.figure_caption),
        Path(snakemake.input.notice).read_text().strip(),
        snakemake.output.html,
        FrontRows(**snakemake.params.rows),
        {"runs": snakemake.params.runs, "contrasts": snakemake.params.contrasts},
    )
