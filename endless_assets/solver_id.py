"""Who solved a task: a policy and its model, named `policy/model` (`chat/o3`) or `policy` alone
when the policy has no model (`oracle`), in the lake (`filtered_dataset.solver_model`,
`task_draws.solver`), the stats views and the metadata. Stated once here, in Python, polars and
SQL."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class SolverId:
    policy: str
    model: str = ""

    def __str__(self) -> str:
        return f"{self.policy}/{self.model}" if self.model else self.policy

    @classmethod
    def parse(cls, text: str) -> SolverId:
        """The inverse of `str`: the policy is up to the first slash (a model name may have
        more, `openrouter/vendor/model`)."""
        policy, _, model = text.partition("/")
        return cls(policy, model)

    @staticmethod
    def expr(policy: str = "policy", model: str = "model") -> pl.Expr:
        """The name from a frame's policy and model columns."""
        bare = pl.col(model).fill_null("") == ""
        return pl.when(bare).then(pl.col(policy)).otherwise(pl.col(policy) + "/" + pl.col(model))

    @staticmethod
    def sql(policy: str = "policy", model: str = "model") -> str:
        """The name from a table's policy and model columns, in SQL."""
        named = f"{policy} || '/' || {model}"
        return f"case when coalesce({model}, '') = '' then {policy} else {named} end"


NO_SOLVER = SolverId("")  # a score read back without its solver
