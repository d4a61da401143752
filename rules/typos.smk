# Targets for names the config does not declare. Without these rules Snakemake ends in a
# generic MissingRuleException; each matches only an undeclared name (its wildcard
# constraint) and its input function names the declared ones (skilleval.config.typos).


rule unknown_run:
    input:
        refuse("run", PLAN.runs),
    output:
        "results/runs/{name}/summary.json",
        "results/runs/{name}/results.jsonl",
    wildcard_constraints:
        name=not_one_of(PLAN.runs, "/"),


rule unknown_contrast:
    input:
        refuse("contrast", PLAN.contrasts),
    output:
        "results/contrasts/{name}.json",
        "results/verdicts/{name}.json",
    wildcard_constraints:
        name=not_one_of(PLAN.contrasts, ".json"),


rule unknown_benchmark:
    input:
        refuse("benchmark", MATRIX["benchmarks"], "the ablation matrix"),
    output:
        "results/ablation/{name}/{run_id}/summary.json",
    wildcard_constraints:
        name=not_one_of(MATRIX["benchmarks"], "/"),


rule unknown_ablation_run:
    input:
        refuse("ablation run", ABLATION_INPUTS.ablation_runs, "the ablation matrix"),
    output:
        "results/ablation/{bench}/{name}/summary.json",
    wildcard_constraints:
        name=not_one_of(ABLATION_INPUTS.ablation_runs, "/"),
