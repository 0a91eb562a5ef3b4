"""lins_analysis: turns the CSV and trace files written by `lins` into the paper's figures and tables.

Modules: schema (the CSV contract, mirrored from src/core/output/results_schema.h), load (finding and reading runs),
style (how measured and projected data are drawn), and one module per figure or table.
"""

class NoData(Exception):
    """Raised by a figure module when the data it was given cannot draw that figure; the message says why."""
