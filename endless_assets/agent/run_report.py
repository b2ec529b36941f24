"""What a solver run says about its endpoint, for the stage's metadata and log.

- How the endpoint was used: requests, timeouts, retries, the concurrency the client settled on,
  time spent queueing for a slot, how the system prompt was sent, the context used.
- Attempts of one task whose replies are byte-identical. k attempts are meant to be independent
  samples; identical ones mean the server decodes greedily (e.g. a generation config without
  sampling, which ignores `temperature`), so pass@k says nothing. They are counted and warned
  about, not dropped.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from endless_assets.agent.chat import ChatPolicy
from endless_assets.agent.policies import Policy

SHOWN = 10  # tasks named in the metadata and the warning, at most


def identical_attempts(rows: Iterable[dict[str, Any]]) -> dict[str, list[list[int]]]:
    """Per task, the groups (2 or more) of attempts whose model replies are byte-identical.
    Attempts without a reply (harness errors, policies without a model) are left out."""
    groups: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for row in rows:
        if row.get("termination") == "harness_error":
            continue
        messages = json.loads(row.get("messages") or "[]")
        replies = [m.get("content") for m in messages if m.get("role") == "assistant"]
        if not replies:
            continue
        key = (row["task_id"], row["policy"], row["model"], json.dumps(replies))
        groups[key].append(int(row["rollout_idx"]))
    found: dict[str, list[list[int]]] = defaultdict(list)
    for (task_id, *_), attempts in sorted(groups.items()):
        if len(attempts) > 1:
            found[task_id].append(sorted(attempts))
    return dict(found)


def solver_run_metadata(
    policy: Policy, rows: list[dict[str, Any]], warn: Callable[[str], None]
) -> dict[str, Any]:
    """Metadata entries for the solver stage; warns through `warn` on identical attempts."""
    identical = identical_attempts(rows)
    duplicates = sum(len(g) - 1 for groups in identical.values() for g in groups)
    metadata: dict[str, Any] = {"identical_attempts": duplicates}
    if identical:
        named = "; ".join(
            f"{task}: attempts {' = '.join(map(str, group))}"
            for task, groups in list(identical.items())[:SHOWN]
            for group in groups
        )
        more = f" (and {len(identical) - SHOWN} more tasks)" if len(identical) > SHOWN else ""
        metadata["identical_attempts_tasks"] = named + more
        warn(
            f"{duplicates} attempt(s) repeat another attempt of the same task byte for byte "
            f"({named}{more}): the endpoint does not seem to sample (a generation config without "
            "sampling decodes greedily whatever the temperature), so pass@k means little"
        )
    if isinstance(policy, ChatPolicy):
        metadata.update(policy.client.report())
        metadata["context_tokens"] = policy.config.context_tokens
    return metadata
