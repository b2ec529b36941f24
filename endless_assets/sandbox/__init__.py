"""Docker sandbox, in rooms: engine/ (clients, the engine pool, retries, leftovers, disk budgets),
image/ (base and task images), containers/ (task containers, the persistent shell, snapshots),
grading/ (verdicts, the in-container grader, verifier containers). sandbox.py is the facade every
stage holds: the engines, the base image, limits and its CPU slot.

Knows nothing of Dagster. Every container it creates carries the `endless.project` label and is
removed when its episode ends; `engine/leftovers.py` removes leftovers of dead processes.
"""
