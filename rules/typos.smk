# Targets for names the config does not declare. Without these rules Snakemake ends in a
# generic MissingRuleException; each matches only an undeclared name (its wildcard
# constraint) and its input function names the declared ones (skilleval.config.typos).


rule unknown_run:
    input:
        refuse("run", PLAN.runs, wildcard="run"),
    output:
        paths.RUN_SUMMARY,
        paths.RUN_RESULTS,
    wildcard_constraints:
        run=not_one_of(PLAN.runs, "/"),


rule unknown_contrast:
    input:
        refuse("contrast", PLAN.contrasts, wildcard="contrast"),
    output:
        paths.CONTRAST,
        paths.VERDICT,
    wildcard_constraints:
        contrast=not_one_of(PLAN.contrasts, ".json"),


rule unknown_benchmark:
    input:
        refuse("benchmark", MATRIX.benchmarks, "the ablation matrix", wildcard="bench"),
    output:
        paths.ABLATION_SUMMARY,
    wildcard_constraints:
        bench=not_one_of(MATRIX.benchmarks, "/"),


rule unknown_ablation_run:
    input:
        refuse(
            "ablation run",
            ABLATION_INPUTS.ablation_runs,
            "the ablation matrix",
            wildcard="run_id",
        ),
    output:
        paths.ABLATION_SUMMARY,
    wildcard_constraints:
        run_id=not_one_of(ABLATION_INPUTS.ablation_runs, "/"),
