"""Versions: one program under two library stacks (regress), the first release that changes it (bisect), and the metrics both judge by."""
