"""The registry of every graded exercise, by key ("day1.vector_add")."""
from grader.exercises import day1, day2, day3, day4, day5
from grader.exercises.spec import KernelExercise, PredictionExercise

_ALL = {ex.key: ex for module in (day1, day2, day3, day4, day5) for ex in module.EXERCISES}


def get(key: str):
    try:
        return _ALL[key]
    except KeyError:
        raise KeyError(f"no exercise named {key!r}; known: {', '.join(sorted(_ALL))}") from None


def all_exercises():
    return list(_ALL.values())


__all__ = ["get", "all_exercises", "KernelExercise", "PredictionExercise"]
