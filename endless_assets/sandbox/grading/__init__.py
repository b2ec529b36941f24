"""Verdicts: the grader that runs inside a container (its source is package data), verifier
containers and a task's own grading script."""
