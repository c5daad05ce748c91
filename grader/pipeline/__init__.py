"""The instructor's pipeline, run from the command line (`course-grader`, `grader.pipeline.cli`).

collect (`submissions`) -> sanitize (`code_rules`) -> autograde (`batch`, each notebook's kernel started
as a user of its own by `sandbox`) -> report (`class_report`), and around it: the student edition
(`edition`), the benchmark and course runs on a GPU machine (`benchmark_report`, `course_run`), the
machine check (`doctor`) and running a notebook's code outside Jupyter (`notebooks`). None of it is
imported by a student's notebook.
"""
