"""Pure retrieval: the agent's tokenizer, BM25, int8 vectors and hybrid fusion (no I/O).

The package re-exports nothing: import the module that owns a name, so importing one
module never loads the others (the preflight's refusal stays free of numpy and Dagster).
"""
