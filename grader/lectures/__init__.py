"""Drawings and widgets for the lecture notebooks, one module per day, with their shared drawing code.

Nothing here is graded; the notebooks stay short and the logic behind each picture is unit-tested.
"""
