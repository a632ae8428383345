"""The `semo` commands over an office's store: sessions, engines, questions, jobs, members."""
