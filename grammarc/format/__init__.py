"""The format: a compiled grammar's tables in memory (`table`) and in artifact files
(`artifact`, docs/FORMAT.md). Numpy only: the runtime imports both.
"""
