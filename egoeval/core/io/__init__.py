"""Files, by concern: ``bounded`` readers (what one input may cost), ``atomic`` writes, a stage's outputs committed
together (``commit``), sha256 ``manifest``s, ``paths`` given by data kept inside their root, and ``dvc_lock``.
"""
