"""What the dataset looks like: stats tables (`endless stats`) and the HTML report
(`endless report`)."""

from endless_assets.report.html import build_report, write_report
from endless_assets.report.tables import StatsTable, headline, stats_tables

__all__ = ["StatsTable", "build_report", "headline", "stats_tables", "write_report"]
