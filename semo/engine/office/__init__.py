"""Office services over a store: answering questions, sending commands, jobs and their timelines."""
