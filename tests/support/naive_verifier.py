"""The verifier as it was before a root agent's configuration, its pytest plugins and what a test
runs were kept from grading (`todays`): what each red-team route of test_root_config.py,
test_root_reference.py and test_grader_reach.py first earns 1 (or a harness error) against,
before the same route earns a scored 0 against ours.

As it was: the system locations were the code trees and the image's PATH, nothing more;
configuration (/etc, the dot-entries of the homes) was the agent's, seen by grading; the paths
the image's ENV names were the agent's, and grading got that ENV as it is; an image's VOLUMEs
were all shared with the verifier; the first grader named only what it had loaded; a script's
pytest loaded the plugins of every sys.path entry; the test, the script and its pytest were not
fenced, a grader lost while the test ran was a harness error, `reward.json` was read before
`reward.txt` from a directory anyone could write, and a script's pytest left the reward files to
whatever it ran.
"""

from __future__ import annotations

import contextlib

from endless_assets.sandbox.grading import (
    offline_pytest,
    system_paths,
    verdict,
    verifier,
    verifier_view,
)

UNFENCED = ("    if landlock_abi() < SCOPED_ABI:\n", "    if True:\n")
TRUSTING = (
    "trust_plugins(pluggy.PluginManager, list(sys.path))",
    "sys.path.extend(later)\nlater = []",
)
GUARD_TRUSTING = ("sys.meta_path.insert(0, PluggyHook)", "pass")


def replaced(source: str, old: str, new: str) -> str:
    assert old in source, old
    return source.replace(old, new)


@contextlib.contextmanager
def todays(monkeypatch, *, backstop: bool = False):
    """The verifier as it was (the module docstring). `backstop`: ours, but for the fence (as on
    a kernel without Landlock's signal scoping): a grader lost while the test ran is scored 0."""
    with monkeypatch.context() as patch:
        source = replaced(verdict.GRADER_SOURCE, *UNFENCED)
        ours = offline_pytest.stand_ins()
        runner = replaced(ours["endless_pytest.py"], *UNFENCED)  # (its fence: grader_fence.py's)
        guard = ours["pyguard/sitecustomize.py"]
        if not backstop:
            source = replaced(
                source, '("reward.txt", "reward.json")', '("reward.json", "reward.txt")'
            )
            source = replaced(
                source, "fresh_directory(logs, 0o755)", "fresh_directory(logs, 0o777)"
            )
            source = replaced(source, 'env["ENDLESS_LOGS_DIR"] = logs', "pass")
            runner = replaced(runner, *TRUSTING)
            guard = replaced(guard, *GUARD_TRUSTING)

            def lost(box, spec, exc, started):
                raise exc

            patch.setattr(verifier, "_lost", lost)
            patch.setattr(system_paths, "CONFIG_DIRS", ())
            patch.setattr(system_paths, "code_locations", lambda env, workdir="": [])
            patch.setattr(system_paths, "grading_env", dict)
            patch.setattr(verifier_view, "homes_of", lambda container, spec=None: [])
            patch.setattr(verifier_view, "shared_volumes", lambda container, homes: (None, ""))
            patch.setattr(verdict, "LOADS", "ENDLESS_NOT_ASKED")
        patch.setattr(verdict, "GRADER_SOURCE", source)
        stand_ins = {**ours, "endless_pytest.py": runner, "pyguard/sitecustomize.py": guard}
        patch.setattr(offline_pytest, "stand_ins", lambda: stand_ins)
        yield


def reward_of(rollout) -> int | None:
    """A rollout's reward, None for a harness error."""
    return None if rollout.termination == "harness_error" else rollout.reward
