"""Benchmarks that are not about one app: labelled data and the code that scores against it.

``gate_pairs.jsonl`` holds hand-written statement pairs with the verdict the write gate should
give; ``gate_quality`` scores ``knowledge.gate.relate`` on them.
"""
