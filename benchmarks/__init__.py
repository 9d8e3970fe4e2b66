"""trikafka's benchmark harness: ``make bench`` (or ``python -m benchmarks``).

Not tests: these measure and print, side by side with librdkafka's mock cluster and a bare
Trio server (the ceiling). See ``benchmarks/run.py`` for the plan and README's Performance
section for the latest figures.
"""
