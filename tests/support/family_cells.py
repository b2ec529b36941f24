"""Procedural families' cells (family, level) through the environment stage, the completion
check and the soundness probes (one repeat), two tasks at a time: what the families' level
tests assert on."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.stages.completion import check_completion_test
from endless_assets.stages.environment import build_environment
from endless_assets.stages.soundness.stage import check_soundness


def validate_cells(sandbox, names, levels, batch: str, seed: int) -> dict:
    """{(name, level): (environment, completion check or None, soundness or None)}: each cell
    described in `batch` with seed `seed + level`, stopping at its first rejection."""
    gen = ProceduralGenerator(sandbox.base.tag)

    def run(cell):
        name, level = cell
        draft, _ = gen.describe_cell(batch, level, seed + level, name, level)
        env = build_environment(draft, gen, sandbox)
        if env.status != "ok":
            return env, None, None
        comp = check_completion_test(draft, env.image_tag, gen, sandbox)
        if comp.status != "ok":
            return env, comp, None
        task = draft.model_copy(update={"completion_test": comp.completion_test})
        sound = check_soundness(task, env.image_tag, sandbox, repeats=1, earlier_reference=True)
        return env, comp, sound

    cells = [(name, level) for name in names for level in levels]
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(cells, pool.map(run, cells), strict=True))


def assert_sound(outcome, shortcuts: int) -> None:
    """The cell built, its completion test fails on the initial state by assertion and after
    doing nothing and passes the reference, and soundness ran at least `shortcuts` shortcut
    probes of which none passed."""
    env, comp, sound = outcome
    assert env.status == "ok", (env.reject_reason, env.attempt_log)
    assert comp is not None and comp.status == "ok", (comp.reject_reason, comp.attempt_log)
    assert (comp.fails_on_initial, comp.fails_with_noop, comp.passes_with_reference) == (
        True,
        True,
        True,
    )
    assert sound is not None and sound.status == "ok", (sound.reject_reason, sound.probes_json())
    assert sound.shortcuts_run >= shortcuts and sound.shortcuts_passed == 0
    assert sound.hackable == []
