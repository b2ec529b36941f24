"""Docker sandbox: the base image, task images, containers, the persistent shell, verdicts.

Knows nothing of Dagster. Every container it creates carries the `endless.project` label and is
removed when its episode ends; `sweep_containers` removes leftovers of dead processes.
"""
