"""Shipping a job's work: push its branch, open a pull request, merge it.

See docs/JOBS.md, "Shipping a job's work"."""
