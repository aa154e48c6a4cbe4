"""Demo cluster: a generator of realistic DRA objects and a churn loop that keeps them moving.

It sits beside the console, at the top of the layers, so that it allocates with the real
allocator (`dralib.allocator`) and admits claims with the real quota rules. It feeds the built-in
fake API server (`python -m demo`), the tests and the benchmarks.
"""
