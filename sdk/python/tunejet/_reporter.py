"""Ray's CLIReporter: which columns the status table shows, and how often.

The table is drawn by the tunejet process fit() runs; a reporter given as
RunConfig(progress_reporter=...) becomes its flags.
"""


class CLIReporter:
    """As Ray's: metric_columns and parameter_columns (a list of keys, or
    a dict of keys to headers, whose keys are taken) replace the table's
    default columns, in the order given; max_report_frequency is how often,
    in seconds, it is drawn at most. Ray's other arguments (sort_by_metric,
    max_progress_rows, ...) are accepted and not used."""

    def __init__(self, *, metric_columns=None, parameter_columns=None, max_report_frequency=5, **others):
        del others
        self.metric_columns = _keys(metric_columns, "metric_columns")
        self.parameter_columns = _keys(parameter_columns, "parameter_columns")
        if max_report_frequency is not None and max_report_frequency <= 0:
            raise ValueError("max_report_frequency must be > 0, got %r" % (max_report_frequency,))
        self.max_report_frequency = max_report_frequency

    def add_metric_column(self, metric, representation=None):
        del representation
        self.metric_columns = (self.metric_columns or []) + [metric]

    def add_parameter_column(self, parameter, representation=None):
        del representation
        self.parameter_columns = (self.parameter_columns or []) + [parameter]


def _keys(columns, name):
    if columns is None:
        return None
    keys = list(columns.keys()) if isinstance(columns, dict) else list(columns)
    for k in keys:
        if not isinstance(k, str) or "," in k:
            raise ValueError("CLIReporter(%s=...) takes result keys without commas, got %r" % (name, k))
    return keys


def args(verbose, reporter):
    """The tunejet flags of RunConfig's verbose and progress_reporter."""
    out = []
    if verbose is not None:
        level = int(verbose)
        if level not in (0, 1, 2, 3):
            raise ValueError("RunConfig.verbose must be 0, 1, 2 or 3, got %r" % (verbose,))
        out.append("--verbose=%d" % level)
    if reporter is None:
        return out
    if not isinstance(reporter, CLIReporter):
        raise ValueError(
            "RunConfig.progress_reporter takes a tune.CLIReporter; a custom ProgressReporter "
            "is not supported (the table is drawn by the tunejet process)"
        )
    if reporter.metric_columns:
        out.append("--metric-columns=" + ",".join(reporter.metric_columns))
    if reporter.parameter_columns:
        out.append("--parameter-columns=" + ",".join(reporter.parameter_columns))
    if reporter.max_report_frequency:
        out.append("--report-every=%gs" % reporter.max_report_frequency)
    return out
