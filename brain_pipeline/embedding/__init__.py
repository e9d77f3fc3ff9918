"""Embedding core: providers (Gemini, local ONNX), quota pacing and retry, and the
incremental, resumable builder of embeddings.bin. Never imports Dagster; the Gemini SDK
and onnxruntime load only when their provider is made.

The package re-exports nothing: import the module that owns a name, so importing one
module never loads the others (the preflight's refusal stays free of numpy and Dagster).
"""
