"""Partition passes: one training step -> the program of each rank, with explicit comm
ops (`graph-data-parallel`, ...) and the gradient rules of the comm ops."""
