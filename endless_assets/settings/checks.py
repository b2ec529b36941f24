"""Settings of the checks around the core stages: decontamination, soundness, and imports."""

from __future__ import annotations

from dataclasses import dataclass

from endless_assets.settings.declare import endpoint, setting


@dataclass(frozen=True)
class DecontaminationSettings:
    # Which tasks enter the build stage, not what any stage makes of a task: operational.
    references: str = setting(
        "",
        "ENDLESS_DECONTAMINATION_REFERENCES",
        "benchmarks kept out of the dataset: comma-separated directories of Harbor or "
        "Terminal-Bench tasks, each name=path or a bare path (its base name names the set); a "
        "task sharing text with one of theirs is rejected as contaminated (empty: no check)",
        operational=True,
        name="decontamination_references",
    )
    ngrams: str = setting(
        "13,8",
        "ENDLESS_DECONTAMINATION_NGRAMS",
        "decontamination: word n-gram sizes compared",
        operational=True,
        name="decontamination_ngrams",
    )
    fuzzy: float = setting(
        0.8,
        "ENDLESS_DECONTAMINATION_FUZZY",
        "decontamination: the normalised fuzzy ratio from which two short instructions are one",
        operational=True,
        name="decontamination_fuzzy",
    )


@dataclass(frozen=True)
class SoundnessSettings:
    mode: str = setting(
        "full",
        "ENDLESS_SOUNDNESS",
        "soundness stage: full (repeated controls, shortcut probes, ablations), controls (the "
        "repeated controls only) or off (every task passes, with no evidence)",
        choices=("full", "controls", "off"),
        name="soundness",
    )
    repeats: int = setting(
        3,
        "ENDLESS_SOUNDNESS_REPEATS",
        "soundness: runs of each control (disagreeing: flaky)",
        name="soundness_repeats",
    )
    # Keys: ENDLESS_AUDITOR_API_KEY, else the solver's; ENDLESS_REFERENCE_JUDGE_API_KEY, else
    # the auditor's.
    auditor_model: str = setting(
        "", "ENDLESS_AUDITOR_MODEL", "soundness: cheat rollout and judge model (empty: skipped)"
    )
    auditor_base_url: str = endpoint(
        "ENDLESS_AUDITOR_BASE_URL", "endpoint of auditor_model (empty: the solver's)"
    )
    reference_judge_model: str = setting(
        "",
        "ENDLESS_REFERENCE_JUDGE_MODEL",
        "soundness: a stronger model that judges the same requests as auditor_model, to "
        "measure the judge's agreement with it (empty: no calibration)",
    )
    reference_judge_base_url: str = endpoint(
        "ENDLESS_REFERENCE_JUDGE_BASE_URL",
        "endpoint of reference_judge_model (empty: the auditor's)",
    )


@dataclass(frozen=True)
class ImportSettings:
    base_recipe: str = setting(
        "bookworm",
        "ENDLESS_BASE_RECIPE",
        "the base image `endless-base` means in an import's --base-image-map: Debian bookworm "
        "(Python 3.11) or trixie (Python 3.13); either is also named endless-base-<recipe>",
        choices=("bookworm", "trixie"),
    )
    max_binary_file_mb: float = setting(
        10.0,
        "ENDLESS_MAX_BINARY_FILE_MB",
        "largest non-text file an imported task may carry (MiB); a larger one refuses the task "
        "with its path and size",
    )
