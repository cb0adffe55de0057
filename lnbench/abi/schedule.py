"""Measurement order inside a worker: ABBA between the two sides, shapes in alternation.

ABBA (T P P T T P P T ...) cancels a linear drift (clock ramp, thermal) between the two sides; odd
workers start with the other side so no side always goes first. Cases are visited round-robin, one
run of each per round, rotated each round, so consecutive calls switch shape: a compiled-function
cache that hands back the previous shape's kernel is exercised on every switch.
"""
from __future__ import annotations

from typing import Sequence, TypeVar

SIDES: tuple[str, str] = ("tensor", "pointer")
T = TypeVar("T")


def abba_pair(round_index: int, worker_index: int = 0, sides: Sequence[str] = SIDES) -> tuple[str, str]:
    """The two sides in the order of round `round_index`: A B, then B A, then A B, ... (B first for odd workers)."""
    a, b = sides
    flip = (round_index + worker_index) % 2 == 1
    return (b, a) if flip else (a, b)


def abba_sequence(rounds: int, worker_index: int = 0, sides: Sequence[str] = SIDES) -> list[str]:
    """Flattened side order over `rounds` rounds, e.g. 4 rounds of worker 0: T P P T T P P T."""
    return [side for r in range(rounds) for side in abba_pair(r, worker_index, sides)]


def rotated(items: Sequence[T], shift: int) -> list[T]:
    """`items` rotated left by `shift` (round r starts at a different case)."""
    if not items:
        return []
    k = shift % len(items)
    return list(items[k:]) + list(items[:k])


def schedule(cases: Sequence[T], rounds: int, worker_index: int = 0,
             sides: Sequence[str] = SIDES) -> list[tuple[int, T, str]]:
    """The full timed order of a worker: (round, case, side) triples.

    Every round visits every case once (rotated by the round index) and both sides of each case in
    ABBA order across rounds.
    """
    out: list[tuple[int, T, str]] = []
    for r in range(rounds):
        for case in rotated(cases, r):
            for side in abba_pair(r, worker_index, sides):
                out.append((r, case, side))
    return out


def alternation(cases: Sequence[T], repeats: int = 2) -> list[T]:
    """Check order that switches case on every step: c1 c2 c3 c1 c2 c3 (needs at least two cases)."""
    if len(cases) < 2:
        raise ValueError("shape alternation needs at least two different cases")
    return [case for _ in range(repeats) for case in cases]
