"""The name of the allocator's command-line contract, `python -m claims.allocator`.

The allocator lives in `dralib.allocator`; this package only keeps the contract's name.
"""
