"""Near-duplicate tasks are rejected within a batch and against the lake, naming the match."""

from __future__ import annotations

import itertools

import pytest

from endless_assets.generation import Usage
from endless_assets.generation.dedupe import (
    Candidate,
    find_near_duplicates,
    jaccard,
    reject_duplicates,
    shingles,
)
from endless_assets.generation.procedural import ProceduralGenerator
from endless_assets.generation.procedural.families import ALL_FAMILIES
from endless_assets.models import task_seed
from endless_assets.stages.describe import Description
from endless_assets.store.columns import frame
from endless_assets.store.lake import Lake
from endless_assets.store.schemas import TABLES

LOGS = (
    "I need you to go through /home/user/logs/app.log and count how many ERROR lines each "
    "service produced, then write the counts to /home/user/reports/errors.csv with a header "
    "service,count sorted by count descending."
)
COSMETIC = (
    "Please go through /home/user/data/server.log and count how many ERROR lines each service "
    "produced, then write the counts to /home/user/out/error_counts.csv with a header "
    "service,count sorted by count descending."
)
OTHER = (
    "The nightly backup in /home/user/backups keeps failing; pack /home/user/project into "
    "/home/user/backups/project-2024.tar.gz, leaving out every .cache directory."
)


def test_a_cosmetic_rewrite_is_similar_and_another_task_is_not():
    assert jaccard(shingles(LOGS), shingles(COSMETIC)) >= 0.4
    assert jaccard(shingles(LOGS), shingles(OTHER)) < 0.1
    # numbers are cosmetic too
    assert shingles("keep 12 files in /tmp/a1") == shingles("keep 3 files in /tmp/a7")


def candidates(*texts: str, batch: str = "2026-06-02") -> list[Candidate]:
    return [Candidate(i, f"et-{i}", batch, t) for i, t in enumerate(texts)]


def test_within_a_batch_copies_are_matched_to_the_first_one_kept():
    found = find_near_duplicates(candidates(LOGS, OTHER, COSMETIC, LOGS + " Thanks!"), [], 0.4)
    assert set(found) == {2, 3}
    assert found[2].task_id == found[3].task_id == "et-0"
    assert found[3].similarity > found[2].similarity
    assert found[2].reason().startswith("duplicate: near-duplicate of et-0 (batch 2026-06-02)")


def test_stored_tasks_are_matched_too_and_the_best_match_wins():
    stored = [("et-old1", "2026-06-01", OTHER + " (weekly)"), ("et-old2", "2026-05-30", COSMETIC)]
    found = find_near_duplicates(
        candidates(LOGS, OTHER, "A task nobody wrote before."), stored, 0.4
    )
    assert {p: (m.task_id, m.batch) for p, m in found.items()} == {
        0: ("et-old2", "2026-05-30"),
        1: ("et-old1", "2026-06-01"),
    }


def test_distinct_procedural_families_are_never_duplicates():
    generator = ProceduralGenerator("base")
    drafts = [generator.describe("2026-06-03", i, task_seed("2026-06-03", i))[0] for i in range(13)]
    assert {d.family for d in drafts} == {f.name for f in ALL_FAMILIES}
    assert find_near_duplicates(candidates(*(d.instruction for d in drafts)), [], 0.4) == {}
    worst = max(
        jaccard(shingles(a.instruction), shingles(b.instruction))
        for a, b in itertools.combinations(drafts, 2)
    )
    assert worst < 0.2


def test_the_threshold_must_be_a_share():
    with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\]"):
        find_near_duplicates([], [], 0)


def rows_for(batch: str, texts: list[str], statuses: list[str] | None = None) -> list[dict]:
    base = ProceduralGenerator("base")
    rows = []
    for i, text in enumerate(texts):
        draft = base.describe(batch, i, task_seed(batch, i))[0]
        draft = draft.model_copy(update={"instruction": text})
        row = Description(draft, Usage(), 0.1).row()
        if statuses:
            row["status"] = statuses[i]
        rows.append(row)
    return rows


def test_the_generator_rejects_duplicates_of_earlier_batches_in_the_lake(tmp_path):
    lake = Lake(tmp_path)
    earlier = rows_for("2026-06-01", [LOGS, OTHER], ["ok", "rejected"])
    lake.write("task_descriptions", "2026-06-01", frame("task_descriptions", earlier))
    # The batch being re-materialized is not its own history.
    stale = rows_for("2026-06-02", [COSMETIC + " again"])
    lake.write("task_descriptions", "2026-06-02", frame("task_descriptions", stale))

    new = rows_for("2026-06-02", [COSMETIC, OTHER + " Please.", "Something else entirely new."])
    checked = reject_duplicates(new, lake, 0.4)

    assert [r["status"] for r in checked] == ["rejected", "ok", "ok"]
    assert checked[0]["duplicate_of"] == earlier[0]["task_id"]
    assert checked[0]["reject_reason"].startswith(
        f"duplicate: near-duplicate of {earlier[0]['task_id']} (batch 2026-06-01)"
    )
    # the rejected stored task does not count; the rows still satisfy the table contract
    assert checked[1]["duplicate_of"] == ""
    TABLES["task_descriptions"].validate(frame("task_descriptions", checked))
