"""Publishing: atomic writes, the manifest, the local copy for the agent, S3, the gate.

Import from the submodules (`publishing.local`, `publishing.s3`, ...): this package
init stays empty of imports so importing a publishing module does not pull in every other one.
"""
