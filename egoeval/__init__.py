"""egoeval: reproducible evaluation pipelines for EgoNormia and EgoHumans."""

import os

__version__ = "0.1.0"

# egoeval's numpy work is many small arrays, where OpenBLAS's worker threads add nothing, and each of them
# busy-waits after it starts: 0.1-0.2 s of CPU per process (numpy's OpenBLAS and scipy's), before any work. Every
# egoeval process (stage, command) imports this package before numpy, so one BLAS thread unless the user sets one.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
