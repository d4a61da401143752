# Contrasts (task-aligned paired bootstrap) and control verdicts of memo §2 A, B.


rule contrast:
    input:
        control=get_contrast_control,
        treatment=get_contrast_treatment,
        audits=get_contrast_audits,
    output:
        contrast="results/contrasts/{contrast}.json",
    log:
        "results/logs/contrasts/{contrast}.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        spec=get_contrast_spec,
        statistics=config["statistics"],
    script:
        "../scripts/contrast.py"


rule verdict:
    input:
        contrast="results/contrasts/{contrast}.json",
    output:
        verdict=report(
            "results/verdicts/{contrast}.json",
            caption="../report/verdict.rst",
            category="Verdicts",
        ),
    log:
        "results/logs/verdicts/{contrast}.log",
    conda:
        "../envs/skilleval.yaml"
    script:
        "../scripts/verdict.py"
