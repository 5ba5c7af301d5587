"""lap 0.4.0's ``lapjv`` (dense Jonker-Volgenant), ported step by step so that exact cost ties resolve as there.

mmtracking's runtime requirements install ``lap``, and py-motmetrics 1.4.0 then solves every assignment with
``lap.lapjv`` (its ``lsa_solve_lapjv``) instead of SciPy. When several assignments share the minimum cost (two
identical tracker boxes on one person), the solvers pick different ones, and the published EgoHumans numbers were
made with lap 0.4.0 (the only release before 2024; 0.5.x breaks ties differently again). This module follows
gatagat/lap 0.4.0 (BSD-2-Clause): ``lap/lapjv.cpp`` (``_ccrrt_dense``, ``_carr_dense``, ``_find_dense``,
``_scan_dense``, ``find_path_dense``, ``_ca_dense``, ``lapjv_internal``) and the ``extend_cost`` padding of
``lap/_lapjv.pyx``, in the same order of operations on the same doubles, ``LARGE`` (1e6) included: that constant
stands for infinity there, so a column whose costs are all >= 1e6 behaves as in lap, not as an exact solver would.
The C code's unsigned 32-bit ``current * n`` is kept too. The tests check every row->column choice against lap
0.4.0 itself, built from its sdist in a NumPy 1 environment.
"""

from __future__ import annotations

import numpy as np

LARGE = 1_000_000.0  # lapjv.h
_UINT32 = 0xFFFFFFFF


def lapjv(cost: np.ndarray) -> np.ndarray:
    """Row -> column (-1: unmatched) as ``lap.lapjv(cost, extend_cost=True, return_cost=False)[0]`` in lap 0.4.0.

    A non-square matrix is padded to a square one with ``cost.max() + 1``; the costs must be finite.
    """
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim != 2:
        raise ValueError("2-dimensional array expected")
    rows, cols = cost.shape
    if rows == 0 or cols == 0:
        return np.full(rows, -1, dtype=np.int64)
    if not np.isfinite(cost).all():
        raise ValueError("costs must be finite (py-motmetrics replaces missing edges before calling lapjv)")
    n = max(rows, cols)
    if rows != cols:
        square = np.full((n, n), cost.max() + 1)
        square[:rows, :cols] = cost
        cost = square
    x = _lapjv_internal(n, cost.tolist())
    row_to_col = np.asarray(x[:rows], dtype=np.int64)
    row_to_col[row_to_col >= cols] = -1
    return row_to_col


def _lapjv_internal(n: int, cost: list[list[float]]) -> list[int]:
    """``lapjv_internal``: column reduction and reduction transfer, two rounds of augmenting row reduction, then
    shortest augmenting paths for the rows still free."""
    x, y, v = [-1] * n, [0] * n, [LARGE] * n
    free_rows = [0] * n
    free = _ccrrt_dense(n, cost, free_rows, x, y, v)
    rounds = 0
    while free > 0 and rounds < 2:
        free = _carr_dense(n, cost, free, free_rows, x, y, v)
        rounds += 1
    if free > 0:
        _ca_dense(n, cost, free, free_rows, x, y, v)
    return x


def _ccrrt_dense(
    n: int, cost: list[list[float]], free_rows: list[int], x: list[int], y: list[int], v: list[float]
) -> int:
    """Column reduction and reduction transfer; returns the number of free rows."""
    for i in range(n):
        row = cost[i]
        for j in range(n):
            if row[j] < v[j]:
                v[j] = row[j]
                y[j] = i
    unique = [True] * n
    for j in range(n - 1, -1, -1):
        i = y[j]
        if x[i] < 0:
            x[i] = j
        else:
            unique[i] = False
            y[j] = -1
    n_free_rows = 0
    for i in range(n):
        if x[i] < 0:
            free_rows[n_free_rows] = i
            n_free_rows += 1
        elif unique[i]:
            j = x[i]
            row = cost[i]
            smallest = LARGE
            for j2 in range(n):
                if j2 != j:
                    c = row[j2] - v[j2]
                    if c < smallest:
                        smallest = c
            v[j] -= smallest
    return n_free_rows


def _carr_dense(
    n: int, cost: list[list[float]], n_free_rows: int, free_rows: list[int], x: list[int], y: list[int], v: list[float]
) -> int:
    """Augmenting row reduction; returns the number of rows left free."""
    current = 0
    new_free_rows = 0
    rr_cnt = 0
    while current < n_free_rows:
        rr_cnt += 1
        free_i = free_rows[current]
        current += 1
        row = cost[free_i]
        j1, v1 = 0, row[0] - v[0]
        j2, v2 = -1, LARGE
        for j in range(1, n):
            c = row[j] - v[j]
            if c < v2:
                if c >= v1:
                    v2, j2 = c, j
                else:
                    v2, v1, j2, j1 = v1, c, j1, j
        i0 = y[j1]
        v1_new = v[j1] - (v2 - v1)
        v1_lowers = v1_new < v[j1]
        if rr_cnt < (current * n) & _UINT32:
            if v1_lowers:
                v[j1] = v1_new
            elif i0 >= 0 and j2 >= 0:
                j1 = j2
                i0 = y[j2]
            if i0 >= 0:
                if v1_lowers:
                    current -= 1
                    free_rows[current] = i0
                else:
                    free_rows[new_free_rows] = i0
                    new_free_rows += 1
        elif i0 >= 0:
            free_rows[new_free_rows] = i0
            new_free_rows += 1
        x[free_i] = j1
        y[j1] = free_i
    return new_free_rows


def _find_dense(n: int, lo: int, d: list[float], cols: list[int]) -> int:
    """Move the columns with the smallest ``d`` to ``cols[lo:hi]`` (the SCAN list); returns ``hi``."""
    hi = lo + 1
    mind = d[cols[lo]]
    for k in range(lo + 1, n):
        j = cols[k]
        if d[j] <= mind:
            if d[j] < mind:
                hi = lo
                mind = d[j]
            cols[k] = cols[hi]
            cols[hi] = j
            hi += 1
    return hi


def _scan_dense(
    n: int,
    cost: list[list[float]],
    lo: int,
    hi: int,
    d: list[float],
    cols: list[int],
    pred: list[int],
    y: list[int],
    v: list[float],
) -> tuple[int, int, int]:
    """Lower ``d`` of the TODO columns through the SCAN columns: ``(free column or -1, lo, hi)``. When a free column
    is found the C code returns without storing ``lo`` and ``hi``, so the caller keeps its own."""
    lo0, hi0 = lo, hi
    while lo != hi:
        j = cols[lo]
        lo += 1
        i = y[j]
        mind = d[j]
        row = cost[i]
        h = row[j] - v[j] - mind
        for k in range(hi, n):
            j = cols[k]
            cred_ij = row[j] - v[j] - h
            if cred_ij < d[j]:
                d[j] = cred_ij
                pred[j] = i
                if cred_ij == mind:
                    if y[j] < 0:
                        return j, lo0, hi0
                    cols[k] = cols[hi]
                    cols[hi] = j
                    hi += 1
    return -1, lo, hi


def _find_path_dense(
    n: int, cost: list[list[float]], start_i: int, y: list[int], v: list[float], pred: list[int]
) -> int:
    """One shortest-path search (Dijkstra as in the JV paper) from row ``start_i``; returns the free column reached."""
    lo = hi = 0
    final_j = -1
    n_ready = 0
    cols = list(range(n))
    row = cost[start_i]
    d = [row[j] - v[j] for j in range(n)]
    pred[:] = [start_i] * n
    while final_j == -1:
        if lo == hi:
            if lo >= n:
                raise RuntimeError("lapjv: no free column left (unreachable for a square matrix)")
            n_ready = lo
            hi = _find_dense(n, lo, d, cols)
            for k in range(lo, hi):
                if y[cols[k]] < 0:
                    final_j = cols[k]
        if final_j == -1:
            final_j, lo, hi = _scan_dense(n, cost, lo, hi, d, cols, pred, y, v)
    mind = d[cols[lo]]
    for k in range(n_ready):
        j = cols[k]
        v[j] += d[j] - mind
    return final_j


def _ca_dense(
    n: int, cost: list[list[float]], n_free_rows: int, free_rows: list[int], x: list[int], y: list[int], v: list[float]
) -> None:
    """Augment along a shortest path from every row still free."""
    pred = [0] * n
    for free_i in free_rows[:n_free_rows]:
        i = -1
        steps = 0
        j = _find_path_dense(n, cost, free_i, y, v, pred)
        while i != free_i:
            i = pred[j]
            y[j] = i
            j, x[i] = x[i], j
            steps += 1
            if steps > n:
                raise RuntimeError("lapjv: augmenting path longer than the matrix (unreachable)")


# The algorithm ported above is lap's (https://pypi.org/project/lap/0.4.0/), under this licence:
#
# Copyright (c) 2012-2017, Tomas Kazmar
# All rights reserved.
#
# Redistribution and use in source and binary forms, with or without modification, are permitted provided that the
# following conditions are met:
#
#     Redistributions of source code must retain the above copyright notice, this list of conditions and the
#     following disclaimer.
#     Redistributions in binary form must reproduce the above copyright notice, this list of conditions and the
#     following disclaimer in the documentation and/or other materials provided with the distribution.
#
# THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES,
# INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
# DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
# SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
# SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY,
# WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
# OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
