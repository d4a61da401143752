# Gate A of memo §2 C: masked val runs over the draft chunks, signed betas.


rule gate_design:
    input:
        bank=RANKING_BANK,
        split_file=SOURCES.input_file(BARE_VAL_INPUTS.split_file),
    output:
        design=paths.GATE_DESIGN,
    log:
        f"{paths.LOGS}/gate/{{gate}}-{{design}}.log",
    priority: GATE_CHAIN_PRIORITY
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("gate_design.py"),
        sources=SOURCES.digests(
            {"bank": RANKING_BANK_PATH, "split_file": BARE_VAL_INPUTS.split_file}
        ),
        design=INPUTS.design_params,
    script:
        "../scripts/gate_design.py"


use rule eval_run as gate_masked_run with:
    output:
        results=paths.GATE_RUN_RESULTS,
        summary=paths.GATE_RUN_SUMMARY,
        transcripts=paths.GATE_RUN_TRANSCRIPTS,
    log:
        f"{paths.LOGS}/gate/{{gate}}-{{masked}}.log",


rule gate_beta:
    input:
        bare=BARE_VAL_RUN,
        masked=INPUTS.gate_runs,
        design=paths.fill(paths.GATE_DESIGN, gate=GATE, design="design"),
        bank=RANKING_BANK,
    output:
        beta=paths.GATE_BETA,
    log:
        f"{paths.LOGS}/gate/{{gate}}-beta.log",
    priority: GATE_CHAIN_PRIORITY
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("gate_beta.py"),
        sources=SOURCES.digests({"bank": RANKING_BANK_PATH}),
        masked=PLAN.designs["design"].runs,
        # the Top/Bottom size whose membership the two fits are compared on
        k=CONFIG.ranking.k,
        history=paths.GATE_HISTORY,
    script:
        "../scripts/gate_beta.py"


rule gate_truth_check:
    input:
        beta=paths.GATE_BETA,
        truth=paths.in_world(paths.WORLD_GROUND_TRUTH, WORLD_DIR),
    output:
        check=paths.GATE_TRUTH_CHECK,
    log:
        f"{paths.LOGS}/gate/{{gate}}-truth_check.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("gate_truth_check.py"),
        checkpoint=PLAN.runs[CONFIG.ranking.bare_val_run].checkpoint,
        bank=CONFIG.ranking.bank,
    script:
        "../scripts/gate_truth_check.py"


rule gate_experiment_b:
    input:
        beta=paths.GATE_BETA,
        design=paths.fill(paths.GATE_DESIGN, gate=GATE, design="design-b"),
        bare=BARE_VAL_RUN,
        fresh=INPUTS.experiment_b_runs,
    output:
        result=paths.GATE_EXPERIMENT_B,
    log:
        f"{paths.LOGS}/gate/{{gate}}-experiment-b.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("gate_experiment_b.py"),
        fresh=PLAN.designs["design-b"].runs,
        n_resamples=CONFIG.statistics.n_resamples,
        seed=CONFIG.statistics.seed,
    script:
        "../scripts/gate_experiment_b.py"
