"""Words of the pool's that others read: an evicted session's end reason starts with EVICTED."""

EVICTED = "evicted"
