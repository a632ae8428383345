"""A job's work as one reviewable unit: its branch, its roles' branches, review (docs/JOBS.md)."""
