"""The `semo` commands over an office: sessions, engines, questions, members, jobs, work."""
