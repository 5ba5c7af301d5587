"""Prefect orchestration of the DVC pipeline: the nightly flow (pipeline, nightly), its report and scale-out (shard).

Without ``PREFECT_API_URL`` a run starts a temporary Prefect server, which takes 35-72 s to start on a loaded 2-core
machine; Prefect waits 20 s by default. So the flows wait up to 180 s unless the user set
``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``: set here, before any flow module imports prefect (Prefect reads
its settings from the environment when it is imported).
"""

import os

STARTUP_TIMEOUT_ENV = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
os.environ.setdefault(STARTUP_TIMEOUT_ENV, "180")
