"""lins_analysis: turns the CSV and trace files written by `lins` into the paper's figures and tables.

Modules: schema (the CSV contract, from `lins schema`'s output through lins_schema), load (finding and reading runs),
style (how measured and projected data are drawn), and one module per figure or table. Commands, each run as
python3 -m lins_analysis.NAME (or analysis/NAME.py from a checkout): make_figures (every figure the data allows),
cluster_summary, compare_plans, projections_table, validate_projection.
"""

class NoData(Exception):
    """Raised by a figure module when the data it was given cannot draw that figure; the message says why."""
