"""What the build directory remembers between runs (no Dagster import).

Every asset reads its inputs from, and writes its outputs to, the build directory, so
any selection runs on a fresh Dagster instance and nothing proportional to the corpus
is pickled into the instance. `layout.StateLayout` names every path once.
"""
