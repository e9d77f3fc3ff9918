"""What each pipeline step does, without Dagster: typed results the assets turn into
metadata. The assets in `defs/` only wire a step to its resources and report its result;
the CLI and the tests can call the same functions."""
