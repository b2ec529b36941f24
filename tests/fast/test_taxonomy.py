"""The taxonomy as data: the paper's three axes, seeded draws, weights, clear errors."""

from __future__ import annotations

from collections import Counter

import pytest

from endless_assets.models import task_seed
from endless_assets.taxonomy import Taxonomy, TaxonomyError


def test_the_shipped_taxonomy_has_the_papers_axes():
    taxonomy = Taxonomy.load()
    assert len(taxonomy.categories) == 62 + 3  # and ours whose tasks need services
    served = [e.name for e in taxonomy.categories if e.services]
    assert len(served) == 3 and "message queues and caches" in served
    assert len(taxonomy.complexities) == 6
    assert len(taxonomy.scenarios) == 54
    assert "SQLite database operations via CLI" in {e.name for e in taxonomy.categories}
    assert taxonomy.complexities[0].name == "simple single terminal command"
    assert all(e.hint for e in taxonomy.complexities)


def test_draws_are_seeded_by_batch_and_index():
    taxonomy = Taxonomy.load()
    first = [taxonomy.draw(task_seed("2026-05-01", i)) for i in range(200)]
    again = [taxonomy.draw(task_seed("2026-05-01", i)) for i in range(200)]
    other_day = [taxonomy.draw(task_seed("2026-05-02", i)) for i in range(200)]
    assert first == again
    assert first != other_day
    assert len({d.category for d in first}) > 40
    assert {d.complexity for d in first} == {e.name for e in taxonomy.complexities}


def test_a_draw_of_a_service_category_says_it_needs_services():
    taxonomy = Taxonomy.load()
    served = next(e.name for e in taxonomy.categories if e.services)
    grade = taxonomy.complexities[0].name
    assert taxonomy.draw_cell(7, served, grade).services
    assert not taxonomy.draw_cell(7, "log analysis", grade).services
    draws = [taxonomy.draw(task_seed("2026-05-01", i)) for i in range(400)]
    assert {d.services for d in draws} == {True, False}


def write(tmp_path, text: str):
    path = tmp_path / "taxonomy.yaml"
    path.write_text(text)
    return path


def test_weights_steer_the_draws(tmp_path):
    path = write(
        tmp_path,
        "categories:\n  - {name: common, weight: 9}\n  - rare\n  - {name: never, weight: 0}\n"
        "complexities: [easy]\nscenarios: [someone]\n",
    )
    taxonomy = Taxonomy.load(path)
    counts = Counter(taxonomy.draw(seed).category for seed in range(2000))
    assert counts["never"] == 0
    assert counts["common"] > 6 * counts["rare"] > 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("categories: [a]\ncomplexities: [b]\n", "`scenarios` must be a non-empty list"),
        ("categories: [a, a]\ncomplexities: [b]\nscenarios: [c]\n", "lists a more than once"),
        (
            "categories: [{name: a, weight: -1}]\ncomplexities: [b]\nscenarios: [c]\n",
            r"categories\[0\] \(a\): weight must be 0 or more",
        ),
        (
            "categories: [{name: a, weight: 0}]\ncomplexities: [b]\nscenarios: [c]\n",
            "every entry of `categories` has weight 0",
        ),
        (
            "categories: [{name: a, colour: red}]\ncomplexities: [b]\nscenarios: [c]\n",
            "unknown key",
        ),
        ("categories: [a]\ncomplexities: [b]\nscenarios: [c]\npersonas: [d]\n", "unknown key"),
        ("categories: [a\n", "not valid YAML"),
        (
            "categories: [{name: a, services: yes please}]\ncomplexities: [b]\nscenarios: [c]\n",
            r"categories\[0\] \(a\): services must be true or false",
        ),
    ],
)
def test_a_bad_taxonomy_names_the_file_and_the_entry(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(TaxonomyError, match=message) as caught:
        Taxonomy.load(path)
    assert str(path) in str(caught.value)
