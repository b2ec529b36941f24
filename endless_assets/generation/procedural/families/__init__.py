"""The registry of procedural task families. Add a family by importing it here."""

from endless_assets.generation.procedural.base import Family
from endless_assets.generation.procedural.families.archive_backup import ArchiveBackup
from endless_assets.generation.procedural.families.checksum_verify import ChecksumVerify
from endless_assets.generation.procedural.families.cron_schedule import CronSchedule
from endless_assets.generation.procedural.families.csv_aggregate import CsvAggregate
from endless_assets.generation.procedural.families.file_organize import FileOrganize
from endless_assets.generation.procedural.families.git_history import GitHistory
from endless_assets.generation.procedural.families.http_upstream import HttpUpstream
from endless_assets.generation.procedural.families.ini_config import IniConfig
from endless_assets.generation.procedural.families.json_filter import JsonFilter
from endless_assets.generation.procedural.families.log_errors import LogErrorCounts
from endless_assets.generation.procedural.families.permissions_fix import PermissionsFix
from endless_assets.generation.procedural.families.pg_report import PgReport
from endless_assets.generation.procedural.families.redis_queue import RedisQueue
from endless_assets.generation.procedural.families.shell_script import ShellScript
from endless_assets.generation.procedural.families.sqlite_report import SqliteReport
from endless_assets.generation.procedural.families.text_replace import TextReplace

ALL_FAMILIES: list[type[Family]] = [
    LogErrorCounts,
    FileOrganize,
    CsvAggregate,
    JsonFilter,
    TextReplace,
    ArchiveBackup,
    ChecksumVerify,
    PermissionsFix,
    SqliteReport,
    IniConfig,
    CronSchedule,
    GitHistory,
    ShellScript,
]

# Families whose tasks have services beside the agent's container (service_kit.py): dealt in
# batches from SERVICES_SINCE on (procedural/__init__.py), so earlier batches reproduce.
SERVICE_FAMILIES: list[type[Family]] = [PgReport, HttpUpstream, RedisQueue]
