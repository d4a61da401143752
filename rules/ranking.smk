# Frozen ranking banks from the signed betas (memo §2 C step 3); their test runs are
# ordinary eval_run jobs (rank-top-4, rank-bottom-4, rank-random-4-SEED).


rule freeze_bank:
    input:
        beta=f"results/gate/{GATE}/beta.json",
        bank=config["banks"][config["ranking"]["bank"]]["path"],
    output:
        bank=f"results/banks/{GATE}/{{arm}}.json",
    log:
        f"results/logs/banks/{GATE}-{{arm}}.log",
    wildcard_constraints:
        arm="(top|bottom)-[0-9]+|random-[0-9]+-[0-9]+",
    conda:
        "../envs/skilleval.yaml"
    params:
        selection=get_freeze_params,
    script:
        "../scripts/freeze_bank.py"
