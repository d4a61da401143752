# Evaluation runs (memo §2 A, B): per-task records and a summary at coverage 1.


rule eval_run:
    input:
        unpack(get_run_inputs),
    output:
        results="results/runs/{run}/results.jsonl",
        summary="results/runs/{run}/summary.json",
    log:
        "results/logs/runs/{run}.log",
    conda:
        "../envs/skilleval.yaml"
    resources:
        model_server=1,
        gpu=get_run_gpus,
    params:
        inputs=get_run_params,
        journal_root="results/journal",
    script:
        "../scripts/eval_run.py"
