
import warnings

import dagster as dg

# The observable `corpus`/`eval_fixture` sources and a job selecting them are marked beta
# in Dagster 1.13; they are what the design needs, so the notice is not repeated to every
# person running `brain-pipeline materialize`. So is `use_user_code_server` (the automation
# sensor evaluates a Python condition, `corpus_version_unconsumed`, in the code location).
# Other beta notices still show.
warnings.filterwarnings(
    "ignore",
    message=r".*(observable_source_asset|include_sources|use_user_code_server).*",
    category=dg.BetaWarning,
)
