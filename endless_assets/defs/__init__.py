"""Dagster wiring only: each module reads inputs, calls domain code, writes rows with metadata."""
