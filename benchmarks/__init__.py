"""dualdl's benchmarks: its cost next to hand-written native code and next to a peer (Keras 3).

``make bench`` (``python -m benchmarks``) runs every registered case and writes
``benchmarks/results.json`` and ``docs/benchmarks.md``; ``--quick`` uses tiny sizes.
"""
