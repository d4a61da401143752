# Frozen ranking banks from the signed betas (memo §2 C step 3); their test runs are
# ordinary eval_run jobs (rank-top-4, rank-bottom-4, rank-random-4-SEED).


rule freeze_bank:
    input:
        beta=paths.GATE_BETA,
        bank=RANKING_BANK,
    output:
        bank=paths.FROZEN_BANK,
    log:
        f"{paths.LOGS}/banks/{{gate}}-{{arm}}.log",
    priority: GATE_CHAIN_PRIORITY
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("freeze_bank.py"),
        sources=SOURCES.digests({"bank": RANKING_BANK_PATH}),
        selection=INPUTS.frozen_arm,
    script:
        "../scripts/freeze_bank.py"
