"""What a served environment takes and gives, as OpenEnv's own models (its Action, Observation
and State bases): published at /schema, validated by OpenEnv's server before they reach us, and
read by any OpenEnv client (GenericEnvClient gets them as dicts)."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError


class TerminalAction(Action):
    """One step: a shell command for the persistent shell, or the final action (`done`), which
    ends the episode and has it graded."""

    command: str = Field(default="", description="one shell command, run in the agent's shell")
    done: bool = Field(default=False, description="the task is complete: grade it now")

    @model_validator(mode="after")
    def _one_of(self) -> TerminalAction:
        if self.done == bool(self.command.strip()):
            # (a PydanticCustomError: OpenEnv's server puts the errors in its JSON reply, which
            # a ValueError in them would break)
            raise PydanticCustomError(
                "one_action", "give a non-empty `command` or `done: true`, one of the two"
            )
        return self


class TerminalObservation(Observation):
    """The instruction (at reset), a command's result, or the end of the episode.

    `reward` is set only when the episode was graded (1.0 or 0.0). `infra_error` says that the
    engine or the harness failed: the episode is over, carries no reward, and is no evidence
    about the agent (mask it; never count it as 0)."""

    text: str = Field(default="", description="what the agent sees, as a solver would see it")
    task_id: str = ""
    episode_id: str = ""
    session_id: str = ""
    output: str = Field(default="", description="the command's merged stdout and stderr, capped")
    exit_code: int | None = Field(default=None, description="None: timed out or unknown")
    timed_out: bool = False
    truncated: bool = Field(default=False, description="the output was cut at the output cap")
    original_bytes: int = Field(default=0, description="the output's size before the cap")
    note: str = Field(default="", description="what the harness did (interrupted, restarted)")
    steps: int = Field(default=0, description="commands run so far in this episode")
    steps_left: int = Field(default=0, description="actions left before the step budget grades")
    seconds_left: float = Field(default=0.0, description="episode time left before it grades")
    command_timeout: float = Field(default=0.0, description="seconds one command may take")
    termination: str = Field(
        default="", description="done | turn_limit | time_limit | infra_error ('' while running)"
    )
    verdict: str = Field(default="", description="the grader's verdict summary, once graded")
    infra_error: str | None = Field(
        default=None, description="why the engine or harness failed: no reward, mask it"
    )


class TerminalState(State):
    """The session's episode, as `state` reports it."""

    session_id: str = ""
    task_id: str = ""
    batch: str = ""
    status: str = Field(default="idle", description="idle | running | over | closed")
    steps_left: int = 0
    reward: float | None = None
    termination: str = ""
    infra_error: str | None = None
