"""A task's services in the model: what a service may be named and hold, that they enter the
task's id and stored form only when there are any (every one-container task keeps its id and
its stored JSON), the lake's `services` column and the quality record."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from endless_assets.interop.quality import QualityRecord
from endless_assets.models import Service, Task, start_order, task_id_for
from endless_assets.store.columns import task_columns

BASE = "endless-base:test"


def service(name: str = "db", **changes) -> Service:
    fields = {
        "name": name,
        "dockerfile": f"FROM {BASE}\nRUN true\n",
        "command": ["sleep", "infinity"],
        "ready": "true",
    }
    return Service(**{**fields, **changes})


def task(**changes) -> Task:
    fields = {
        "batch": "2026-12-07",
        "index": 3,
        "seed": 7,
        "category": "databases",
        "complexity": "easy",
        "scenario": "s",
        "instruction": "Fix the app's database connection.",
        "truth": {"rows": 4},
        "generator": "procedural",
    }
    return Task(**{**fields, **changes})


def test_a_one_container_task_keeps_the_id_and_stored_form_it_always_had():
    plain = task()
    assert plain.task_id == task_id_for("2026-12-07", 3, plain.instruction, {"rows": 4})
    assert "services" not in json.loads(plain.stored_json())
    assert Task.model_validate_json(plain.stored_json()) == plain


def test_service_names_enter_the_id_and_the_services_survive_the_stored_form():
    with_db = task(services=[service()])
    assert with_db.task_id != task().task_id
    assert task(services=[service("cache")]).task_id != with_db.task_id
    # What the build stage may repair is not in the id, as the task's own Dockerfile is not.
    repaired = task(services=[service(command=["sleep", "1000"], ready="true")])
    assert repaired.task_id == with_db.task_id
    back = Task.model_validate_json(with_db.stored_json())
    assert back.services == with_db.services and back.task_id == with_db.task_id


@pytest.mark.parametrize("name", ["DB", "1db", "a_b", "x" * 32, "", "agent", "localhost"])
def test_a_service_name_must_be_a_dns_label_that_is_not_reserved(name):
    with pytest.raises(ValidationError):
        service(name)


def test_service_names_are_unique_within_a_task():
    with pytest.raises(ValidationError, match="unique"):
        task(services=[service("db"), service("db")])


@pytest.mark.parametrize(
    "changes",
    [
        {"command": []},
        {"ready": ""},
        {"ready_seconds": 0},
        {"cpus": 0},
        {"pids": 1},
        {"context_files": {"../etc/passwd": "x"}},
        {"extra": 1},
    ],
)
def test_a_service_without_a_command_a_readiness_check_or_sane_limits_is_refused(changes):
    with pytest.raises(ValidationError):
        service(**changes)


def test_the_lake_column_holds_the_services_as_json_and_an_empty_list_for_none():
    assert task_columns(task())["services"] == "[]"
    stored = json.loads(task_columns(task(services=[service("cache")]))["services"])
    assert [s["name"] for s in stored] == ["cache"]
    assert stored[0]["memory"] == "512m"


def test_the_quality_record_names_the_services():
    named = QualityRecord.from_tables(
        score=None,
        soundness=None,
        completion=None,
        decontamination=None,
        recheck=None,
        services=["db", "web"],
    )
    assert named.services == "db,web"
    none = QualityRecord.from_tables(
        score=None, soundness=None, completion=None, decontamination=None, recheck=None
    )
    assert none.services is None
    assert QualityRecord.from_dict(named.as_dict()) == named


def test_services_start_in_waves_after_those_they_wait_for():
    db, cache = service("db"), service("cache")
    web = service("web", after=["db", "cache"])
    proxy = service("proxy", after=["web"])
    waves = start_order([proxy, web, db, cache])
    assert [[s.name for s in w] for w in waves] == [["db", "cache"], ["web"], ["proxy"]]


@pytest.mark.parametrize(
    ("services", "message"),
    [
        ([("web", ["ghost"])], "service web starts after ghost: no such service"),
        ([("a", ["b"]), ("b", ["a"])], "services a, b wait on each other"),
        ([("a", ["a"])], "services a wait on each other"),
    ],
)
def test_an_unknown_or_circular_after_is_refused_naming_it(services, message):
    with pytest.raises(ValidationError, match=message):
        task(services=[service(name, after=after) for name, after in services])


def test_an_alias_is_a_compose_name_unique_in_the_task_and_not_reserved():
    assert service("my-db", aliases=["my_db", "DB.main"]).aliases == ["my_db", "DB.main"]
    with pytest.raises(ValidationError):
        service("db", aliases=["bad name"])
    for aliases in (["Agent"], ["WEB"]):
        with pytest.raises(ValidationError, match="unique and not reserved"):
            task(services=[service("db", aliases=aliases), service("web")])
