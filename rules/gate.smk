# Gate A of memo §2 C: masked val runs over the draft chunks, signed betas.


rule gate_design:
    input:
        bank=config["banks"][config["ranking"]["bank"]]["path"],
        split_file=WF.design_params("design")["split_file"],
    output:
        design="results/gate/{gate}/{design}.json",
    log:
        "results/logs/gate/{gate}-{design}.log",
    wildcard_constraints:
        design="design|design-b",
    conda:
        "../envs/skilleval.yaml"
    params:
        design=get_design_params,
    script:
        "../scripts/gate_design.py"


rule gate_masked_run:
    input:
        unpack(get_masked_inputs),
    output:
        results="results/gate/{gate}/runs/{masked}/results.jsonl",
        summary="results/gate/{gate}/runs/{masked}/summary.json",
    log:
        "results/logs/gate/{gate}-{masked}.log",
    conda:
        "../envs/skilleval.yaml"
    resources:
        model_server=1,
        gpu=get_masked_gpus,
    params:
        inputs=get_masked_params,
        journal_root="results/journal",
    script:
        "../scripts/eval_run.py"


rule gate_beta:
    input:
        bare=WF.run_files(config["ranking"]["bare_val_run"]),
        masked=get_masked_run_files,
        design="results/gate/{gate}/design.json",
        bank=config["banks"][config["ranking"]["bank"]]["path"],
    output:
        beta="results/gate/{gate}/beta.json",
    log:
        "results/logs/gate/{gate}-beta.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        masked=WF.masked_runs("gate"),
        archive="results/archive/gate/{gate}",
    script:
        "../scripts/gate_beta.py"


rule gate_truth_check:
    input:
        beta="results/gate/{gate}/beta.json",
        truth=f"{WORLD_DIR}/ground_truth.json",
    output:
        check="results/gate/{gate}/truth_check.json",
    log:
        "results/logs/gate/{gate}-truth_check.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        checkpoint=WF.plans[config["ranking"]["bare_val_run"]].checkpoint,
        bank=config["ranking"]["bank"],
    script:
        "../scripts/gate_truth_check.py"


rule gate_experiment_b:
    input:
        beta="results/gate/{gate}/beta.json",
        design="results/gate/{gate}/design-b.json",
        bare=WF.run_files(config["ranking"]["bare_val_run"]),
        fresh=get_fresh_run_files,
    output:
        result="results/gate/{gate}/experiment-b.json",
    log:
        "results/logs/gate/{gate}-experiment-b.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        fresh=WF.masked_runs("b"),
        n_resamples=config["statistics"]["n_resamples"],
        seed=config["statistics"]["seed"],
    script:
        "../scripts/gate_experiment_b.py"
