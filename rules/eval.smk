# Evaluation runs (memo §2 A, B): per-task records and a summary at coverage 1.


rule eval_run:
    input:
        unpack(INPUTS.run_files),
    output:
        results=paths.RUN_RESULTS,
        summary=paths.RUN_SUMMARY,
        transcripts=paths.RUN_TRANSCRIPTS,
    log:
        paths.RUN_LOG,
    priority: RUN_SCHEDULING.run_priority
    conda:
        "../envs/skilleval.yaml"
    resources:
        model_server=1,
        gpu=RUN_SCHEDULING.run_gpus,
        # what a cluster job of the run asks for (serving/sizing.py; a site's profile
        # overrides them with set-resources)
        cpus_per_task=RUN_SCHEDULING.run_cpus,
        mem_mb=RUN_SCHEDULING.run_mem_mb,
        runtime=RUN_SCHEDULING.run_runtime,
    params:
        code=MODEL_RUN_CODE,
        sources=INPUTS.run_sources,
        inputs=INPUTS.run_params,
        # where its servers are: the job reads it, Snakemake never compares it
        execution=INPUTS.run_execution,
        journal_root=paths.JOURNAL_ROOT,
    script:
        "../scripts/eval_run.py"
