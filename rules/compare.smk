# Contrasts (task-aligned paired bootstrap) and control verdicts of memo §2 A, B.


rule contrast:
    input:
        control=INPUTS.contrast_control,
        treatment=INPUTS.contrast_treatment,
        audits=INPUTS.contrast_audits,
    output:
        contrast=paths.CONTRAST,
    log:
        f"{paths.LOGS}/contrasts/{{contrast}}.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("contrast.py"),
        spec=INPUTS.contrast_spec,
        statistics=canonical(CONFIG.statistics.settings()),
    script:
        "../scripts/contrast.py"


rule verdict:
    input:
        contrast=paths.CONTRAST,
    output:
        verdict=report(
            paths.VERDICT,
            caption="../report/verdict.rst",
            category="Verdicts",
        ),
    log:
        f"{paths.LOGS}/verdicts/{{contrast}}.log",
    conda:
        "../envs/skilleval.yaml"
    params:
        code=code("verdict.py"),
    script:
        "../scripts/verdict.py"
