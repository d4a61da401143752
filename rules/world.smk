# The embedded default world (shopsim): every file is an artifact built from seeds.


rule world_tasks:
    output:
        catalogue=paths.in_world(paths.WORLD_CATALOGUE, WORLD_DIR),
        splits=paths.in_world(paths.WORLD_SPLITS, WORLD_DIR),
    log:
        f"{paths.LOGS}/world/tasks.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        content=WORLD_DIGESTS.get("tasks"),
        world=canonical(CONFIG.world.settings()),
    script:
        "../scripts/world_tasks.py"


rule world_checkpoint:
    output:
        weights=paths.in_world(paths.WORLD_CHECKPOINT, WORLD_DIR),
    log:
        f"{paths.LOGS}/world/checkpoint-{{checkpoint}}.log",
    wildcard_constraints:
        checkpoint="|".join(WORLD_DESIGN.checkpoints),
    conda:
        "../envs/skilleval.yaml"
    params:
        content=INPUTS.world_checkpoint_digest,
        seed=CONFIG.world.seed,
        design=lambda wildcards: WORLD_DESIGN.checkpoints[
            wildcards.checkpoint
        ].as_params(),
    script:
        "../scripts/world_checkpoint.py"


rule world_bank:
    output:
        bank=paths.in_world(paths.WORLD_BANK, WORLD_DIR),
    log:
        f"{paths.LOGS}/world/bank-{{bank}}.log",
    wildcard_constraints:
        bank="|".join(WORLD_DESIGN.banks),
    conda:
        "../envs/skilleval.yaml"
    params:
        content=INPUTS.world_bank_digest,
        seed=CONFIG.world.seed,
        design=lambda wildcards: WORLD_DESIGN.banks[wildcards.bank].as_params(),
    script:
        "../scripts/world_bank.py"


rule world_ground_truth:
    input:
        catalogue=paths.in_world(paths.WORLD_CATALOGUE, WORLD_DIR),
        splits=paths.in_world(paths.WORLD_SPLITS, WORLD_DIR),
        checkpoints=[SOURCES.input_file(p) for p in INPUTS.world_checkpoints().values()],
        banks=[SOURCES.input_file(p) for p in INPUTS.world_banks().values()],
    output:
        truth=paths.in_world(paths.WORLD_GROUND_TRUTH, WORLD_DIR),
    log:
        f"{paths.LOGS}/world/ground_truth.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("world_ground_truth.py"),
        # Names in the order of the inputs; contents by digest, never paths.
        checkpoints=list(INPUTS.world_checkpoints()),
        banks=list(INPUTS.world_banks()),
        sources=SOURCES.digests(INPUTS.world_sources()),
        reference=INPUTS.ground_truth_reference(),
    script:
        "../scripts/world_ground_truth.py"
