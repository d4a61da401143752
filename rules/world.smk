# The embedded default world (shopsim): every file is an artifact built from seeds.


rule world_tasks:
    output:
        catalogue=f"{WORLD_DIR}/catalogue.json",
        splits=f"{WORLD_DIR}/persona_splits.v1.json",
    log:
        "results/logs/world/tasks.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        world=config["world"],
    script:
        "../scripts/world_tasks.py"


rule world_checkpoint:
    output:
        weights=f"{WORLD_DIR}/checkpoints/{{checkpoint}}/model.safetensors",
    log:
        "results/logs/world/checkpoint-{checkpoint}.log",
    wildcard_constraints:
        checkpoint="base|final",
    conda:
        "../envs/skilleval.yaml"
    params:
        seed=config["world"]["seed"],
    script:
        "../scripts/world_checkpoint.py"


rule world_bank:
    output:
        bank=f"{WORLD_DIR}/banks/{{bank}}.md",
    log:
        "results/logs/world/bank-{bank}.log",
    wildcard_constraints:
        bank="S0|ST|draft16",
    conda:
        "../envs/skilleval.yaml"
    params:
        seed=config["world"]["seed"],
    script:
        "../scripts/world_bank.py"


rule world_ground_truth:
    input:
        catalogue=f"{WORLD_DIR}/catalogue.json",
        splits=f"{WORLD_DIR}/persona_splits.v1.json",
        checkpoints=get_world_checkpoint_files,
        banks=get_world_bank_files,
    output:
        truth=f"{WORLD_DIR}/ground_truth.json",
    log:
        "results/logs/world/ground_truth.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        checkpoints=WF.world_checkpoint_files(),
        banks=WF.world_bank_files(),
        reference=WF.ground_truth_reference(),
    script:
        "../scripts/world_ground_truth.py"
