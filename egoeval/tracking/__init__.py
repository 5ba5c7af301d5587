"""Multi-object tracking metrics, knowing no benchmark.

- ``trackeval``: HOTA, CLEAR and Identity equal to TrackEval's (MOT15 semantics), vectorised; the metric units in
  ``hota``, ``clear``, ``identity`` on ``base``, ``similarity``, ``matching`` and ``npsum``;
- ``motmetrics``: mmtracking's ``eval_mot`` on py-motmetrics 1.4.0, with lap 0.4.0's LAPJV (``lapjv``);
- ``mot``: MOTChallenge text files (read, write, seqinfo.ini).
"""
